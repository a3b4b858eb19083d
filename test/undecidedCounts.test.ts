import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { StressSummary } from '../cli/stress.ts';
import { summaryText } from '../cli/stress.ts';
import { jsonReport, reportText } from '../cli/check.ts';
import type { History } from '../conformance/history/event.ts';
import { type CheckReport, checkHistory } from '../conformance/history/check.ts';
import { historyReportHtml } from '../conformance/history/report.ts';
import { lockcheckSync } from './lockcheckProcess.ts';
import { checkConformance } from '../conformance/check.ts';
import type { RunJson } from '../cli/run.ts';
import { simLeaseBackend } from '../conformance/sim/backend.ts';
import { designs } from '../model/index.ts';
import { PROPERTY_IDS } from '../model/properties.ts';
import { testTempDir } from './tempDirs.ts';

/**
 * A check whose budget ran out before it counted the history printed its
 * counts as 0 (JSON, text, the HTML report, the stress summary): "0
 * operations, 0 holds, 0 lost updates" read as checked and found none. A
 * count not taken is null and said so ('not counted'); an undecided check's
 * findings are null in JSON.
 */
const dir = testTempDir('lockcheck-undecided-');

/** Writes enough that the budget is read during the first phase (the first 65,536 items are judged whole whatever the budget). */
function largeHistory(writes: number): History {
  const events: History[number][] = [{ type: 'meta', store: 'strict' }];
  for (let i = 0; i < writes; i++) {
    const process = i % 8;
    const resource = `r${i % 50}`;
    events.push({ type: 'invoke', process, time: 2 * i, op: 'write', resource, key: 'k', value: String(i), token: String(i + 1) } as History[number]);
    events.push({ type: 'ok', process, time: 2 * i + 1, op: 'write', resource, key: 'k' } as History[number]);
  }
  return events;
}

const history = largeHistory(40_000);
const countNames = ['operations', 'grants', 'holds', 'overlappingHolds', 'writesAccepted', 'writesRejected', 'writesUnknown', 'lostUpdates', 'staleWritesAccepted', 'tokenOrderViolations', 'unknownOutcomes', 'faults'];

describe('counts a check did not take', () => {
  const report = checkHistory(history, { timeoutMs: 0 });

  it('checkHistory: null, not 0; events are known', () => {
    expect(report.verdict).toBe('unknown');
    expect(report.counts.events).toBe(history.length);
    for (const name of countNames) expect(report.counts[name as keyof typeof report.counts], name).toBeNull();
  });

  it('checkHistory: an undecided check\'s findings are null in the API itself (the type says so), never a 0 that reads as "none found"', () => {
    const undecided = report.checks.filter((k) => k.verdict === 'unknown');
    expect(undecided.length).toBeGreaterThan(0);
    for (const k of undecided) {
      expect(k.findings, k.check).toBeNull();
      expect(k.note, k.check).toMatch(/^not decided/);
    }
    // A decided check keeps its count; the union makes a reader handle both.
    const decided = checkHistory(history.slice(0, 201)).checks;
    for (const k of decided) expect(typeof k.findings, k.check).toBe(k.verdict === 'unknown' ? 'object' : 'number');
  });

  it('a --json report read back draws its page: an undecided check\'s null findings are what the report type says, not refused as "not a number"', () => {
    const readBack = JSON.parse(JSON.stringify(jsonReport(report))) as CheckReport;
    expect(readBack.checks.filter((k) => k.verdict === 'unknown').map((k) => k.findings)).toContain(null);
    expect(historyReportHtml(history, readBack)).toMatch(/not counted/);
  });

  it('the text report and the HTML page say "not counted", never 0', () => {
    const text = reportText('big.jsonl', report);
    expect(text).toMatch(/^ {2}operations not counted, grants not counted, holds not counted, writes not counted, faults not counted$/m);
    expect(text).not.toMatch(/\b0 (operations|grants|holds|faults)\b/);
    const html = historyReportHtml(history, report);
    expect(html).toMatch(/operations not counted · grants not counted/);
    expect(html).not.toMatch(/operations 0/);
  });

  it('the stress summary says "not counted" too', () => {
    const summary = {
      backend: 'redis-single', store: 'strict', clients: 2, seconds: 1, nemesis: [], seed: 1, verdict: 'unknown', operations: null, opsPerSecond: null, cycles: 2,
      holds: null, overlappingHolds: null, lostUpdates: null, staleWritesAccepted: null, writesRejected: null, unknownOutcomes: null, faults: 0, faultIntervals: null, durationMs: 1000, overheadMs: 0,
      clientErrors: [], adapterErrors: [], unobserved: null, faultsNotStruck: [], checks: report.checks, findings: [], historyFile: 'out/history.jsonl', reportFile: null, eventLimitReached: false,
    } satisfies StressSummary;
    const text = summaryText(summary);
    expect(text).toMatch(/^ {2}operations not counted in 1\.0 s \(not counted ops\/s;.*holds not counted, 0 faults injected \(fault intervals not counted in the history\)$/m);
    expect(text).toMatch(/^ {2}overlapping holds not counted, lost updates not counted, stale writes accepted not counted \(rejected not counted\), unknown outcomes not counted$/m);
  });

  it('lockcheck check --json: exit 4, the counts null with countsNote saying why, an undecided check\'s findings null; --report writes its page', () => {
    const report = join(dir, 'report');
    const r = lockcheckSync(['check', '-', '--timeout-ms', '1', '--json', '--report', report], { input: history.map((e) => JSON.stringify(e)).join('\n') });
    expect(r.code, r.stderr).toBe(4);
    const json = JSON.parse(r.stdout) as { verdict: string; counts: Record<string, number | null>; countsNote?: string; checks: Array<{ verdict: string; findings: number | null }> };
    expect(json.verdict).toBe('unknown');
    expect(json.counts.events).toBe(history.length);
    for (const name of countNames) expect(json.counts[name], name).toBeNull();
    expect(json.countsNote).toMatch(/^null: not counted \(not decided: the 1 ms budget \(--timeout-ms\) ran out while /);
    for (const k of json.checks) expect(k).toMatchObject({ verdict: 'unknown', findings: null });
    expect(readFileSync(join(report, 'history.html'), 'utf8')).toMatch(/operations not counted/);
  });
});

describe('findings of a conformance check that judged no run to its end', () => {
  // Every run out of pace: before, findings were {} ("none found") in checkConformance's result, run --json and the text line.
  it('checkConformance: every property null (not decided), never absent or 0', async () => {
    const { default: outOfPace } = await import('./fixtures/outOfPaceAdapter.ts');
    const r = await checkConformance(outOfPace, { runs: 2, seed: 1, faults: ['advance'] });
    expect(r.stoppedEarly).toBe(2);
    expect(r.findings).toEqual(Object.fromEntries(PROPERTY_IDS.map((p) => [p, null])));
    // A check that judged runs decides every property: 0 where none showed it.
    const judged = await checkConformance(simLeaseBackend(designs.redisSingle(), 'strict'), { runs: 3, seed: 1, faults: ['advance'] });
    expect(Object.values(judged.findings).every((n) => typeof n === 'number')).toBe(true);
  });

  it('lockcheck run --json: findings null per property, the text says "not decided", never "none"', () => {
    const out = join(dir, 'ce.json');
    const json = lockcheckSync(['run', '--backend', 'test/fixtures/outOfPaceAdapter.ts', '--runs', '2', '--faults', 'advance', '--json', '--counterexample', out]);
    expect(json.code, json.stderr).toBe(4);
    const parsed = JSON.parse(json.stdout) as RunJson & { verdict: string };
    expect(parsed.verdict).toBe('inconclusive');
    // Every field RunJson declares, none other.
    expect(Object.keys(parsed).sort()).toEqual(['backend', 'deviations', 'failure', 'faults', 'findings', 'retried', 'runs', 'seed', 'stoppedEarly', 'stoppedEarlyBy', 'verdict', 'warnings']);
    // Not an audit: no deviations counted, null (it was {}, which reads as audited, none found).
    expect(parsed).toMatchObject({ failure: null, runs: 2, stoppedEarly: 2, seed: 20161010, faults: ['advance'], deviations: null });
    expect(parsed.findings).toEqual(Object.fromEntries(PROPERTY_IDS.map((p) => [p, null])));
    // --junit: the case decided nothing, so it is skipped (with why), never a pass a CI job reads as green.
    const junit = join(dir, 'run.xml');
    const text = lockcheckSync(['run', '--backend', 'test/fixtures/outOfPaceAdapter.ts', '--runs', '2', '--faults', 'advance', '--counterexample', out, '--junit', junit]);
    expect(text.stdout).toMatch(/^findings \(property violations of the design, not bugs\): not decided \(no run was judged to its end\)$/m);
    const xml = readFileSync(junit, 'utf8');
    expect(xml).toMatch(/<testsuite [^>]*tests="1" failures="0" skipped="1"/);
    expect(xml).toMatch(/<testcase name="out of pace at every advance" time="[\d.]+"><skipped message="out of pace at every advance: inconclusive: none of 2 runs was judged to its end/);
  });
});
