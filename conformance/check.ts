import { makeOutputDir, writeRedacted } from './env/outputFile.ts';
import { terminalSafe } from './env/redact.ts';
import { dirname } from 'node:path';
import fc from 'fast-check';
import type { Command } from '../model/command.ts';
import { InvalidInputError } from '../model/errors.ts';
import { describeCommand } from '../model/describe.ts';
import type { PropertyId } from '../model/properties.ts';
import type { BackendUnderTest, FaultKind } from './adapter.ts';
import { requestTimeoutArb, scheduleArb, timeScalesFor, tokenBaseArb, ttlFloorFor, withoutExtend } from './generate.ts';
import type { ConsequenceKind } from './consequence.ts';
import { findingCounts, judgedDesign, MAX_NUMBER_TOKEN_BASE } from './consequence.ts';
import { nodeCount } from '../model/design.ts';
import { runLockstep } from './lockstep.ts';
import { MINIMISE_BUDGET, type MinimiseBudget, type Minimised, minimise, type Schedule, sameFailure } from './minimise.ts';
import { seedSchedules } from './seeds.ts';
import { offeredFaults, offersExtend } from './backendApi.ts';
import { checkCheckOptions, checkRunCommands } from './options.ts';
import { htmlTimeline, textTimeline } from './timeline.ts';
import type { ConformanceFailure, InconclusiveCause, RunReport } from './verdict.ts';
import { verdictProperties } from './verdict.ts';
import { counted } from './counted.ts';

/**
 * Checks a backend against its model over many generated schedules with
 * faults, and shrinks the first failure to a minimal, replayable schedule.
 */
export interface CheckOptions {
  /** Number of generated schedules. Default 100. */
  readonly runs?: number;
  /** Commands per schedule, at most. Default 40. */
  readonly maxCommands?: number;
  /** fast-check seed; with `path`, replays one exact case. */
  readonly seed?: number;
  /** fast-check's counterexample path (CheckFailure.path); with `seed`, replays that one case. */
  readonly path?: string;
  /** Fault kinds to generate (intersected with what the backend supports). Default: all it supports. */
  readonly faults?: readonly FaultKind[];
  /** Simulated clients per run. Default 2. */
  readonly clients?: number;
  /** Resources (lock names) the schedules use, 1..4. Default 1. */
  readonly resources?: number;
  /**
   * What fails a run: only a conformance failure (default; property
   * violations are findings the design is expected to have); any verdict but
   * a pass; or a conformance failure or a violation of one of the given
   * properties (to find, and shrink, a schedule that shows that finding);
   * or only a conformance failure with one of the given consequences (an
   * audit: deviations of the other kinds are counted in `deviations` and the
   * runs go on, so the audit gets past the safe direction to what is worse).
   */
  readonly failOn?: 'conformance-failure' | 'any' | { readonly properties: readonly PropertyId[] } | { readonly consequences: readonly ConsequenceKind[] };
  /** Where to write the shrunk counterexample's timeline (.html; a .txt beside it). */
  readonly timelineFile?: string;
  /** Called after every run, for progress output. */
  readonly onRun?: (run: number, report: RunReport) => void;
  /** A clock for the elapsed figures only. */
  readonly clock?: () => number;
  /**
   * Run first, as runs 1, 2, ... (token base 0) before the generated ones,
   * the model's shortest counterexamples for the backend's design and store
   * under the faults taken (seedSchedules in seeds.ts), so a predicted
   * finding shows up in the first runs. They count towards `runs`; a replay
   * must ask for them too, as its path counts them.
   */
  readonly modelSeeds?: boolean;
  /**
   * Real time shrinking may take once the first failure is found. Past it,
   * every further candidate is passed over unrun and the smallest failure
   * found so far is the counterexample (`CheckFailure.shrinkCut`): on servers
   * paced to real time one candidate costs seconds. Default: no limit.
   */
  readonly shrinkLimitMs?: number;
  /**
   * The pass after fast-check's shrink (minimise.ts): steps removed, then
   * arguments simplified, each candidate replayed and kept only if it fails
   * the same way. Its budget (default MINIMISE_BUDGET: 60 replays, 30 s),
   * or false to keep fast-check's counterexample as it is.
   */
  readonly minimise?: false | Partial<MinimiseBudget>;
  /** Called after every replay of the minimising pass, for progress output. */
  readonly onMinimise?: (replays: number, maxReplays: number, steps: number) => void;
  /**
   * Runs this one schedule as it is (CheckFailure.schedule, a counterexample
   * file's `schedule`) instead of generated ones: a replay of a minimised
   * counterexample, which no fast-check path names. Not with `path`.
   */
  readonly schedule?: Schedule;
}

/** The failure a check stopped on, shrunk: what it shows and how to replay it. */
export interface CheckFailure {
  /** The shrunk counterexample's report. */
  readonly report: RunReport;
  /** The properties its verdict names (verdictProperties): the one a conformance failure endangers, or those a violation breaks. */
  readonly properties: PropertyId[];
  /** 1-based index of the first failing run. */
  readonly failedAtRun: number;
  /** Time from the check's start to the first failure, in ms (on `CheckOptions.clock`), before shrinking. */
  readonly msToDetection: number;
  /** Steps of the first failing run, before shrinking. */
  readonly originalLength: number;
  /** Steps of the counterexample: after fast-check's shrink and the minimising pass. */
  readonly shrunkLength: number;
  /** Steps after fast-check's shrink, before the minimising pass. */
  readonly fastCheckLength: number;
  /** The minimising pass (replays, time, whether its budget cut it short), or null when it did not run. */
  readonly minimised: { readonly replays: number; readonly elapsedMs: number; readonly cut: boolean } | null;
  /** The counterexample's schedule as run: `checkConformance(backend, { schedule })` replays it exactly. */
  readonly schedule: Schedule;
  /**
   * fast-check seed of the check; with `path`, replays the shrunk case (CheckOptions.seed/path, LOCKCHECK_SEED/LOCKCHECK_PATH).
   * A replay of `CheckOptions.schedule` draws nothing: its seed is the option's as given, else 0, and its path '';
   * `schedule` is what replays it.
   */
  readonly seed: number;
  /** fast-check's counterexample path ('' if it gave none): with `seed`, fast-check's case, minimised again the same way. */
  readonly path: string;
  /** Shrinking stopped at `shrinkLimitMs`: the counterexample fails, but a smaller one may exist. */
  readonly shrinkCut: boolean;
  /** Ready to print: verdict, replay line and the schedule as steps; secrets redacted, control characters shown as escapes. */
  readonly message: string;
}

/** What checkConformance found: the failure it stopped on (or none), and what the runs showed on the way. */
export interface CheckResult {
  /** The backend's name. */
  readonly backend: string;
  /** Runs made before the check ended (fast-check's numRuns: shrinking's candidates not counted). */
  readonly runs: number;
  /** The shrunk failure, or null when every run passed (findings and deviations may still be counted). */
  readonly failure: CheckFailure | null;
  /**
   * Per property ID, the runs judged to their end that showed its violation
   * (findings about the design, not failures; 0: judged, none did), or null
   * when the check did not decide it: no run was judged to its end (every
   * run stopped early, or the check failed at its first), or the backend is
   * not judged by it (FENCE-1, FENCE-2, DUR-1 for a lock without tokens).
   */
  readonly findings: Readonly<Record<PropertyId, number | null>>;
  /**
   * An audit's (failOn consequences) conformance failures that did not fail
   * the check, per consequence, of runs not stopped early ({}: none); null
   * outside an audit, where nothing is counted (the first fails the check).
   * With every run stopped early an audit's is {} too: read `findings` (all
   * null) to tell that from none.
   */
  readonly deviations: Readonly<Partial<Record<ConsequenceKind, number>>> | null;
  /** What runs said beside their verdicts (RunReport.warnings), each once, with the number of runs that said it. */
  readonly warnings: Readonly<Record<string, number>>;
  /**
   * Runs whose verdict was `inconclusive` after every attempt (too ambiguous
   * to follow, or out of pace with servers on their own clocks): evidence of
   * nothing, counted neither as passes nor in `findings` or `deviations`.
   */
  readonly stoppedEarly: number;
  /** The runs of `stoppedEarly` by why they stopped (INCONCLUSIVE_CAUSES says each in words). */
  readonly stoppedEarlyBy: Readonly<Partial<Record<InconclusiveCause, number>>>;
  /** Attempts made again because real time outran the pace (spec 7.8): the same schedule from a fresh start. */
  readonly retried: number;
  /** Time the whole check took, shrinking included, in ms (on `CheckOptions.clock`). */
  readonly elapsedMs: number;
}

/**
 * Attempts per schedule while real time outruns the pace (servers on their
 * own clocks, spec 7.8): a busy machine slows the check down instead of
 * leaving the schedule unjudged. Bounded: a machine that never keeps pace
 * gets the run counted as stopped early.
 */
export const MAX_ATTEMPTS = 4;

class RunFailed extends Error {
  constructor(readonly report: RunReport) {
    super(textTimeline(report));
  }
}

/**
 * Checks `backend` against its model: runs generated schedules (CheckOptions)
 * in lockstep, each on a fresh instance, and shrinks the first run that fails
 * (`failOn`) to a minimal schedule with its replay line and timeline.
 * Resolves to the result either way; a failure is `result.failure`, not a
 * rejection. Rejects with InvalidInputError('invalid-config') for bad
 * options and AdapterApiError for a backend not shaped as the adapter API
 * says, before anything starts; an error that is not a run's verdict (the
 * backend's start or close failing: AdapterError) goes up as it is. Leaves
 * the backend's `close` to the caller.
 */
export async function checkConformance(backend: BackendUnderTest, options: CheckOptions = {}): Promise<CheckResult> {
  checkCheckOptions(options);
  const clock = options.clock ?? (() => performance.now());
  const started = clock();
  const clients = options.clients ?? 2;
  const offered = await offeredFaults(backend);
  const faults = (options.faults ?? offered).filter((f) => offered.includes(f));
  const extend = await offersExtend(backend);
  const failOn = options.failOn ?? 'conformance-failure';
  const findings: Partial<Record<PropertyId, number>> = {};
  // Runs whose findings were counted: with none, no property was decided (findingCounts).
  let judgedRuns = 0;
  // Counted in an audit only: outside one there is nothing to count (null, not an empty count).
  const deviations: Partial<Record<ConsequenceKind, number>> | null = isAudit(failOn) ? {} : null;
  const warnings: Record<string, number> = {};
  let run = 0;
  let stoppedEarly = 0;
  const stoppedEarlyBy: Partial<Record<InconclusiveCause, number>> = {};
  let retried = 0;
  let firstFailure: { run: number; ms: number; length: number; report: RunReport } | null = null;
  let shrinkCut = false;
  // Shrinking must never grow a counterexample: a smaller schedule that fails only after more steps
  // than the shortest failure seen so far is not accepted as a shrink (it counts as a pass).
  let shortest = Number.POSITIVE_INFINITY;
  const failWith = (cut: RunReport): never | void => {
    if (cut.steps.length > shortest) return;
    // Nor turn it into another failure: a candidate that fails another way (another property, another consequence) passes.
    if (firstFailure !== null && !sameFailure(firstFailure.report.verdict, cut.verdict)) return;
    shortest = cut.steps.length;
    firstFailure ??= { run, ms: clock() - started, length: cut.steps.length, report: cut };
    throw new RunFailed(cut);
  };
  /** Whether the check fails on this report: a deviation it seeks (any, outside an audit) or a property it seeks. */
  const fails = (r: RunReport): boolean => {
    const deviated = [...(r.deviations ?? []), ...(r.verdict.kind === 'conformance-failure' ? [r.verdict] : [])];
    if (typeof failOn === 'object' && 'consequences' in failOn) return deviated.some((d) => failOn.consequences.includes(d.consequence.kind));
    if (deviated.length > 0) return true;
    if (typeof failOn === 'object' && 'properties' in failOn) return r.findings.some((f) => f.violations.some((v) => failOn.properties.includes(v.property)));
    return failOn === 'any' && r.verdict.kind === 'property-violation';
  };
  /** The report the check fails on, cut at the failure it seeks; null when the run does not fail the check. */
  const failureOf = (report: RunReport): RunReport | null => {
    const verdict = report.verdict;
    if (verdict.kind === 'inconclusive' && !fails(report)) return null;
    // Every deviation of the run, in order: those a library audit went past, then the one it ended on.
    const deviated = [...(report.deviations ?? []), ...(verdict.kind === 'conformance-failure' ? [verdict] : [])];
    const cutAt = (d: ConformanceFailure): RunReport => (d === verdict ? report : { ...report, verdict: d, steps: report.steps.slice(0, d.step.index + 1), deviations: (report.deviations ?? []).filter((p) => p.step.index < d.step.index) });
    if (typeof failOn === 'object' && 'consequences' in failOn) {
      // An audit goes on past what it is not looking for.
      const sought = deviated.find((d) => failOn.consequences.includes(d.consequence.kind));
      return sought === undefined ? null : cutAt(sought);
    }
    // Not an audit: the first deviation fails the run, as if the run had stopped there.
    if (deviated.length > 0 && deviated[0] !== verdict) return cutAt(deviated[0]!);
    const wanted = typeof failOn === 'object' && 'properties' in failOn ? report.findings.find((f) => f.violations.some((v) => failOn.properties.includes(v.property))) : undefined;
    // The finding is the verdict now: cut the report at its step.
    if (wanted !== undefined && verdict.kind !== 'conformance-failure') return { ...report, verdict: wanted, steps: report.steps.slice(0, wanted.step.index + 1) };
    const failed = failOn === 'any' ? verdict.kind !== 'pass' && verdict.kind !== 'inconclusive' : verdict.kind === 'conformance-failure' || wanted !== undefined;
    return failed ? report : null;
  };
  /** One schedule run to a verdict: tried again while real time outran the pace; `retries` counts the extra attempts. */
  const judged = async (s: Schedule, retries: () => void): Promise<RunReport> => {
    const attempt = (): Promise<RunReport> => runLockstep(backend, s.commands, { clients, tokenBase: s.tokenBase, continueAfterViolation: failOn !== 'any', ...(s.requestTimeoutMs !== undefined ? { requestTimeoutMs: s.requestTimeoutMs } : {}) });
    let report = await attempt();
    // What the check fails on was judged on steps in pace (a late reply stops the run at once): a stop after it does not undo it.
    for (let attempts = 1; report.verdict.kind === 'inconclusive' && report.verdict.cause === 'out-of-pace' && !fails(report) && attempts < MAX_ATTEMPTS; attempts++) {
      retries();
      report = await attempt();
    }
    return report;
  };
  // A saved, minimised schedule: run as it is, once; no fast-check path names it.
  if (options.schedule !== undefined) return replaySchedule(backend, options.schedule, options, { judged: (s) => judged(s, () => undefined), failureOf, started, clock });
  const schedule = scheduleArb({ design: backend.design, faults, clients, resources: options.resources ?? 1, maxCommands: options.maxCommands ?? 40, ttlFloorMs: ttlFloorFor(backend.capabilities), ...(backend.capabilities.ttlGrainMs !== undefined ? { ttlGrainMs: backend.capabilities.ttlGrainMs } : {}), timeScales: timeScalesFor(backend.capabilities, backend.design), lateReplies: backend.contract?.clientTimeout !== false, extend });
  // A backend with a ttl grain (etcd's whole seconds) cannot take the model's millisecond schedules as they are.
  const seeds = options.modelSeeds === true && backend.capabilities.ttlGrainMs === undefined ? seedSchedules(judgedDesign(backend), backend.capabilities.store, faults, ttlFloorFor(backend.capabilities)).map((commands) => (extend ? commands : commands.flatMap(withoutExtend))) : [];
  const requestTimeout = requestTimeoutArb(faults, ttlFloorFor(backend.capabilities), backend.contract?.clientTimeout !== false);
  const property = fc.asyncProperty(schedule, tokenBaseArb(backend.contract?.tokens === 'number' ? MAX_NUMBER_TOKEN_BASE : undefined), requestTimeout, async (commands: Command[], tokenBase: bigint, requestTimeoutMs: number | undefined) => {
    if (firstFailure !== null && options.shrinkLimitMs !== undefined && clock() - started - firstFailure.ms > options.shrinkLimitMs) {
      shrinkCut = true;
      return;
    }
    // A path names one case. When it fails, shrinking goes on from it (a cut-short shrink resumes); when it passes,
    // fast-check's stream would go on past it (the next runs, or the case's next shrinks): not judged, nor counted.
    if (options.path !== undefined && run > 0 && firstFailure === null) return;
    run++;
    const report = await judged({ commands, tokenBase, ...(requestTimeoutMs !== undefined ? { requestTimeoutMs } : {}) }, () => {
      if (firstFailure === null) retried++;
    });
    options.onRun?.(run, report);
    for (const w of report.warnings ?? []) warnings[w] = (warnings[w] ?? 0) + 1;
    const cut = failureOf(report);
    if (cut !== null) return failWith(cut);
    // What the runs showed on the way is counted until the first failure (shrinking's candidates are not runs).
    if (firstFailure !== null) return;
    const verdict = report.verdict;
    // Evidence of nothing: neither a pass nor the findings and deviations it saw before it stopped.
    if (verdict.kind === 'inconclusive') {
      stoppedEarly++;
      stoppedEarlyBy[verdict.cause] = (stoppedEarlyBy[verdict.cause] ?? 0) + 1;
      return;
    }
    if (deviations !== null) {
      // An audit goes on past what it is not looking for, and counts it (each kind once per run).
      countDeviations(report, deviations);
      if (verdict.kind === 'conformance-failure') return;
    }
    judgedRuns++;
    for (const p of new Set(report.findings.flatMap((f) => f.violations.map((v) => v.property)))) findings[p] = (findings[p] ?? 0) + 1;
  });
  const details = await fc.check(property, {
    numRuns: options.runs ?? 100,
    examples: seeds.map((commands): [Command[], bigint, number | undefined] => [commands, 0n, undefined]),
    ...(options.seed !== undefined ? { seed: options.seed } : {}),
    ...(options.path !== undefined ? { path: options.path } : {}),
  });
  if (!details.failed) return { backend: backend.name, runs: options.path !== undefined ? run : details.numRuns, failure: null, findings: findingCounts(backend, findings, judgedRuns), deviations, warnings, stoppedEarly, stoppedEarlyBy, retried, elapsedMs: clock() - started };
  // Anything but a lockstep failure (a bug in the harness or the backend's setup) goes up as it is.
  if (!(details.errorInstance instanceof RunFailed)) throw details.errorInstance ?? new Error(`fast-check failed without an error: ${JSON.stringify(details.failures)}`);
  const shrunk = details.errorInstance.report;
  const first = firstFailure ?? { run: details.numRuns, ms: clock() - started, length: shrunk.steps.length };
  const [, tokenBase, requestTimeoutMs] = details.counterexample!;
  const fastCheckCase: Schedule = { commands: shrunk.steps.map((s) => s.command), tokenBase, ...(requestTimeoutMs !== undefined ? { requestTimeoutMs } : {}) };
  // The pass counts as shrinking: with shrinkLimitMs it gets what is left of it (none when fast-check's shrink was cut).
  const left = options.shrinkLimitMs === undefined ? Number.POSITIVE_INFINITY : options.shrinkLimitMs - (clock() - started - first.ms);
  const budget = options.minimise === false || shrinkCut || left <= 0 ? null : { ...MINIMISE_BUDGET, ...options.minimise, limitMs: Math.min(options.minimise?.limitMs ?? MINIMISE_BUDGET.limitMs, left) };
  const minimised: Minimised | null =
    budget === null
      ? null
      : await minimise(fastCheckCase, shrunk, async (s) => failureOf(await judged(s, () => undefined)), {
          budget,
          limits: { ttlFloorMs: ttlFloorFor(backend.capabilities), ttlGrainMs: backend.capabilities.ttlGrainMs ?? 1 },
          clock,
          ...(options.onMinimise !== undefined ? { progress: (replays: number, steps: number) => options.onMinimise!(replays, budget.maxReplays, steps) } : {}),
        });
  const report = minimised?.report ?? shrunk;
  writeTimeline(options.timelineFile, report);
  const replay = `seed ${details.seed}, path "${details.counterexamplePath}" (replay: LOCKCHECK_SEED=${details.seed} LOCKCHECK_PATH=${details.counterexamplePath}, or checkConformance(backend, { seed: ${details.seed}, path: '${details.counterexamplePath}' }), which minimise fast-check's case again; or checkConformance(backend, { schedule: failure.schedule }), this schedule as it is)`;
  const shrinking = `shrunk from ${first.length} to ${counted(shrunk.steps.length, 'step')}${shrinkCut ? ` (shrinking stopped after ${Math.round((options.shrinkLimitMs ?? 0) / 1000)} s: a smaller counterexample may exist)` : ''}`;
  const minimising = minimised === null ? '' : `, minimised to ${report.steps.length} (${counted(minimised.replays, 'replay')}, ${seconds(minimised.elapsedMs)}${minimised.cut ? ': budget spent, a smaller one may exist' : ''})`;
  return {
    backend: backend.name,
    runs: details.numRuns,
    failure: checkFailure(report, options, {
      failedAtRun: first.run,
      msToDetection: first.ms,
      originalLength: first.length,
      fastCheckLength: shrunk.steps.length,
      shrinkCut,
      seed: details.seed,
      path: details.counterexamplePath ?? '',
      minimised: minimised && { replays: minimised.replays, elapsedMs: minimised.elapsedMs, cut: minimised.cut },
      schedule: minimised?.schedule ?? fastCheckCase,
      found: `found at run ${first.run} of ${options.runs ?? 100}, ${shrinking}${minimising}; ${replay}`,
    }),
    findings: findingCounts(backend, findings, judgedRuns),
    deviations,
    warnings,
    stoppedEarly,
    stoppedEarlyBy,
    retried,
    elapsedMs: clock() - started,
  };
}

function seconds(ms: number): string {
  return ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`;
}

function writeTimeline(file: string | undefined, report: RunReport): void {
  if (file === undefined) return;
  makeOutputDir(dirname(file), 'the timeline into');
  writeRedacted(file, htmlTimeline(report), 'the timeline', 'markup');
  writeRedacted(file.replace(/\.html?$/, '') + '.txt', textTimeline(report) + '\n', 'the timeline');
}

/** A CheckFailure for `report`: its message is the timeline, the `found` line, the timeline file and the schedule. */
function checkFailure(report: RunReport, options: CheckOptions, f: Omit<CheckFailure, 'report' | 'properties' | 'shrunkLength' | 'message'> & { readonly found: string }): CheckFailure {
  const { found, ...rest } = f;
  const message = [textTimeline(report), '', found, options.timelineFile !== undefined ? `timeline: ${options.timelineFile}` : '', 'schedule:', ...report.steps.map((s, i) => `  ${i + 1}. ${describeCommand(s.command)}`)]
    .filter((l) => l !== '')
    .join('\n');
  // Redacted and its controls shown, as the timeline is: the message reaches a test runner's output, where no filter runs.
  return { ...rest, report, properties: verdictProperties(report.verdict), shrunkLength: report.steps.length, message: terminalSafe(message) };
}

/** `options.schedule` run once as it is: the failure it shows (no shrinking, nothing to minimise), or none. */
/**
 * Every command of a saved schedule ran, up to where the run ended: the
 * engine skips a command the model does not enable (or refuses as malformed),
 * which in a generated run is how schedules are drawn, but in a saved one
 * means the file was edited or written by hand, and a pass would then say
 * "no longer fails" of a run that was never the saved one.
 */
function checkRanAsSaved(schedule: Schedule, report: RunReport): void {
  const ran = new Set<Command>(report.steps.map((s) => s.command));
  let through = schedule.commands.length;
  if (report.verdict.kind !== 'pass') while (through > 0 && !ran.has(schedule.commands[through - 1]!)) through--;
  for (let i = 0; i < through; i++) {
    const c = schedule.commands[i]!;
    if (!ran.has(c)) throw new InvalidInputError('precondition', `schedule.commands[${i}] (${describedSafely(c)}) is not a command the model can run at that point (malformed, or not enabled after the commands before it): the replay would not be the saved run`);
  }
}

/**
 * A saved command that no run can take (a client or node the run does not
 * have, an unknown kind) is refused before the backend starts, named as the
 * saved schedule's, as checkRanAsSaved names one the model did not enable.
 */
function checkSavedCommands(schedule: Schedule, clients: number, nodes: number): void {
  for (let i = 0; i < schedule.commands.length; i++) {
    try {
      checkRunCommands([schedule.commands[i]], clients, nodes);
    } catch (e) {
      if (!(e instanceof InvalidInputError)) throw e;
      const why = e.message.replace(/^[a-z-]+: commands\[0\]/, 'it');
      throw new InvalidInputError('precondition', `schedule.commands[${i}] (${describedSafely(schedule.commands[i]!)}) is not a command the model can run at that point (${why}): the replay would not be the saved run`);
    }
  }
}

/** A saved command in words for a message about it: one the model cannot describe (an unknown kind, a malformed field) as its kind, never a second error. */
function describedSafely(c: Command): string {
  try {
    return describeCommand(c);
  } catch (e) {
    if (!(e instanceof InvalidInputError)) throw e;
    const kind = (c as { kind?: unknown } | null)?.kind;
    return `a command of kind ${typeof kind === 'string' ? JSON.stringify(kind.slice(0, 40)) : typeof kind} the model cannot describe`;
  }
}

/** Whether the check is an audit (failOn consequences): it goes on past the deviations it is not looking for, and counts them. */
const isAudit = (failOn: CheckOptions['failOn']): failOn is { readonly consequences: readonly ConsequenceKind[] } => typeof failOn === 'object' && 'consequences' in failOn;

/** Adds a run's deviations (those it went past, and the one it ended on) to an audit's count: each kind once per run. */
function countDeviations(report: RunReport, deviations: Partial<Record<ConsequenceKind, number>>): void {
  const deviated = [...(report.deviations ?? []), ...(report.verdict.kind === 'conformance-failure' ? [report.verdict] : [])];
  for (const kind of new Set(deviated.map((d) => d.consequence.kind))) deviations[kind] = (deviations[kind] ?? 0) + 1;
}

async function replaySchedule(
  backend: BackendUnderTest,
  schedule: Schedule,
  options: CheckOptions,
  run: { readonly judged: (s: Schedule) => Promise<RunReport>; readonly failureOf: (r: RunReport) => RunReport | null; readonly started: number; readonly clock: () => number },
): Promise<CheckResult> {
  checkSavedCommands(schedule, options.clients ?? 2, nodeCount(judgedDesign(backend)));
  const report = await run.judged(schedule);
  checkRanAsSaved(schedule, report);
  options.onRun?.(1, report);
  const warnings: Record<string, number> = {};
  for (const w of report.warnings ?? []) warnings[w] = 1;
  const cut = run.failureOf(report);
  const stoppedEarly = cut === null && report.verdict.kind === 'inconclusive' ? 1 : 0;
  const stoppedEarlyBy = cut === null && report.verdict.kind === 'inconclusive' ? { [report.verdict.cause]: 1 } : {};
  const elapsed = (): number => run.clock() - run.started;
  // The one run's findings count as a generated run's would: only when it passed the check and was judged to its end.
  const judgedToEnd = cut === null && report.verdict.kind !== 'inconclusive' && report.verdict.kind !== 'conformance-failure';
  const seen: Partial<Record<PropertyId, number>> = Object.fromEntries(report.findings.flatMap((f) => f.violations.map((v) => [v.property, 1])));
  // An audit counts the deviations the one run went past as a generated run's: when it did not fail the check and was not stopped early.
  const deviations: Partial<Record<ConsequenceKind, number>> | null = isAudit(options.failOn) ? {} : null;
  if (deviations !== null && cut === null && report.verdict.kind !== 'inconclusive') countDeviations(report, deviations);
  const base = { backend: backend.name, runs: 1, findings: findingCounts(backend, seen, judgedToEnd ? 1 : 0), deviations, warnings, stoppedEarly, stoppedEarlyBy, retried: 0 };
  if (cut === null) return { ...base, failure: null, elapsedMs: elapsed() };
  writeTimeline(options.timelineFile, cut);
  const found = `replayed the saved schedule (${counted(cut.steps.length, 'step')}, token base ${schedule.tokenBase}${schedule.requestTimeoutMs !== undefined ? `, request timeout ${schedule.requestTimeoutMs} ms` : ''}): checkConformance(backend, { schedule })`;
  const failure = checkFailure(cut, options, { failedAtRun: 1, msToDetection: elapsed(), originalLength: cut.steps.length, fastCheckLength: cut.steps.length, shrinkCut: false, seed: options.seed ?? 0, path: '', minimised: null, schedule: { ...schedule, commands: cut.steps.map((s) => s.command) }, found });
  return { ...base, failure, elapsedMs: elapsed() };
}
