import { describe, expect, it } from 'vitest';
import { checkHistory } from '../conformance/history/check.ts';
import { parseHistory } from '../conformance/history/parse.ts';
import { historyReportHtml } from '../conformance/history/report.ts';
import type { CheckReport } from '../conformance/history/check.ts';
import { htmlTimeline } from '../conformance/timeline.ts';
import { InvalidInputError } from '../impl/errors.ts';
import type { RunReport } from '../conformance/verdict.ts';

/**
 * The public HTML builders take reports a caller may have read back from
 * JSON (`lockcheck check --json`): every string in them is text on the page,
 * never markup, in element text and in attributes alike.
 */
const MARKUP = /<script|<img|<svg onload/i;
const PAYLOAD = '"><img src=x onerror=alert(1)><script>alert(2)</script>';

const HISTORY = [
  '{"type":"invoke","process":0,"time":0,"op":"acquire","resource":"r","ttlMs":100}',
  '{"type":"ok","process":0,"time":1,"op":"acquire","resource":"r","owner":"a","token":"1","validUntil":90}',
  '{"type":"invoke","process":1,"time":2,"op":"acquire","resource":"r","ttlMs":100}',
  '{"type":"ok","process":1,"time":3,"op":"acquire","resource":"r","owner":"b","token":"2","validUntil":90}',
].join('\n');

describe('HTML reports: every string of a report given to them is escaped', () => {
  it('historyReportHtml: check names, properties, verdicts of checks, store policy, finding properties', () => {
    const history = parseHistory(HISTORY);
    if (history instanceof Error) throw history;
    const report = JSON.parse(JSON.stringify(checkHistory(history))) as CheckReport & Record<string, unknown>;
    expect(report.findings.length).toBeGreaterThan(0);
    const crafted = {
      ...report,
      storePolicy: PAYLOAD,
      checks: report.checks.map((c) => ({ ...c, check: PAYLOAD, property: PAYLOAD })),
      findings: report.findings.map((f) => ({ ...f, property: PAYLOAD })),
    } as unknown as CheckReport;
    const html = historyReportHtml(history, crafted);
    expect(html).not.toMatch(MARKUP);
  });

  it('htmlTimeline: the properties a verdict names', () => {
    const report = {
      backend: 'b',
      verdict: { kind: 'property-violation', step: { index: 0 }, violations: [{ property: PAYLOAD, message: 'm' }] },
      clients: 1,
      nodes: 1,
      findings: [],
      steps: [],
    } as unknown as RunReport;
    // Refused as no property of the model's, or drawn as text: never markup, never a TypeError.
    let html = '';
    try {
      html = htmlTimeline(report);
    } catch (e) {
      expect(e).toBeInstanceOf(InvalidInputError);
    }
    expect(html).not.toMatch(MARKUP);
  });
});

describe('historyReportHtml: the page is bounded by the number of events, not the length of names', () => {
  it('20 holds of 1 MiB resource names make a page far smaller than its history (was three times its size)', () => {
    const name = 'r'.repeat(1 << 20);
    const lines: string[] = [];
    for (let p = 0; p < 20; p++) {
      lines.push(JSON.stringify({ type: 'invoke', process: p, time: p * 10, op: 'acquire', resource: `${name}${p}`, ttlMs: 5, reason: name }));
      lines.push(JSON.stringify({ type: 'ok', process: p, time: p * 10 + 1, owner: `o${p}`, token: String(p + 1), validUntil: p * 10 + 5 }));
    }
    const history = parseHistory(lines.join('\n'));
    if (history instanceof Error) throw history;
    const html = historyReportHtml(history, checkHistory(history));
    expect(html.length).toBeLessThan(1_000_000);
    expect(html).toContain('… (1048577 characters)');
  });
});

describe('historyReportHtml: lanes and fault bands are bounded too', () => {
  it('25,000 one-event processes and 12,000 faults: a lane only for a process with something drawn, at most 10,000 fault bands', () => {
    const lines: string[] = [];
    for (let p = 0; p < 25_000; p++) lines.push(JSON.stringify({ type: 'invoke', process: p, time: p, op: 'acquire', resource: 'r', ttlMs: 5 }));
    for (let i = 0; i < 12_000; i++) {
      lines.push(JSON.stringify({ type: 'invoke', process: 'nemesis', time: 25_000 + 2 * i, op: 'fault', fault: 'pause-client', target: String(i) }));
      lines.push(JSON.stringify({ type: 'ok', process: 'nemesis', time: 25_001 + 2 * i, op: 'fault', fault: 'pause-client', target: String(i) }));
    }
    const history = parseHistory(lines.join('\n'));
    if (history instanceof Error) throw history;
    const html = historyReportHtml(history, checkHistory(history, { timeoutMs: 0 }));
    expect((html.match(/class="lane"/g) ?? []).length).toBeLessThanOrEqual(20_000);
    expect((html.match(/class="fault-band"/g) ?? []).length).toBeLessThanOrEqual(10_000);
    expect(html).toContain('10000 of 12000 faults');
  });
});
