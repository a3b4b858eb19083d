import { Redis } from 'ioredis';
import { match } from 'ts-pattern';
import type { Lease } from '../../impl/lease.ts';
import type { AcquireResult } from '../../impl/leaseLock.ts';
import { createRedisLock, redisFencedStore } from '../../impl/redis/index.ts';
import type { FencedStore } from '../../impl/fencedStore.ts';
import type { ClientBackend, FencePolicy } from './protocol.ts';
import { sharedClock } from './sharedClock.ts';
import { loadConcurrent } from './adapterRef.ts';
import { checkedAcquire, withinGuard } from './adapterBreach.ts';
import { checkUrlText } from '../kitInput.ts';
import { parseRedisUrl } from '../env/serverUrls.ts';

/**
 * One client process's lock and store, as the workload uses them. Every call
 * is bounded by the clients' own timeouts (COMMAND_TIMEOUT_MS).
 */
export interface StressClient {
  acquire(resource: string, ttlMs: number): Promise<AcquireResult>;
  read(lease: Lease): Promise<string | null>;
  /** 'rejected': a fenced store refused the token. Throws when the outcome is unknown. */
  write(lease: Lease, value: string): Promise<'accepted' | 'rejected'>;
  /** Whether the lease's writes are known to be in the store (pg-xact: COMMIT answered); always true elsewhere. */
  release(lease: Lease): Promise<boolean>;
  /** The PostgreSQL backend pids the client's locks live on (empty for Redis). */
  pids(): number[];
  close(): Promise<void>;
}

/** Bound on each command or statement (a paused server or a black-holed link fails the call, not the run). */
export const COMMAND_TIMEOUT_MS = 2_000;

export async function connectClient(backend: ClientBackend): Promise<StressClient> {
  return match(backend)
    .with({ kind: 'redis' }, (b) => redisClient(b))
    .with({ kind: 'redis-sentinel' }, (b) => sentinelClient(b))
    // A client process loads the driver of its own backend only (the process starts in each matrix cell's stress run).
    .with({ kind: 'pg-session' }, async (b) => (await import('./postgresClients.ts')).pgSessionClient(b))
    .with({ kind: 'pg-xact' }, async (b) => (await import('./postgresClients.ts')).pgXactClient(b))
    .with({ kind: 'adapter' }, (b) => adapterClient(b))
    .with({ kind: 'etcd' }, async (b) => (await import('./consensusClients.ts')).etcdStressClient(b))
    .with({ kind: 'zookeeper' }, async (b) => (await import('./consensusClients.ts')).zookeeperStressClient(b))
    .exhaustive();
}

/**
 * An ioredis connection as a stress client wants it, connected: every command
 * bounded (COMMAND_TIMEOUT_MS), no offline queue (a command on a broken link
 * fails at once), reconnecting every 20 ms after a crash. A node that is down
 * now is one it reconnects to. For adapters' concurrent clients (lockcheck/kit).
 */
export async function concurrentRedis(url: string): Promise<Redis> {
  // A redis:// URL (ServerUrlError otherwise) before a connection is made: ioredis would take any text and retry forever.
  parseRedisUrl(checkUrlText(url));
  const redis = redisConnection(url);
  await redis.connect().catch(() => undefined);
  return redis;
}

function redisConnection(url: string): Redis {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: COMMAND_TIMEOUT_MS,
    connectTimeout: COMMAND_TIMEOUT_MS,
    retryStrategy: () => 20,
    lazyConnect: true,
  });
  redis.on('error', () => undefined); // reported by the commands that fail
  return redis;
}

async function redisClient(b: Extract<ClientBackend, { kind: 'redis' }>): Promise<StressClient> {
  const nodes = b.nodes.map(redisConnection);
  const storeConnection = redisConnection(b.store);
  // A node down at the start (the nemesis may have struck already) is one the client reconnects to; its calls fail meanwhile.
  await Promise.all([...nodes, storeConnection].map((r) => r.connect().catch(() => undefined)));
  const lock = createRedisLock({ nodes, clock: sharedClock, requestTimeoutMs: COMMAND_TIMEOUT_MS });
  return leaseStressClient(lock, redisFencedStore(storeConnection, b.storePolicy), async () => {
    for (const r of [...nodes, storeConnection]) r.disconnect();
  });
}

/** WAIT 1's bound in a stress client: shorter than the request timeout, or the WAIT outlives the vote. */
const STRESS_WAIT = { count: 1, timeoutMs: COMMAND_TIMEOUT_MS / 2 } as const;

/**
 * redis-replicated: one connection that follows the primary through Sentinel
 * (after a failover it asks Sentinel again, every 20 ms, until the promoted
 * replica answers as primary), with WAIT 1 after every script or not.
 */
async function sentinelClient(b: Extract<ClientBackend, { kind: 'redis-sentinel' }>): Promise<StressClient> {
  const primary = new Redis({
    sentinels: [b.sentinel],
    name: b.name,
    password: b.password,
    sentinelPassword: b.sentinelPassword,
    role: 'master',
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: COMMAND_TIMEOUT_MS,
    connectTimeout: COMMAND_TIMEOUT_MS,
    sentinelRetryStrategy: () => 20,
    retryStrategy: () => 20,
    lazyConnect: true,
  });
  primary.on('error', () => undefined); // reported by the commands that fail
  const storeConnection = redisConnection(b.store);
  await Promise.all([primary, storeConnection].map((r) => r.connect().catch(() => undefined)));
  const lock = createRedisLock({ nodes: [primary], clock: sharedClock, requestTimeoutMs: COMMAND_TIMEOUT_MS, ...(b.wait ? { replicas: STRESS_WAIT } : {}) });
  return leaseStressClient(lock, redisFencedStore(storeConnection, b.storePolicy), async () => {
    for (const r of [primary, storeConnection]) r.disconnect();
  });
}

async function adapterClient(b: Extract<ClientBackend, { kind: 'adapter' }>): Promise<StressClient> {
  const concurrent = await loadConcurrent(b.adapter);
  // Bounded: a connect that never settled held the run until its end, which then threw the whole history away.
  const lock = await withinGuard(Promise.resolve(concurrent.connect(b.servers, sharedClock)), 'connect()');
  const register = b.store !== null ? await redisRegister(b.store, b.storePolicy) : b.servers.pg !== null ? (await import('./postgresClients.ts')).storeOutside(b.servers.pg, b.storePolicy) : null;
  if (register === null) {
    await lock.close();
    throw new Error('an adapter client needs a Redis store or a PostgreSQL database for its register');
  }
  return {
    // An answer of the wrong shape is the adapter's error (AdapterBreach), not a library's unknown outcome.
    acquire: async (resource, ttlMs) => checkedAcquire(await lock.acquire(resource, ttlMs), resource, b.tokens),
    read: async (lease) => (await register.store.read(lease.resource)).value,
    write: async (lease, value) => (await register.store.write(lease.resource, lease.token, value)).kind,
    release: async (lease) => {
      if ((await lock.release(lease)) === false) throw new Error('release not confirmed by the adapter (it resolved false)');
      return true;
    },
    pids: () => [...(lock.backendPids?.() ?? [])],
    close: async () => {
      try {
        await lock.close();
      } finally {
        await register.close();
      }
    },
  };
}

async function redisRegister(url: string, policy: FencePolicy): Promise<{ store: FencedStore; close(): Promise<void> }> {
  const connection = await concurrentRedis(url);
  return {
    store: redisFencedStore(connection, policy),
    close: async () => {
      connection.disconnect();
    },
  };
}

/** A lease lock and a fenced store beside it (Redis, Redis through Sentinel, etcd, ZooKeeper): nothing to commit at release, no backend pids. */
export function leaseStressClient(
  lock: { acquire(resource: string, options: { ttlMs: number }): Promise<AcquireResult>; release(lease: Lease): Promise<unknown> },
  store: { read(resource: string): Promise<{ readonly value: string | null }>; write(resource: string, token: bigint, value: string): Promise<{ readonly kind: 'accepted' | 'rejected' }> },
  close: () => Promise<void>,
): StressClient {
  return {
    acquire: (resource, ttlMs) => lock.acquire(resource, { ttlMs }),
    read: async (lease) => (await store.read(lease.resource)).value,
    write: async (lease, value) => (await store.write(lease.resource, lease.token, value)).kind,
    release: async (lease) => {
      // A release the lock could not confirm (no quorum answered) is an unknown outcome in the history, never one that happened.
      if ((await lock.release(lease)) === false) throw new Error('release not confirmed: too few nodes answered (the key may stay until its ttl)');
      return true;
    },
    pids: () => [],
    close,
  };
}
