import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import type { CheckReport } from '../conformance/history/check.ts';
import { checkHistory } from '../conformance/history/check.ts';
import type { History, HistoryEvent } from '../conformance/history/event.ts';
import { HistoryFormatError, validateHistory } from '../conformance/history/parse.ts';
import { checkLinearizability, etcdRegister, leaseLock, lockHistories, registerHistories, type Model } from '../conformance/history/linearizability/index.ts';
import type { SimBug } from './fixtures/historySim.ts';
import { simulate } from './fixtures/historySim.ts';

/**
 * The checkers on many generated histories (test/fixtures/historySim.ts): a
 * correct world (a lease lock, a strictly fenced store, lost replies) must be
 * judged safe whatever the interleaving, each injected bug must be found, and
 * turning observed outcomes into unknown ones must never add a finding.
 */
function valid(events: readonly unknown[]): History {
  const h = validateHistory(events);
  if (h instanceof HistoryFormatError) throw h;
  return h;
}

const totals = (r: CheckReport) => Object.fromEntries(r.checks.map((c) => [c.property, c.findings]));
const BUGS: readonly SimBug[] = ['grant-while-held', 'client-trusts-too-long', 'store-ignores-tokens', 'token-reset'];

describe('generated histories', () => {
  test.prop([fc.integer(), fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 3 }), fc.constantFrom(0, 0.1, 0.3)], { numRuns: 60 })(
    'a correct world is judged safe, unknown outcomes included; the linearizability search may only run out of time',
    (seed, processes, resources, lossRate) => {
      // Many unknown outcomes make the search exponential: a small budget keeps the test quick, and 'unknown' is allowed there.
      const r = checkHistory(valid(simulate({ seed, processes, resources, operations: 120, lossRate })), { timeoutMs: 50 });
      expect(r.findings).toEqual([]);
      for (const c of r.checks) expect([c.property, c.verdict]).not.toEqual([c.property, 'violation']);
      for (const c of r.checks.filter((c) => c.property !== 'LIN-1')) expect(c.verdict, c.check).toBe('safe');
    },
  );

  test.prop([fc.integer(), fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 3 })], { numRuns: 30 })('without lost replies the search decides: safe', (seed, processes, resources) => {
    const r = checkHistory(valid(simulate({ seed, processes, resources, operations: 120, lossRate: 0 })));
    expect(r.checks.map((c) => [c.property, c.verdict])).toEqual([
      ['MUTEX-1', 'safe'],
      ['FENCE-1', 'safe'],
      ['STORE-1', 'safe'],
      ['FENCE-2', 'safe'],
      ['LIN-1', 'safe'],
      ['LIN-1', 'safe'],
    ]);
    expect(r.verdict).toBe('safe');
  });

  it('finds each injected bug', () => {
    const run = (bugs: SimBug[]) => checkHistory(valid(simulate({ seed: 7, processes: 4, resources: 1, operations: 400, lossRate: 0.1, bugs })), { timeoutMs: 50 });
    expect(totals(run(['grant-while-held']))['MUTEX-1']).toBeGreaterThan(0);
    expect(totals(run(['client-trusts-too-long']))['MUTEX-1']).toBeGreaterThan(0);
    expect(totals(run(['token-reset']))['FENCE-1']).toBeGreaterThan(0);
    const unfenced = run(['grant-while-held', 'store-ignores-tokens']);
    expect(totals(unfenced)['STORE-1']).toBeGreaterThan(0);
    expect(totals(unfenced)['FENCE-2']).toBeGreaterThan(0);
    expect(unfenced.counts.lostUpdates).toBeGreaterThan(0);
  });

  // LIN-1: bounding how long unknown outcomes matter (Model.relevance) never changes a verdict.
  test.prop([fc.integer(), fc.integer({ min: 1, max: 4 }), fc.subarray([...BUGS]), fc.constantFrom(0.2, 0.5)], { numRuns: 40 })(
    'with many lost replies, the bounded linearizability search and the unbounded one agree on every lock and register',
    (seed, processes, bugs, lossRate) => {
      const history = valid(simulate({ seed, processes, resources: 1, operations: 36, lossRate, bugs }));
      const unbounded = <S, I, O>(model: Model<S, I, O>): Model<S, I, O> => ({ ...model, relevance: undefined });
      // The unbounded search is the reference where it decides: some of these histories take it minutes (that is what the
      // bounds are for), and a loaded machine must not turn its 'unknown' into a failure. The bounded one always decides.
      const both = <S, I, O>(model: Model<S, I, O>, ops: Parameters<typeof checkLinearizability<S, I, O>>[1]) => [checkLinearizability(model, ops).verdict, checkLinearizability(unbounded(model), ops, { timeoutMs: 3_000 }).verdict];
      const agree = (object: string, [bounded, plain]: string[]) => {
        expect(bounded, object).not.toBe('unknown');
        if (plain !== 'unknown') expect(bounded, object).toBe(plain);
      };
      for (const h of lockHistories(history)) agree(h.object, both(leaseLock(), h.operations));
      for (const h of registerHistories(history)) agree(h.object, both(etcdRegister(), h.operations));
    },
  );

  test.prop([fc.integer(), fc.subarray([...BUGS], { minLength: 1 }), fc.integer({ min: 0, max: 2 ** 31 - 1 })], { numRuns: 50 })(
    'turning ok outcomes into info (or dropping the last completions) never adds a finding',
    (seed, bugs, mask) => {
      const events = simulate({ seed, processes: 3, resources: 1, operations: 120, lossRate: 0.1, bugs });
      // LIN-1 is left out here: a search that runs out of time finds nothing, with or without the info outcomes.
      const before = totals(checkHistory(valid(events), { timeoutMs: 1 }));
      let i = 0;
      const blurred = events.map((e): HistoryEvent => (e.type === 'ok' && (mask >>> (i++ % 31)) & 1 ? ({ ...e, type: 'info' } as HistoryEvent) : e));
      // Drop each process's last completion: it stays in flight, as if the history had been cut.
      const lastCompletion = new Map<number, number>();
      blurred.forEach((e, k) => {
        if ((e.type === 'ok' || e.type === 'fail' || e.type === 'info') && typeof e.process === 'number') lastCompletion.set(e.process, k);
      });
      const cut = blurred.filter((_e, k) => !(mask & 1) || ![...lastCompletion.values()].includes(k));
      const after = totals(checkHistory(valid(cut), { timeoutMs: 1 }));
      for (const [property, n] of Object.entries(after)) if (property !== 'LIN-1') expect(n, property).toBeLessThanOrEqual(before[property]!);
    },
  );
});
