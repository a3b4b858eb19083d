import { redactSecrets, visibleControls } from '../conformance/env/redact.ts';
import { writeEach, writeRedacted } from '../conformance/env/outputFile.ts';
import { interruptedBy, onInterrupt } from '../conformance/env/processes.ts';
import type { BackendUnderTest, FaultKind } from '../conformance/adapter.ts';
import { judgedDesign } from '../conformance/consequence.ts';
import { type CheckFailure, type CheckOptions, type CheckResult, checkConformance } from '../conformance/check.ts';
import type { PropertyId } from '../model/properties.ts';
import { describeStoppedEarly } from '../conformance/verdict.ts';
import { offeredFaults } from '../conformance/backendApi.ts';
import { closeBackend } from '../conformance/adapterCall.ts';
import { ownServersOnly } from '../conformance/faults.ts';
import { textTimeline } from '../conformance/timeline.ts';
import type { Schedule } from '../conformance/minimise.ts';
import type { ServerChoice } from './backends.ts';
import { Servers, isBuiltIn, resolveBackend } from './backends.ts';
import { CounterexampleFileError, type CounterexampleFile, counterexampleFile, parseCounterexample, replayDifferences } from './counterexample.ts';
import { InvalidInputError } from '../model/errors.ts';
import { junitXml } from './junit.ts';
import { progressLine, runText, startingLine } from './progress.ts';
import { readInputText } from './readInput.ts';
import { counted } from '../conformance/counted.ts';
import { replayHint } from './replayHint.ts';
import { UsageError } from './usage.ts';
import { shellWord } from './shellWord.ts';

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

/**
 * What `run --json` prints (docs/getting-started.md): the verdict the exit code says, with what reproduces the
 * run; or, interrupted, no verdict (null) and how far it got.
 */
export type RunJson =
  | {
      readonly backend: string;
      readonly verdict: 'agrees' | 'inconclusive' | 'conformance-failure';
      readonly seed: number;
      readonly faults: readonly FaultKind[];
      readonly runs: number;
      /** Per property: runs that showed it, 0 judged and none did, null not decided (CheckResult.findings). */
      readonly findings: CheckResult['findings'];
      readonly deviations: CheckResult['deviations'];
      readonly warnings: CheckResult['warnings'];
      readonly stoppedEarly: number;
      readonly stoppedEarlyBy: CheckResult['stoppedEarlyBy'];
      readonly retried: number;
      /** The failure, shrunk, and where its counterexample file is; null when none. */
      readonly failure: {
        readonly properties: readonly PropertyId[];
        readonly seed: number;
        readonly path: string;
        readonly originalLength: number;
        readonly fastCheckLength: number;
        readonly shrunkLength: number;
        readonly minimised: CheckFailure['minimised'];
        readonly counterexample: string;
      } | null;
    }
  | { readonly backend: string; readonly interrupted: NodeJS.Signals; readonly verdict: null; readonly seed: number; readonly faults: readonly FaultKind[]; readonly runsPlanned: number; readonly runsStarted: number };

/**
 * The start-up line (startingLine), once the backend is resolved (a name that
 * is none, a module that is not there, a library not installed: its message
 * comes alone) and before its servers start, the slow part.
 */
function sayStarting(spec: string, choice: ServerChoice): void {
  startingLine(redactSecrets(spec), choice.redis !== undefined || choice.pg !== undefined);
}

export async function runCommand(o: RunOptions): Promise<number> {
  const servers = new Servers(o.servers);
  let backend: BackendUnderTest | null = null;
  try {
    for (const line of await servers.check()) process.stderr.write(`${line}\n`);
    const resolved = await resolveBackend(o.backend, servers);
    backend = resolved;
    sayStarting(o.backend, o.servers ?? {});
    const offered = await offeredFaults(resolved);
    const missing = (o.faults ?? []).filter((f) => !offered.includes(f));
    if (missing.length > 0) {
      // On the user's servers, say why a fault that needs the server's process or clock is not there.
      const onUsers = o.servers?.redis !== undefined || o.servers?.pg !== undefined;
      const why = onUsers ? missing.flatMap((f) => (ownServersOnly(f) === null ? [] : [`; ${f} ${ownServersOnly(f)}`])).join('') : '';
      throw new UsageError(`${resolved.name} takes no ${missing.join(', ')} fault here (it takes: ${offered.join(', ')})${why}`);
    }
    const started = performance.now();
    // --json interrupted: stdout says the run was stopped, with no verdict, not nothing (a consumer cannot tell that from a crash).
    let runsStarted = 0;
    const unregister = onInterrupt(async () => {
      // The signal is set before the clean-ups run (processes.ts).
      const by = interruptedBy();
      if (o.json && by !== null) console.log(JSON.stringify({ backend: resolved.name, interrupted: by, verdict: null, seed: o.seed, faults: o.faults ?? offered, runsPlanned: o.runs, runsStarted } satisfies RunJson, null, 2));
    });
    const result = await withReplayPath(o.path, `--path '${o.path}' with --seed ${o.seed}`, '', () => checkConformance(resolved, {
      runs: o.runs,
      seed: o.seed,
      // The model's shortest counterexamples for this design run first (conformance/seeds.ts).
      modelSeeds: true,
      ...(o.path !== undefined ? { path: o.path } : {}),
      ...(o.faults !== undefined ? { faults: o.faults } : {}),
      timelineFile: o.counterexample.replace(/\.json$/, '') + '.html',
      // A library audit goes on past deviations in the safe direction (counted below) to what is worse.
      ...auditFailOn(resolved),
      onRun: (run) => {
        runsStarted = run;
        progressLine(`${resolved.name}: ${runText(run, o.runs)}`, started, run, o.runs);
      },
      onMinimise: (replays, max, steps) => progressLine(`${resolved.name}: minimising the counterexample (replay ${replays}/${max}, ${counted(steps, 'step')})`, started, o.runs, o.runs),
    })).finally(unregister);
    process.stderr.write('\n');
    // Interrupted: the runs after the signal failed for want of their servers; nothing of them is saved.
    if (interruptedBy() !== null) return 1;
    namesACase(result, o.path, `--path '${o.path}' with --seed ${o.seed}`, '');
    for (const [warning, runs] of Object.entries(result.warnings)) process.stderr.write(`warning: ${resolved.name}: ${warning} (in ${counted(runs, 'run')})\n`);
    const failure = result.failure;
    // Per property: runs that showed it, 0 judged and none did, null not decided (a lock without tokens is not judged by its token properties).
    const findings = result.findings;
    // The verdict is printed first, then the files written: one that still cannot be written (checked before the run) loses only itself.
    if (o.json) {
      // Whole enough to act on without the text: the verdict the exit code says, and the seed and faults that reproduce the run.
      const verdict = failure !== null ? 'conformance-failure' : result.runs - result.stoppedEarly === 0 ? 'inconclusive' : 'agrees';
      console.log(JSON.stringify({ backend: resolved.name, verdict, seed: o.seed, faults: o.faults ?? offered, runs: result.runs, findings, deviations: result.deviations, warnings: result.warnings, stoppedEarly: result.stoppedEarly, stoppedEarlyBy: result.stoppedEarlyBy, retried: result.retried, failure: failure && { properties: failure.properties, seed: failure.seed, path: failure.path, originalLength: failure.originalLength, fastCheckLength: failure.fastCheckLength, shrunkLength: failure.shrunkLength, minimised: failure.minimised, counterexample: o.counterexample } } satisfies RunJson, null, 2));
    } else {
      console.log(failure === null ? agreement(resolved.name, result) : `${failure.message}\ncounterexample: ${o.counterexample} (${replayHint(o.counterexample, o.backend, o.servers)})`);
      console.log(`findings (property violations of the design, not bugs): ${findingsText(findings)}`);
      if (result.deviations?.safe) console.log(`deviations in the safe direction (validity shorter than allowed, an early loss signal): ${counted(result.deviations.safe, 'run')}`);
    }
    writeEach([
      ...(failure === null ? [] : [() => writeRedacted(o.counterexample, JSON.stringify(counterexampleFile(o.backend, resolved, offered, o.faults ?? null, o.runs, failure), null, 2) + '\n', 'the counterexample')]),
      ...(o.junit === undefined ? [] : [() => writeRedacted(o.junit!, junitXml(`lockcheck run ${resolved.name}`, [{ name: resolved.name, timeMs: result.elapsedMs, ...(failure !== null ? { failure: failure.message } : { failure: null, ...(result.runs - result.stoppedEarly === 0 ? { skipped: agreement(resolved.name, result) } : {}) }) }]), 'the JUnit report', 'markup')]),
    ]);
    if (failure !== null) return 1;
    return result.runs - result.stoppedEarly === 0 ? EXIT_INCONCLUSIVE : 0;
  } finally {
    try {
      if (backend !== null) await closeBackend(backend);
    } finally {
      await servers.stop();
    }
  }
}

/** The findings line: those seen, else none; nothing decided (no run judged to its end) is said so, never "none". */
export function findingsText(findings: CheckResult['findings']): string {
  const counts = Object.entries(findings);
  if (counts.every(([, n]) => n === null)) return 'not decided (no run was judged to its end)';
  const listed = counts.flatMap(([p, n]) => (n !== null && n > 0 ? [`${p} in ${counted(n, 'run')}`] : []));
  return listed.join(', ') || 'none';
}

/** The largest counterexample `replay` reads: lockcheck's own are a few kB (at most MAX_STEPS short steps). */
export const MAX_COUNTEREXAMPLE_BYTES = 16 * 1024 * 1024;

/**
 * `lockcheck replay <file> [--backend <module>]`. The file names its backend;
 * a built-in one is used as is, but a module is loaded only when the user
 * passes it on the command line: a file is data, never code to run.
 */
export async function replayCommand(file: string, choice: ServerChoice = {}, backendArg?: string): Promise<number> {
  const text = readInputText(file, MAX_COUNTEREXAMPLE_BYTES, 'a counterexample');
  const saved = parseCounterexample(file === '-' ? 'stdin' : file, text);
  const spec = backendArg ?? saved.backend;
  if (backendArg === undefined && !isBuiltIn(saved.backend)) {
    throw new UsageError(
      `the counterexample in '${file}' was found on the adapter module ${JSON.stringify(saved.backend)}; replay loads a module only when you name it: lockcheck replay ${shellWord(file)} --backend <module path>`,
    );
  }
  const servers = new Servers(choice);
  let backend: BackendUnderTest | null = null;
  try {
    for (const line of await servers.check()) process.stderr.write(`${line}\n`);
    backend = await resolveBackend(spec, servers);
    sayStarting(spec, choice);
    // Compared as the file holds them: with secret-named options redacted (writeRedacted).
    const now = redactSecrets(JSON.stringify({ design: judgedDesign(backend), contract: backend.contract ?? null, options: backend.options ?? null }));
    const then = saved.settings === undefined ? now : redactSecrets(JSON.stringify({ design: saved.settings.design, contract: saved.settings.contract, options: saved.settings.options ?? null }));
    // A counterexample judged under other settings may not replay: say so rather than let it pass silently.
    // Shown with their control characters visible: the file's text (a bidirectional override, a C1 escape) must not act on the terminal.
    if (now !== then) process.stderr.write(`${visibleControls(`warning: ${backend.name}'s settings changed since the counterexample was saved\n  then: ${then}\n  now:  ${now}`)}\n`);
    const differences = replayDifferences(saved, { name: backend.name, faults: await offeredFaults(backend) });
    for (const d of differences) process.stderr.write(`warning: ${d}\n`);
    const failOn = replayFailOn(saved, backend);
    // The path counts the model's seed schedules if the run tried them first (files from before they existed did not).
    const b = backend;
    const why = differences.length > 0 ? ` (${differences.join('; ')})` : '';
    // A minimised counterexample is run as it is, once (no fast-check path names it); files from before replay by seed and path.
    const result =
      saved.schedule !== undefined
        ? await checkConformance(b, { seed: saved.seed, schedule: scheduleOf(saved.schedule), ...(saved.faults ? { faults: saved.faults } : {}), ...failOn }).catch((e: unknown) => {
            // A command the model cannot run where the file puts it: the file's fault, named as such (exit 2), not a crash.
            if (e instanceof InvalidInputError && e.message.includes('schedule.commands[')) throw new CounterexampleFileError(file, '"schedule"', `does not replay as saved: ${e.message.replace(/^precondition: /, '')}`);
            throw e;
          })
        : await withReplayPath(saved.path, `the path "${saved.path}" in '${file}'`, why, () => checkConformance(b, { runs: saved.runs, seed: saved.seed, path: saved.path, ...(saved.faults ? { faults: saved.faults } : {}), ...failOn, modelSeeds: saved.modelSeeds === true }));
    if (saved.schedule === undefined) namesACase(result, saved.path, `the path "${saved.path}" in '${file}'`, why);
    if (result.failure === null) {
      // A run that stopped early judged nothing: "no longer fails" would be said of a case that was never run to its end.
      if (result.runs - result.stoppedEarly === 0) {
        console.log(`${agreement(backend.name, result)}: the counterexample was not run to its end, so whether it still fails is unknown`);
        return EXIT_INCONCLUSIVE;
      }
      console.log(`${backend.name}: the counterexample no longer fails`);
      return 0;
    }
    console.log(textTimeline(result.failure.report));
    return 1;
  } finally {
    try {
      if (backend !== null) await closeBackend(backend);
    } finally {
      await servers.stop();
    }
  }
}

/** The file's schedule as the check runs it: the token base back from its decimal string. */
function scheduleOf(s: NonNullable<CounterexampleFile['schedule']>): Schedule {
  return { commands: s.commands, tokenBase: BigInt(s.tokenBase), ...(s.requestTimeoutMs !== undefined ? { requestTimeoutMs: s.requestTimeoutMs } : {}) };
}

/**
 * What a replay fails on: a property violation as saved; a library audit's failure as run found it, past the deviations
 * in the safe direction to the worse one; but one whose worst was in the safe direction (a matrix cell saves it too) is
 * replayed to it, or a replay went past it and said "no longer fails" of a failure that still showed.
 */
export function replayFailOn(saved: Pick<CounterexampleFile, 'verdict' | 'consequence'>, backend: Pick<BackendUnderTest, 'contract'>): Pick<CheckOptions, 'failOn'> {
  if (saved.verdict === 'property-violation') return { failOn: 'any' };
  return saved.consequence?.startsWith('safe:') === true ? { failOn: 'conformance-failure' } : auditFailOn(backend);
}

/** What a library audit fails on (run and replay alike): it goes past deviations in the safe direction to what is worse. */
function auditFailOn(backend: Pick<BackendUnderTest, 'contract'>): { failOn?: { consequences: readonly ['unsafe', 'liveness'] } } {
  return backend.contract !== undefined ? { failOn: { consequences: ['unsafe', 'liveness'] as const } } : {};
}

/**
 * fast-check refuses a replay path that names no case of the seed (a shrink
 * index beyond the shrinks there are) with a bare Error: it was printed as a
 * crash (exit 1, a stack). It is a bad argument: exit 2, naming the path.
 */
async function withReplayPath<T>(path: string | undefined, what: string, differences: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (e) {
    if (path !== undefined && e instanceof Error && e.message.startsWith('Unable to replay')) {
      // On another backend than the file's, or other faults, the path names cases of another generator: that is the cause to name.
      const fix = differences === '' ? 'give the seed and path exactly as the failure printed them' : `replay it on the backend it was found on${differences}`;
      throw new UsageError(`${what} names no case fast-check can replay (${e.message}): ${fix}`);
    }
    throw e;
  }
}

/** `run` or `replay` judged no run to its end (each stopped early): nothing was decided (docs/getting-started.md#exit-codes). */
export const EXIT_INCONCLUSIVE = 4;

/**
 * A replay path that fast-check follows to no case at all (a shrink index
 * past the last shrink, where fast-check does not say "Unable to replay"):
 * 0 runs. It is a bad argument, as withReplayPath says of the other kind.
 */
function namesACase(result: CheckResult, path: string | undefined, what: string, differences: string): void {
  if (path === undefined || result.runs > 0) return;
  const fix = differences === '' ? 'give the seed and path exactly as the failure printed them' : `replay it on the backend it was found on${differences}`;
  throw new UsageError(`${what} names no case fast-check can replay (it ran none): ${fix}`);
}

/** A run without failure: how many runs were judged to their end; those that stopped early are evidence of nothing (spec 7.8). */
function agreement(name: string, result: CheckResult): string {
  const judged = result.runs - result.stoppedEarly;
  const retried = result.retried ? `; ${counted(result.retried, 'attempt')} out of pace with the servers' clocks ${result.retried === 1 ? 'was' : 'were'} tried again` : '';
  const early = result.stoppedEarly ? ` (${result.stoppedEarly} more stopped early: ${describeStoppedEarly(result.stoppedEarlyBy)}; no evidence either way${retried})` : retried ? ` (${retried.slice(2)})` : '';
  return judged === 0 ? `${name}: inconclusive: none of ${counted(result.runs, 'run')} was judged to its end${early}` : `${name}: agrees with its model in ${counted(judged, 'run')}${early}`;
}
