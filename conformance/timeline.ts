import { match } from 'ts-pattern';
import type { Command } from '../model/command.ts';
import { describeCommand, describeOutcome } from '../model/describe.ts';
import { PROPERTY_TITLES } from '../model/properties.ts';
import { escapedText } from '../model/shownText.ts';
import type { ExecutedStep, RunReport } from './verdict.ts';
import { verdictProperties } from './verdict.ts';
import { checkRunReport } from './reportInput.ts';
import { terminalSafe, visibleControls } from './env/redact.ts';
import { redactMarkup } from './env/redactMarkup.ts';

/**
 * Counterexamples people can read: one lane per client and per node and one
 * for the store, true time along the axis. As text for terminals, and as a
 * self-contained HTML page with an SVG drawing.
 */

type Lane = { readonly kind: 'client'; readonly index: number } | { readonly kind: 'node'; readonly index: number } | { readonly kind: 'store' };

function laneOf(command: Command): Lane {
  return match<Command, Lane>(command)
    .with({ kind: 'clock-step' }, { kind: 'crash' }, { kind: 'restart' }, { kind: 'node-delay' }, (c) => ({ kind: 'node', index: c.node }))
    .with({ kind: 'clock-drift' }, (c) => ('node' in c.target ? { kind: 'node', index: c.target.node } : { kind: 'client', index: c.target.client }))
    .with({ kind: 'advance' }, () => ({ kind: 'store' }))
    .otherwise((c) => ({ kind: 'client', index: (c as { client: number }).client }));
}

function laneName(lane: Lane): string {
  return lane.kind === 'store' ? 'store/time' : `${lane.kind} ${lane.index}`;
}

function lanes(report: RunReport): Lane[] {
  return [
    ...Array.from({ length: report.clients }, (_v, index): Lane => ({ kind: 'client', index })),
    ...Array.from({ length: report.nodes }, (_v, index): Lane => ({ kind: 'node', index })),
    { kind: 'store' },
  ];
}

function headline(report: RunReport): string {
  const v = report.verdict;
  return match(v)
    .with({ kind: 'pass' }, () => `${report.backend}: agrees with its model; no property violated`)
    .with({ kind: 'inconclusive' }, (i) => `${report.backend}: INCONCLUSIVE after step ${report.steps.length}: ${i.reason}`)
    .with({ kind: 'conformance-failure' }, (f) => `${report.backend}: CONFORMANCE FAILURE at step ${f.step.index + 1} (${f.property}: ${PROPERTY_TITLES[f.property]}; ${f.consequence.kind}: ${f.consequence.what}): ${f.message}`)
    .with({ kind: 'property-violation' }, (p) => `${report.backend}: PROPERTY VIOLATION at step ${p.step.index + 1}: ${p.violations.map((x) => `${x.property} (${x.message})`).join('; ')}`)
    .exhaustive();
}

function stepLine(s: ExecutedStep): string {
  const leases = s.leases.map((l) => `c${l.client}:${escapedText(l.resource)}#${l.token}${l.validUntilTrueMs === null ? '' : `<${l.validUntilTrueMs}`}`).join(' ');
  const nodes = s.nodes.map((n, i) => `n${i}${n.up ? '' : '(down)'}${n.clockOffsetMs ? `${n.clockOffsetMs > 0 ? '+' : ''}${n.clockOffsetMs}` : ''}`).join(' ');
  return `t=${s.startMs}..${s.endMs} ms  [${laneName(laneOf(s.command))}] ${describeCommand(s.command)} -> ${describeOutcome(s.actual)}${s.allowed.length > 1 ? `  (model allowed ${s.allowed.length} outcomes)` : ''}\n      leases: ${leases || 'none'}   nodes: ${nodes}${s.violations.length ? `\n      !! ${s.violations.map((v) => `${v.property}: ${v.message}`).join('; ')}` : ''}`;
}

/** The deviations a library audit went past before its verdict, one line each. */
function passedLines(report: RunReport): string[] {
  return (report.deviations ?? []).map((d) => `  went past at step ${d.step.index + 1}: ${d.property}, ${d.consequence.kind}: ${d.consequence.what}: ${d.message}`);
}

/** The run as numbered steps: time, lane, command, outcome, leases (token < deadline in true ms), node clocks; secrets redacted (an adapter's name or message may quote a URL with its password); control characters shown as the terminal shows them. */
export function textTimeline(report: RunReport): string {
  checkRunReport(report);
  // The backend's name and the messages are the adapter's text: one line each, whatever they hold.
  const lines = [escapedText(headline(report)), ...passedLines(report).map(escapedText), ''];
  report.steps.forEach((s, i) => lines.push(`${String(i + 1).padStart(3)}. ${stepLine(s)}`));
  const v = report.verdict;
  if (v.kind === 'conformance-failure') lines.push('', `allowed: ${v.step.allowed.map(describeOutcome).join(' | ')}`, `actual:  ${describeOutcome(v.step.actual)}`);
  return terminalSafe(lines.join('\n'));
}

function esc(s: string): string {
  return s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');
}

/** A self-contained HTML page: the SVG lanes, then the steps as a table; secrets redacted as the page reads (redactMarkup); control characters shown as the terminal shows them. */
export function htmlTimeline(report: RunReport): string {
  checkRunReport(report);
  return visibleControls(redactMarkup(timelinePage(report)));
}

function timelinePage(report: RunReport): string {
  const all = lanes(report);
  const laneH = 46;
  const left = 110;
  const width = 1100;
  // A loop, not Math.max(...all): a spread of every step's time overflowed the call stack on a long report.
  let endMs = 1;
  for (const s of report.steps) {
    endMs = Math.max(endMs, s.endMs);
    for (const l of s.leases) endMs = Math.max(endMs, l.validUntilTrueMs ?? 0);
  }
  // Steps are spread evenly, so that instantaneous steps do not pile up; the time labels say where they are.
  const stepW = (width - left - 20) / Math.max(1, report.steps.length);
  const x = (i: number) => left + i * stepW + stepW / 2;
  const y = (lane: Lane) => 30 + all.findIndex((l) => l.kind === lane.kind && (l.kind === 'store' || (lane.kind !== 'store' && l.index === lane.index))) * laneH;
  const bad = new Set(verdictProperties(report.verdict));
  const parts: string[] = [];
  all.forEach((lane) => {
    parts.push(`<text x="8" y="${y(lane) + 4}" class="lane">${esc(laneName(lane))}</text><line x1="${left}" x2="${width - 10}" y1="${y(lane)}" y2="${y(lane)}" class="axis"/>`);
  });
  // Lease bars: from the step that granted a token to the last step that still shows it.
  const bars = new Map<string, { client: number; token: bigint; from: number; to: number }>();
  report.steps.forEach((s, i) => {
    for (const l of s.leases) {
      const key = `${l.client}:${l.resource}:${l.token}`;
      const bar = bars.get(key) ?? { client: l.client, token: l.token, from: i, to: i };
      bar.to = i;
      bars.set(key, bar);
    }
  });
  for (const b of bars.values()) {
    const yy = y({ kind: 'client', index: b.client }) - 14;
    parts.push(`<rect x="${x(b.from)}" y="${yy}" width="${Math.max(4, x(b.to) - x(b.from))}" height="6" class="lease"><title>token ${esc(String(b.token))}</title></rect>`);
  }
  report.steps.forEach((s, i) => {
    const lane = laneOf(s.command);
    const failed = s.violations.length > 0 || (report.verdict.kind === 'conformance-failure' && report.verdict.step.index === s.index);
    const label = `${i + 1}. ${describeCommand(s.command)} -> ${describeOutcome(s.actual)} (t=${s.startMs}..${s.endMs} ms)`;
    parts.push(`<circle cx="${x(i)}" cy="${y(lane)}" r="${failed ? 8 : 5}" class="${failed ? 'bad' : esc(s.command.kind)}"><title>${esc(label)}</title></circle>`);
    parts.push(`<text x="${x(i)}" y="${y(lane) + 18}" class="num">${i + 1}</text>`);
    parts.push(`<text x="${x(i)}" y="${22 + all.length * laneH}" class="t">${s.endMs}</text>`);
  });
  const height = 40 + all.length * laneH;
  const rows = report.steps
    .map((s, i) => {
      const failed = s.violations.length > 0 || (report.verdict.kind === 'conformance-failure' && report.verdict.step.index === s.index);
      return `<tr class="${failed ? 'badrow' : ''}"><td>${i + 1}</td><td>${s.startMs}..${s.endMs}</td><td>${esc(laneName(laneOf(s.command)))}</td><td>${esc(describeCommand(s.command))}</td><td>${esc(describeOutcome(s.actual))}</td><td>${esc(s.allowed.map(describeOutcome).join(' | '))}</td><td>${esc(s.leases.map((l) => `client ${l.client} '${l.resource}' token ${l.token}`).join(', '))}</td><td>${esc(s.violations.map((v) => `${v.property}: ${v.message}`).join('; '))}</td></tr>`;
    })
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>lockcheck: ${esc(report.backend)}</title>
<style>
body{font:14px system-ui,sans-serif;margin:24px;color:#222}
h1{font-size:18px} .verdict{padding:8px 12px;border-radius:6px;background:${report.verdict.kind === 'pass' ? '#e6f4ea' : '#fde8e8'}}
.lane{font:12px monospace} .axis{stroke:#bbb} .num{font:10px monospace;text-anchor:middle;fill:#555} .t{font:10px monospace;text-anchor:middle;fill:#666}
circle{fill:#4a7bd0} circle.bad{fill:#d33} circle.advance{fill:#999} circle.crash,circle.restart{fill:#a0522d} circle.clock-step,circle.clock-drift{fill:#c90}
circle.pause,circle.resume{fill:#7a4bc0} .lease{fill:#7bc47f;opacity:.7}
table{border-collapse:collapse;margin-top:16px;font-size:12px} td,th{border:1px solid #ddd;padding:3px 6px;vertical-align:top} tr.badrow{background:#fde8e8} td:nth-child(-n+3),th:nth-child(-n+3){white-space:nowrap}
</style></head><body>
<h1>lockcheck counterexample: ${esc(report.backend)}</h1>
<p class="verdict">${esc(headline(report))}</p>${passedLines(report).map((l) => `\n<p class="passed">${esc(l.trim())}</p>`).join('')}
<p>Properties: ${[...bad].map((p) => `${esc(p)} (${esc(PROPERTY_TITLES[p])})`).join(', ') || 'none'}. Time axis: steps in order, true time (ms) below each; green bars: leases held (token in the tooltip); last true time ${endMs} ms.</p>
<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">${parts.join('')}</svg>
<table><thead><tr><th>#</th><th>true ms</th><th>lane</th><th>command</th><th>backend did</th><th>model allowed</th><th>leases after</th><th>violations</th></tr></thead><tbody>
${rows}
</tbody></table></body></html>
`;
}
