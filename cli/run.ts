import { readFileSync, writeFileSync } from 'node:fs';
import type { Capabilities, FaultKind, LibraryContract } from '../conformance/adapter.ts';
import { judgedDesign } from '../conformance/consequence.ts';
import type { Design } from '../model/design.ts';
import { checkConformance } from '../conformance/check.ts';
import { textTimeline } from '../conformance/timeline.ts';
import type { ServerChoice } from './backends.ts';
import { Servers, resolveBackend } from './backends.ts';
import { junitXml } from './junit.ts';
import { progressLine, runText } from './progress.ts';
import { UsageError } from './usage.ts';

/** `lockcheck run`: one backend (built-in, or a user's adapter module) against its model. `lockcheck replay`: one saved counterexample. */
export interface RunOptions {
  readonly backend: string;
  readonly faults: readonly FaultKind[] | undefined;
  readonly runs: number;
  readonly seed: number;
  readonly path: string | undefined;
  readonly json: boolean;
  readonly junit: string | undefined;
  readonly counterexample: string;
  /** The user's own servers, if given (--redis, --pg). */
  readonly servers?: ServerChoice;
}

/** What a replay needs: everything that fixes the generated schedule. */
export interface CounterexampleFile {
  readonly lockcheck: 'counterexample';
  readonly backend: string;
  readonly faults: readonly FaultKind[] | null;
  readonly seed: number;
  readonly path: string;
  readonly runs: number;
  readonly verdict: string;
  readonly properties: readonly string[];
  /** What the deviation costs (unsafe, liveness, safe), for a conformance failure. */
  readonly consequence: string | null;
  /** The adapter's settings the counterexample was found with: the model it was judged by, and the library's contract. */
  readonly settings: {
    readonly name: string;
    readonly design: Design;
    readonly capabilities: Capabilities;
    readonly contract: LibraryContract | null;
    readonly faults: readonly FaultKind[];
  };
  readonly steps: readonly string[];
}

export async function runCommand(o: RunOptions): Promise<number> {
  const servers = new Servers(o.servers);
  try {
    for (const line of await servers.check()) process.stderr.write(`${line}\n`);
    const backend = await resolveBackend(o.backend, servers);
    const missing = (o.faults ?? []).filter((f) => !backend.faults.includes(f));
    if (missing.length > 0) throw new UsageError(`${backend.name} takes no ${missing.join(', ')} fault here (it takes: ${backend.faults.join(', ')})`);
    const started = performance.now();
    const result = await checkConformance(backend, {
      runs: o.runs,
      seed: o.seed,
      ...(o.path !== undefined ? { path: o.path } : {}),
      ...(o.faults !== undefined ? { faults: o.faults } : {}),
      timelineFile: o.counterexample.replace(/\.json$/, '') + '.html',
      // A library audit goes on past deviations in the safe direction (counted below) to what is worse.
      ...(backend.contract !== undefined ? { failOn: { consequences: ['unsafe', 'liveness'] as const } } : {}),
      onRun: (run) => progressLine(`${backend.name}: ${runText(run, o.runs)}`, started, run, o.runs),
    });
    process.stderr.write('\n');
    const failure = result.failure;
    if (failure !== null) {
      const file: CounterexampleFile = {
        lockcheck: 'counterexample',
        backend: o.backend,
        faults: o.faults ?? null,
        seed: failure.seed,
        path: failure.path,
        runs: o.runs,
        verdict: failure.report.verdict.kind,
        properties: failure.properties,
        consequence: failure.report.verdict.kind === 'conformance-failure' ? `${failure.report.verdict.consequence.kind}: ${failure.report.verdict.consequence.what}` : null,
        settings: { name: backend.name, design: judgedDesign(backend), capabilities: backend.capabilities, contract: backend.contract ?? null, faults: backend.faults },
        steps: failure.report.steps.map((s) => JSON.stringify(s.command)),
      };
      writeFileSync(o.counterexample, JSON.stringify(file, null, 2) + '\n');
    }
    if (o.junit !== undefined) writeFileSync(o.junit, junitXml(`lockcheck run ${backend.name}`, [{ name: backend.name, failure: failure?.message ?? null, timeMs: result.elapsedMs }]));
    if (o.json) {
      console.log(JSON.stringify({ backend: backend.name, runs: result.runs, findings: result.findings, deviations: result.deviations, stoppedEarly: result.stoppedEarly, failure: failure && { properties: failure.properties, seed: failure.seed, path: failure.path, shrunkLength: failure.shrunkLength, counterexample: o.counterexample } }, null, 2));
    } else {
      const early = result.stoppedEarly ? ` (${result.stoppedEarly} of them stopped early: too ambiguous to follow, or real time outran the pace)` : '';
      console.log(failure === null ? `${backend.name}: agrees with its model in ${result.runs} runs${early}` : `${failure.message}\ncounterexample: ${o.counterexample} (lockcheck replay ${o.counterexample})`);
      const findings = Object.entries(result.findings).map(([p, n]) => `${p} in ${n} runs`).join(', ');
      console.log(`findings (property violations of the design, not bugs): ${findings || 'none'}`);
      if (result.deviations.safe) console.log(`deviations in the safe direction (validity shorter than allowed, an early loss signal): ${result.deviations.safe} runs`);
    }
    return failure === null ? 0 : 1;
  } finally {
    await servers.stop();
  }
}

export async function replayCommand(file: string, choice: ServerChoice = {}): Promise<number> {
  let saved: CounterexampleFile;
  try {
    saved = JSON.parse(readFileSync(file, 'utf8')) as CounterexampleFile;
  } catch (e) {
    throw new UsageError(`cannot read counterexample '${file}': ${(e as Error).message}`);
  }
  if (saved.lockcheck !== 'counterexample' || typeof saved.seed !== 'number' || typeof saved.path !== 'string') throw new UsageError(`'${file}' is not a lockcheck counterexample file`);
  const servers = new Servers(choice);
  try {
    for (const line of await servers.check()) process.stderr.write(`${line}\n`);
    const backend = await resolveBackend(saved.backend, servers);
    const now = JSON.stringify({ design: judgedDesign(backend), contract: backend.contract ?? null });
    const then = saved.settings === undefined ? now : JSON.stringify({ design: saved.settings.design, contract: saved.settings.contract });
    // A counterexample judged under other settings may not replay: say so rather than let it pass silently.
    if (now !== then) process.stderr.write(`warning: ${backend.name}'s settings changed since the counterexample was saved\n  then: ${then}\n  now:  ${now}\n`);
    const failOn = saved.verdict === 'property-violation' ? ('any' as const) : ('conformance-failure' as const);
    const result = await checkConformance(backend, { runs: saved.runs, seed: saved.seed, path: saved.path, ...(saved.faults ? { faults: saved.faults } : {}), failOn });
    if (result.failure === null) {
      console.log(`${backend.name}: the counterexample no longer fails`);
      return 0;
    }
    console.log(textTimeline(result.failure.report));
    return 1;
  } finally {
    await servers.stop();
  }
}
