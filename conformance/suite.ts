import { makeOutputDir, writeRedacted } from './env/outputFile.ts';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, test } from 'vitest';
import type { BackendUnderTest } from './adapter.ts';
import type { FaultKind } from './faults.ts';
import { FAULT_KINDS, isFaultKind } from './faults.ts';
import { checkBackendApi, offeredFaults, offersExtend } from './backendApi.ts';
import { closeBackend } from './adapterCall.ts';
import { requestTimeoutArb, scheduleArb, timeScalesFor, tokenBaseArb, ttlFloorFor } from './generate.ts';
import { MAX_NUMBER_TOKEN_BASE } from './consequence.ts';
import { runLockstep } from './lockstep.ts';
import { htmlTimeline, textTimeline } from './timeline.ts';
import { checkMisconfigurations } from './configuration.ts';
import { checkSuiteOptions } from './options.ts';
import { checkObject } from '../impl/options.ts';
import { InvalidInputError } from '../model/errors.ts';

/**
 * Registers the conformance suite for a backend in the caller's vitest file:
 * one property test that drives the backend and its model in lockstep over
 * generated schedules with faults, and fails on the first conformance
 * failure with the shrunk schedule, its timeline file and the replay line.
 * Property violations are findings the design is expected to have; they do
 * not fail the test.
 *
 * Options come from code, and the environment overrides them for CI:
 * LOCKCHECK_RUNS, LOCKCHECK_SEED, LOCKCHECK_PATH (with the seed: replay one
 * case), LOCKCHECK_FAULTS (comma-separated fault kinds), LOCKCHECK_MAX_COMMANDS,
 * LOCKCHECK_TIMELINE_DIR (default: lockcheck-timelines).
 */
export interface SuiteOptions {
  /** Number of generated schedules. Default 100. */
  readonly runs?: number;
  /** fast-check seed; with `path`, replays one exact case. */
  readonly seed?: number;
  /** fast-check's counterexample path, from a failure's message. */
  readonly path?: string;
  /** Fault kinds to generate (intersected with what the backend takes). Default: all it takes. */
  readonly faults?: readonly FaultKind[];
  /** Commands per schedule, at most. Default 40. */
  readonly maxCommands?: number;
  /** Simulated clients per run. Default 2. */
  readonly clients?: number;
  /** Resources (lock names) the schedules use, 1..4. Default 1. */
  readonly resources?: number;
  /** Where a failure's timeline file goes (`<backend name>.html`). Default lockcheck-timelines. */
  readonly timelineDir?: string;
  /** Per-test timeout in ms (default 120000). */
  readonly timeoutMs?: number;
}

/** Reads the LOCKCHECK_* variables over `options`; throws a clear error for a bad value. */
export function suiteOptionsFromEnv(options: SuiteOptions, env: Readonly<Record<string, string | undefined>> = process.env): SuiteOptions {
  checkObject(options, 'options');
  checkObject(env, 'env', 'an object of environment variables');
  const int = (name: string, min: number, max: number): number | undefined => {
    const raw = env[name];
    if (raw === undefined || raw === '') return undefined;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max) throw new InvalidInputError('invalid-config', `${name} must be an integer in [${min}, ${max}], got '${raw}'`);
    return n;
  };
  const faults = (typeof env.LOCKCHECK_FAULTS === 'string' ? env.LOCKCHECK_FAULTS : undefined)?.split(',').map((f) => f.trim()).filter((f) => f !== '');
  for (const f of faults ?? []) if (!isFaultKind(f)) throw new InvalidInputError('invalid-config', `LOCKCHECK_FAULTS: unknown fault '${f}' (known: ${FAULT_KINDS.join(', ')})`);
  return {
    ...options,
    ...(int('LOCKCHECK_RUNS', 1, 1_000_000) !== undefined ? { runs: int('LOCKCHECK_RUNS', 1, 1_000_000)! } : {}),
    ...(int('LOCKCHECK_SEED', -(2 ** 31), 2 ** 31 - 1) !== undefined ? { seed: int('LOCKCHECK_SEED', -(2 ** 31), 2 ** 31 - 1)! } : {}),
    ...(env.LOCKCHECK_PATH ? { path: env.LOCKCHECK_PATH } : {}),
    ...(faults !== undefined ? { faults: faults as FaultKind[] } : {}),
    ...(int('LOCKCHECK_MAX_COMMANDS', 1, 10_000) !== undefined ? { maxCommands: int('LOCKCHECK_MAX_COMMANDS', 1, 10_000)! } : {}),
    ...(env.LOCKCHECK_TIMELINE_DIR ? { timelineDir: env.LOCKCHECK_TIMELINE_DIR } : {}),
  };
}

/**
 * Registers the suite's tests for `backend` in the calling vitest file (see
 * SuiteOptions): the conformance property test and, where the backend lists
 * misconfigurations, a test that each is refused; an afterAll calls the
 * backend's close hook. Throws AdapterApiError for a backend not shaped as
 * the adapter API says and InvalidInputError('invalid-config') for bad
 * options (LOCKCHECK_* variables included), at registration.
 */
export function conformanceSuite(backend: BackendUnderTest, options: SuiteOptions = {}): void {
  checkBackendApi(backend);
  checkSuiteOptions(options);
  // The backend's close hook: what it keeps across runs (servers it started) goes when the file is done.
  afterAll(async () => closeBackend(backend));
  const o = suiteOptionsFromEnv(options);
  const clients = o.clients ?? 2;
  // Shrinking never grows a counterexample: a candidate that fails after more steps than the shortest failure so far passes.
  let shortest = Number.POSITIVE_INFINITY;
  const timelineFile = join(o.timelineDir ?? 'lockcheck-timelines', `${backend.name.replace(/[^\w.-]+/g, '_')}.html`);
  test(
    `${backend.name} agrees with its model under ${o.faults === undefined ? 'every fault it takes' : o.faults.join(', ')}`,
    async () => {
      // What the backend takes is read from its environment: one instance, started in the test.
      const offered = await offeredFaults(backend);
      const warned = new Set<string>();
      const faults = (o.faults ?? offered).filter((f) => offered.includes(f));
      const schedule = scheduleArb({ design: backend.design, faults, clients, resources: o.resources ?? 1, maxCommands: o.maxCommands ?? 40, ttlFloorMs: ttlFloorFor(backend.capabilities), ...(backend.capabilities.ttlGrainMs !== undefined ? { ttlGrainMs: backend.capabilities.ttlGrainMs } : {}), timeScales: timeScalesFor(backend.capabilities, backend.design), lateReplies: backend.contract?.clientTimeout !== false, extend: await offersExtend(backend) });
      // fast-check's failure message carries the seed and the path that replay the shrunk case (LOCKCHECK_SEED, LOCKCHECK_PATH).
      await fc.assert(
        fc.asyncProperty(schedule, tokenBaseArb(backend.contract?.tokens === 'number' ? MAX_NUMBER_TOKEN_BASE : undefined), requestTimeoutArb(faults, ttlFloorFor(backend.capabilities), backend.contract?.clientTimeout !== false), async (commands, tokenBase, requestTimeoutMs) => {
          const report = await runLockstep(backend, commands, { clients, tokenBase, continueAfterViolation: true, ...(requestTimeoutMs !== undefined ? { requestTimeoutMs } : {}) });
          for (const w of report.warnings ?? []) warned.add(w);
          if (report.verdict.kind === 'conformance-failure' && report.steps.length <= shortest) {
            shortest = report.steps.length;
            // Shrinking fails smaller and smaller cases; the file left behind is the last, smallest one.
            makeOutputDir(o.timelineDir ?? 'lockcheck-timelines', 'the timeline into');
            writeRedacted(timelineFile, htmlTimeline(report), 'the timeline');
            throw new Error(`${textTimeline(report)}\ntimeline: ${timelineFile}`);
          }
        }),
        { numRuns: o.runs ?? 100, ...(o.seed !== undefined ? { seed: o.seed } : {}), ...(o.path !== undefined ? { path: o.path } : {}) },
      );
      for (const w of warned) process.stderr.write(`warning: ${backend.name}: ${w}\n`);
    },
    o.timeoutMs ?? 120_000,
  );
  if ((backend.misconfigurations?.length ?? 0) > 0) {
    test(`${backend.name} refuses ${backend.misconfigurations!.length} invalid configurations with InvalidInputError naming the option`, async () => {
      const problems = await checkMisconfigurations(backend);
      if (problems.length > 0) throw new Error(problems.join('\n'));
    });
  }
}
