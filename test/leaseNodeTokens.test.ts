import { describe, expect, it } from 'vitest';
import { systemClock } from '../impl/clock.ts';
import { ServerRefusedError, TokenOverflowError } from '../impl/errors.ts';
import { LeaseLock } from '../impl/leaseLock.ts';
import type { LeaseNode } from '../impl/leaseNode.ts';

/**
 * A LeaseNode of the user's own (the interface is public) answers acquire
 * with what it likes: the lock hands out only a bigint token in [0, 2^63-1].
 * A node whose counter is past 2^63-1 is TokenOverflowError, any other
 * answer that is no token (a number, a string, a negative, undefined) a
 * ServerRefusedError('schema', 'UnexpectedValue'); on a minority of nodes
 * that is a vote against, and every key the attempt set is released.
 */

/** A node that sets its key and answers acquire with `answer` (a well-behaved node answers the counter, here 7n). */
function nodeAnswering(answer: unknown): LeaseNode & { readonly holders: Map<string, string> } {
  const holders = new Map<string, string>();
  return {
    holders,
    acquire: (resource, owner) => {
      if (holders.has(resource)) return Promise.resolve(null);
      holders.set(resource, owner);
      return Promise.resolve(answer as bigint);
    },
    release: (resource, owner) => {
      if (holders.get(resource) !== owner) return Promise.resolve(false);
      holders.delete(resource);
      return Promise.resolve(true);
    },
    extend: (resource, owner) => Promise.resolve(holders.get(resource) === owner),
    raiseToken: () => Promise.resolve(),
  };
}

async function outcome(lock: LeaseLock): Promise<unknown> {
  return lock.acquire('r', { ttlMs: 10_000 }).then(
    (r) => (r.kind === 'granted' ? `granted ${typeof r.lease.token} ${String(r.lease.token)}` : r.kind),
    (e: unknown) => e,
  );
}

describe('LeaseLock: a node answering acquire with no token', () => {
  it.each([
    ['2^63', 2n ** 63n, TokenOverflowError],
    ['-1n', -1n, ServerRefusedError],
    ['a number', 7, ServerRefusedError],
    ['a string', '7', ServerRefusedError],
    ['undefined', undefined, ServerRefusedError],
  ])('one node answering %s: refused by name, no lease, its key released', async (_what, answer, type) => {
    const node = nodeAnswering(answer);
    const lock = new LeaseLock({ nodes: [node], clock: systemClock, requestTimeoutMs: 5_000 });
    const e = await outcome(lock);
    expect(e).toBeInstanceOf(type);
    if (e instanceof ServerRefusedError) expect([e.code, e.serverCode]).toEqual(['schema', 'UnexpectedValue']);
    await lock.settled();
    expect(node.holders.size).toBe(0);
  });

  it('on a minority of three nodes it is a vote against: the grant carries the quorum\'s token (not 2^63), exact at 2^63-1', async () => {
    const nodes = [nodeAnswering(9n), nodeAnswering(9n), nodeAnswering(2n ** 63n)];
    const lock = new LeaseLock({ nodes, clock: systemClock, requestTimeoutMs: 5_000 });
    expect(await outcome(lock)).toBe('granted bigint 9');
    // A number among two at 2^63-1: a vote against; the grant is exact at 2^63-1, and its release frees every key.
    const others = [nodeAnswering(2n ** 63n - 1n), nodeAnswering(2n ** 63n - 1n), nodeAnswering(5)];
    const other = new LeaseLock({ nodes: others, clock: systemClock, requestTimeoutMs: 5_000 });
    const r = await other.acquire('r', { ttlMs: 10_000 });
    if (r.kind !== 'granted') throw new Error(`expected a grant, got ${r.kind}`);
    expect(r.lease.token).toBe(2n ** 63n - 1n);
    await other.release(r.lease);
    await other.settled();
    expect(others.map((n) => n.holders.size)).toEqual([0, 0, 0]);
  });
});
