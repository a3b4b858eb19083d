import { describe, expect, it } from 'vitest';
import type { BackendUnderTest, LockClient } from '../conformance/adapter.ts';
import { checkConformance, runLockstep } from '../conformance/index.ts';
import type { ConformanceFailure } from '../conformance/index.ts';
import { simLeaseBackend } from '../conformance/sim/backend.ts';
import { SimRedisNode } from '../conformance/sim/redisNode.ts';
import { SimStore } from '../conformance/sim/store.ts';
import type { Command, StorePolicy } from '../model/index.ts';
import { designs } from '../model/index.ts';
import type { LeaseHandle } from '../impl/lease.ts';
import { tinyLock } from '../docs/examples/tinyLock.ts';
import { BROKEN } from './fixtures/broken.ts';

/**
 * Broken backends that a user's run missed, or named by the wrong property
 * or consequence, before session h36 (docs/mutation.md, "Session h36"): each
 * must be caught, fast and seeded, naming what it breaks.
 */

/** A store that decides writes by `passes` instead of its policy. */
function storeDeciding(policy: StorePolicy, passes: (token: bigint, highest: bigint) => boolean, name: string) {
  class Deciding extends SimStore {
    protected override passes(token: bigint, highest: bigint): boolean {
      return passes(token, highest);
    }
  }
  return simLeaseBackend(designs.redisSingle(), policy, { storeServer: (p) => new Deciding(p) }, name);
}

const failureOf = (verdict: unknown): ConformanceFailure => {
  expect(verdict).toMatchObject({ kind: 'conformance-failure' });
  return verdict as ConformanceFailure;
};

describe('a write held across its client pause is judged when it lands at the resume', () => {
  const acquire = (client: number): Command => ({ kind: 'acquire', client, resource: 'r', ttlMs: 10 });
  // The GC pause of the fencing story: client 0 checks its lease, pauses, and its write lands after client 1's.
  const pausedWrite: Command[] = [
    acquire(0),
    { kind: 'pause', client: 0, pendingWrite: { resource: 'r', value: 'stale' } },
    { kind: 'advance', ms: 12 },
    acquire(1),
    { kind: 'write', client: 1, resource: 'r', value: 'new' },
    { kind: 'resume', client: 0 },
  ];

  it('a store that takes every token is FENCE-2, unsafe, at the resume (it passed: no read came after it)', async () => {
    const report = await runLockstep(storeDeciding('strict', () => true, 'store ignores tokens'), pausedWrite, { clients: 2, tokenBase: 0n });
    const failure = failureOf(report.verdict);
    expect(failure.property).toBe('FENCE-2');
    expect(failure.consequence.kind).toBe('unsafe');
    expect(failure.step.index).toBe(5);
    expect(failure.message).toContain("client 0's write, checked before its pause and sent at the resume, was accepted; the model's strict store has it rejected (highest token accepted before: 2)");
    expect(failure.step.actual).toEqual({ kind: 'accepted' });
    expect(failure.step.allowed).toEqual([{ kind: 'rejected', highest: 2n }]);
  });

  it('a correct store passes the same schedule, and a correct one under a stale write is not blamed', async () => {
    for (const policy of ['strict', 'monotonic'] as const) {
      const report = await runLockstep(simLeaseBackend(designs.redisSingle(), policy), pausedWrite, { clients: 2, tokenBase: 0n });
      expect(report.verdict, policy).toEqual({ kind: 'pass' });
    }
    const unfenced = await runLockstep(simLeaseBackend(designs.redisSingle(), 'unfenced'), pausedWrite, { clients: 2, tokenBase: 0n, continueAfterViolation: true });
    expect(unfenced.verdict).toEqual({ kind: 'pass' });
    expect(unfenced.findings.map((f) => f.violations.map((v) => v.property))).toEqual([['STORE-1']]);
  });

  it('a store that refuses the holder its own second write is FENCE-2 with consequence liveness, not a stale write', async () => {
    // Declared monotonic (equal tokens pass), deciding as strict: the holder's write after its pause is lost.
    const strictAsMonotonic = storeDeciding('monotonic', (t, h) => t > h, 'strict store declared monotonic');
    const schedule: Command[] = [acquire(0), { kind: 'write', client: 0, resource: 'r', value: 'a' }, { kind: 'pause', client: 0, pendingWrite: { resource: 'r', value: 'b' } }, { kind: 'resume', client: 0 }];
    const failure = failureOf((await runLockstep(strictAsMonotonic, schedule, { clients: 2, tokenBase: 0n })).verdict);
    expect(failure.property).toBe('FENCE-2');
    expect(failure.consequence).toEqual({ kind: 'liveness', what: "a write the store's policy takes was refused: the holder's write is lost" });
    expect(failure.step.index).toBe(3);
  });

  it('a refusal at the resume naming the wrong highest token is FENCE-2, as at a plain write (only its kind was compared: session h39)', async () => {
    // Refuses as its policy says, but names a highest token it never accepted.
    class Misnaming extends SimStore {
      override write(resource: string, token: bigint, value: string) {
        const r = super.write(resource, token, value);
        return r.kind === 'rejected' ? { kind: 'rejected' as const, highest: r.highest + 1n } : r;
      }
    }
    const backend = simLeaseBackend(designs.redisSingle(), 'strict', { storeServer: (p) => new Misnaming(p) }, 'store names a wrong highest');
    const failure = failureOf((await runLockstep(backend, pausedWrite, { clients: 2, tokenBase: 0n })).verdict);
    expect(failure.property).toBe('FENCE-2');
    expect(failure.step.index).toBe(5);
    expect(failure.step.actual).toEqual({ kind: 'rejected', highest: 3n });
    expect(failure.step.allowed).toEqual([{ kind: 'rejected', highest: 2n }]);
    // The same store at a plain write: the same finding.
    const plain: Command[] = [acquire(0), { kind: 'advance', ms: 12 }, acquire(1), { kind: 'write', client: 1, resource: 'r', value: 'new' }, { kind: 'write', client: 1, resource: 'r', value: 'again' }];
    const again = simLeaseBackend(designs.redisSingle(), 'strict', { storeServer: (p) => new Misnaming(p) }, 'store names a wrong highest');
    expect(failureOf((await runLockstep(again, plain, { clients: 2, tokenBase: 0n })).verdict).property).toBe('FENCE-2');
    // Tokens compared by order: the refusal's highest (20, the backend's) stands for the model's 2, as at a plain write.
    const skipping = simLeaseBackend(designs.redisSingle(), 'strict', { nodeServer: (...args) => new SkippingNode(...args) }, 'tokens skip values');
    const ordered = { ...skipping, capabilities: { ...skipping.capabilities, tokensComparedBy: 'order' as const } };
    expect((await runLockstep(ordered, pausedWrite, { clients: 2, tokenBase: 0n })).verdict).toEqual({ kind: 'pass' });
  });

  it('checkConformance with its defaults names it FENCE-2 at once, with a replayable schedule', async () => {
    const backend = storeDeciding('strict', () => true, 'store ignores tokens');
    // Found at run 1; shrinking is bounded to keep the test short (it is not what is tested here).
    const r = await checkConformance(backend, { runs: 100, seed: 20161010, shrinkLimitMs: 1000 });
    expect(r.failure?.failedAtRun).toBe(1);
    expect(r.failure!.properties).toEqual(['FENCE-2']);
    expect(r.failure!.report.verdict).toMatchObject({ consequence: { kind: 'unsafe' } });
    const replay = await checkConformance(backend, { schedule: r.failure!.schedule });
    expect(replay.failure?.properties).toEqual(['FENCE-2']);
  });
});

/** A node whose every third grant hands out the token before it again (its counter is read before the INCR lands). */
class RepeatingNode extends SimRedisNode {
  #grants = 0;
  override acquire(resource: string, owner: string, ttlMs: number): bigint | null {
    const token = super.acquire(resource, owner, ttlMs);
    return token !== null && ++this.#grants % 3 === 0 ? token - 1n : token;
  }
}

describe('a token that repeats with no restart to blame', () => {
  it('is FENCE-1, its schedule without the restart a run drew before it (it was named DUR-1, a counter lost at the restart)', async () => {
    const backend = simLeaseBackend(designs.redisSingle({ persistence: 'aof-always' }), 'strict', { nodeServer: (...args) => new RepeatingNode(...args) }, 'every third token repeats');
    // Seed 3: the first failing run (run 2) holds a crash and a restart before the repeated token.
    const r = await checkConformance(backend, { runs: 100, seed: 3, faults: ['advance', 'crash-restart'] });
    expect(r.failure).not.toBeNull();
    expect(r.failure!.properties).toEqual(['FENCE-1']);
    expect(r.failure!.schedule.commands.filter((c) => c.kind === 'crash' || c.kind === 'restart')).toEqual([]);
  });

  it('a counter lost at a restart is still DUR-1', async () => {
    class CountersInMemory extends SimRedisNode {
      protected override countersPersist(): boolean {
        return false;
      }
    }
    const backend = simLeaseBackend(designs.redisSingle({ persistence: 'aof-always' }), 'strict', { nodeServer: (...args) => new CountersInMemory(...args) }, 'counters in memory');
    const r = await checkConformance(backend, { runs: 100, seed: 3, faults: ['advance', 'crash-restart'] });
    expect(r.failure!.properties).toEqual(['DUR-1']);
  });
});

/** A node whose tokens go up by ten: they skip values, and still order the holders. */
class SkippingNode extends SimRedisNode {
  override acquire(resource: string, owner: string, ttlMs: number): bigint | null {
    const token = super.acquire(resource, owner, ttlMs);
    return token === null ? null : token * 10n;
  }
}

describe('a token that skips values', () => {
  const grants: Command[] = [
    { kind: 'acquire', client: 0, resource: 'r', ttlMs: 10 },
    { kind: 'advance', ms: 12 },
    { kind: 'acquire', client: 1, resource: 'r', ttlMs: 10 },
  ];

  it('is a deviation from the declared exact tokens in the safe direction, saying what to declare (it read: unsafe, a stale write can land)', async () => {
    const backend = simLeaseBackend(designs.redisSingle(), 'strict', { nodeServer: (...args) => new SkippingNode(...args) }, 'tokens skip values');
    const failure = failureOf((await runLockstep(backend, grants, { clients: 2, tokenBase: 0n })).verdict);
    expect(failure.property).toBe('FENCE-1');
    expect(failure.consequence.kind).toBe('safe');
    expect(failure.message).toContain("capabilities.tokensComparedBy: 'order'");
    const ordered = { ...backend, capabilities: { ...backend.capabilities, tokensComparedBy: 'order' as const } };
    expect((await runLockstep(ordered, grants, { clients: 2, tokenBase: 0n })).verdict).toEqual({ kind: 'pass' });
  });

  it('a token at or below an earlier one is unsafe, whatever the model expected', async () => {
    const backend = simLeaseBackend(designs.redisSingle(), 'strict', { nodeServer: (...args) => new RepeatingNode(...args) }, 'every third token repeats');
    const three: Command[] = [...grants, { kind: 'advance', ms: 12 }, { kind: 'acquire', client: 0, resource: 'r', ttlMs: 10 }];
    const failure = failureOf((await runLockstep(backend, three, { clients: 2, tokenBase: 0n })).verdict);
    expect(failure.property).toBe('FENCE-1');
    expect(failure.consequence.kind).toBe('unsafe');
    expect(failure.message).not.toContain('tokensComparedBy');
  });
});

describe("the docs example's extension with a shorter ttl (spec 4.1)", () => {
  // Client 0 holds; node 0's clock jumps past its key and client 1 takes over; client 0's extension with a shorter ttl
  // is refused; its lease is good only until the shorter deadline (the node may have re-armed the key with it).
  const takeover: Command[] = [
    { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 6 },
    { kind: 'clock-step', node: 0, deltaMs: 7 },
    { kind: 'acquire', client: 1, resource: 'r0', ttlMs: 5 },
    { kind: 'extend', client: 0, resource: 'r0', ttlMs: 5 },
    { kind: 'advance', ms: 2 },
  ];

  it('brings the deadline down when the extension is sent (it kept the old one: MUTEX-1, found by a generator variant of session h36)', async () => {
    expect((await runLockstep(tinyLock, takeover, { clients: 2, tokenBase: 0n, continueAfterViolation: true })).verdict).toEqual({ kind: 'pass' });
    const keepsDeadline: BackendUnderTest = {
      ...tinyLock,
      name: 'tiny lock keeping its deadline past a failed shorter extension',
      start: async (o) => {
        const instance = await tinyLock.start(o);
        const clients = instance.clients.map((c): LockClient => ({
          acquire: c.acquire.bind(c),
          release: c.release.bind(c),
          store: c.store,
          clock: c.clock,
          extend: (lease, ttlMs) => {
            (lease as LeaseHandle).limitTo = () => undefined;
            return c.extend!(lease, ttlMs);
          },
        }));
        return { ...instance, clients };
      },
    };
    const failure = failureOf((await runLockstep(keepsDeadline, takeover, { clients: 2, tokenBase: 0n, continueAfterViolation: true })).verdict);
    expect(failure.property).toBe('MUTEX-1');
    expect(failure.message).toContain("client 0's lease on 'r0' is over in the model but its signal has not fired");
  });
});

describe("an extension without the owner check, under checkConformance's defaults", () => {
  // After a clock jump hands the lock to another client, the generator's script lets the first holder act on the lease its
  // clock still holds valid (extend, release or write): where a missing owner check shows. Before, seeds 1, 3 and 4 missed it
  // in 100 runs (it was found at run 193 of 500 on the docs example).
  it.each([1, 3, 4, 20161010])('is caught in the default 100 runs, seed %i, as OWN-1', async (seed) => {
    const bug = BROKEN.find((b) => b.id === 'extend-without-owner-check')!;
    const result = await checkConformance(bug.backend, { seed });
    expect(result.failure, `seed ${seed}: not caught in ${result.runs} runs`).not.toBeNull();
    expect(result.failure!.properties).toEqual(['OWN-1']);
  });
});
