import { redactUrl } from '../conformance/env/redact.ts';
import { removeStaleOutput, writeRedacted } from '../conformance/env/outputFile.ts';
import { join } from 'node:path';
import type { BackendUnderTest } from '../conformance/adapter.ts';
import type { CheckOptions, CheckResult } from '../conformance/check.ts';
import type { ConsequenceKind } from '../conformance/consequence.ts';
import { CONSEQUENCE_KINDS, findingConsequence, judgesProperty } from '../conformance/consequence.ts';
import type { InconclusiveCause, RunReport } from '../conformance/verdict.ts';
import { describeStoppedEarly } from '../conformance/verdict.ts';
import { checkConformance } from '../conformance/check.ts';
import { offeredFaults } from '../conformance/backendApi.ts';
import type { PropertyId } from '../model/properties.ts';
import { PROPERTY_IDS, PROPERTY_TITLES } from '../model/properties.ts';
import { derivedProperties } from '../model/matrix.ts';
import { SEED_CELLS } from '../conformance/seedSchedules.ts';
import { faultsLackingFor } from '../conformance/seeds.ts';
import type { FaultKind } from '../conformance/faults.ts';
import type { Design, StorePolicy } from '../model/design.ts';
import { describeDesign } from '../model/design.ts';
import { judgedDesign } from '../conformance/consequence.ts';
import type { BuiltIn, MeasuredFaultClass } from './backends.ts';
import type { LibraryId } from './rows.ts';
import type { ServerChoice } from './backends.ts';
import { BUILT_INS, LIBRARY_AUDITS, MEASURED_FAULT_CLASSES, Servers, libraryInstall, missingLibrary, notMeasurable } from './backends.ts';
import { type JUnitCase, junitXml } from './junit.ts';
import { StagedTimelines } from './matrixTimelines.ts';
import { progressDone, progressLine, runText } from './progress.ts';
import { UsageError } from './usage.ts';
import { EnvironmentError } from '../conformance/env/faketime.ts';
import { interruptedBy, onInterrupt } from '../conformance/env/processes.ts';
import type { Observed } from './stressOracle.ts';
import { observedText, oracleColumn, unpredictedBreaks, STRESS_CLIENTS, StressOracle } from './stressOracle.ts';
import { counted } from '../conformance/counted.ts';
import { counterexampleFile } from './counterexample.ts';
import { replayHint } from './replayHint.ts';

/** The properties about fencing tokens. */

/**
 * `lockcheck matrix`: every built-in backend x fault class on real servers,
 * measured against what the model predicts, written as docs/matrix.md and an
 * HTML report whose cells link to their counterexample timelines.
 */
export interface MatrixOptions {
  readonly runs: number;
  readonly seed: number;
  /**
   * Where matrix.md and matrix/ go; undefined: docs, the committed report,
   * which a run that did not finish never replaces (its partial report goes
   * beside it, docs/matrix.partial.md and docs/matrix/partial/). A directory
   * the user names gets whatever the run measured, partial or not, marked.
   */
  readonly out: string | undefined;
  readonly json: boolean;
  readonly junit: string | undefined;
  readonly backends: readonly string[] | undefined;
  readonly faults: readonly string[] | undefined;
  /** The user's own servers, if given (--redis, --pg). */
  readonly servers?: ServerChoice;
  /** Seconds of the concurrent stress run per cell (the second oracle); 0 skips it. */
  readonly stressSeconds: number;
}

export interface MatrixCell {
  readonly backend: string;
  /** A library audit: its conformance failures are findings about the library, not failures of this run. */
  readonly audit: boolean;
  readonly faultClass: string;
  readonly runs: number;
  readonly conformanceFailure: string | null;
  /** The properties its runs broke; null when nothing was decided: the cell was not measured, or no run was judged to its end ([] would read as "all hold"). */
  readonly measured: readonly PropertyId[] | null;
  /** What the model predicts for the cell; null when the cell was not measured (nothing compared: [] would read as "predicts nothing"). */
  readonly predicted: readonly PropertyId[] | null;
  /** The depth to which the prediction holds: every schedule of the model's classes of up to this many commands was explored; null when not measured. */
  readonly predictedDepth: number | null;
  /** Measured but not predicted by the model: flagged. */
  readonly unexpected: readonly PropertyId[];
  /** Predicted but not seen in these runs: noted. */
  readonly unseen: readonly PropertyId[];
  /** Predicted only with faults this backend does not take (the model's schedules for it all need them): not seen, and why. */
  readonly outOfReach: ReadonlyArray<{ readonly property: PropertyId; readonly needs: readonly FaultKind[] }>;
  readonly timeline: string | null;
  readonly elapsedMs: number;
  /** Why the cell was not measured (the backend cannot take the class's faults here), or null. */
  readonly notMeasured: string | null;
  /** Runs the runner stopped following before their end (too ambiguous, or real time outran the pace). */
  readonly stoppedEarly: number;
  /** The runs of `stoppedEarly` by why they stopped. */
  readonly stoppedEarlyBy: Readonly<Partial<Record<InconclusiveCause, number>>>;
  /**
   * A library audit: the worst consequence of its deviations from the model
   * of its contract (unsafe, then liveness, then the safe direction), with the
   * property and the step of its shrunk counterexample; null when it agreed.
   */
  readonly worst: { readonly kind: ConsequenceKind; readonly what: string; readonly property: PropertyId; readonly step: number } | null;
  /** A library audit: runs whose deviation was not the worst kind, per consequence (counted, and gone past); null: no audit (CheckResult.deviations). */
  readonly deviations: Readonly<Partial<Record<ConsequenceKind, number>>> | null;
  /** What concurrent clients observed in a short stress run under the class's faults (the second oracle), or why not. */
  readonly observed: Observed | { readonly notObserved: string } | null;
  /** Broken in the stress run but not predicted by the model: flagged (not a failure of the run). */
  readonly observedUnpredicted: readonly PropertyId[];
}

/**
 * Why a matrix has no row to run. A row whose library is not installed makes
 * it the environment's lack: EnvironmentError (exit 3) with the install
 * command, worded as run and stress word it for one row. Only rows the given
 * --redis/--pg servers cannot serve make it a bad argument (exit 2).
 */
export function noRowCanRun(skipped: ReadonlyArray<{ readonly name: string; readonly why: string; readonly library: LibraryId | undefined }>): Error {
  const missing = skipped.flatMap((x) => (x.library === undefined ? [] : [x.library]));
  if (missing.length === 0) return new UsageError(`none of the backends can run on the given servers: ${skipped.map((x) => `${x.name} (${x.why})`).join('; ')}`);
  if (skipped.length === 1) return new EnvironmentError(`${skipped[0]!.name} ${skipped[0]!.why}`, libraryInstall(...missing));
  return new EnvironmentError(`none of the backends can run: ${skipped.map((x) => `${x.name} (${x.why})`).join('; ')}`, libraryInstall(...missing));
}

export async function matrixCommand(o: MatrixOptions): Promise<number> {
  const all = [...BUILT_INS, ...LIBRARY_AUDITS];
  const wanted = all.filter((b) => o.backends === undefined || o.backends.includes(b.name));
  if (wanted.length === 0) throw new UsageError(`no backend among ${o.backends?.join(', ')}; known: ${all.map((b) => b.name).join(', ')}`);
  const cols = MEASURED_FAULT_CLASSES.filter((f) => o.faults === undefined || o.faults.includes(f.id));
  if (cols.length === 0) throw new UsageError(`no fault class among ${o.faults?.join(', ')}; known: ${MEASURED_FAULT_CLASSES.map((f) => f.id).join(', ')}`);
  const servers = new Servers(o.servers);
  const judged = await Promise.all(
    wanted.map(async (b) => {
      const unavailable = servers.unavailable(b);
      if (unavailable !== null) return { row: b, why: unavailable, library: undefined };
      const missing = await missingLibrary(b);
      // A library that is not installed is the environment's lack (exit 3, with the install command, as run and stress say it), not a bad argument.
      return { row: b, why: missing, library: missing === null ? undefined : b.library };
    }),
  );
  const skipped = judged.flatMap((x) => (x.why === null ? [] : [{ name: x.row.name, why: x.why, library: x.library }]));
  const rows = judged.flatMap((x) => (x.why === null ? [x.row] : []));
  if (rows.length === 0) throw noRowCanRun(skipped);
  const out = o.out ?? 'docs';
  const cellsDir = join(out, 'matrix');
  const cells: MatrixCell[] = [];
  const total = rows.length * cols.length;
  const started = performance.now();
  const onStressServers = o.servers?.redis !== undefined || o.servers?.pg !== undefined;
  const oracle = o.stressSeconds > 0 && !onStressServers ? new StressOracle(o.stressSeconds, o.seed, () => undefined) : null;
  let stressMs = 0;
  /** Cells that ended by an error other than their servers failing: each a bug, reported, and the matrix fails at its end. */
  let harnessErrors = 0;
  const timelines = new StagedTimelines(cellsDir);
  /** Set once a report, whole or partial, is written: the run writes one. */
  let reported = false;
  // What was measured is not lost to Ctrl-C or SIGTERM: the cells done when it came are reported, marked partial (the cell in flight then is not one of them).
  const unregisterPartial = onInterrupt(async () => {
    const signal = interruptedBy();
    if (reported || signal === null) return;
    reported = true;
    writePartial(cells.slice(), `interrupted by ${signal}`);
  });
  const writePartial = (done: readonly MatrixCell[], reason: string): void => {
    const unfinished: Unfinished = { reason, done: done.length, total };
    // No cell measured: nothing to lose, and no report of nothing over an earlier one.
    if (done.length === 0) {
      process.stderr.write(`\nlockcheck matrix: the run was ${reason} before any cell was measured: no report written\n`);
      return;
    }
    try {
      // Every cell measured (the signal came while the servers were stopped): the report is whole, and written as one.
      if (done.length === total) {
        printReport(done, rows, cols, o, skipped, null);
        writeReport(done, rows, cols, o, skipped, null, timelines, reportPlace(o, false));
        writeJunit(done, o);
        process.stderr.write(`\nlockcheck matrix: the run was ${reason} once every cell was measured: wrote ${join(out, 'matrix.md')} and ${join(cellsDir, 'index.html')}\n`);
        return;
      }
      const place = reportPlace(o, true);
      printReport(done, rows, cols, o, skipped, unfinished);
      writeReport(done, rows, cols, o, skipped, unfinished, timelines, place);
      writeJunit(done, o, unfinished);
      process.stderr.write(`\nlockcheck matrix: the run was ${reason} after ${done.length} of ${counted(total, 'cell')}: wrote the partial report ${place.markdown} and ${join(place.dir, 'index.html')}${o.out === undefined ? ` (${join(out, 'matrix.md')} is left as it was)` : ''}\n`);
    } catch (e) {
      process.stderr.write(`\nlockcheck matrix: the run was ${reason}; the report could not be written: ${e instanceof Error ? e.message : String(e)}\n`);
    }
  };
  try {
    for (const line of await servers.check()) process.stderr.write(`${line}\n`);
    for (const x of skipped) process.stderr.write(`skipping ${x.name}: ${x.why}${x.library === undefined ? '' : ` (fix: ${libraryInstall(x.library)})`}\n`);
    for (const row of rows) {
      const backend = await servers.backend(row);
      // A row paced to real time in whole seconds (etcd) runs fewer schedules per cell; its cells say how many.
      const runs = Math.min(o.runs, row.maxRuns ?? o.runs);
      for (const col of cols) {
        const index = cells.length;
        const t0 = performance.now();
        const timelineFile = timelines.path(fileName(row.name, col.id));
        const offered = await offeredFaults(backend);
        const why = notMeasurable(backend, offered, col);
        if (why !== null) {
          const cell: MatrixCell = { ...EMPTY_CELL, backend: row.name, audit: row.library !== undefined, faultClass: col.id, notMeasured: why };
          cells.push(cell);
          progressDone(describeCell(cell));
          continue;
        }
        let cell: MatrixCell;
        try {
          const report = (run: number, found: string): void =>
            progressLine(`[${index + 1}/${total}] ${row.name} x ${col.id}: ${runText(run, runs)}, findings ${found || 'none'}`, started, index + Math.min(run / runs, 1), total);
          const seen = new Set<string>();
          const onRun = (run: number, r: RunReport): void => {
            for (const f of r.findings) for (const v of f.violations) seen.add(v.property);
            report(run, [...seen].sort().join(' '));
          };
          const onMinimise = (replays: number, max: number, steps: number): void =>
            progressLine(`[${index + 1}/${total}] ${row.name} x ${col.id}: minimising the counterexample (replay ${replays}/${max}, ${counted(steps, 'step')})`, started, index + 1, total);
          // The minimising pass takes its default budget (60 replays, 30 s) within the cell's two minutes of shrinking.
          const shrinking = { shrinkLimitMs: SHRINK_LIMIT_MS, onMinimise };
          const audit = row.library !== undefined || backend.contract !== undefined;
          const result: CheckResult = audit
            ? await auditCell(backend, { runs, seed: o.seed, faults: col.faults, modelSeeds: true, timelineFile, onRun, ...shrinking })
            : await checkConformance(backend, { runs, seed: o.seed, faults: col.faults, modelSeeds: true, timelineFile, onRun, ...shrinking });
          for (const [warning, runs] of Object.entries(result.warnings)) process.stderr.write(`\nwarning: ${row.name} x ${col.id}: ${warning} (in ${counted(runs, 'run')})\n`);
          const verdict = result.failure?.report.verdict;
          const worst = verdict?.kind === 'conformance-failure' ? { kind: verdict.consequence.kind, what: verdict.consequence.what, property: verdict.property, step: verdict.step.index + 1 } : null;
          // A library without tokens (declared) has none to order: the model's token properties say nothing about it.
          const judged = (p: PropertyId): boolean => judgesProperty(backend, p);
          const broke = PROPERTY_IDS.filter((p) => (result.findings[p] ?? 0) > 0 && judged(p));
          // No run judged to its end decided no property (CheckResult.findings all null).
          const measured = Object.values(result.findings).every((n) => n === null) ? null : broke;
          const predictedAll = predict(predictionDesign(row, backend), row.store, col);
          const predicted = predictedAll.properties.filter(judged);
          const predictedDepth = predictedAll.depth;
          const first = broke[0];
          const unseen = predicted.filter((p) => !broke.includes(p));
          const here = col.faults.filter((k) => offered.includes(k));
          const outOfReach = unseen.flatMap((property) => {
            const needs = faultsLackingFor(predictionDesign(row, backend), row.store, col.model, property, here);
            return needs === null ? [] : [{ property, needs }];
          });
          // One shrunk counterexample per cell: the bug if there is one, else the first finding.
          if (result.failure === null && first !== undefined) {
            const shown = await checkConformance(backend, { runs, seed: o.seed, faults: col.faults, modelSeeds: true, failOn: { properties: [first] }, timelineFile, ...shrinking });
            if (shown.failure?.shrinkCut === true) process.stderr.write(`\nnote: ${row.name} x ${col.id}: shrinking stopped after ${SHRINK_LIMIT_MS / 1000} s; the timeline shows a ${shown.failure.shrunkLength}-step ${first} that a smaller schedule may also show\n`);
          }
          if (result.failure?.shrinkCut === true) process.stderr.write(`\nnote: ${row.name} x ${col.id}: shrinking stopped after ${SHRINK_LIMIT_MS / 1000} s; the counterexample may not be the smallest\n`);
          if (result.failure !== null) {
            // Saved beside its timeline for `lockcheck replay` (a conformance failure, or an audit's worst deviation).
            const name = fileName(row.name, col.id);
            const file = counterexampleFile(row.name, backend, offered, col.faults, runs, result.failure);
            writeRedacted(timelines.path(name).replace(/\.html$/, '.json'), JSON.stringify(file, null, 2) + '\n', 'the counterexample');
            const saved = join(cellsDir, `${name}.json`);
            const hint = replayHint(saved, row.name, o.servers);
            timelines.noteReplay(name, hint);
            process.stderr.write(`\n${row.name} x ${col.id}: counterexample ${saved} (${hint})\n`);
          }
          const timeline = result.failure !== null || first !== undefined ? `${fileName(row.name, col.id)}.html` : null;
          let observed: MatrixCell['observed'] = null;
          if (oracle !== null) {
            progressLine(`[${index + 1}/${total}] ${row.name} x ${col.id}: concurrent clients, ${o.stressSeconds} s under the class's faults`, started, index + 1, total);
            const s0 = performance.now();
            observed = await oracle.observe(row, col);
            stressMs += performance.now() - s0;
          }
          cell = {
            backend: row.name,
            audit: row.library !== undefined,
            faultClass: col.id,
            runs: result.runs,
            conformanceFailure: result.failure === null ? null : result.failure.message.split('\n')[0]!,
            measured,
            predicted,
            predictedDepth,
            unexpected: broke.filter((p) => !predicted.includes(p)),
            unseen: unseen.filter((p) => !outOfReach.some((x) => x.property === p)),
            outOfReach,
            timeline,
            elapsedMs: performance.now() - t0,
            notMeasured: null,
            stoppedEarly: result.stoppedEarly,
            stoppedEarlyBy: result.stoppedEarlyBy,
            worst: audit ? worst : null,
            deviations: result.deviations,
            observed,
            observedUnpredicted: observed !== null && 'broken' in observed ? oracleUnpredicted(predictionDesign(row, backend), row.store, col, observed, judged) : [],
          };
        } catch (e) {
          // A missing program stops the matrix with its fix.
          if (e instanceof EnvironmentError && e.fix !== null) throw e;
          let why: string;
          if (e instanceof EnvironmentError) {
            // The servers failed this cell, not the machine: say so, go on.
            why = `environment error: ${e.message.split('\n')[0]}`;
          } else {
            // Anything else is a bug (lockcheck's, or an environment's): the cell says so and the matrix fails at its end, but
            // the other cells are still measured (one such error ended a 40-minute npm start at its 81st cell).
            harnessErrors++;
            process.stderr.write(`\nerror: ${row.name} x ${col.id}: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
            why = `error: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`;
          }
          cell = { ...EMPTY_CELL, backend: row.name, audit: row.library !== undefined, faultClass: col.id, notMeasured: why, elapsedMs: performance.now() - t0 };
        }
        cells.push(cell);
        progressDone(describeCell(cell));
      }
    }
  } catch (e) {
    // An error that stopped the matrix (a program missing for a later row, a row's servers not starting): the cells measured so far are reported, marked partial.
    if (!reported && interruptedBy() === null) {
      reported = true;
      writePartial(cells, `stopped by an error (${e instanceof Error ? e.message.split('\n')[0] : String(e)})`);
    }
    timelines.drop();
    throw e;
  } finally {
    unregisterPartial();
    await oracle?.stop();
    await servers.stop();
  }
  // Interrupted: the partial report was written when the signal came; the cells measured after it failed for want of their servers.
  if (interruptedBy() !== null || reported) {
    timelines.drop();
    return 1;
  }
  reported = true;
  if (oracle !== null) process.stderr.write(`the concurrent oracle (stress runs, ${o.stressSeconds} s each, setup included) took ${Math.round(stressMs / 1000)} s of ${Math.round((performance.now() - started) / 1000)} s; --stress-seconds 0 skips it\n`);
  else if (o.stressSeconds > 0 && onStressServers) process.stderr.write('the concurrent oracle needs servers lockcheck starts (its faults kill and pause them): not run on --redis/--pg\n');
  // Printed before the files are written: a file that cannot be written then loses nothing of the run.
  printReport(cells, rows, cols, o, skipped, null);
  try {
    writeReport(cells, rows, cols, o, skipped, null, timelines, reportPlace(o, false));
    // A partial report an earlier run left beside the committed one is stale now.
    if (o.out === undefined) for (const stale of [join(out, 'matrix.partial.md'), join(cellsDir, 'partial')]) removeStaleOutput(stale, 'the partial report', true);
  } finally {
    timelines.drop();
  }
  writeJunit(cells, o);
  // Library audits report what they find; only lockcheck's own backends fail the run.
  const failures = cells.filter((c) => !c.audit && c.conformanceFailure !== null).length;
  const unexpected = cells.filter((c) => !c.audit && c.unexpected.length > 0).length;
  process.stderr.write(`\nwrote ${join(out, 'matrix.md')} and ${join(cellsDir, 'index.html')}; ${failures} conformance failure(s), ${unexpected} cell(s) unlike the prediction${harnessErrors > 0 ? `, ${harnessErrors} cell(s) ended by an error (above)` : ''}\n`);
  return failures > 0 || unexpected > 0 || harnessErrors > 0 ? 1 : 0;
}

/** A run that did not measure every cell: why it stopped, and how far it got. */
interface Unfinished {
  readonly reason: string;
  readonly done: number;
  readonly total: number;
}

/** Where a report goes: matrix.md and matrix/index.html, with the cells' timelines in its `dir` (`link` from the markdown). */
interface ReportPlace {
  readonly markdown: string;
  readonly dir: string;
  readonly link: string;
}

/**
 * A whole report goes to <out>/matrix.md and <out>/matrix/. A partial one goes
 * there too when the user named --out; under the default (docs, the committed
 * report) it goes beside it, to docs/matrix.partial.md and docs/matrix/partial/.
 */
function reportPlace(o: MatrixOptions, partial: boolean): ReportPlace {
  const out = o.out ?? 'docs';
  if (!partial || o.out !== undefined) return { markdown: join(out, 'matrix.md'), dir: join(out, 'matrix'), link: 'matrix/' };
  return { markdown: join(out, 'matrix.partial.md'), dir: join(out, 'matrix', 'partial'), link: 'matrix/partial/' };
}

/** The report on stdout: the markdown, or (--json) the cells measured, with what was not when the run did not finish. */
function printReport(cells: readonly MatrixCell[], rows: readonly BuiltIn[], cols: readonly MeasuredFaultClass[], o: MatrixOptions, skipped: ReadonlyArray<{ name: string; why: string }>, unfinished: Unfinished | null): void {
  if (!o.json) {
    console.log(markdown(cells, rows, cols, o, skipped, unfinished, reportPlace(o, unfinished !== null).link));
    return;
  }
  const notRun = rows.flatMap((r) => cols.flatMap((c) => (cells.some((x) => x.backend === r.name && x.faultClass === c.id) ? [] : [{ backend: r.name, faultClass: c.id }])));
  const partial = unfinished === null ? null : { reason: unfinished.reason, cellsMeasured: unfinished.done, cellsPlanned: unfinished.total, notRun };
  console.log(JSON.stringify({ seed: o.seed, runs: o.runs, complete: unfinished === null, partial, cells }, null, 2));
}

/** The markdown and the page, the timelines of their cells first (the report links only to files that are there). */
function writeReport(cells: readonly MatrixCell[], rows: readonly BuiltIn[], cols: readonly MeasuredFaultClass[], o: MatrixOptions, skipped: ReadonlyArray<{ name: string; why: string }>, unfinished: Unfinished | null, timelines: StagedTimelines, place: ReportPlace): void {
  const names = cells.map((c) => fileName(c.backend, c.faultClass));
  if (place.dir === join(o.out ?? 'docs', 'matrix')) timelines.publish(names);
  else {
    // The partial report's own directory: what an earlier partial run left there is not this run's.
    removeStaleOutput(place.dir, 'the partial report', true);
    timelines.publishInto(place.dir, names);
  }
  writeRedacted(place.markdown, markdown(cells, rows, cols, o, skipped, unfinished, place.link), 'the matrix', 'markup');
  writeRedacted(join(place.dir, 'index.html'), html(cells, rows, cols, o, skipped, unfinished), 'the matrix page', 'markup');
}

/** A cell's JUnit verdict: failed (a conformance failure of lockcheck's own, a break not predicted), skipped (nothing decided: not measured, or every run stopped early), else passed. */
function junitVerdict(c: MatrixCell): { readonly failure: string } | { readonly failure: null; readonly skipped?: string } {
  const failure = c.audit ? null : (c.conformanceFailure ?? (c.unexpected.length ? `unexpected: ${c.unexpected.join(', ')}` : null));
  if (failure !== null) return { failure };
  if (c.notMeasured !== null) return { failure: null, skipped: `not measured: ${c.notMeasured}` };
  return c.measured === null && c.conformanceFailure === null ? { failure: null, skipped: `inconclusive: ${counted(c.stoppedEarly, 'run')} stopped early (${describeStoppedEarly(c.stoppedEarlyBy)})` } : { failure: null };
}

/** --junit: a test case per cell measured; a partial run's ends with one that fails, saying why it stopped (a CI job must not read it as all green). */
function writeJunit(cells: readonly MatrixCell[], o: MatrixOptions, unfinished: Unfinished | null = null): void {
  if (o.junit === undefined) return;
  const incomplete = unfinished === null ? [] : [{ name: 'the matrix run', failure: `partial: the run was ${unfinished.reason} after ${unfinished.done} of ${counted(unfinished.total, 'cell')}`, timeMs: 0 }];
  writeRedacted(
    o.junit,
    junitXml(
      'lockcheck matrix',
      [...cells.map((c): JUnitCase => ({ name: `${c.backend} x ${c.faultClass}`, timeMs: c.elapsedMs, ...junitVerdict(c) })), ...incomplete],
    ),
    'the JUnit report',
    'markup',
  );
}

/** A cell the run did not get to: said so, never a number that reads as measured. */
function notRunCell(backend: string, faultClass: string, unfinished: Unfinished): MatrixCell {
  return { ...EMPTY_CELL, backend, audit: false, faultClass, notMeasured: `not run: the run was ${unfinished.reason} before this cell` };
}

/** Real time each cell's shrinking may take: on the paced rows (etcd, ZooKeeper) one candidate run costs seconds, and a finding's timeline was shrunk for ten minutes and more. */
const SHRINK_LIMIT_MS = 120_000;

const EMPTY_CELL = { runs: 0, conformanceFailure: null, measured: null, predicted: null, predictedDepth: null, unexpected: [], unseen: [], outOfReach: [], timeline: null, elapsedMs: 0, stoppedEarly: 0, stoppedEarlyBy: {}, worst: null, deviations: null, observed: null, observedUnpredicted: [] } as const;

/**
 * A library audit of one cell: the runs go on past deviations that are not
 * unsafe (counted), and the worst consequence found is shrunk: unsafe if any
 * run showed one, else liveness, else the safe direction (one more pass each,
 * from the same seed, looking only for that kind).
 */
async function auditCell(backend: BackendUnderTest, options: CheckOptions): Promise<CheckResult> {
  const first = await checkConformance(backend, { ...options, failOn: { consequences: ['unsafe'] } });
  if (first.failure !== null) return first;
  const next = CONSEQUENCE_KINDS.find((k) => (first.deviations?.[k] ?? 0) > 0);
  if (next === undefined) return first;
  const { onRun: _progress, ...quiet } = options;
  const shrunk = await checkConformance(backend, { ...quiet, failOn: { consequences: [next] } });
  return { ...first, failure: shrunk.failure };
}

/**
 * The design a row's cell is predicted by: the row's; for a library audit
 * the model of the library's declared contract, which must be the design its
 * adapter is judged by (judgedDesign): a row predicted by another model than
 * the one judging it would flag the contract's own consequences as
 * "observed, not predicted".
 */
export function predictionDesign(row: BuiltIn, backend: BackendUnderTest): Design {
  if (row.library === undefined) return row.design;
  const judged = describeDesign(judgedDesign(backend));
  if (judged !== describeDesign(row.design)) throw new Error(`${row.name}: its adapter is judged by ${judged}, the row is predicted by ${describeDesign(row.design)}: the row's design must be the model of the contract its adapter declares (cli/backends.ts, conformance/adapters/contracts.ts)`);
  return row.design;
}

/**
 * What the model predicts for a cell: the properties its bounded exploration
 * of `design` breaks under the column's classes (the exploration recorded in
 * conformance/seedSchedules.ts, the same that seeds the runs), their derived
 * consequences, and the depth to which that holds (the least of the classes').
 */
export function predict(design: Design, store: StorePolicy, col: MeasuredFaultClass): { readonly properties: PropertyId[]; readonly depth: number } {
  const label = describeDesign(design);
  const found = new Set<PropertyId>();
  let depth = Number.POSITIVE_INFINITY;
  for (const faultClass of col.model) {
    const cell = SEED_CELLS.find((c) => c.design === label && c.store === store && c.fault === faultClass);
    // Every matrix row is recorded (test/seeds.test.ts); a missing one is a stale file, not a prediction of nothing.
    if (cell === undefined) throw new Error(`no recorded exploration of ${label} / ${store} / ${faultClass}: run npm run seeds`);
    for (const f of cell.found) found.add(f.property);
    depth = Math.min(depth, cell.depth);
  }
  for (const p of derivedProperties(found, store)) found.add(p);
  return { properties: PROPERTY_IDS.filter((p) => found.has(p)), depth };
}

/**
 * The concurrent line's breaks the model does not account for. Judged against the model's
 * exploration of every class the line's nemesis brought about (oracleColumn), not the column's
 * alone: the stress run's delayed link also delays the store's writes, which the model explores
 * under `timing`, so a lost update it causes in the partition-delay column is predicted, not news.
 */
export function oracleUnpredicted(design: Design, store: StorePolicy, col: MeasuredFaultClass, observed: Observed, judged: (p: PropertyId) => boolean): readonly PropertyId[] {
  const covered = oracleColumn(col, observed.nemesis);
  return unpredictedBreaks(predict(design, store, covered).properties.filter(judged), observed.broken, unfencedPrediction(design, store, covered));
}

/**
 * For a row whose store is fenced (strict, monotonic): what the same design predicts with an
 * unfenced store under the column's faults, whose STORE-1 says a write may land after its
 * holder's lease ended (the fenced store accepts it when it lands first; stressOracle.ts's
 * unpredictedBreaks). Nothing for any other store.
 */
export function unfencedPrediction(design: Design, store: StorePolicy, col: MeasuredFaultClass): readonly PropertyId[] {
  if (store !== 'strict' && store !== 'monotonic') return [];
  return predict(design, 'unfenced', col).properties;
}

function fileName(backend: string, col: string): string {
  return `${backend}__${col}`.replace(/[^\w.-]+/g, '_');
}

/** A cell's progress line (exported for its test). */
export function describeCell(c: MatrixCell): string {
  if (c.notMeasured !== null) return `${c.backend} x ${c.faultClass}: not measured (${c.notMeasured})`;
  const parts = [`${c.backend} x ${c.faultClass}: ${counted(c.runs, 'run')}${c.stoppedEarly ? ` (${c.stoppedEarly} stopped early: ${describeStoppedEarly(c.stoppedEarlyBy)})` : ''}`];
  // A library audit's deviation is a finding about the library (the run does not fail), so it must not read like a failure of lockcheck's own.
  if (c.conformanceFailure !== null) parts.push(c.audit ? `audit finding, the library deviates from its contract: ${c.conformanceFailure.replace(/^.*CONFORMANCE FAILURE at /, 'at ')}` : `CONFORMANCE FAILURE: ${c.conformanceFailure}`);
  parts.push(c.measured?.length ? `breaks ${c.measured.join(', ')}` : holds(c));
  if (c.unexpected.length) parts.push(`!!! NOT PREDICTED: ${c.unexpected.join(', ')}`);
  if (c.unseen.length) parts.push(`(predicted ${c.unseen.join(', ')}: not seen)`);
  if (c.outOfReach.length) parts.push(`(${outOfReachText(c)})`);
  const obs = observedCellText(c);
  if (obs !== '') parts.push(`concurrent clients observed ${obs}`);
  return parts.join('; ');
}

/** Predictions the cell's runs cannot show: each with the faults the model's schedules for it need and the backend does not take. */
function outOfReachText(c: MatrixCell): string {
  return c.outOfReach.map((x) => `predicted with ${x.needs.join(' and ')}, which this backend does not take: ${x.property}`).join('; ');
}

/** A cell without findings: 'all hold' only if some run was judged to its end (a run that stopped early is evidence of nothing). */
function holds(c: MatrixCell): string {
  return c.runs > 0 && c.stoppedEarly >= c.runs ? 'inconclusive' : 'all hold';
}

/** A library audit's cell: its worst consequence, then the design's findings and what else it deviated in. */
export function auditText(c: MatrixCell): string {
  const others = CONSEQUENCE_KINDS.filter((k) => k !== c.worst?.kind && (c.deviations?.[k] ?? 0) > 0).map((k) => `${k} in ${counted(c.deviations?.[k] ?? 0, 'run')}`);
  // What the contract itself costs: the model's findings under it, by consequence (the worst first).
  const underIt = new Map<string, { kind: ConsequenceKind; properties: PropertyId[] }>();
  for (const p of c.measured ?? []) {
    const { kind, what } = findingConsequence(p);
    underIt.set(what, { kind, properties: [...(underIt.get(what)?.properties ?? []), p] });
  }
  const costs = [...underIt].sort(([, a], [, b]) => CONSEQUENCE_KINDS.indexOf(a.kind) - CONSEQUENCE_KINDS.indexOf(b.kind));
  return [
    c.worst === null ? 'agrees with the model of its contract' : `**${c.worst.kind}**: ${c.worst.what} (${c.worst.property}, step ${c.worst.step} of the shrunk schedule)`,
    costs.length ? `under its contract **${costs[0]![1].kind}**: ${costs.map(([what, u]) => `${what} (${u.properties.join(', ')})`).join(', ')}` : '',
    others.length ? `also ${others.join(', ')}` : '',
    c.stoppedEarly ? `${c.stoppedEarly} of ${counted(c.runs, 'run')} inconclusive: ${describeStoppedEarly(c.stoppedEarlyBy)}` : '',
  ]
    .filter((x) => x)
    .join('; ');
}

/** The second oracle's part of a cell: what concurrent clients observed, and any break the model did not predict. */
function observedCellText(c: MatrixCell): string {
  const o = c.observed;
  if (o === null) return '';
  if ('notObserved' in o) return `nothing (${o.notObserved})`;
  return `${observedText(o)}${c.observedUnpredicted.length > 0 ? ` (observed, not predicted: ${c.observedUnpredicted.join(', ')})` : ''}`;
}

/**
 * A message quoted in matrix.md (a server's, a driver's or an adapter's
 * error): markdown viewers render HTML in it, and a '|' ends the table's
 * cell, so both are made text.
 */
function mdText(s: string): string {
  return s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('|', '/');
}

/** A cell of matrix.md (exported for its test). */
export function cellText(c: MatrixCell, link: (file: string) => string): string {
  const obs = observedCellText(c);
  const lockstep = lockstepText(c, link);
  return obs === '' || c.notMeasured !== null ? lockstep : `${lockstep}<br>concurrent: ${c.observedUnpredicted.length > 0 ? `**${obs}**` : obs}`;
}

function lockstepText(c: MatrixCell, link: (file: string) => string): string {
  if (c.notMeasured !== null) return `— (not measured: ${mdText(c.notMeasured)})`;
  if (c.audit) return `${c.timeline ? link(c.timeline) : ''}${mdText(auditText(c))}`;
  if (c.conformanceFailure !== null) return `${c.timeline ? link(c.timeline) : ''}**conformance failure** ${mdText(c.conformanceFailure.replace(/^.*CONFORMANCE FAILURE at /, 'at '))}`;
  const measured = c.measured?.length ? c.measured.join(', ') : holds(c);
  const flags = [
    c.unexpected.length ? `**not predicted: ${c.unexpected.join(', ')}**` : '',
    c.unseen.length ? `predicted, not seen: ${c.unseen.join(', ')}` : '',
    c.outOfReach.length ? outOfReachText(c) : '',
    c.stoppedEarly ? `${c.stoppedEarly} of ${counted(c.runs, 'run')} stopped early: ${describeStoppedEarly(c.stoppedEarlyBy)}` : '',
  ].filter((x) => x);
  return `${c.timeline ? link(c.timeline) : ''}${measured}${flags.length ? ` (${flags.join('; ')})` : ''} [model to ${c.predictedDepth}]`;
}

/** Where the runs ran, in a sentence. */
function serversText(o: MatrixOptions): string {
  const given = [
    o.servers?.redis !== undefined ? `the Redis servers ${o.servers.redis.map((u) => redactUrl(u)).join(', ')} (paced to their real clocks)` : '',
    o.servers?.pg !== undefined ? `the PostgreSQL database ${redactUrl(o.servers.pg)}` : '',
  ].filter((x) => x);
  const started = [o.servers?.redis === undefined ? 'redis-server' : '', o.servers?.pg === undefined ? 'PostgreSQL' : ''].filter((x) => x);
  return [...(given.length ? [`on ${given.join(' and ')}`] : []), ...(started.length ? [`on ${started.join(' and ')} processes lockcheck started`] : [])].join(', ');
}

function markdown(cells: readonly MatrixCell[], rows: readonly BuiltIn[], cols: readonly MeasuredFaultClass[], o: MatrixOptions, skipped: ReadonlyArray<{ name: string; why: string }>, unfinished: Unfinished | null, link: string): string {
  const cellOf = (r: BuiltIn, c: MeasuredFaultClass): MatrixCell => cells.find((x) => x.backend === r.name && x.faultClass === c.id) ?? notRunCell(r.name, c.id, unfinished!);
  const lines = [
    unfinished === null ? '# The measured matrix' : '# The measured matrix (PARTIAL)',
    '',
    ...(unfinished === null ? [] : [`**Partial report**: the run was ${mdText(unfinished.reason)} after ${unfinished.done} of ${counted(unfinished.total, 'cell')}; the cells it did not get to read "not run". A complete run replaces this report.`, '']),
    `Generated by \`lockcheck matrix\` (seed ${o.seed}, ${counted(o.runs, 'generated schedule')} per cell, ${serversText(o)}). Each cell lists the spec properties the design broke in those runs (findings, not bugs: the backend agreed with its model at every step) and links to a shrunk counterexample timeline. "Predicted" compares with the model's bounded exploration, recorded in \`conformance/seedSchedules.ts\` (\`npm run seeds\`): "[model to k]" says it explored every schedule of the column's fault classes up to k commands (8, or less where its state cap stopped it); a property measured but not predicted is flagged. Each cell's runs start with the model's shortest counterexamples for it ([docs/conformance.md](conformance.md#the-models-counterexamples-run-first)), then random schedules. A conformance failure would be a bug in the backend. A library row (lib:…) is an audit judged against the library's declared contract (its adapter's \`contract\`: deadline, drift allowance, tokens, timeouts): each cell names the worst consequence of its deviations, unsafe (the client may act on a lease longer than allowed, two holders, a stale write lands, another owner's key changed), then liveness, then the safe direction (validity shorter than allowed, an early loss signal), with the shrunk counterexample of that worst one; the runs go on past the others, which are counted.${cells.some((c) => c.observed !== null) ? ` "concurrent" is the second oracle: what ${STRESS_CLIENTS} real client processes observed in a ${o.stressSeconds} s \`lockcheck stress\` run of the row's backend under the column's faults (targeted and random; [docs/stress.md](stress.md)): overlapping holds (MUTEX-1), lost updates (STORE-1), stale writes accepted (FENCE-2), tokens out of order (FENCE-1); a break the model did not predict is in bold.` : ''} See [the spec](../spec/SPEC.md) for the properties and the predicted matrix with its reasons, and [reading the matrix](matrix-guide.md).`,
    '',
    `| backend | ${cols.map((c) => c.id).join(' | ')} |`,
    `|---|${cols.map(() => '---').join('|')}|`,
    ...rows.map((r) => `| ${r.name} | ${cols.map((c) => cellText(cellOf(r, c), (f) => `[🔎](${link}${f}) `)).join(' | ')} |`),
    '',
    ...(skipped.length ? ['Not run on these servers:', ...skipped.map((x) => `- ${x.name}: ${mdText(x.why)}`), ''] : []),
    'Fault classes:',
    ...cols.map((c) => `- **${c.id}**: ${c.title} (fault kinds: ${c.faults.join(', ')})`),
    '',
    'Properties:',
    ...PROPERTY_IDS.map((p) => `- **${p}**: ${PROPERTY_TITLES[p]}`),
    '',
  ];
  return lines.join('\n');
}

function esc(s: string): string {
  return s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');
}

function html(cells: readonly MatrixCell[], rows: readonly BuiltIn[], cols: readonly MeasuredFaultClass[], o: MatrixOptions, skipped: ReadonlyArray<{ name: string; why: string }>, unfinished: Unfinished | null): string {
  const cellOf = (r: BuiltIn, c: MeasuredFaultClass): MatrixCell => cells.find((x) => x.backend === r.name && x.faultClass === c.id) ?? notRunCell(r.name, c.id, unfinished!);
  const td = (c: MatrixCell): string => {
    if (c.notMeasured !== null) return `<td class="na" data-backend="${esc(c.backend)}" data-fault="${esc(c.faultClass)}">—<div class="note">not measured: ${esc(c.notMeasured)}</div></td>`;
    if (c.audit) {
      const cls = c.worst === null ? (c.measured?.length ? 'finding' : 'holds') : c.worst.kind === 'unsafe' ? 'bug' : 'finding';
      const text = c.worst === null ? 'agrees' : c.worst.kind;
      const body = c.timeline ? `<a href="${esc(c.timeline)}">${esc(text)}</a>` : esc(text);
      return `<td class="${cls}" data-backend="${esc(c.backend)}" data-fault="${esc(c.faultClass)}">${body}<div class="note">${esc(auditText(c).replaceAll('**', ''))}</div></td>`;
    }
    const cls = c.conformanceFailure !== null ? 'bug' : c.unexpected.length ? 'unexpected' : c.measured?.length ? 'finding' : 'holds';
    const text = c.conformanceFailure !== null ? 'conformance failure' : c.measured?.length ? c.measured.join(', ') : holds(c);
    const note = [
      c.conformanceFailure !== null ? c.conformanceFailure.replace(/^.*CONFORMANCE FAILURE at /, 'at ') : '',
      c.unexpected.length ? `not predicted: ${c.unexpected.join(', ')}` : '',
      c.unseen.length ? `predicted, not seen: ${c.unseen.join(', ')}` : '',
      c.outOfReach.length ? outOfReachText(c) : '',
      c.stoppedEarly ? `${c.stoppedEarly} of ${counted(c.runs, 'run')} stopped early: ${describeStoppedEarly(c.stoppedEarlyBy)}` : '',
      observedCellText(c) !== '' ? `concurrent clients: ${observedCellText(c)}` : '',
    ]
      .filter((x) => x)
      .join('; ');
    const body = c.timeline ? `<a href="${esc(c.timeline)}">${esc(text)}</a>` : esc(text);
    return `<td class="${cls}" data-backend="${esc(c.backend)}" data-fault="${esc(c.faultClass)}">${body}${note ? `<div class="note">${esc(note)}</div>` : ''}</td>`;
  };
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>lockcheck: the measured matrix${unfinished === null ? '' : ' (PARTIAL)'}</title>
<style>
body{font:14px system-ui,sans-serif;margin:24px;color:#222} table{border-collapse:collapse} td,th{border:1px solid #ccc;padding:6px 8px;vertical-align:top}
td.holds{background:#e6f4ea} td.finding{background:#fff4d6} td.unexpected{background:#ffd9a8} td.bug{background:#f8c4c4} td.na{background:#eee;color:#777} .note{font-size:11px;color:#555}
</style></head><body>
<h1>The measured matrix${unfinished === null ? '' : ' (PARTIAL)'}</h1>
${unfinished === null ? '' : `<p id="partial"><b>Partial report</b>: the run was ${esc(unfinished.reason)} after ${unfinished.done} of ${esc(counted(unfinished.total, 'cell'))}; the cells it did not get to read "not run". A complete run replaces this report.</p>\n`}<p>Seed ${o.seed}, ${o.runs} generated schedules per cell, ${esc(serversText(o))}. Green: every property held. Yellow: the design broke the properties shown (click for the shrunk counterexample). Orange: a finding the model did not predict. Red: a conformance failure (a bug); in a library row (lib:…), where the library deviates from the model of its design.</p>
<table id="matrix"><thead><tr><th>backend</th>${cols.map((c) => `<th title="${esc(c.title)}">${esc(c.id)}</th>`).join('')}</tr></thead><tbody>
${rows.map((r) => `<tr><th>${esc(r.name)}<div class="note">${esc(describeDesign(r.design))}</div></th>${cols.map((c) => td(cellOf(r, c))).join('')}</tr>`).join('\n')}
</tbody></table>
${skipped.length ? `<p>Not run on these servers:</p><ul>${skipped.map((x) => `<li>${esc(x.name)}: ${esc(x.why)}</li>`).join('')}</ul>` : ''}
<ul>${PROPERTY_IDS.map((p) => `<li><b>${p}</b>: ${esc(PROPERTY_TITLES[p])}</li>`).join('')}</ul>
</body></html>
`;
}
