import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisServer } from '../../conformance/env/redisServer.ts';
import { createRedisLock, redisLeaseNode } from '../../impl/redis/index.ts';
import { LeaseLock, type AcquireResult } from '../../impl/leaseLock.ts';
import { rejectsWithin, resolvesWithin } from './blackhole.ts';
import { ManualClock } from './servers.ts';

/**
 * An acquire that gives up (spec 4.2, 7.1 step 4: a reply later than the ttl
 * on the client's clock, `timed-out`) leaves nothing behind on a node that ran
 * it late: the lock sends its compare-and-delete on the attempt's own owner,
 * in the background, behind the acquire on each connection, as after any
 * denial. Real redis-servers paused with SIGSTOP hold the acquire back while
 * the test moves the client's clock past the ttl; they run it, then the
 * release, when resumed. Before, a timed-out attempt sent no release and the
 * late key held the resource for its whole ttl. Nothing here waits on wall
 * time: the outcome follows the hand-moved clock, and every wait is bounded.
 */
const TTL_MS = 60_000;
const BOUND_MS = 20_000;

const servers: RedisServer[] = [];
beforeAll(async () => {
  for (let i = 0; i < 3; i++) servers.push(await RedisServer.start({ persistence: 'none' }));
}, 60_000);
afterAll(async () => {
  for (const s of servers) {
    if (s.paused) s.resume();
    await s.stop();
  }
});

let resources = 0;
const fresh = (): string => `timed-out-${process.pid}-${++resources}`;

async function connected(nodes: readonly RedisServer[]): Promise<Redis[]> {
  const conns = nodes.map((s) => new Redis({ ...s.connection, lazyConnect: true }));
  for (const c of conns) c.on('error', () => undefined);
  await Promise.all(conns.map((c) => c.connect()));
  return conns;
}

/** Runs `start` with `nodes` paused (SIGSTOP), moves `clock` by `ms`, resumes them; resumed whatever happens. */
async function heldBack(nodes: readonly RedisServer[], clock: ManualClock, ms: number, start: () => Promise<AcquireResult>): Promise<AcquireResult> {
  let acquiring: Promise<AcquireResult>;
  try {
    for (const s of nodes) s.pause();
    acquiring = start();
    clock.advance(ms);
  } finally {
    for (const s of nodes) if (s.paused) s.resume();
  }
  return resolvesWithin('acquire', acquiring, BOUND_MS);
}

/** The lock key of `resource` on each connection: its owner value, or null. */
const holders = (conns: readonly Redis[], resource: string): Promise<Array<string | null>> => Promise.all(conns.map((c) => c.get(`lockcheck:lock:${resource}`)));

describe.each([
  ['redis (single node)', 1],
  ['redlock (3 nodes)', 3],
] as const)('%s: an acquire that timed out', (_name, count) => {
  it.each([
    ['the request timeout is the ttl (the default): the round ends at the ttl', undefined],
    ['a request timeout longer than the ttl: the replies come, later than the ttl', 2 * TTL_MS],
  ] as const)('releases its key behind the late acquire (%s)', async (_case, requestTimeoutMs) => {
    const nodes = servers.slice(0, count);
    const conns = await connected(nodes);
    try {
      const clock = new ManualClock();
      const lock = createRedisLock({ nodes: conns, clock, ...(requestTimeoutMs === undefined ? {} : { requestTimeoutMs }) });
      const resource = fresh();
      expect(await heldBack(nodes, clock, TTL_MS, () => lock.acquire(resource, { ttlMs: TTL_MS }))).toEqual({ kind: 'timed-out' });
      await resolvesWithin('settled', lock.settled(), BOUND_MS);
      // Every node ran the acquire (its counter moved), then the release: no key is left for the ttl.
      expect(await Promise.all(conns.map((c) => c.get(`lockcheck:token:${resource}`)))).toEqual(conns.map(() => '1'));
      expect(await holders(conns, resource)).toEqual(conns.map(() => null));
      // The resource is free at once for the next client, not after the late key's 60 s.
      const next = createRedisLock({ nodes: conns, clock });
      expect(await resolvesWithin('acquire', next.acquire(resource, { ttlMs: TTL_MS }), BOUND_MS)).toMatchObject({ kind: 'granted', lease: { token: 2n } });
    } finally {
      for (const c of conns) c.disconnect();
    }
  });

  it("never releases another holder's key, and a close right after the give-up leaves no rejection unhandled", async () => {
    const nodes = servers.slice(0, count);
    const conns = await connected(nodes);
    const clock = new ManualClock();
    const resource = fresh();
    // Another client holds the first node (all of them, on one node).
    const other = createRedisLock({ nodes: [conns[0]!], clock });
    const held = await resolvesWithin('acquire', other.acquire(resource, { ttlMs: 10 * TTL_MS }), BOUND_MS);
    if (held.kind !== 'granted') throw new Error(`not granted: ${held.kind}`);
    const lock = createRedisLock({ nodes: conns, clock });
    expect(await heldBack(nodes, clock, TTL_MS, () => lock.acquire(resource, { ttlMs: TTL_MS }))).toEqual({ kind: 'timed-out' });
    await resolvesWithin('settled', lock.settled(), BOUND_MS);
    const [first, ...rest] = await holders(conns, resource);
    expect(first).toBe(held.lease.owner);
    expect(rest).toEqual(rest.map(() => null));
    // The application closes while a give-up's release is still in flight: it fails, handled, and nothing waits on it.
    const lock2 = createRedisLock({ nodes: conns, clock });
    const again = await heldBack(nodes, clock, TTL_MS, () => lock2.acquire(fresh(), { ttlMs: TTL_MS }));
    expect(again).toEqual({ kind: 'timed-out' });
    for (const c of conns) c.disconnect();
    await resolvesWithin('settled', lock2.settled(), BOUND_MS);
    expect(lock2.backgroundRounds).toBe(0);
  });
});

describe('redlock (3 nodes): an acquire that ends in a throw', () => {
  it("a node's programming error rejects the acquire, and the keys the other nodes granted are released, not left for their ttl", async () => {
    const conns = await connected(servers);
    try {
      const clock = new ManualClock();
      const broken = new TypeError('a node of the application threw');
      const nodes = conns.map((c, i) => {
        const node = redisLeaseNode(c);
        // The last node answers the others' grants with a defect of its own (thrown after they were sent, so they land).
        return i < 2 ? node : { ...node, acquire: () => Promise.reject(broken) };
      });
      const lock = new LeaseLock({ nodes, clock });
      const resource = fresh();
      expect(await rejectsWithin('acquire', lock.acquire(resource, { ttlMs: TTL_MS }), BOUND_MS)).toBe(broken);
      await resolvesWithin('settled', lock.settled(), BOUND_MS);
      expect(await Promise.all(conns.slice(0, 2).map((c) => c.get(`lockcheck:token:${resource}`)))).toEqual(['1', '1']);
      expect(await holders(conns, resource)).toEqual([null, null, null]);
    } finally {
      for (const c of conns) c.disconnect();
    }
  });

  it('a clock that turns unreadable as the replies come rejects the acquire, and the keys granted are released', async () => {
    const conns = await connected(servers);
    try {
      const manual = new ManualClock();
      let bad = false;
      const clock = { now: () => (bad ? Number.NaN : manual.now()), schedule: (atMs: number, fn: () => void) => manual.schedule(atMs, fn) };
      const nodes = conns.map((c) => {
        const node = redisLeaseNode(c);
        return { ...node, acquire: async (r: string, o: string, t: number) => {
          const answer = await node.acquire(r, o, t);
          bad = true;
          return answer;
        } };
      });
      const lock = new LeaseLock({ nodes, clock });
      const resource = fresh();
      expect(await rejectsWithin('acquire', lock.acquire(resource, { ttlMs: TTL_MS }), BOUND_MS)).toMatchObject({ code: 'invalid-config' });
      await resolvesWithin('settled', lock.settled(), BOUND_MS);
      expect(await holders(conns, resource)).toEqual([null, null, null]);
    } finally {
      for (const c of conns) c.disconnect();
    }
  });
});
