import { describe, expect, it } from 'vitest';
import { auditText, describeCell } from '../cli/matrix.ts';
import { matrixCell } from './matrixCell.ts';
import { observedText, type Observed } from '../cli/stressOracle.ts';
import { summaryText, type StressSummary } from '../cli/stress.ts';
import { counted } from '../conformance/counted.ts';

/**
 * Counts in what lockcheck prints read as English at one: a matrix audit
 * cell said 'liveness in 1 runs'. Each text is made with every count at 1,
 * and must hold no '1 <noun>s' (nor '1 processes'; a rate, '1 ops/s', is a unit).
 */
const ONE_PLURAL = /(?<![\d.])1 (runs|steps|faults|cells|clients|events|operations|ops(?!\/)|holds|grants|nodes|findings|attempts|schedules|[a-z ]*processes|more findings|overlapping holds|lost updates|stale writes|tokens|generated schedules)\b/;

const cell = matrixCell({
  backend: 'lib:some-lock',
  audit: true,
  stoppedEarly: 1,
  stoppedEarlyBy: { ambiguous: 1 },
  worst: { kind: 'unsafe', what: 'two holders', property: 'MUTEX-1', step: 1 },
  deviations: { unsafe: 1, liveness: 1, safe: 1 },
});

const observed: Observed = { command: 'lockcheck stress', operations: 1, faults: 1, overlappingHolds: 1, lostUpdates: 1, staleWritesAccepted: 1, tokenOrderViolations: 1, broken: [], clientErrors: ['died'] } as unknown as Observed;

describe('counts at one read in the singular', () => {
  it('counted: singular at one, the plural (or the one given) otherwise', () => {
    expect([counted(0, 'run'), counted(1, 'run'), counted(2, 'run')]).toEqual(['0 runs', '1 run', '2 runs']);
    expect([counted(1, 'client process', 'client processes'), counted(3, 'client process', 'client processes')]).toEqual(['1 client process', '3 client processes']);
  });

  it("a matrix audit cell: 'liveness in 1 run', '1 of 1 run inconclusive' (before: 'liveness in 1 runs')", () => {
    const text = auditText(cell);
    expect(text).toMatch(/liveness in 1 run\b/);
    expect(text).not.toMatch(ONE_PLURAL);
    expect(describeCell({ ...cell, audit: false, worst: null, deviations: null })).not.toMatch(ONE_PLURAL);
  });

  it("the concurrent oracle's cell text and the stress summary", () => {
    expect(observedText(observed)).not.toMatch(ONE_PLURAL);
    const summary = {
      backend: 'redis-single', store: 'unfenced', clients: 1, seconds: 1, nemesis: [], seed: 1, verdict: 'violation', operations: 1, opsPerSecond: 1, cycles: 1,
      holds: 1, overlappingHolds: 1, lostUpdates: 0, staleWritesAccepted: 0, writesRejected: 0, unknownOutcomes: 0, faults: 1, faultIntervals: 1, durationMs: 1000, overheadMs: 0,
      clientErrors: [], adapterErrors: [], unobserved: null, faultsNotStruck: [], checks: [], findings: Array.from({ length: 6 }, () => ({ check: 'overlapping-holds', property: 'MUTEX-1', message: 'x', events: [1] })), historyFile: 'h.jsonl', reportFile: null,
    } as unknown as StressSummary;
    const text = summaryText(summary);
    expect(text).toMatch(/1 more finding \(--json/);
    expect(text).not.toMatch(ONE_PLURAL);
  });
});
