import { join } from 'node:path';
import { afterAll, test } from 'vitest';
import type { BackendUnderTest } from './adapter.ts';
import type { FaultKind } from './faults.ts';
import { FAULT_KINDS, isFaultKind } from './faults.ts';
import { checkBackendApi } from './backendApi.ts';
import { closeBackend } from './adapterCall.ts';
import { checkConformance } from './check.ts';
import { checkMisconfigurations } from './configuration.ts';
import { checkSuiteOptions } from './options.ts';
import { checkObject, shown } from '../impl/options.ts';
import { quotedInput } from './quotedInput.ts';
import { InvalidInputError } from '../model/errors.ts';
import { terminalSafe } from './env/redact.ts';

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
    if (!Number.isInteger(n) || n < min || n > max) throw new InvalidInputError('invalid-config', `${name} must be an integer in [${min}, ${max}], got ${typeof raw === 'string' ? quotedInput(raw, 40) : shown(raw)}`);
    return n;
  };
  const faults = (typeof env.LOCKCHECK_FAULTS === 'string' ? env.LOCKCHECK_FAULTS : undefined)?.split(',').map((f) => f.trim()).filter((f) => f !== '');
  for (const f of faults ?? []) if (!isFaultKind(f)) throw new InvalidInputError('invalid-config', `LOCKCHECK_FAULTS: unknown fault ${quotedInput(f, 40)} (known: ${FAULT_KINDS.join(', ')})`);
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
 * backend's close hook. A run's warnings go to stderr, and a failure's text
 * to the test's error, redacted and with control characters shown. Throws AdapterApiError for a backend not shaped as
 * the adapter API says and InvalidInputError('invalid-config') for bad
 * options (LOCKCHECK_* variables included), at registration.
 */
export function conformanceSuite(backend: BackendUnderTest, options: SuiteOptions = {}): void {
  checkBackendApi(backend);
  checkSuiteOptions(options);
  // The backend's close hook: what it keeps across runs (servers it started) goes when the file is done.
  afterAll(async () => closeBackend(backend));
  const o = suiteOptionsFromEnv(options);
  const timelineFile = join(o.timelineDir ?? 'lockcheck-timelines', `${backend.name.replace(/[^\w.-]+/g, '_')}.html`);
  test(
    `${backend.name} agrees with its model under ${o.faults === undefined ? 'every fault it takes' : o.faults.join(', ')}`,
    async () => {
      // The check the CLI runs (checkConformance): fast-check's shrink, then the minimising pass, within the test's time.
      const timeoutMs = o.timeoutMs ?? 120_000;
      const result = await checkConformance(backend, {
        runs: o.runs ?? 100,
        ...(o.seed !== undefined ? { seed: o.seed } : {}),
        ...(o.path !== undefined ? { path: o.path } : {}),
        ...(o.faults !== undefined ? { faults: o.faults } : {}),
        maxCommands: o.maxCommands ?? 40,
        clients: o.clients ?? 2,
        resources: o.resources ?? 1,
        timelineFile,
        // What is left of a quarter of the test's time once a failure is found: the failure is reported, not the timeout.
        minimise: { limitMs: timeoutMs / 4 },
      });
      // Redacted, controls shown: vitest's stderr has no filter (an adapter's name or warning may quote a URL with its password).
      for (const w of Object.keys(result.warnings)) process.stderr.write(`${terminalSafe(`warning: ${backend.name}: ${w}`)}\n`);
      if (result.failure !== null) throw new Error(result.failure.message);
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
