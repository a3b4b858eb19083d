import { join } from 'node:path';
import { makeOutputDir, writeRedacted } from '../env/outputFile.ts';
import { redactMarkup } from '../env/redactMarkup.ts';
import { visibleControls } from '../env/redact.ts';
import type { CheckReport } from './check.ts';
import { readHistory } from './check.ts';
import { checkReport } from './reportInput.ts';
import { checkString } from '../../impl/options.ts';
import type { History, OperationEvent } from './event.ts';
import type { Hold } from './holds.ts';
import { holdIntervals } from './holds.ts';
import type { FaultInterval, OperationRecord } from './operations.ts';
import { faultIntervals, ms, operations } from './operations.ts';

/**
 * A concurrent history as people read it: a self-contained HTML page, one
 * lane per client process, time on the shared clock along the axis. Lease
 * holds are bars (the ones a finding names in red), operations thin bars
 * under them coloured by outcome, faults bands across all lanes; then the
 * checks and the findings as tables. No script: the drawing is plain SVG.
 */

const WIDTH = 1200;
const LEFT = 90;
const LANE_H = 34;
const TOP = 30;
/** Beyond these the page draws the first ones and what the findings name (a browser chokes on a million rects). */
const MAX_OPS_DRAWN = 20_000;
const MAX_HOLDS_DRAWN = 10_000;
const MAX_FAULTS_DRAWN = 10_000;

/** Beyond these a name or value (a resource, a reason) and a finding's text are cut on the page: a history of long names made a page three times its size, past what a string can hold. */
const MAX_NAME_SHOWN = 300;
const MAX_MESSAGE_SHOWN = 3000;

/** `s` cut to `max` characters, saying how long it was. */
function clip(s: string, max = MAX_NAME_SHOWN): string {
  return s.length <= max ? s : `${s.slice(0, max)}… (${s.length} characters)`;
}

function capped<T>(items: readonly T[], max: number, keep: (t: T) => boolean): readonly T[] {
  return items.length <= max ? items : items.filter((t, i) => i < max || keep(t));
}

/** Text as HTML, for element text and double-quoted attributes alike: every string a report or history holds goes through it (a report may be read back from JSON). */
function esc(s: string): string {
  return s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');
}

function opLabel(o: OperationRecord): string {
  const e = o.event as OperationEvent & Record<string, unknown>;
  const extra = ['key', 'value', 'prev', 'token', 'validUntil', 'reason']
    .filter((k) => e[k] !== undefined)
    .map((k) => `${k}=${clip(JSON.stringify(e[k]) ?? '')}`)
    .join(' ');
  return `process ${o.process}: ${e.op} '${clip(String(e.resource))}' ${extra} -> ${o.outcome} (${ms(o.start)}..${ms(o.end)} ms; ${o.completeIndex === undefined ? `line ${o.invokeIndex + 1}` : `lines ${o.invokeIndex + 1}, ${o.completeIndex + 1}`})`;
}

/**
 * The report as a self-contained HTML page titled `title`: the verdict, each
 * check, the findings, and a timeline of the processes' operations, holds
 * and faults. Throws HistoryFormatError for a malformed history and
 * InvalidInputError for a report not shaped as CheckReport. Secrets are
 * redacted as in every written report (redactMarkup): a client's error
 * message may quote a URL with its password, and the caller prints or
 * stores what it gets; control characters are shown (visibleControls), as in
 * every output.
 */
export function historyReportHtml(given: History, report: CheckReport, title = 'lockcheck history'): string {
  return visibleControls(redactMarkup(historyPage(given, report, title)));
}

/** The page before redaction: writeHistoryReport's writer redacts it once, as it writes. */
function historyPage(given: History, report: CheckReport, title = 'lockcheck history'): string {
  // The history as checkHistory reads it (a HistoryFormatError naming a malformed event), and the report's shape: before any of it is drawn.
  const history = readHistory(given);
  checkReport(report);
  checkString(title, 'title', false);
  const ops = operations(history);
  const holds = holdIntervals(history);
  const faults = faultIntervals(history);
  // Loops, not Math.min(...xs): a history can have more events than a call has arguments.
  let t0 = Infinity;
  let t1 = -Infinity;
  for (const e of history) if (e.type !== 'meta') [t0, t1] = [Math.min(t0, e.time), Math.max(t1, e.time)];
  for (const h of holds) if (Number.isFinite(h.end)) t1 = Math.max(t1, h.end);
  if (!Number.isFinite(t0)) [t0, t1] = [0, 1];
  t1 = Math.max(t1, t0 + 1);
  const x = (t: number) => LEFT + ((Math.min(t, t1) - t0) / (t1 - t0)) * (WIDTH - LEFT - 20);
  const named = new Set(report.findings.flatMap((f) => f.events));
  const violatingHold = (h: Hold) =>
    report.findings.some((f) => f.intervals?.some((s) => s.process === h.process && s.resource === h.resource && s.start === h.start)) ||
    h.events.some((i) => report.findings.some((f) => f.property === 'FENCE-1' && f.events.includes(i)));
  const involvedOp = (o: OperationRecord) => named.has(o.invokeIndex) || (o.completeIndex !== undefined && named.has(o.completeIndex));
  const holdsDrawn = capped(holds, MAX_HOLDS_DRAWN, violatingHold);
  const opsDrawn = capped(ops, MAX_OPS_DRAWN, involvedOp);
  // A lane for each process with something drawn, not for every process: a history of millions of one-event processes made a page past what a string can hold.
  const processes = [...new Set([...opsDrawn.map((o) => o.process), ...holdsDrawn.map((h) => h.process)])].sort((a, b) => a - b);
  const laneY = new Map(processes.map((p, i) => [p, TOP + i * LANE_H]));
  const height = TOP + processes.length * LANE_H + 30;

  const parts: string[] = [];
  const faultsDrawn = capped(faults, MAX_FAULTS_DRAWN, () => false);
  for (const f of faultsDrawn) drawFault(parts, f, x, height);
  for (const p of processes) {
    const y = laneY.get(p)!;
    parts.push(`<g class="lane" data-process="${p}"><text x="8" y="${y + 16}" class="label">process ${p}</text><line x1="${LEFT}" x2="${WIDTH - 20}" y1="${y + LANE_H - 2}" y2="${y + LANE_H - 2}" class="axis"/></g>`);
  }
  for (const h of holdsDrawn) {
    const y = laneY.get(h.process)! + 4;
    const bad = violatingHold(h);
    const end = Number.isFinite(h.end) ? h.end : t1;
    parts.push(
      `<rect class="hold${bad ? ' violating' : ''}" data-process="${h.process}" data-resource="${esc(clip(h.resource))}" data-start="${h.start}" data-end="${Number.isFinite(h.end) ? h.end : ''}" x="${x(h.start)}" y="${y}" width="${Math.max(2, x(end) - x(h.start))}" height="12"><title>${esc(`process ${h.process} held '${clip(h.resource)}'${h.token === undefined ? '' : ` (token ${h.token})`} from ${ms(h.start)} to ${ms(h.end)} ms; ended by ${h.endedBy}`)}</title></rect>`,
    );
  }
  for (const o of opsDrawn) {
    const y = laneY.get(o.process)! + 20;
    parts.push(
      `<rect class="op ${esc(String(o.event.op))} ${esc(o.outcome)}${involvedOp(o) ? ' involved' : ''}" x="${x(o.start)}" y="${y}" width="${Math.max(2, x(o.end) - x(o.start))}" height="6"><title>${esc(opLabel(o))}</title></rect>`,
    );
  }
  parts.push(`<text x="${LEFT}" y="${height - 8}" class="t">${ms(t0)} ms</text><text x="${WIDTH - 20}" y="${height - 8}" class="t end">${ms(t1)} ms</text>`);
  const truncated = holdsDrawn.length < holds.length || opsDrawn.length < ops.length || faultsDrawn.length < faults.length;

  const checkRows = report.checks
    .map((c) => `<tr class="${esc(c.verdict)}"><td>${esc(c.property)}</td><td>${esc(c.check)}</td><td>${esc(c.verdict)}</td><td>${c.verdict === 'unknown' ? '—' : esc(String(c.findings))}</td><td>${esc(clip(c.note ?? '', MAX_MESSAGE_SHOWN))}</td></tr>`)
    .join('\n');
  const findingRows = report.findings.map((f) => `<tr><td>${esc(f.property)}</td><td>${esc(clip(f.message, MAX_MESSAGE_SHOWN))}</td><td>${f.events.map((i) => `${i} (line ${i + 1})`).join(', ')}</td></tr>`).join('\n');
  const counts = Object.entries(report.counts)
    .map(([k, v]) => `${k} ${v ?? 'not counted'}`)
    .join(' · ');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(clip(title))}: ${esc(report.verdict)}</title>
<style>
body{font:14px system-ui,sans-serif;margin:24px;color:#222}
h1{font-size:18px} .verdict{padding:8px 12px;border-radius:6px} .verdict.safe{background:#e6f4ea} .verdict.violation{background:#fde8e8} .verdict.unknown{background:#fff4d6}
.label{font:12px monospace} .axis{stroke:#ddd} .t{font:10px monospace;fill:#666} .t.end{text-anchor:end}
.hold{fill:#7bc47f;opacity:.8} .hold.violating{fill:#d33;opacity:.9;stroke:#800;stroke-width:1.5}
.op{fill:#4a7bd0} .op.fail{fill:#aaa} .op.info,.op.pending{fill:#e0a000} .op.involved{fill:#d33}
.fault{fill:#b48cd8;opacity:.18} .fault-label{font:10px monospace;fill:#6a3d9a}
table{border-collapse:collapse;margin-top:16px;font-size:12px} td,th{border:1px solid #ddd;padding:3px 6px;vertical-align:top;text-align:left} tr.violation{background:#fde8e8} tr.unknown{background:#fff4d6}
</style></head><body>
<h1>${esc(clip(title))}</h1>
<p class="verdict ${esc(report.verdict)}" id="verdict">verdict: <b>${esc(report.verdict)}</b>${report.storePolicy === undefined ? '' : ` (store policy ${esc(report.storePolicy)})`}</p>
<p>${esc(counts)}</p>
<p>One lane per client process; time on the history's clock. Bars: leases the client believed valid (red: named by a finding); thin bars: operations (blue ok, grey fail, amber unknown); purple bands: faults.${truncated ? ` Large history: drawn are the first holds and operations and all that findings name (${holdsDrawn.length} of ${holds.length} holds, ${opsDrawn.length} of ${ops.length} operations, ${faultsDrawn.length} of ${faults.length} faults; a lane for each process with something drawn).` : ''}</p>
<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}">${parts.join('')}</svg>
<h2>Checks</h2>
<table id="checks"><thead><tr><th>property</th><th>check</th><th>verdict</th><th>findings</th><th>note</th></tr></thead><tbody>
${checkRows}
</tbody></table>
<h2>Findings</h2>
<table id="findings"><thead><tr><th>property</th><th>what</th><th>events</th></tr></thead><tbody>
${findingRows}
</tbody></table></body></html>
`;
}

function drawFault(parts: string[], f: FaultInterval, x: (t: number) => number, height: number): void {
  const label = `${clip(f.fault)}${f.target === undefined ? '' : ` ${clip(f.target)}`}`;
  parts.push(
    `<g class="fault-band" data-fault="${esc(clip(f.fault))}"><rect class="fault" x="${x(f.start)}" y="${TOP - 12}" width="${Math.max(2, x(f.end) - x(f.start))}" height="${height - TOP - 18}"><title>${esc(`${label}${f.detail === undefined ? '' : ` (${clip(f.detail)})`}: ${ms(f.start)}..${ms(f.end)} ms`)}</title></rect><text class="fault-label" x="${x(f.start) + 2}" y="${TOP - 2}">${esc(label)}</text></g>`,
  );
}

/** Writes `<dir>/history.html` (the timeline, checks and findings), secrets redacted (a client's error message may quote a URL with its password); returns its path. */
export function writeHistoryReport(dir: string, history: History, report: CheckReport, title?: string): string {
  checkString(dir, 'dir', true);
  // The page first: a bad history or report is refused before the directory is made.
  const html = historyPage(history, report, title);
  makeOutputDir(dir, 'the history report into');
  const file = join(dir, 'history.html');
  writeRedacted(file, html, 'the history report', 'markup');
  return file;
}
