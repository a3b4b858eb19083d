import { describe, expect, it } from 'vitest';
import { checkConformance } from '../conformance/check.ts';
import { findingCounts, judgedDesign } from '../conformance/consequence.ts';
import { simLeaseBackend } from '../conformance/sim/backend.ts';
import type { SimParts } from '../conformance/sim/backend.ts';
import { leaseNodeOver } from '../conformance/sim/redisNode.ts';
import { runLockstep } from '../conformance/lockstep.ts';
import { textTimeline } from '../conformance/timeline.ts';
import type { BackendUnderTest } from '../conformance/adapter.ts';
import { LeaseLock } from '../impl/leaseLock.ts';
import type { Design } from '../model/design.ts';
import { designs, driftMarginMs } from '../model/design.ts';
import { BROKEN } from './fixtures/broken.ts';

/**
 * Findings by consequence (conformance/consequence.ts): every deviation is
 * unsafe, liveness or the safe direction; an audit goes on past the kinds it
 * is not looking for; a library's declared contract is what the model judges.
 */

/** Claims 1 ms less validity than it has: the safe direction. */
class ShortValidity extends LeaseLock {
  protected override driftMarginMs(ttlMs: number): number {
    return super.driftMarginMs(ttlMs) + 1;
  }
}

const short = simLeaseBackend(designs.redisSingle(), 'strict', { lock: (p) => new ShortValidity(p) }, 'short validity');
const PAUSES = ['advance', 'pause'] as const;

describe('findings by consequence', () => {
  it('a deadline shorter than allowed is the safe direction; an audit for unsafe deviations goes past it and counts it', async () => {
    const plain = await checkConformance(short, { runs: 30, seed: 3, faults: PAUSES });
    const verdict = plain.failure?.report.verdict;
    expect(verdict?.kind, plain.failure?.message).toBe('conformance-failure');
    if (verdict?.kind !== 'conformance-failure') return;
    expect(verdict.consequence).toEqual({ kind: 'safe', what: 'validity shorter than allowed' });
    expect(plain.failure!.message).toMatch(/LIVE-1: .*; safe: validity shorter than allowed\)/);
    // Not an audit: nothing counted, null (not {}, which read as "audited, none went past").
    expect(plain.deviations).toBeNull();
    expect((await checkConformance(short, { runs: 2, seed: 3, faults: [] })).deviations).toBeNull();

    const audit = await checkConformance(short, { runs: 30, seed: 3, faults: PAUSES, failOn: { consequences: ['unsafe'] } });
    expect(audit.failure?.message ?? null).toBeNull();
    expect(audit.runs).toBe(30);
    expect(audit.deviations?.safe).toBeGreaterThan(0);
    // An audit's replay of a saved schedule counts the deviations its one run went past, as a generated run's are.
    const replay = await checkConformance(short, { schedule: plain.failure!.schedule, failOn: { consequences: ['unsafe'] } });
    expect(replay.failure).toBeNull();
    expect(replay.deviations).toEqual({ safe: 1 });
  });

  it('a deadline later than allowed is unsafe, and an audit shrinks it', async () => {
    const drift = BROKEN.find((b) => b.id === 'drift-added')!;
    const audit = await checkConformance(drift.backend, { runs: 50, seed: 1, faults: drift.faults, failOn: { consequences: ['unsafe'] } });
    const verdict = audit.failure?.report.verdict;
    expect(verdict?.kind).toBe('conformance-failure');
    if (verdict?.kind !== 'conformance-failure') return;
    expect(verdict.consequence).toEqual({ kind: 'unsafe', what: 'the client may act on a lease longer than allowed' });
  });

  it("a library's declared drift allowance is the model's: the same short deadline agrees with a contract that declares it", async () => {
    // ShortValidity's margin is ceil(0.01 * ttl) + 2 + 1: declared as the library's own (factor 0.01, 3 ms fixed, rounded up).
    const declared: BackendUnderTest = { ...short, contract: { driftMargin: { factor: 0.01, fixedMs: 3, rounding: 'ceil' } } };
    expect(driftMarginMs(judgedDesign(declared), 40)).toBe(4);
    const r = await checkConformance(declared, { runs: 30, seed: 3, faults: PAUSES });
    expect(r.failure?.message ?? null).toBeNull();
    // Rounded to nearest, as redlock on npm does: 1 ms less under a 50 ms ttl.
    expect(driftMarginMs({ ...designs.redlock(), driftRounding: 'round' } as Design, 40)).toBe(2);
    expect(driftMarginMs(designs.redlock(), 40)).toBe(3);
  });
});

describe('an audit runs past the safe direction', () => {
  // A library whose leases end 1 ms early (the safe direction), and whose release deletes the key whoever holds it (unsafe).
  const parts: SimParts = {
    lock: (p) => new ShortValidity(p),
    node: (net, c, i, node) => ({ ...leaseNodeOver(net, c, i, node), release: (r) => net.call(c, i, () => node.releaseAny(r)) }),
  };
  const schedule = [
    { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 40 },
    { kind: 'advance', ms: 45 },
    { kind: 'acquire', client: 1, resource: 'r0', ttlMs: 40 },
    { kind: 'release', client: 0, resource: 'r0' },
    { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 40 },
  ] as const;

  it('a library audit records a safe deviation, follows the backend, and finds the unsafe one later in the same run', async () => {
    const library: BackendUnderTest = { ...simLeaseBackend(designs.redisSingle(), 'strict', parts, 'short and careless'), contract: {} };
    const report = await runLockstep(library, schedule, { clients: 2, tokenBase: 0n });
    expect(report.deviations?.map((d) => [d.step.index, d.consequence.kind])).toEqual([
      [0, 'safe'],
      [2, 'safe'],
    ]);
    expect(report.verdict.kind).toBe('conformance-failure');
    if (report.verdict.kind !== 'conformance-failure') return;
    expect(report.verdict.consequence.kind).toBe('unsafe');
    expect(report.verdict.step.index).toBeGreaterThan(2);
    // The timeline says what the run went past.
    expect(textTimeline(report)).toMatch(/went past at step 1: LIVE-1, safe: validity shorter than allowed/);
    // The same backend without a contract (not an audit) stops at the first deviation.
    const plain = await runLockstep({ ...library, contract: undefined } as BackendUnderTest, schedule, { clients: 2, tokenBase: 0n });
    expect(plain.verdict.kind === 'conformance-failure' && plain.verdict.step.index).toBe(0);
    expect(plain.deviations).toBeUndefined();
  });
});

describe('the findings reported for a lock without tokens', () => {
  it('leave the token properties (FENCE-1, FENCE-2, DUR-1) undecided (null) when the contract or capabilities say it has none, as the matrix does', () => {
    const base = simLeaseBackend(designs.redisSingle(), 'unfenced');
    const seen = { 'MUTEX-1': 4, 'DUR-1': 4, 'FENCE-1': 4, 'FENCE-2': 1, 'STORE-1': 3 };
    expect(findingCounts(base, seen, 5)).toEqual({ ...seen, 'OWN-1': 0, 'LIVE-1': 0 });
    const noTokens: BackendUnderTest = { ...base, contract: { tokens: 'none' } };
    const untokened = { 'MUTEX-1': 4, 'STORE-1': 3, 'OWN-1': 0, 'LIVE-1': 0, 'FENCE-1': null, 'FENCE-2': null, 'DUR-1': null };
    expect(findingCounts(noTokens, seen, 5)).toEqual(untokened);
    expect(findingCounts({ ...base, capabilities: { ...base.capabilities, tokens: false } }, seen, 5)).toEqual(untokened);
  });

  it('no run judged to its end decides nothing: every property null, never a 0 that reads as "none found"', () => {
    const base = simLeaseBackend(designs.redisSingle(), 'unfenced');
    expect(Object.values(findingCounts(base, {}, 0))).toEqual(Array(7).fill(null));
  });
});
