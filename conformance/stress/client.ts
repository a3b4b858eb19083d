import { Redis } from 'ioredis';
import pg from 'pg';
import { match } from 'ts-pattern';
import type { Lease } from '../../impl/lease.ts';
import type { AcquireResult } from '../../impl/leaseLock.ts';
import { createRedisLock, redisFencedStore } from '../../impl/redis/index.ts';
import { PostgresSessionLock } from '../../impl/postgres/sessionLock.ts';
import { PostgresTransactionLock } from '../../impl/postgres/xactLock.ts';
import { postgresFencedStore } from '../../impl/postgres/store.ts';
import type { FencedStore } from '../../impl/fencedStore.ts';
import { EtcdLock, etcd3Node, etcdClient, etcdFencedStore } from '../../impl/etcd/index.ts';
import { ZookeeperLock, zookeeperFencedStore, zookeeperNode } from '../../impl/zookeeper/index.ts';
import type { ClientBackend, FencePolicy } from './protocol.ts';
import { sharedClock } from './sharedClock.ts';
import { loadConcurrent } from './adapterRef.ts';
import { checkUrlText } from '../kitInput.ts';
import { parseRedisUrl } from '../env/userRedis.ts';

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
    .with({ kind: 'pg-session' }, (b) => pgSessionClient(b))
    .with({ kind: 'pg-xact' }, (b) => pgXactClient(b))
    .with({ kind: 'adapter' }, (b) => adapterClient(b))
    .with({ kind: 'etcd' }, (b) => etcdStressClient(b))
    .with({ kind: 'zookeeper' }, (b) => zookeeperStressClient(b))
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
  const lock = await concurrent.connect(b.servers, sharedClock);
  const register = b.store !== null ? await redisRegister(b.store, b.storePolicy) : b.servers.pg !== null ? storeOutside(b.servers.pg, b.storePolicy) : null;
  if (register === null) {
    await lock.close();
    throw new Error('an adapter client needs a Redis store or a PostgreSQL database for its register');
  }
  return {
    acquire: (resource, ttlMs) => lock.acquire(resource, ttlMs),
    read: async (lease) => (await register.store.read(lease.resource)).value,
    write: async (lease, value) => (await register.store.write(lease.resource, lease.token, value)).kind,
    release: async (lease) => {
      await lock.release(lease);
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

/** A store connection outside the lock's session, opened again after it is lost (a terminated backend, a crash). */
function storeOutside(url: string, policy: FencePolicy): { store: FencedStore; close(): Promise<void> } {
  let client: Promise<pg.Client> | null = null;
  const connection = (): Promise<pg.Client> =>
    (client ??= (async () => {
      const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: COMMAND_TIMEOUT_MS, query_timeout: COMMAND_TIMEOUT_MS, statement_timeout: COMMAND_TIMEOUT_MS });
      const forget = (): void => {
        client = null;
      };
      c.on('error', forget);
      c.on('end', forget);
      await c.connect().catch((e: unknown) => {
        forget();
        throw e;
      });
      return c;
    })());
  const store = postgresFencedStore({ query: (async (...args: unknown[]) => (await connection()).query(...(args as [string]))) as pg.Client['query'] }, policy);
  return {
    store,
    close: async () => {
      const c = await client?.catch(() => null);
      await c?.end().catch(() => undefined);
    },
  };
}

async function pgSessionClient(b: Extract<ClientBackend, { kind: 'pg-session' }>): Promise<StressClient> {
  const lock = new PostgresSessionLock({ connection: { connectionString: b.url }, clock: sharedClock, statementTimeoutMs: COMMAND_TIMEOUT_MS });
  const outside = storeOutside(b.url, b.storePolicy);
  return {
    acquire: (resource) => lock.acquire(resource),
    read: async (lease) => (await outside.store.read(lease.resource)).value,
    write: async (lease, value) => (await outside.store.write(lease.resource, lease.token, value)).kind,
    release: async (lease) => {
      await lock.release(lease);
      return true;
    },
    pids: () => (lock.backendPid === null ? [] : [lock.backendPid]),
    close: async () => {
      await lock.close();
      await outside.close();
    },
  };
}

async function pgXactClient(b: Extract<ClientBackend, { kind: 'pg-xact' }>): Promise<StressClient> {
  const lock = new PostgresTransactionLock({ connection: { connectionString: b.url }, clock: sharedClock, statementTimeoutMs: COMMAND_TIMEOUT_MS });
  // Reads and writes run in the lease's own transaction.
  const inside = (lease: Lease): FencedStore => postgresFencedStore(lock.queryable(lease), 'transactional');
  return {
    acquire: (resource) => lock.acquire(resource),
    read: async (lease) => (await inside(lease).read(lease.resource)).value,
    write: async (lease, value) => (await inside(lease).write(lease.resource, lease.token, value)).kind,
    // Resolves: committed, unless the transaction was already gone (the lease lost before); throws when COMMIT's fate is unknown.
    release: async (lease) => {
      const lostBefore = lease.signal.aborted;
      await lock.release(lease);
      return !lostBefore;
    },
    pids: () => lock.backendPids,
    close: () => lock.close(),
  };
}

async function etcdStressClient(b: Extract<ClientBackend, { kind: 'etcd' }>): Promise<StressClient> {
  const client = etcdClient({ hosts: [...b.hosts], tls: b.tls, dialTimeoutMs: COMMAND_TIMEOUT_MS });
  const node = etcd3Node(client, { clock: sharedClock, requestTimeoutMs: COMMAND_TIMEOUT_MS });
  const lock = new EtcdLock({ node, clock: sharedClock });
  return leaseStressClient(lock, etcdFencedStore(node, b.storePolicy), async () => client.close());
}

async function zookeeperStressClient(b: Extract<ClientBackend, { kind: 'zookeeper' }>): Promise<StressClient> {
  const node = zookeeperNode({ connectString: b.connectString, auth: b.auth, clock: sharedClock, requestTimeoutMs: COMMAND_TIMEOUT_MS });
  const lock = new ZookeeperLock({ node, clock: sharedClock });
  return leaseStressClient(lock, zookeeperFencedStore(node, b.storePolicy), async () => node.close());
}

/** A lease lock and a fenced store beside it (Redis, Redis through Sentinel, etcd, ZooKeeper): nothing to commit at release, no backend pids. */
function leaseStressClient(
  lock: { acquire(resource: string, options: { ttlMs: number }): Promise<AcquireResult>; release(lease: Lease): Promise<unknown> },
  store: { read(resource: string): Promise<{ readonly value: string | null }>; write(resource: string, token: bigint, value: string): Promise<{ readonly kind: 'accepted' | 'rejected' }> },
  close: () => Promise<void>,
): StressClient {
  return {
    acquire: (resource, ttlMs) => lock.acquire(resource, { ttlMs }),
    read: async (lease) => (await store.read(lease.resource)).value,
    write: async (lease, value) => (await store.write(lease.resource, lease.token, value)).kind,
    release: async (lease) => {
      await lock.release(lease);
      return true;
    },
    pids: () => [],
    close,
  };
}
