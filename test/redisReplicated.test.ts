import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { RedisReplicated } from '../conformance/env/redisReplicated.ts';
import { createRedisLock } from '../impl/redis/index.ts';
import type { AcquireResult } from '../impl/leaseLock.ts';

/**
 * redis-replicated on real servers (spec 7.9): a primary, an asynchronous
 * replica and a Sentinel. One schedule, the one the exploration finds
 * (crash-restart, MUTEX-1 in four steps): the grant does not reach the
 * replica, the primary fails, Sentinel promotes the replica, a second client
 * acquires. Without WAIT both hold the lock with the same token; with WAIT 1
 * the first grant never counted (the replica did not acknowledge it).
 * No timing decides anything: replication is held back by pausing the
 * replica and dropping its link, and every wait is bounded.
 */

// Long enough that the first lease is still valid after the failover (about 1-2 s), however loaded the machine.
const TTL_MS = 60_000;
// WAIT's bound: long enough for a loaded machine's replica to acknowledge, shorter than the request timeout.
const WAIT = { count: 1, timeoutMs: 2_000 };

const opened: Array<RedisReplicated | Redis> = [];
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) {
    if ('stop' in o) await o.stop();
    else o.disconnect();
  }
});

async function connect(cluster: RedisReplicated): Promise<Redis> {
  const redis = await cluster.connect();
  opened.push(redis);
  return redis;
}

interface Run {
  readonly first: AcquireResult;
  readonly second: AcquireResult;
  /** The first lease is still valid on its holder's clock when the second is granted. */
  readonly bothValid: boolean;
}

/**
 * The schedule: [hold replication,] client 0 acquires, failover, client 1 acquires.
 * With `rejoin`, client 1 first tries at once (no replica yet: `beforeRejoin`), then
 * again once the old primary has come back as the new primary's replica.
 */
async function failoverSchedule(wait: boolean, holdReplication: boolean, rejoin = false): Promise<Run & { readonly beforeRejoin?: AcquireResult }> {
  const cluster = await RedisReplicated.start();
  opened.push(cluster);
  const options = wait ? { replicas: WAIT, requestTimeoutMs: 5_000 } : { requestTimeoutMs: 5_000 };
  const lock0 = createRedisLock({ nodes: [await connect(cluster)], ...options });
  if (holdReplication) await cluster.holdReplication();
  const first = await lock0.acquire('r', { ttlMs: TTL_MS });
  await cluster.failover();
  expect(await cluster.primaryPort()).toBe(cluster.replica.port);
  const lock1 = createRedisLock({ nodes: [await connect(cluster)], ...options });
  let beforeRejoin: AcquireResult | undefined;
  if (rejoin) {
    beforeRejoin = await lock1.acquire('r', { ttlMs: TTL_MS });
    await cluster.rejoin();
  }
  const second = await lock1.acquire('r', { ttlMs: TTL_MS });
  const clock = lock0.clockOf();
  const bothValid = first.kind === 'granted' && second.kind === 'granted' && first.lease.validUntilMs !== null && clock.now() < first.lease.validUntilMs;
  return { first, second, bothValid, ...(beforeRejoin !== undefined ? { beforeRejoin } : {}) };
}

const token = (r: AcquireResult): string | null => (r.kind === 'granted' ? r.lease.token.toString() : null);

describe('redis-replicated: failover on real servers (spec 7.9)', () => {
  it('without WAIT: the grant had not reached the replica, and the promoted replica grants it again (MUTEX-1, FENCE-1)', async () => {
    const run = await failoverSchedule(false, true);
    expect(run.first.kind).toBe('granted');
    expect(run.second.kind).toBe('granted');
    expect(run.bothValid).toBe(true);
    // The counter went back with the failover: the same token twice.
    expect(token(run.second)).toBe(token(run.first));
  }, 60_000);

  it('with WAIT 1, the same schedule: the unacknowledged grant is not returned, so no double grant', async () => {
    const run = await failoverSchedule(true, true, true);
    expect(run.first).toEqual({ kind: 'denied', reason: 'no-quorum' });
    // The price: the promoted primary has no replica to acknowledge until the old one rejoins.
    expect(run.beforeRejoin).toEqual({ kind: 'denied', reason: 'no-quorum' });
    expect(run.second).toMatchObject({ kind: 'granted' });
    expect(run.bothValid).toBe(false);
  }, 60_000);

  it('with WAIT 1 and replication running: the grant survives the failover and the second client is denied', async () => {
    const run = await failoverSchedule(true, false);
    expect(run.first.kind).toBe('granted');
    expect(run.second).toEqual({ kind: 'denied', reason: 'held' });
  }, 60_000);
});
