import { beforeAll, describe, expect, it } from 'vitest';
import { checkConformance } from '../conformance/check.ts';
import { checkHistory } from '../conformance/history/check.ts';
import { parseHistory } from '../conformance/history/parse.ts';
import { historyReportHtml } from '../conformance/history/report.ts';
import { simLeaseBackend } from '../conformance/sim/backend.ts';
import { htmlTimeline, textTimeline } from '../conformance/timeline.ts';
import type { RunReport } from '../conformance/verdict.ts';
import { InvalidInputError } from '../impl/errors.ts';
import { LeaseLock } from '../impl/leaseLock.ts';
import { designs } from '../model/design.ts';

/** Claims 1 ms less validity than it has: a conformance failure, whose report has steps with leases and nodes. */
class ShortValidity extends LeaseLock {
  protected override driftMarginMs(ttlMs: number): number {
    return super.driftMarginMs(ttlMs) + 1;
  }
}

type Json = Record<string, unknown>;
/** A deep copy that keeps bigints and leaves the original alone. */
const copied = <T>(v: T): T => structuredClone(v);

/**
 * A hand-made report (one read back from JSON, or built by a tool) handed to
 * the timelines and the history page: every part they draw is checked first,
 * so a wrong one is InvalidInputError naming it, never a TypeError from the
 * template (audit finding, session h35: a null lease threw from the page).
 */
describe('the timelines check what they draw of each step', () => {
  let report: RunReport;
  beforeAll(async () => {
    const found = await checkConformance(simLeaseBackend(designs.redisSingle(), 'strict', { lock: (p) => new ShortValidity(p) }, 'short validity'), { runs: 30, seed: 3, faults: ['advance', 'pause'] });
    if (found.failure == null) throw new Error('the short-validity lock was not caught: no report to corrupt');
    report = found.failure.report;
  });

  /** Each corruption, as the path the message must name and a change to a copy of the report. */
  const corruptions: ReadonlyArray<readonly [string, (r: Json & { steps: Json[] }) => void]> = [
    ['report.steps[0].leases[0]', (r) => ((r.steps[0]!.leases as unknown[])[0] = null)],
    ['report.steps[0].leases[0].resource', (r) => (((r.steps[0]!.leases as Json[])[0] ??= { client: 0, token: 1n, validUntilTrueMs: null }).resource = Symbol('r'))],
    ['report.steps[0].leases[0].token', (r) => (((r.steps[0]!.leases as Json[])[0] ??= { client: 0, resource: 'r', validUntilTrueMs: null }).token = 5)],
    ['report.steps[0].leases[0].client', (r) => (((r.steps[0]!.leases as Json[])[0] ??= { resource: 'r', token: 1n, validUntilTrueMs: null }).client = 'zero')],
    ['report.steps[0].leases[0].validUntilTrueMs', (r) => (((r.steps[0]!.leases as Json[])[0] ??= { client: 0, resource: 'r', token: 1n }).validUntilTrueMs = Number.NaN)],
    ['report.steps[0].nodes[0]', (r) => ((r.steps[0]!.nodes as unknown[])[0] = 'up')],
    ['report.steps[0].nodes[0].clockOffsetMs', (r) => ((r.steps[0]!.nodes as Json[])[0] = { up: true, clockOffsetMs: Symbol('x') })],
    ['report.steps[0].nodes[0].up', (r) => ((r.steps[0]!.nodes as Json[])[0] = { clockOffsetMs: 0 })],
    ['report.steps[0].violations[0]', (r) => ((r.steps[0]!.violations as unknown[])[0] = null)],
    ['report.steps[0].violations[0].message', (r) => ((r.steps[0]!.violations as unknown[])[0] = { property: 'MUTEX-1', message: Symbol('m') })],
    ['report.steps[0].violations[0].property', (r) => ((r.steps[0]!.violations as unknown[])[0] = { property: 'NOPE-9', message: 'm' })],
    ['report.steps[0].allowed[0]', (r) => ((r.steps[0]!.allowed as unknown[])[0] = null)],
    ['report.steps[0].index', (r) => (r.steps[0]!.index = -1)],
    ['report.steps[0].endMs', (r) => (r.steps[0]!.endMs = Number.POSITIVE_INFINITY)],
    ['report.verdict.step.leases', (r) => ((r.verdict as Json & { step: Json }).step.leases = null)],
    ['report.verdict.consequence', (r) => ((r.verdict as Json).consequence = { kind: 'fatal', what: 'x' })],
    ['report.verdict.message', (r) => ((r.verdict as Json).message = 7)],
    ['report.deviations[0].step', (r) => (r.deviations = [{ property: 'MUTEX-1', consequence: { kind: 'safe', what: 'w' }, message: 'm', step: null }])],
  ];

  it.each(corruptions.map(([at, change]) => ({ at, change })))('$at: InvalidInputError naming it, from the text and the page', ({ at, change }) => {
    // Each step copied on its own: the verdict's step is one of the steps, and the change is to the list's.
    const bad = { ...copied(report), steps: report.steps.map((s) => copied(s)) } as unknown as Json & { steps: Json[] };
    change(bad);
    for (const draw of [textTimeline, htmlTimeline]) {
      let thrown: unknown;
      try {
        draw(bad as unknown as RunReport);
      } catch (e) {
        thrown = e;
      }
      expect(thrown).toBeInstanceOf(InvalidInputError);
      expect((thrown as Error).message).toMatch(new RegExp(`^invalid-config: ${at.replaceAll(".", "\\.").replaceAll("[", "\\[").replaceAll("]", "\\]")} must be`));
    }
  });

  it('the report as checkConformance gave it is drawn, and so is a copy of it (the checks refuse nothing real)', () => {
    expect(report.steps.length).toBeGreaterThan(0);
    for (const r of [report, copied(report)]) {
      expect(textTimeline(r)).toContain('CONFORMANCE FAILURE');
      expect(htmlTimeline(r)).toMatch(/^<!doctype html>/i);
    }
  });
});

describe('the history page checks the counts it prints', () => {
  const history = parseHistory(
    [
      '{"type":"invoke","process":0,"op":"acquire","resource":"r","time":0}',
      '{"type":"ok","process":0,"op":"acquire","resource":"r","token":"1","time":1}',
    ].join('\n'),
  );
  if (history instanceof Error) throw history;
  const report = checkHistory(history);

  it.each([
    ['a Symbol', Symbol('n')],
    ['an object', {}],
    ['a negative number', -1],
    ['a fraction', 0.5],
    ['NaN', Number.NaN],
  ])('a count that is %s: InvalidInputError naming it', (_what, n) => {
    expect(() => historyReportHtml(history, { ...report, counts: { ...report.counts, grants: n as number } })).toThrow(expect.objectContaining({ name: 'InvalidInputError', message: expect.stringMatching(/^invalid-config: report\.counts\.grants must be a count/) as string }));
    // A key that is not a plain name is not quoted in the message.
    expect(() => historyReportHtml(history, { ...report, counts: { ...report.counts, ['\u001b[31mx']: n as number } as never })).toThrow(expect.objectContaining({ message: expect.stringMatching(/^invalid-config: a value of report\.counts must be a count/) as string }));
  });

  it("checkHistory's own counts are drawn", () => {
    expect(historyReportHtml(history, report)).toContain(`grants ${report.counts.grants}`);
  });
});
