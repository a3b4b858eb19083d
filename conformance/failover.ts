import type { Redis } from 'ioredis';
import { createRedisLock } from '../impl/redis/index.ts';
import type { AcquireResult } from '../impl/leaseLock.ts';
import { RedisReplicated } from './env/redisReplicated.ts';

/**
 * The failover schedule of redis-replicated (spec 7.9) on real servers: the
 * shortest MUTEX-1 counterexample the exploration finds in the crash-restart
 * column (acquire, failover, acquire), with the grant held back from the
 * replica. `lockcheck failover` prints it; test/redisReplicated.test.ts
 * asserts it. The matrix rows of the design (env/replicatedBackend.ts) run
 * generated schedules instead, with replication told to the model.
 */
export interface FailoverVariant {
  /** WAIT 1 after every script (the lease is returned only once the replica acknowledged). */
  readonly wait: boolean;
  /** Hold replication back before the first acquire, so the grant cannot reach the replica. */
  readonly holdReplication: boolean;
}

export interface FailoverRun {
  readonly variant: FailoverVariant;
  readonly first: AcquireResult;
  /** With WAIT: client 1's attempt right after the failover, before the old primary rejoined as a replica. */
  readonly beforeRejoin: AcquireResult | null;
  readonly second: AcquireResult;
  /** MUTEX-1 broken: client 0's lease was still valid on its clock when client 1 was granted. */
  readonly doubleGrant: boolean;
  /** Milliseconds from killing the primary to Sentinel naming the replica primary. */
  readonly failoverMs: number;
}

/** Long enough that the first lease is still valid after the failover, however loaded the machine. */
export const FAILOVER_TTL_MS = 60_000;
/** WAIT's bound: long enough for a loaded machine's replica to acknowledge, shorter than the request timeout. */
export const WAIT_FOR_ONE = { count: 1, timeoutMs: 2_000 } as const;
const REQUEST_TIMEOUT_MS = 5_000;

/**
 * Runs the schedule on a fresh primary, replica and Sentinel, and stops them
 * (also on failure): [hold replication,] client 0 acquires, the primary is
 * killed and Sentinel promotes the replica, client 1 acquires. With WAIT the
 * promoted primary has no replica until the old one rejoins, so client 1 tries
 * once before and once after the rejoin.
 */
export async function runFailover(variant: FailoverVariant, progress: (step: string) => void = () => {}): Promise<FailoverRun> {
  progress('starting a primary, a replica and Sentinel');
  const cluster = await RedisReplicated.start();
  const connections: Redis[] = [];
  try {
    const connect = async (): Promise<Redis> => {
      const redis = await cluster.connect();
      connections.push(redis);
      return redis;
    };
    const options = { requestTimeoutMs: REQUEST_TIMEOUT_MS, ...(variant.wait ? { replicas: WAIT_FOR_ONE } : {}) };
    const lock0 = createRedisLock({ nodes: [await connect()], ...options });
    if (variant.holdReplication) await cluster.holdReplication();
    const first = await lock0.acquire('r', { ttlMs: FAILOVER_TTL_MS });
    progress('killing the primary; waiting for Sentinel to promote the replica');
    const killedAt = performance.now();
    await cluster.failover();
    const failoverMs = Math.round(performance.now() - killedAt);
    const lock1 = createRedisLock({ nodes: [await connect()], ...options });
    let beforeRejoin: AcquireResult | null = null;
    if (variant.wait) {
      beforeRejoin = await lock1.acquire('r', { ttlMs: FAILOVER_TTL_MS });
      await cluster.rejoin();
    }
    const second = await lock1.acquire('r', { ttlMs: FAILOVER_TTL_MS });
    const validUntil = first.kind === 'granted' ? first.lease.validUntilMs : null;
    const doubleGrant = second.kind === 'granted' && validUntil !== null && lock0.clockOf().now() < validUntil;
    return { variant, first, beforeRejoin, second, doubleGrant, failoverMs };
  } finally {
    for (const c of connections) c.disconnect();
    progress('stopping the servers');
    await cluster.stop();
  }
}

/** One line of an acquire's outcome, e.g. "granted, token 1" or "denied (no-quorum)". */
export function describeAcquire(r: AcquireResult): string {
  return r.kind === 'granted' ? `granted, token ${r.lease.token}` : r.kind === 'denied' ? `denied (${r.reason})` : r.kind;
}
