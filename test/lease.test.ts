import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { clockAt } from '../model/clock.ts';
import { InvalidInputError } from '../model/errors.ts';
import { LeaseLock } from '../impl/leaseLock.ts';
import { LeaseHandle } from '../impl/lease.ts';
import type { LeaseLostError } from '../impl/errors.ts';
import { createRedisLock } from '../impl/redis/index.ts';
import { LockNotAcquiredError, using } from '../impl/using.ts';
import { SimNetwork } from '../conformance/sim/network.ts';
import { leaseNodeOver, SimRedisNode } from '../conformance/sim/redisNode.ts';
import { VirtualTime } from '../conformance/sim/time.ts';

/** Three in-memory Redis nodes and one client on virtual time. */
function world(options: { safetyMarginMs?: number; requestTimeoutMs?: number } = {}) {
  const time = new VirtualTime();
  const nodes = [0, 1, 2].map(() => new SimRedisNode(time, false, 0, 0n));
  const network = new SimNetwork(time, (e) => (e === 'store' ? { reachable: () => true } : nodes[e as number]!));
  const clock = time.clockOf(() => clockAt());
  const lock = new LeaseLock({ nodes: nodes.map((n, i) => leaseNodeOver(network, 0, i, n)), clock, ...options });
  return { time, nodes, network, clock, lock };
}

describe('using(): hold a lease for the length of a task', () => {
  it('extends in the background while the task runs, and releases at the end', async () => {
    const w = world();
    let deadlines: Array<number | null> = [];
    const task = using(w.lock, 'job', { ttlMs: 100 }, async (signal, lease) => {
      for (let i = 0; i < 5; i++) {
        await w.time.advanceTo(w.time.nowMs() + 40);
        deadlines.push(lease.validUntilMs);
        expect(signal.aborted).toBe(false);
      }
      return lease.token;
    });
    await w.time.runUntil(task, 10_000);
    expect(await task).toBe(1n);
    // Five times 40 ms is twice the ttl: only extensions kept the lease alive.
    expect(new Set(deadlines).size).toBeGreaterThan(1);
    expect(w.nodes.map((n) => n.holder('job'))).toEqual([null, null, null]);
    deadlines = [];
  });

  it('never re-acquires: when extensions fail the signal fires at the deadline and no new token is minted', async () => {
    const w = world();
    let seen: unknown;
    const task = using(w.lock, 'job', { ttlMs: 100 }, async (signal) => {
      for (const i of [0, 1, 2]) w.network.cut(0, i);
      await w.time.advanceTo(200);
      seen = signal.reason;
      return signal.aborted;
    });
    await w.time.runUntil(task, 10_000);
    expect(await task).toBe(true);
    expect(String(seen)).toMatch(/lease on 'job' expired/);
    for (const i of [0, 1, 2]) w.network.heal(0, i);
    // A fresh acquire gets token 2: nothing was minted behind the task's back.
    const again = w.lock.acquire('job', { ttlMs: 100 });
    await w.time.runUntil(again, 10_000);
    expect(await again).toMatchObject({ kind: 'granted', lease: { token: 2n } });
  });

  it('throws LockNotAcquiredError when the resource is held, and runs nothing', async () => {
    const w = world();
    const first = w.lock.acquire('job', { ttlMs: 100 });
    await w.time.runUntil(first, 1000);
    let ran = false;
    const second = using(w.lock, 'job', { ttlMs: 100 }, async () => {
      ran = true;
    });
    await w.time.runUntil(second.catch(() => undefined), 1000);
    await expect(second).rejects.toBeInstanceOf(LockNotAcquiredError);
    expect(ran).toBe(false);
  });
});

describe('the lease-loss signal', () => {
  it('fires at the validity deadline, or a safety margin before it', async () => {
    for (const margin of [0, 7]) {
      const w = world({ safetyMarginMs: margin });
      const r = w.lock.acquire('r', { ttlMs: 100 });
      await w.time.runUntil(r, 1000);
      const granted = await r;
      if (granted.kind !== 'granted') throw new Error('not granted');
      const deadline = granted.lease.validUntilMs!;
      expect(deadline).toBe(100 - (Math.ceil(0.01 * 100) + 2));
      await w.time.advanceTo(deadline - margin - 1);
      expect(granted.lease.signal.aborted).toBe(false);
      await w.time.advanceTo(deadline - margin);
      expect(granted.lease.signal.aborted).toBe(true);
    }
  });
});

describe('input validation', () => {
  it('rejects bad lock options with typed errors', () => {
    const redis = new Redis({ lazyConnect: true });
    try {
      expect(() => createRedisLock({ nodes: [] })).toThrow(InvalidInputError);
      expect(() => createRedisLock({ nodes: [redis], driftFactor: 1 })).toThrow(/driftFactor/);
      expect(() => createRedisLock({ nodes: [redis], driftFactor: -0.1 })).toThrow(InvalidInputError);
      expect(() => createRedisLock({ nodes: [redis], requestTimeoutMs: 0 })).toThrow(/invalid-config: requestTimeoutMs/);
      expect(() => createRedisLock({ nodes: [redis], safetyMarginMs: -1 })).toThrow(/safetyMarginMs/);
      expect(() => createRedisLock({ nodes: [redis], tokenBase: -1n })).toThrow(/invalid-token: tokenBase/);
      expect(() => createRedisLock({ nodes: Array(16).fill(redis) })).toThrow(/1..15 nodes/);
    } finally {
      redis.disconnect();
    }
  });

  it('rejects a bad ttl or resource before sending anything', async () => {
    const w = world();
    for (const [resource, ttlMs, code] of [
      ['r', 0, 'invalid-ttl'],
      ['r', 1.5, 'invalid-ttl'],
      ['r', 2 ** 31, 'invalid-ttl'],
      ['', 10, 'invalid-resource'],
      ['x'.repeat(257), 10, 'invalid-resource'],
    ] as const) {
      await expect(w.lock.acquire(resource, { ttlMs })).rejects.toMatchObject({ name: 'InvalidInputError', code });
    }
    await expect(w.lock.acquire('r', { ttlMs: 10, retries: -1 })).rejects.toBeInstanceOf(InvalidInputError);
    expect(w.nodes.map((n) => n.holder('r'))).toEqual([null, null, null]);
  });
});

describe('LeaseHandle: the signal is made when first asked for', () => {
  /** A clock the test moves, counting the timers scheduled on it. */
  function counted() {
    const time = new VirtualTime();
    const clock = time.clockOf(() => clockAt());
    let timers = 0;
    return { time, clock: { now: () => clock.now(), schedule: (at: number, fn: () => void) => (timers++, clock.schedule(at, fn)) }, timers: () => timers };
  }

  it('schedules no timer for a lease released without anyone listening', () => {
    const c = counted();
    const lease = new LeaseHandle('r', 'o', 1n, 10, c.clock);
    lease.lose('released');
    expect(c.timers()).toBe(0);
    expect(lease.lost).toBe(true);
    expect((lease.signal.reason as LeaseLostError).reason).toBe('released');
  });

  it('past its deadline with nobody listening, it is lost as expired, as the timer would have said', async () => {
    const c = counted();
    const lease = new LeaseHandle('r', 'o', 1n, 10, c.clock, 2);
    await c.time.advanceTo(7);
    expect(lease.lost).toBe(false);
    await c.time.advanceTo(8); // the deadline less the safety margin
    expect(lease.lost).toBe(true);
    lease.lose('released'); // too late to change the reason
    expect(lease.signal.aborted).toBe(true);
    expect((lease.signal.reason as LeaseLostError).reason).toBe('expired');
    lease.extendTo(100);
    expect(lease.validUntilMs).toBe(10);
  });

  it('once asked for, the signal fires at the deadline, and moves with an extension', async () => {
    const c = counted();
    const lease = new LeaseHandle('r', 'o', 1n, 10, c.clock);
    const signal = lease.signal;
    expect(c.timers()).toBe(1);
    lease.extendTo(20);
    await c.time.advanceTo(19);
    expect(signal.aborted).toBe(false);
    await c.time.advanceTo(20);
    expect(signal.aborted).toBe(true);
    expect(lease.signal).toBe(signal);
    expect((signal.reason as LeaseLostError).reason).toBe('expired');
  });
});

describe('LeaseHandle: the deadline is judged when the lease is used, not only when its timer runs', () => {
  /** A stalled event loop: the clock moves, no timer ever runs. */
  function stalled() {
    let nowMs = 0;
    let timers = 0;
    return { clock: { now: () => nowMs, schedule: () => (timers++, () => undefined) }, set: (ms: number) => void (nowMs = ms), timers: () => timers };
  }

  it('a signal read past the deadline is aborted (as expired, its event fired) although its timer has not run', () => {
    const s = stalled();
    const lease = new LeaseHandle('r', 'o', 1n, 10, s.clock, 2);
    const signal = lease.signal;
    expect(s.timers()).toBe(1);
    let events = 0;
    signal.addEventListener('abort', () => void events++);
    s.set(7);
    expect(signal.aborted).toBe(false);
    expect(() => signal.throwIfAborted()).not.toThrow();
    expect(lease.lost).toBe(false);
    s.set(8); // the deadline less the safety margin; the timer is stuck
    expect(signal.aborted).toBe(true);
    expect(events).toBe(1);
    expect((signal.reason as LeaseLostError).reason).toBe('expired');
    expect(lease.signal).toBe(signal);
    expect(lease.lost).toBe(true);
  });

  it('reason and throwIfAborted judge the deadline too, and so does every way of reading', () => {
    for (const read of [(sig: AbortSignal) => sig.reason, (sig: AbortSignal) => { try { sig.throwIfAborted(); } catch (e) { return e; } return undefined; }] as const) {
      const s = stalled();
      const lease = new LeaseHandle('r', 'o', 1n, 10, s.clock);
      const signal = lease.signal;
      s.set(10);
      expect((read(signal) as LeaseLostError).reason).toBe('expired');
    }
  });

  it('an extension that comes back after the deadline does not revive the lease, and a later release keeps the reason', () => {
    const s = stalled();
    const lease = new LeaseHandle('r', 'o', 1n, 10, s.clock);
    const signal = lease.signal;
    s.set(12);
    lease.extendTo(100);
    expect(lease.validUntilMs).toBe(10);
    expect(signal.aborted).toBe(true);
    lease.lose('released');
    expect((signal.reason as LeaseLostError).reason).toBe('expired');
  });

  it('a session lease (no deadline) is judged by its events only', () => {
    const s = stalled();
    const lease = new LeaseHandle('r', 'o', 1n, null, s.clock);
    const signal = lease.signal;
    s.set(1e9);
    expect(signal.aborted).toBe(false);
    lease.lose('connection-lost');
    expect((signal.reason as LeaseLostError).reason).toBe('connection-lost');
  });
});

describe('release() answers whether it is known', () => {
  it('true when a quorum of nodes answered, false when too few did (the key may stay until its ttl), and the lease is dropped either way', async () => {
    const w = world({ requestTimeoutMs: 20 });
    const grant = async () => {
      const r = w.lock.acquire('job', { ttlMs: 1000 });
      await w.time.runUntil(r, 10_000);
      const got = await r;
      if (got.kind !== 'granted') throw new Error(`expected a grant, got ${got.kind}`);
      return got.lease;
    };
    const release = async (lease: Awaited<ReturnType<typeof grant>>) => {
      const r = w.lock.release(lease);
      await w.time.runUntil(r, 10_000);
      return r;
    };
    const first = await grant();
    // One node of three cut: two answer, a quorum.
    w.network.cut(0, 2);
    expect(await release(first)).toBe(true);
    w.network.heal(0, 2);
    const second = await grant();
    // Two of three cut: one answers, no quorum: unknown, never reported as done.
    w.network.cut(0, 1);
    w.network.cut(0, 2);
    expect(await release(second)).toBe(false);
    expect(second.signal.aborted).toBe(true);
    expect(w.nodes.map((n) => n.holder('job') !== null)).toEqual([false, true, true]);
  });
});
