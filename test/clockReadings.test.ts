import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisServer } from '../conformance/env/redisServer.ts';
import { systemClock, type MonotonicClock } from '../impl/clock.ts';
import { InvalidInputError } from '../impl/errors.ts';
import { LeaseLock } from '../impl/leaseLock.ts';
import type { LeaseNode } from '../impl/leaseNode.ts';
import { createRedisLock, keysFor, redisFencedStore, redisLeaseNode } from '../impl/redis/index.ts';
import { HandClock } from './handClock.ts';

/**
 * A user's clock whose now() returns no finite number: the lock and the
 * store refuse its reading with InvalidInputError('invalid-config') before
 * anything is sent. A numeric string made `startedMs + ttlMs` a string
 * ('3271' + 200 = '3271200'): the lease was valid for 54 minutes on a 200 ms
 * key, a second holder beside it; NaN, Infinity and undefined denied every
 * acquire 'validity-exhausted', a bigint threw a TypeError.
 */
let server: RedisServer;
let redis: Redis;
beforeAll(async () => {
  server = await RedisServer.start({ persistence: 'none' });
  redis = new Redis({ ...server.connection, maxRetriesPerRequest: 0 });
  await redis.ping();
}, 30_000);
afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
});

const BAD: ReadonlyArray<readonly [string, () => unknown, string]> = [
  ['a numeric string', () => String(Math.round(performance.now())), 'string'],
  ['NaN', () => NaN, 'nan'],
  ['undefined', () => undefined, 'undefined'],
  ['Infinity', () => Infinity, 'infinity'],
  ['-Infinity', () => -Infinity, 'minus-infinity'],
  ['a bigint', () => 5n, 'bigint'],
];

/** A clock that reads the system clock until `bad()` says otherwise, then returns `reading()`. */
function turning(reading: () => unknown, bad: () => boolean): MonotonicClock {
  return { now: () => (bad() ? reading() : performance.now()) as number, schedule: (atMs, fn) => systemClock.schedule(atMs, fn) };
}

const refused = expect.objectContaining({ name: 'InvalidInputError', code: 'invalid-config', message: expect.stringContaining('clock.now() must return a finite number of ms') });

describe('a clock reading that is no finite number', () => {
  it.each(BAD)('%s: acquire and extend reject before anything is sent', async (_name, reading, key) => {
    const resource = `clock-${key}`;
    let bad = true;
    const lock = createRedisLock({ nodes: [redis], clock: turning(reading, () => bad) });
    await expect(lock.acquire(resource, { ttlMs: 200 })).rejects.toEqual(refused);
    await expect(lock.acquire(resource, { ttlMs: 200, retries: 2 })).rejects.toBeInstanceOf(InvalidInputError);
    expect(await redis.exists(keysFor(resource).lock, keysFor(resource).counter)).toBe(0);
    bad = false;
    const granted = await lock.acquire(resource, { ttlMs: 60_000 });
    if (granted.kind !== 'granted') throw new Error(`not granted: ${granted.kind}`);
    await redis.pexpire(keysFor(resource).lock, 30_000);
    bad = true;
    await expect(lock.extend(granted.lease, 60_000)).rejects.toEqual(refused);
    // Not sent: the key keeps the ttl set by hand.
    expect(await redis.pttl(keysFor(resource).lock)).toBeLessThanOrEqual(30_000);
    bad = false;
    expect(await lock.release(granted.lease)).toBe(true);
    await lock.settled();
  });

  it.each(BAD)('%s: the fenced store refuses a write and a read, nothing written', async (_name, reading, key) => {
    const resource = `store-${key}`;
    const store = redisFencedStore(redis, 'strict', { clock: turning(reading, () => true) });
    await expect(store.write(resource, 1n, 'v')).rejects.toEqual(refused);
    await expect(store.read(resource)).rejects.toEqual(refused);
    expect(await redis.exists(keysFor(resource).cell)).toBe(0);
  });
});

describe('a clock that turns unreadable while a lease is held', () => {
  it('no timer throws, the lease reads lost (the safe side), and the lock can still release with a good clock', async () => {
    const hand = new HandClock();
    let bad = false;
    const clock: MonotonicClock = { now: () => (bad ? Number.NaN : hand.now()), schedule: (atMs, fn) => hand.schedule(atMs, fn) };
    const lock = createRedisLock({ nodes: [redis], clock, requestTimeoutMs: 100 });
    const granted = await lock.acquire('clock-turns', { ttlMs: 10_000 });
    if (granted.kind !== 'granted') throw new Error(`not granted: ${granted.kind}`);
    bad = true;
    // Read while the clock cannot be read: a deadline no one can judge is over (it threw InvalidInputError from the getter).
    expect(granted.lease.signal.aborted).toBe(true);
    expect((granted.lease.signal.reason as { reason?: unknown }).reason).toBe('expired');
    // The acquire round's deadline timer fires on the unreadable clock: it threw from the timer (an uncaught exception).
    expect(() => hand.advance(150)).not.toThrow();
    bad = false;
    await lock.release(granted.lease);
    await lock.settled();
  });
});

describe('a clock that turns unreadable while an acquire round waits for its replies', () => {
  it.each(BAD)('%s: the acquire rejects with the refusal, no unhandled rejection, and the lock settles', async (_name, reading) => {
    let bad = false;
    const node = redisLeaseNode(redis);
    // Goes bad as the node's reply comes: the round is decided (one turn of the clock) on a clock that cannot be read.
    const turning: LeaseNode = { ...node, acquire: async (...args) => {
      const answer = await node.acquire(...args);
      bad = true;
      return answer;
    } };
    const clock: MonotonicClock = { now: () => (bad ? reading() : performance.now()) as number, schedule: (atMs, fn) => systemClock.schedule(atMs, fn) };
    const lock = new LeaseLock({ nodes: [turning], clock, requestTimeoutMs: 10_000 });
    // It threw in the reply's callback (an unhandled rejection), and the round waited for its 10 s bound.
    await expect(lock.acquire(`round-${_name}`, { ttlMs: 30_000 })).rejects.toEqual(refused);
    await lock.settled();
    // The key the node set is released (d5a3c16's undo, through a round on the unreadable clock), not left for its 30 s.
    await expect.poll(() => redis.exists(keysFor(`round-${_name}`).lock), { timeout: 10_000, interval: 20 }).toBe(0);
  });

  it.each(BAD)('%s: a release on a clock turned unreadable still goes out and frees the key (its answer not awaited)', async (_name, reading, key) => {
    let bad = false;
    const clock: MonotonicClock = { now: () => (bad ? reading() : performance.now()) as number, schedule: (atMs, fn) => systemClock.schedule(atMs, fn) };
    const lock = createRedisLock({ nodes: [redis], clock, requestTimeoutMs: 10_000 });
    const resource = `release-${key}`;
    const granted = await lock.acquire(resource, { ttlMs: 60_000 });
    if (granted.kind !== 'granted') throw new Error(`not granted: ${granted.kind}`);
    bad = true;
    // It threw from the round's start: the key stayed for its 60 s ttl, the lock held for no one.
    expect(typeof (await lock.release(granted.lease))).toBe('boolean');
    await lock.settled();
    await expect.poll(() => redis.exists(keysFor(resource).lock), { timeout: 10_000, interval: 20 }).toBe(0);
  });
});
