import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { makeOutputDir, removeStaleOutput, writeEach, writeRedacted } from '../conformance/env/outputFile.ts';
import { interruptedBy } from '../conformance/env/processes.ts';
import type { CheckReport } from '../conformance/history/check.ts';
import type { History, HistoryEvent, StorePolicy } from '../conformance/history/event.ts';
import { HistoryFormatError, validateHistory } from '../conformance/history/parse.ts';
import { writeHistoryReport } from '../conformance/history/report.ts';
import { toJsonl, wellFormedText } from '../conformance/stress/recorder.ts';
import type { StressOptions, StressRun } from '../conformance/stress/runner.ts';
import { MAX_STRESS_EVENTS, runStress } from '../conformance/stress/runner.ts';
import { EXIT_BY_VERDICT, findingText } from './check.ts';
import { counted, countedIfKnown, countText } from '../conformance/counted.ts';
import { faultsNotStruck, judgeRecording, unobserved } from '../conformance/stress/observed.ts';
import { MalformedRecordingError } from './malformedRecording.ts';
import { shellWord } from './shellWord.ts';

export { MalformedRecordingError } from './malformedRecording.ts';

/**
 * `lockcheck stress`: real client processes race on real servers under the
 * nemesis; the recorded history is judged by the history checkers. Exit
 * codes: 0 safe, 1 violation found, 2 bad usage, 3 environment missing,
 * 4 a check could not decide.
 */
export interface StressCommandOptions extends StressOptions {
  readonly json: boolean;
  readonly out: string;
}

/** What a stress run measured and what the checkers found: the --json output. */
export interface StressSummary {
  readonly backend: string;
  readonly store: StorePolicy;
  readonly clients: number;
  readonly seconds: number;
  readonly nemesis: readonly string[];
  readonly seed: number;
  /** The history's verdict; unknown when the run observed nothing a verdict can rest on (`unobserved`), a violation found still standing. */
  readonly verdict: CheckReport['verdict'];
  /** Why the run observed nothing to judge (no hold granted, or no fault of its nemesis struck), or null. */
  readonly unobserved: string | null;
  /** Faults of the nemesis that never struck in the run (the others did). */
  readonly faultsNotStruck: readonly string[];
  /** This and the history's other counts: null when its check ran out of budget before counting them (a 0 would read as counted). */
  readonly operations: number | null;
  readonly opsPerSecond: number | null;
  readonly cycles: number;
  readonly holds: number | null;
  readonly overlappingHolds: number | null;
  readonly lostUpdates: number | null;
  readonly staleWritesAccepted: number | null;
  readonly writesRejected: number | null;
  readonly unknownOutcomes: number | null;
  /** Faults the nemesis injected (one may take several steps: pause a client, then terminate its backend). */
  readonly faults: number;
  /** The fault intervals the history records (what `lockcheck check` counts as faults). */
  readonly faultIntervals: number | null;
  readonly durationMs: number;
  readonly overheadMs: number;
  readonly clientErrors: readonly string[];
  /** Where the adapter broke its contract (an answer of the wrong shape, a call that never settled): the run is its error (exit 2) unless it found a violation. */
  readonly adapterErrors: readonly string[];
  /** The run ended before its --seconds: the history reached its most events (MAX_STRESS_EVENTS). */
  readonly eventLimitReached: boolean;
  readonly checks: CheckReport['checks'];
  readonly findings: CheckReport['findings'];
  readonly historyFile: string;
  readonly reportFile: string | null;
}

/** Histories larger than this get no HTML timeline (it would not be readable, nor small). */
export const REPORT_MAX_EVENTS = 20_000;

export function storeOf(o: Pick<StressOptions, 'backend' | 'store'>): StorePolicy {
  return o.backend === 'pg-xact' ? 'transactional' : o.store;
}

/** The recorded history, checked against the format as `lockcheck check` reads it; throws MalformedRecordingError. */
export function validRecording(recorded: History, historyFile?: string): History {
  const checked = validateHistory(recorded);
  if (checked instanceof HistoryFormatError) throw new MalformedRecordingError(checked, historyFile);
  return checked;
}

/**
 * The command line that runs `o` again, as the history's meta line and the
 * matrix's stress cells print it. Every option the run used, in a form the
 * CLI takes: an adapter module by its path (its name is no --backend),
 * pg-xact without --store (it refuses one), no empty --nemesis, and a
 * negative seed as --seed=-5 (`--seed -5` reads -5 as an option).
 */
export function stressCommandLine(o: Pick<StressOptions, 'backend' | 'adapter' | 'clients' | 'seconds' | 'resources' | 'ttlMinMs' | 'ttlMaxMs' | 'nemesis' | 'seed' | 'store'>): string {
  const backend = o.adapter === undefined ? o.backend : o.adapter.ref.kind === 'module' ? o.adapter.ref.path : o.adapter.name;
  return [
    `lockcheck stress --backend ${shellWord(backend)}`,
    ...(o.backend === 'pg-xact' ? [] : [`--store ${o.store}`]),
    `--clients ${o.clients} --seconds ${o.seconds} --resources ${o.resources} --ttl ${o.ttlMinMs}-${o.ttlMaxMs}`,
    `--nemesis ${o.nemesis.join(',') || 'none'}`,
    o.seed < 0 ? `--seed=${o.seed}` : `--seed ${o.seed}`,
  ].join(' ');
}

/**
 * Runs, saves `<out>/history.jsonl`, checks, gives the summary to `print`,
 * then writes `<out>/history.html` (or, above REPORT_MAX_EVENTS, removes the
 * one an earlier run left, which would show another history). Interrupted,
 * it saves the history so far to `<out>/history.partial.jsonl` instead
 * (saveInterruptedHistory), the earlier run's files left as they were. The outputs
 * were checked before the run (cli/main.ts); one that still cannot be
 * written throws its OutputFileError only after the verdict was printed and
 * every other output written.
 */
export async function stressAndCheck(o: StressOptions, out: string, print: (summary: StressSummary) => void = () => {}, printInterrupted: (saved: InterruptedStress) => void = () => {}): Promise<{ run: StressRun; history: History; report: CheckReport; summary: StressSummary }> {
  const store = storeOf(o);
  const historyFile = join(out, 'history.jsonl');
  const htmlFile = join(out, 'history.html');
  const meta = (events: readonly HistoryEvent[], note = ''): History => [{ type: 'meta', store, backend: wellFormedText(o.adapter?.name ?? o.backend), description: wellFormedText(`${stressCommandLine(o)}${note}`) }, ...events];
  const save = (events: readonly HistoryEvent[]): History => {
    const recorded = meta(events);
    makeOutputDir(out, 'the stress history into');
    // The clients' error messages are in it (reasons): redacted like every other file lockcheck writes.
    writeRedacted(historyFile, toJsonl(recorded), 'the history');
    return recorded;
  };
  // Interrupted: the history so far is saved beside (never over) a complete one an earlier run left, to be judged with check.
  const onInterrupt = (events: readonly HistoryEvent[]): void => {
    const partial = saveInterruptedHistory(out, events, (file) => writeRedacted(file, toJsonl(meta(events, ' (interrupted)')), 'the interrupted history'));
    printInterrupted({ interrupted: interruptedBy() ?? 'SIGINT', verdict: null, events: events.length, historyFile: partial });
    process.stderr.write(
      partial === null
        ? `lockcheck: interrupted before any event was recorded: nothing saved${existsSync(historyFile) ? ` (${historyFile}, an earlier run's, is left as it was)` : ''}\n`
        : `lockcheck: the history so far (${counted(events.length, 'event')}) is in ${partial}: judge it with lockcheck check ${shellWord(partial)}\n`,
    );
  };
  const run = await runStress({ ...o, onInterrupt });
  // Saved before it is judged (a long search may be interrupted), but a history that cannot be saved is still judged and its verdict printed.
  let unsaved: { readonly error: unknown } | null = null;
  let recorded: History;
  try {
    recorded = save(run.history);
  } catch (error) {
    unsaved = { error };
    recorded = [{ type: 'meta', store, backend: wellFormedText(o.adapter?.name ?? o.backend), description: wellFormedText(stressCommandLine(o)) }, ...run.history];
  }
  const history = validRecording(recorded, historyFile);
  const report = judgeRecording(history, store);
  const reportFile = history.length <= REPORT_MAX_EVENTS ? htmlFile : null;
  const c = report.counts;
  const observation = { operations: c.operations, holds: c.holds, nemesis: o.nemesis, faultsStruck: run.faultsStruck };
  const nothing = unobserved(observation);
  const summary: StressSummary = {
    backend: o.adapter?.name ?? o.backend,
    store,
    clients: o.clients,
    seconds: o.seconds,
    nemesis: o.nemesis,
    seed: o.seed,
    // A run that observed nothing (no hold, no fault struck) is no SAFE; a violation it did find stands.
    verdict: nothing !== null && report.verdict !== 'violation' ? 'unknown' : report.verdict,
    unobserved: nothing,
    faultsNotStruck: nothing === null ? faultsNotStruck(observation) : [],
    operations: c.operations,
    opsPerSecond: c.operations === null ? null : run.durationMs > 0 ? Math.round((c.operations / run.durationMs) * 1000) : 0,
    cycles: run.cycles,
    holds: c.holds,
    overlappingHolds: c.overlappingHolds,
    lostUpdates: c.lostUpdates,
    staleWritesAccepted: c.staleWritesAccepted,
    writesRejected: c.writesRejected,
    unknownOutcomes: c.unknownOutcomes,
    faults: run.faults,
    faultIntervals: c.faults,
    durationMs: Math.round(run.durationMs),
    overheadMs: Math.round(run.overheadMs),
    clientErrors: run.clientErrors,
    adapterErrors: run.adapterErrors,
    eventLimitReached: run.eventLimitReached,
    checks: report.checks,
    findings: report.findings,
    historyFile,
    reportFile,
  };
  print(summary);
  writeEach([
    () => {
      if (unsaved !== null) throw unsaved.error;
    },
    () => void writeStressReport(out, history, report, `lockcheck stress ${o.adapter?.name ?? o.backend} / ${store}`),
  ]);
  return { run, history, report, summary };
}

/** What --json prints when a signal stops the run: no verdict (null, never judged), the history so far and where it is (null: none recorded). */
export interface InterruptedStress {
  readonly interrupted: NodeJS.Signals;
  readonly verdict: null;
  readonly events: number;
  readonly historyFile: string | null;
}

/** Where an interrupted run's history goes: beside history.jsonl, which stays a complete run's (or absent). */
export const PARTIAL_HISTORY = 'history.partial.jsonl';

/**
 * An interrupted run's history: `<out>/history.partial.jsonl`, written by
 * `write`, and its path returned; nothing (null) when no event was recorded.
 * `<out>/history.jsonl` and `history.html`, a complete earlier run's, are
 * never touched: an interrupt must not destroy a complete result with a
 * partial one (it replaced them, even with no event at all).
 */
export function saveInterruptedHistory(out: string, events: readonly HistoryEvent[], write: (file: string) => void): string | null {
  if (events.length === 0) return null;
  const file = join(out, PARTIAL_HISTORY);
  makeOutputDir(out, 'the stress history into');
  write(file);
  return file;
}

/**
 * Writes `<out>/history.html`, the timeline of `history`, and returns its
 * path; or, for a history above REPORT_MAX_EVENTS, which gets none, removes
 * the one an earlier run left there (it would be read as this history's) and
 * returns null.
 */
export function writeStressReport(out: string, history: History, report: CheckReport, title: string): string | null {
  if (history.length <= REPORT_MAX_EVENTS) return writeHistoryReport(out, history, report, title);
  removeStaleOutput(join(out, 'history.html'), 'the history report');
  return null;
}

export async function stressCommand(o: StressCommandOptions): Promise<number> {
  const { summary } = await stressAndCheck({ ...o, progress: (line) => process.stderr.write(`${line}\n`) }, o.out, (s) => console.log(o.json ? JSON.stringify(s, null, 2) : summaryText(s)),
    // --json: a consumer reading stdout gets an object that says the run was stopped, not nothing.
    (saved) => {
      if (o.json) console.log(JSON.stringify(saved, null, 2));
    },
  );
  return stressExit(summary);
}

/**
 * The exit code of a stress run: a violation found stands on its history (1); an adapter that broke its contract makes
 * the run its error (2: a SAFE from clients that stopped, or whose answers were not leases, says nothing); clients that
 * all failed before any operation are an environment missing something (3); else the verdict's.
 */
export function stressExit(summary: Pick<StressSummary, 'verdict' | 'adapterErrors' | 'clientErrors' | 'operations'>): number {
  if (summary.verdict === 'violation') return EXIT_BY_VERDICT.violation;
  if (summary.adapterErrors.length > 0) return 2;
  if (summary.clientErrors.length > 0 && summary.operations === 0) return 3;
  return EXIT_BY_VERDICT[summary.verdict];
}

export function summaryText(s: StressSummary): string {
  return [
    `${s.backend} / ${s.store}, ${counted(s.clients, 'client')}, nemesis ${s.nemesis.length > 0 ? s.nemesis.join(',') : 'none'}, seed ${s.seed}: ${s.verdict.toUpperCase()}${s.unobserved !== null && s.verdict === 'unknown' ? ` (nothing observed: ${s.unobserved})` : ''}${s.adapterErrors.length > 0 && s.verdict !== 'violation' ? ' (not a verdict on the library: the adapter broke its contract, below)' : ''}`,
    `  ${countedIfKnown(s.operations, 'operation')} in ${(s.durationMs / 1000).toFixed(1)} s (${countText(s.opsPerSecond)} ops/s; setup and teardown ${(s.overheadMs / 1000).toFixed(1)} s), ${countedIfKnown(s.holds, 'hold')}, ${counted(s.faults, 'fault')} injected (${countedIfKnown(s.faultIntervals, 'fault interval')} in the history)`,
    `  overlapping holds ${countText(s.overlappingHolds)}, lost updates ${countText(s.lostUpdates)}, stale writes accepted ${countText(s.staleWritesAccepted)} (rejected ${countText(s.writesRejected)}), unknown outcomes ${countText(s.unknownOutcomes)}`,
    ...s.checks.map((k) => `  ${k.property.padEnd(8)} ${k.check.padEnd(22)} ${k.verdict}${k.findings !== null && k.findings > 0 ? ` (${k.findings})` : ''}${k.note === undefined ? '' : `: ${k.note}`}`),
    ...s.findings.slice(0, 5).map((f) => `  ${findingText(f)}`),
    ...(s.findings.length > 5 ? [`  ... ${counted(s.findings.length - 5, 'more finding', 'more findings')} (--json lists them)`] : []),
    ...(s.faultsNotStruck.length > 0 ? [`  never struck: ${s.faultsNotStruck.join(', ')} (the run says nothing about ${s.faultsNotStruck.length === 1 ? 'it' : 'them'})`] : []),
    ...s.clientErrors.map((e) => `  client error: ${e}`),
    ...s.adapterErrors.map((e) => `  adapter error: ${e}`),
    ...(s.eventLimitReached ? [`  stopped before ${s.seconds} s: the history reached ${counted(MAX_STRESS_EVENTS, 'event')}, the most a run records (judged as it is)`] : []),
    // A stress run is real processes racing: it does not replay; its history is judged again as it is.
    `  history: ${s.historyFile} (judge it again: lockcheck check ${shellWord(s.historyFile)})${s.reportFile !== null ? `\n  report: ${s.reportFile}` : ` (no HTML report above ${REPORT_MAX_EVENTS} events)`}`,
  ].join('\n');
}
