import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { match } from 'ts-pattern';
import type { CheckProgress, CheckReport, Finding } from '../conformance/history/check.ts';
import type { StorePolicy } from '../conformance/history/event.ts';
import { decodeHistory, parseHistory } from '../conformance/history/parse.ts';
import type { CheckMessage, CheckTask } from './checkWorker.ts';
import { workerScript } from './exploreWorkerScript.ts';
import { StopFlag, stopOnSignals } from './stopSignals.ts';
import { writeHistoryReport } from '../conformance/history/report.ts';
import { InputFileError, readInputBytes } from './readInput.ts';
import { counted, countedIfKnown, countText } from '../conformance/counted.ts';

/**
 * `lockcheck check <history.jsonl>`: judges a history recorded anywhere.
 * Exit codes: 0 safe, 1 violation, 2 bad input (the message names the line;
 * a history without a client operation is bad input, not safe),
 * 4 unknown (a check could not decide, e.g. the linearizability search timed out).
 */
export interface CheckCommandOptions {
  /** A path, or `-` for stdin. */
  readonly file: string;
  readonly json: boolean;
  readonly report: string | undefined;
  readonly storePolicy: StorePolicy | undefined;
  readonly timeoutMs: number | undefined;
  readonly maxMemoryBytes: number | undefined;
}

/** The largest history `check` reads: its events are held in memory several times over (parsed, ordered, searched). */
export const MAX_HISTORY_BYTES = 256 * 1024 * 1024;

export const EXIT_BY_VERDICT = { safe: 0, violation: 1, unknown: 4 } as const;

/** An input this large takes seconds to parse: a line on stderr says it is being read. */
const LARGE_INPUT_BYTES = 16 * 2 ** 20;
/** In a log (not a terminal), at most one progress line this often. */
const LOG_EVERY_MS = 5000;

/**
 * Progress of a long check on stderr (checkHistory reports about once a second, nothing for a check done within one):
 * rewritten in place on a terminal and blanked at the end; in a log, a line every few seconds.
 */
function progressLines(): { readonly line: (p: CheckProgress) => void; readonly end: () => void } {
  let drawn = 0;
  let lastLogged = -Infinity;
  const text = (p: CheckProgress) =>
    `lockcheck check: ${(p.elapsedMs / 1000).toFixed(0)} s of the ${p.timeoutMs % 1000 === 0 ? p.timeoutMs / 1000 : (p.timeoutMs / 1000).toFixed(3).replace(/0+$/, '')} s budget (--timeout-ms): ${p.phase}${p.total > 0 ? `, ${Math.min(p.done, p.total).toLocaleString('en-US')} of ${p.total.toLocaleString('en-US')}` : ''}`;
  return {
    line: (p) => {
      if (process.stderr.isTTY) {
        const shown = text(p).slice(0, (process.stderr.columns ?? 120) - 1);
        process.stderr.write(`\r${shown.padEnd(drawn)}`);
        drawn = shown.length;
      } else if (p.elapsedMs - lastLogged >= LOG_EVERY_MS) {
        lastLogged = p.elapsedMs;
        process.stderr.write(`${text(p)}\n`);
      }
    },
    end: () => {
      if (drawn > 0) process.stderr.write(`\r${' '.repeat(drawn)}\r`);
    },
  };
}

/**
 * Judges the history on a worker thread, so that this thread hears Ctrl-C (SIGTERM, SIGHUP) while a long search
 * runs: the first signal stops the check as its budget running out would (what it decided is kept and printed, the
 * rest `unknown`, "interrupted while ..."), exit 128 + the signal's number; a second ends the process at once.
 */
export async function checkCommand(o: CheckCommandOptions): Promise<number> {
  let bytes: Buffer;
  try {
    bytes = readInputBytes(o.file, MAX_HISTORY_BYTES, 'a history');
  } catch (e) {
    if (!(e instanceof InputFileError)) throw e;
    console.error(`lockcheck: ${e.message}`);
    return 2;
  }
  // `-` in a message reads as a typo: stdin is named.
  const shown = o.file === '-' ? 'stdin' : o.file;
  // Parsing is not in the budget (a malformed line is refused wherever it is), but a large file takes seconds: say so.
  if (bytes.length >= LARGE_INPUT_BYTES) process.stderr.write(`lockcheck check: reading ${shown} (${Math.round(bytes.length / 2 ** 20)} MiB)\n`);
  const progress = progressLines();
  const stop = new StopFlag();
  const signals = stopOnSignals(stop, (signal) => {
    progress.end();
    process.stderr.write(`\nlockcheck: ${signal}: stopping the check; what it decided follows (again to end at once)\n`);
  });
  let answer: Exclude<CheckMessage, { kind: 'progress' }>;
  try {
    const task: CheckTask = {
      bytes,
      stop: stop.buffer,
      options: {
        ...(o.storePolicy !== undefined ? { storePolicy: o.storePolicy } : {}),
        ...(o.timeoutMs !== undefined ? { timeoutMs: o.timeoutMs } : {}),
        ...(o.maxMemoryBytes !== undefined ? { maxMemoryBytes: o.maxMemoryBytes } : {}),
      },
    };
    answer = await judgeOnWorker(task, progress.line);
  } finally {
    signals.remove();
    progress.end();
  }
  if (answer.kind === 'invalid') {
    console.error(`lockcheck: ${shown} is not a valid history: ${answer.message}\n(the format: docs/histories.md)`);
    return 2;
  }
  // Nothing to judge is not 'safe': an empty or truncated recording would pass as a clean bill of health.
  if (answer.kind === 'empty') {
    console.error(`lockcheck: ${shown} has no client operations (${counted(answer.events, 'event')}): nothing to judge; is the recording empty or truncated?\n(the format: docs/histories.md)`);
    return 2;
  }
  const report = answer.report;
  const stoppedBy = signals.by();
  // The verdict is printed before the report is written: a report that still cannot be written (checked before, cli/main.ts) loses only itself.
  const html = o.report === undefined ? undefined : join(o.report, 'history.html');
  if (o.json) console.log(JSON.stringify({ file: o.file, ...jsonReport(report), ...(html !== undefined ? { reportFile: html } : {}), ...(stoppedBy !== null ? { interrupted: stoppedBy[0] } : {}) }, null, 2));
  else console.log(reportText(o.file, report, html) + (stoppedBy !== null ? `\ninterrupted (${stoppedBy[0]}): the checks not decided by then say unknown` : ''));
  if (o.report !== undefined) {
    // The worker's history is its own: read again here for the timeline (valid: the worker read it).
    const history = parseHistory(decodeHistory(bytes) as string);
    if (!(history instanceof Error)) writeHistoryReport(o.report, history, report, `lockcheck check ${o.file}`);
  }
  return stoppedBy !== null ? stoppedBy[1] : EXIT_BY_VERDICT[report.verdict];
}

/** Runs the check on a worker thread (checkWorker.ts); its progress goes to `onProgress`, its answer is returned. */
async function judgeOnWorker(task: CheckTask, onProgress: (p: CheckProgress) => void): Promise<Exclude<CheckMessage, { kind: 'progress' }>> {
  const worker = new Worker(await workerScript('checkWorker'), { workerData: task });
  try {
    return await new Promise((resolve, reject) => {
      worker.on('message', (m: CheckMessage) => {
        match(m)
          .with({ kind: 'progress' }, (p) => onProgress(p.progress))
          .otherwise((answer) => resolve(answer));
      });
      worker.on('error', reject);
      worker.on('exit', (code) => reject(new Error(`the check's worker thread ended (exit code ${code}) without an answer`)));
    });
  } finally {
    await worker.terminate();
  }
}

/**
 * The report as --json prints it: counts the budget ran out before are null (checkHistory's), with `countsNote`
 * saying why: a 0 there read as "checked, found none" (an undecided check's findings are null already).
 */
export function jsonReport(report: CheckReport): CheckReport & { readonly countsNote?: string } {
  const undecided = report.checks.find((k) => k.verdict === 'unknown');
  const uncounted = Object.values(report.counts).some((n) => n === null);
  return {
    ...report,
    ...(uncounted ? { countsNote: `null: not counted (${undecided?.note ?? 'the check stopped before it counted them'})` } : {}),
  };
}

/** One finding as the text reports print it: the property, the message, the lines of the events involved. */
export function findingText(f: Finding): string {
  return `${f.property}: ${f.message} [lines ${f.events.map((i) => i + 1).join(', ')}]`;
}

export function reportText(file: string, report: CheckReport, html?: string): string {
  const c = report.counts;
  // A check the budget ran out on counted nothing: its count is not 0 but not known.
  const judged = (check: CheckReport['checks'][number]['check'], n: number | null) => (n === null || report.checks.find((k) => k.check === check)?.verdict === 'unknown' ? 'not decided' : String(n));
  const lines = [
    `${file}: ${report.verdict.toUpperCase()}`,
    `  ${c.operations === null ? 'operations not counted' : `${counted(c.operations, 'operation')} (${countText(c.unknownOutcomes)} with unknown outcome)`}, ${countedIfKnown(c.grants, 'grant')}, ${countedIfKnown(c.holds, 'hold')}, ${c.writesAccepted === null ? 'writes not counted' : `writes ${c.writesAccepted} accepted / ${countText(c.writesRejected)} rejected / ${countText(c.writesUnknown)} unknown`}, ${countedIfKnown(c.faults, 'fault')}`,
    `  overlapping holds ${judged('overlapping-holds', c.overlappingHolds)}, lost updates ${judged('lost-updates', c.lostUpdates)}, stale writes accepted ${judged('stale-writes', c.staleWritesAccepted)}, token order violations ${judged('token-order', c.tokenOrderViolations)}`,
    `  store policy: ${report.storePolicy ?? 'not given'}`,
    ...report.checks.map((k) => `  ${k.property.padEnd(8)} ${k.check.padEnd(22)} ${k.verdict}${k.findings !== null && k.findings > 0 ? ` (${k.findings})` : ''}${k.note === undefined ? '' : `: ${k.note}`}`),
    ...report.findings.map(findingText),
    ...(html === undefined ? [] : [`report: ${html}`]),
  ];
  return lines.join('\n');
}
