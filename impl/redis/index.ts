import type { RedisConnection } from './connection.ts';
import { InvalidInputError } from '../../model/errors.ts';
import type { MonotonicClock } from '../clock.ts';
import { systemClock } from '../clock.ts';
import { LeaseLock } from '../leaseLock.ts';
import { checkObject, knownOptions, shown } from '../options.ts';
import { checkConnection, redisLeaseNode, type WaitForReplicas } from './node.ts';

export { redisLeaseNode, type WaitForReplicas } from './node.ts';
export { redisFencedStore } from './store.ts';
export { keysFor } from './keys.ts';
export type { RedisConnection, RedisStoreConnection } from './connection.ts';

/** createRedisLock's options. */
export interface RedisLockOptions {
  /** One connection for the single-node lease; several independent nodes for Redlock (a majority must grant). An ioredis 5 or 6 `Redis`. */
  readonly nodes: readonly RedisConnection[];
  /** The client's monotonic clock. Default: performance.now(). */
  readonly clock?: MonotonicClock;
  /** Clock drift allowance as a fraction of the ttl, in [0, 1). Default 0.01. */
  readonly driftFactor?: number;
  /** Fixed ms added to the drift allowance (expiry precision, clock skew between client and servers). Default 2. */
  readonly clockMarginMs?: number;
  /** Bound on each call to one node (a timeout counts as a vote against). Default: the ttl. */
  readonly requestTimeoutMs?: number;
  /** The lease's signal fires this many ms before its deadline; an acquire that would leave less usable time than that is denied `validity-exhausted` (the key released). Default 0. */
  readonly safetyMarginMs?: number;
  /** Key prefix. Default 'lockcheck'. */
  readonly prefix?: string;
  /** Where fresh token counters start (the first token is tokenBase + 1). Default 0. */
  readonly tokenBase?: bigint;
  /** On a replicated Redis (redis-replicated): WAIT for this many replicas after every script; a shortfall is a vote against. */
  readonly replicas?: WaitForReplicas;
}

const checkKeys = knownOptions('createRedisLock options', ['nodes', 'clock', 'driftFactor', 'clockMarginMs', 'requestTimeoutMs', 'safetyMarginMs', 'prefix', 'tokenBase', 'replicas']);

/**
 * A lease lock on Redis: with one node, SET NX PX with a fencing token minted
 * in the same script; with N nodes, Redlock (spec: redis-single, redlock).
 * Throws InvalidInputError for bad options.
 */
export function createRedisLock(options: RedisLockOptions): LeaseLock {
  checkObject(options, 'createRedisLock options');
  checkKeys(options);
  const nodes: unknown = options.nodes;
  if (!Array.isArray(nodes) || nodes.length === 0) throw new InvalidInputError('invalid-config', `nodes must be a non-empty array of ioredis connections, got ${shown(nodes)}`);
  // Every index, holes included (forEach skips them: new Array(2) passed, and the first call threw a TypeError on the hole).
  for (let i = 0; i < nodes.length; i++) checkConnection(nodes[i], `nodes[${i}]`);
  // Redlock's nodes are independent servers: one connection twice made every free resource read as held (its second script saw the first's key). Past 15 nodes LeaseLock names the count.
  for (let i = 1; i < nodes.length && nodes.length <= 15; i++) {
    const first = nodes.indexOf(nodes[i]);
    if (first !== i) throw new InvalidInputError('invalid-config', `nodes[${i}] is the same connection as nodes[${first}]: each node must be its own server`);
  }
  return new LeaseLock({
    nodes: options.nodes.map((redis) =>
      redisLeaseNode(redis, {
        ...(options.prefix !== undefined ? { prefix: options.prefix } : {}),
        ...(options.tokenBase !== undefined ? { tokenBase: options.tokenBase } : {}),
        ...(options.replicas !== undefined ? { replicas: options.replicas } : {}),
      }),
    ),
    clock: options.clock ?? systemClock,
    ...(options.driftFactor !== undefined ? { driftFactor: options.driftFactor } : {}),
    ...(options.clockMarginMs !== undefined ? { clockMarginMs: options.clockMarginMs } : {}),
    ...(options.requestTimeoutMs !== undefined ? { requestTimeoutMs: options.requestTimeoutMs } : {}),
    ...(options.safetyMarginMs !== undefined ? { safetyMarginMs: options.safetyMarginMs } : {}),
  });
}
