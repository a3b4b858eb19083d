import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisServer } from '../../conformance/env/redisServer.ts';
import { LeaseLostError, TimeoutError, UnavailableError } from '../../impl/errors.ts';
import { createRedisLock, redisFencedStore } from '../../impl/redis/index.ts';
import type { Lease } from '../../impl/lease.ts';
import { backToBaseline, grantedBeforeTheFault, lostUnderUsing, rejectsWithin, resolvesWithin, steadyResources } from './blackhole.ts';

/**
 * Redis and Redlock under a black hole: the servers paused with SIGSTOP (TCP
 * connections open, no reply), and killed with a call in flight. Every call
 * of the lock and the fenced store settles within its timeout (a generous
 * 10x bound here: a loaded machine), typed: a denial `no-quorum`, a
 * `not-extended`, a release that says it is not known, a store TimeoutError or
 * UnavailableError; and the connection's disconnect() then leaves no handle.
 */
const TIMEOUT_MS = 200;
const BOUND_MS = 10 * TIMEOUT_MS + 2000;

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

/** A connection as an application makes one: ioredis's defaults, no command timeout of its own. */
function connect(server: RedisServer): Redis {
  const c = new Redis({ ...server.connection, lazyConnect: true });
  c.on('error', () => undefined);
  return c;
}

/**
 * The resource an acquire gave up on is free once the servers answer again: the script it sent ran late, and the
 * release the lock sent after it on the same connection ran next (no holder left for the ttl).
 */
async function freeAgain(nodes: readonly RedisServer[], resource: string): Promise<void> {
  const conns = nodes.map(connect);
  try {
    const lock = createRedisLock({ nodes: conns, requestTimeoutMs: 5000 });
    const again = await lock.acquire(resource, { ttlMs: 60_000 });
    expect(again.kind).toBe('granted');
    if (again.kind === 'granted') await lock.release(again.lease);
  } finally {
    for (const c of conns) c.disconnect();
  }
}

/** Pauses `paused` (SIGSTOP) around `fn`, resuming them whatever happens. */
async function whilePaused(paused: readonly RedisServer[], fn: () => Promise<void>): Promise<void> {
  try {
    for (const s of paused) s.pause();
    await fn();
  } finally {
    for (const s of paused) if (s.paused) s.resume();
  }
}

describe.each([
  ['redis (single node)', 1],
  ['redlock (3 nodes)', 3],
] as const)('%s paused (SIGSTOP)', (_name, count) => {
  it('acquire, extend, release, store write and read settle typed within their timeouts; disconnect leaves no handle', async () => {
    const baseline = await steadyResources();
    const nodes = servers.slice(0, count);
    const conns = nodes.map(connect);
    await Promise.all(conns.map((c) => c.connect()));
    const lock = createRedisLock({ nodes: conns, requestTimeoutMs: TIMEOUT_MS });
    const store = redisFencedStore(conns[0]!, 'strict', { timeoutMs: TIMEOUT_MS });
    const lease: Lease = (await grantedBeforeTheFault('acquire', `held-${count}`, (r) => lock.acquire(r, { ttlMs: 60_000 }))).lease;
    await whilePaused(nodes, async () => {
      expect(await resolvesWithin('acquire', lock.acquire(`r-${count}`, { ttlMs: 60_000 }), BOUND_MS)).toEqual({ kind: 'denied', reason: 'no-quorum' });
      expect(await resolvesWithin('extend', lock.extend(lease, 60_000), BOUND_MS)).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
      expect(await resolvesWithin('release', lock.release(lease), BOUND_MS)).toBe(false);
      expect(await rejectsWithin('store write', store.write('c', 1n, 'v'), BOUND_MS)).toBeInstanceOf(TimeoutError);
      expect(await rejectsWithin('store read', store.read('c'), BOUND_MS)).toBeInstanceOf(TimeoutError);
      await resolvesWithin('settled', lock.settled(), BOUND_MS);
      // The application's close while the servers are still silent: ioredis drops the sockets.
      for (const c of conns) c.disconnect();
    });
    await backToBaseline(baseline);
    await freeAgain(nodes, `r-${count}`);
  });

  it('a connection opened while the servers are paused: the acquire is denied no-quorum within its timeout', async () => {
    const baseline = await steadyResources();
    const nodes = servers.slice(0, count);
    await whilePaused(nodes, async () => {
      const conns = nodes.map(connect);
      const lock = createRedisLock({ nodes: conns, requestTimeoutMs: TIMEOUT_MS });
      const store = redisFencedStore(conns[0]!, 'strict', { timeoutMs: TIMEOUT_MS });
      expect(await resolvesWithin('acquire', lock.acquire(`c-${count}`, { ttlMs: 60_000 }), BOUND_MS)).toEqual({ kind: 'denied', reason: 'no-quorum' });
      expect(await rejectsWithin('store write', store.write('c', 1n, 'v'), BOUND_MS)).toBeInstanceOf(TimeoutError);
      await resolvesWithin('settled', lock.settled(), BOUND_MS);
      for (const c of conns) c.disconnect();
    });
    await backToBaseline(baseline);
  });
});

describe.each([
  ['redis (single node)', 1],
  ['redlock (3 nodes)', 3],
] as const)('%s paused under using()', (_name, count) => {
  it("the extensions fail, the signal fires by the lease's deadline, fn ends and using() settles; no handle left", async () => {
    const baseline = await steadyResources();
    const nodes = servers.slice(0, count);
    const conns = nodes.map(connect);
    await Promise.all(conns.map((c) => c.connect()));
    const lock = createRedisLock({ nodes: conns, requestTimeoutMs: TIMEOUT_MS });
    const TTL = 1500;
    try {
      const { outcome, ran } = await lostUnderUsing(lock, `u-${count}`, TTL, () => nodes.forEach((s) => s.pause()), 10 * TTL + BOUND_MS);
      expect(ran).toBe(true);
      // fn returned the signal's reason: the lease lost at its deadline (extensions denied no-quorum), no hang.
      expect(outcome.ok ? outcome.value : outcome.error).toBeInstanceOf(LeaseLostError);
    } finally {
      for (const s of nodes) if (s.paused) s.resume();
    }
    await resolvesWithin('settled', lock.settled(), BOUND_MS);
    for (const c of conns) c.disconnect();
    await backToBaseline(baseline);
  });
});

describe.each([
  ['redis (single node)', 1],
  ['redlock (3 nodes)', 3],
] as const)('%s killed with calls in flight', (_name, count) => {
  it('the calls in flight settle typed; disconnect leaves no handle', async () => {
    const baseline = await steadyResources();
    const nodes = servers.slice(0, count);
    const conns = nodes.map(connect);
    await Promise.all(conns.map((c) => c.connect()));
    const lock = createRedisLock({ nodes: conns, requestTimeoutMs: TIMEOUT_MS });
    const store = redisFencedStore(conns[0]!, 'strict', { timeoutMs: TIMEOUT_MS });
    const held = await grantedBeforeTheFault('acquire', `k-${count}`, (r) => lock.acquire(r, { ttlMs: 60_000 }));
    try {
      // Paused first, so that the calls are surely in flight (sent, unanswered) when the servers die.
      for (const s of nodes) s.pause();
      const acquiring = resolvesWithin('acquire', lock.acquire(`k2-${count}`, { ttlMs: 60_000 }), BOUND_MS);
      const extending = resolvesWithin('extend', lock.extend(held.lease, 60_000), BOUND_MS);
      const writing = rejectsWithin('store write', store.write('c', 1n, 'v'), BOUND_MS);
      await Promise.all(nodes.map((s) => s.crash()));
      expect(await acquiring).toEqual({ kind: 'denied', reason: 'no-quorum' });
      expect(await extending).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
      const w = await writing;
      expect(w instanceof TimeoutError || w instanceof UnavailableError, String(w)).toBe(true);
      // Down for good (no restart yet): the next calls too.
      expect(await resolvesWithin('release', lock.release(held.lease), BOUND_MS)).toBe(false);
      const r = await rejectsWithin('store read', store.read('c'), BOUND_MS);
      expect(r instanceof TimeoutError || r instanceof UnavailableError, String(r)).toBe(true);
      await resolvesWithin('settled', lock.settled(), BOUND_MS);
      for (const c of conns) c.disconnect();
    } finally {
      for (const s of nodes) await s.restart();
    }
    await backToBaseline(baseline);
  });
});
