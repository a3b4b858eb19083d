import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisLeaseNode } from '../../impl/redis/index.ts';
import { sharedRedis } from './servers.ts';

/**
 * Spec section 3, "Delayed requests": a request of acquire, extend or release
 * that the network holds lands later, on a node that has moved on. These
 * deliver such a request (the script call exactly as the client sent it: its
 * owner, its ttl) after the client's key expired for real and another owner
 * was granted, on a real redis-server, and show that it changes nothing of
 * the newer holder's: each script acts only for its own owner. This holds for
 * every Redis design (redis-single, each Redlock node, redis-replicated's
 * primary), which run the same scripts.
 */
const server = sharedRedis();
let redis: Redis;
let resources = 0;

beforeAll(() => {
  redis = new Redis({ ...server(), lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 5_000, commandTimeout: 5_000 });
});
afterAll(() => redis?.disconnect());

/** A resource of this test alone, whose first key (owner o1) has already expired on the server. */
async function expiredThenRetaken(): Promise<{ readonly resource: string; readonly lock: string }> {
  const resource = `late${process.pid}-${++resources}`;
  const lock = `lockcheck:lock:${resource}`;
  const node = redisLeaseNode(redis);
  expect(await node.acquire(resource, 'o1', 1)).toBe(1n);
  // Bounded wait for the server's own expiry of a 1 ms key (no sleep: the server says when).
  const deadline = Date.now() + 10_000;
  while ((await redis.exists(lock)) === 1) if (Date.now() > deadline) throw new Error('the 1 ms key never expired');
  expect(await node.acquire(resource, 'o2', 60_000)).toBe(2n);
  return { resource, lock };
}

describe('late requests on Redis (spec 3, "Delayed requests")', () => {
  it("a release held past its key's expiry and another owner's grant deletes nothing: the newer holder keeps the key", async () => {
    const { resource, lock } = await expiredThenRetaken();
    expect(await redisLeaseNode(redis).release(resource, 'o1')).toBe(false);
    expect(await redis.get(lock)).toBe('o2');
    expect(await redis.pttl(lock)).toBeGreaterThan(50_000);
  });

  it("an extend held past its key's expiry re-arms nothing: the newer holder's ttl is its own", async () => {
    const { resource, lock } = await expiredThenRetaken();
    expect(await redisLeaseNode(redis).extend(resource, 'o1', 600_000)).toBe(false);
    expect(await redis.get(lock)).toBe('o2');
    // An extend that wrongly re-armed o2's key would have set 600 s.
    expect(await redis.pttl(lock)).toBeLessThanOrEqual(60_000);
  });

  it('an acquire sent while the resource was free and landing after another grant is denied, mints no token, and leaves the holder alone', async () => {
    const { resource, lock } = await expiredThenRetaken();
    expect(await redisLeaseNode(redis).acquire(resource, 'o3', 60_000)).toBeNull();
    expect(await redis.get(lock)).toBe('o2');
    expect(await redis.get(`lockcheck:token:${resource}`)).toBe('2');
  });
});
