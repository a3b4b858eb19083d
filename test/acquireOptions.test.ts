import { Redis } from 'ioredis';
import type { Etcd3 } from 'etcd3';
import { afterAll, describe, expect, it } from 'vitest';
import { systemClock } from '../impl/clock.ts';
import { InvalidInputError } from '../impl/errors.ts';
import type { Lease } from '../impl/lease.ts';
import type { AcquireResult, LeaseLock } from '../impl/leaseLock.ts';
import { using } from '../impl/using.ts';
import { createRedisLock } from '../impl/redis/index.ts';
import { PostgresSessionLock, PostgresTransactionLock } from '../impl/postgres/index.ts';
import { EtcdLock, etcd3Node, etcdClient } from '../impl/etcd/index.ts';
import { ZookeeperLock, zookeeperNode, type ZookeeperNode } from '../impl/zookeeper/index.ts';
import { sharedEtcd, sharedPostgres, sharedRedis, sharedZookeeper } from './impl/servers.ts';

/**
 * The acquire options of every lock, on real servers: each lock refuses a
 * key it does not know by its own list (ZooKeeper takes waitMs, the
 * PostgreSQL locks take no ttl and no jitter), before anything is sent, so
 * the resource is free afterwards; using() passes its own option
 * (extendAtFraction) to no lock, and the lock's refusal of the rest reaches
 * its caller.
 */

const redisServer = sharedRedis();
const postgresServer = sharedPostgres();
const etcdServer = sharedEtcd();
const zookeeperServer = sharedZookeeper();
const run = `${process.pid}-${Date.now().toString(36)}`;
let resources = 0;

/** Whatever a test opened, closed at the end of the file (also when a test failed). */
const closers: Array<() => unknown> = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

/** The calls of a lock the tests make, whatever the backend. */
interface AnyLock {
  acquire(resource: string, options: object): Promise<AcquireResult>;
  release(lease: Lease): Promise<unknown>;
}

interface Backend {
  readonly name: string;
  /** A lock client on the real server (closed with the file). */
  readonly lock: () => AnyLock;
  /** Good acquire options that do not wait. */
  readonly base: Readonly<Record<string, unknown>>;
  /** A key another backend's acquire takes and this one's does not. */
  readonly foreign: string;
  /** Whether using() takes this lock (it needs extend and clockOf). */
  readonly usable: boolean;
}

function redisLock(): AnyLock {
  const s = redisServer();
  const connection = new Redis({ host: s.host, port: s.port, password: s.password, maxRetriesPerRequest: 1, commandTimeout: 5_000 });
  closers.push(() => connection.disconnect());
  return createRedisLock({ nodes: [connection], prefix: `t${run}` });
}

function etcdLock(): AnyLock {
  const client: Etcd3 = etcdClient({ hosts: etcdServer().hosts, tls: etcdServer().tls });
  closers.push(() => client.close());
  return new EtcdLock({ node: etcd3Node(client, { clock: systemClock, requestTimeoutMs: 5_000 }), clock: systemClock, prefix: `t${run}/` });
}

function zookeeperLock(): AnyLock {
  const s = zookeeperServer();
  const node: ZookeeperNode = zookeeperNode({ connectString: s.connectString, auth: s.auth, clock: systemClock, requestTimeoutMs: 5_000 });
  closers.push(() => node.close());
  return new ZookeeperLock({ node, clock: systemClock, root: `/t${run}` });
}

function postgresLock(Lock: typeof PostgresSessionLock | typeof PostgresTransactionLock): () => AnyLock {
  return () => {
    const lock = new Lock({ connection: postgresServer(), statementTimeoutMs: 5_000 });
    closers.push(() => lock.close());
    return lock;
  };
}

const BACKENDS: readonly Backend[] = [
  { name: 'redis', lock: redisLock, base: { ttlMs: 10_000 }, foreign: 'waitMs', usable: true },
  { name: 'etcd', lock: etcdLock, base: { ttlMs: 10_000 }, foreign: 'waitMs', usable: true },
  { name: 'zookeeper', lock: zookeeperLock, base: { ttlMs: 10_000 }, foreign: 'statementTimeoutMs', usable: true },
  { name: 'postgres session', lock: postgresLock(PostgresSessionLock), base: {}, foreign: 'retryJitterMs', usable: false },
  { name: 'postgres transaction', lock: postgresLock(PostgresTransactionLock), base: {}, foreign: 'retryJitterMs', usable: false },
];

function resource(): string {
  return `r${run}-${++resources}`;
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    (v) => new Error(`expected a refusal, got ${JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? String(x) : x))}`),
    (e: unknown) => e,
  );
}

function granted(r: AcquireResult): Lease {
  if (r.kind !== 'granted') throw new Error(`expected granted, got ${JSON.stringify(r)}`);
  return r.lease;
}

/** The resource is free: another client of the same backend takes it at once. */
async function free(b: Backend, r: string): Promise<void> {
  const other = b.lock();
  await other.release(granted(await other.acquire(r, b.base)));
}

describe.each(BACKENDS)('$name acquire options', (b) => {
  it('refuses a typo of a known key, naming it and the known key, and takes nothing', async () => {
    const r = resource();
    const e = await rejection(b.lock().acquire(r, { ...b.base, retry: 3 }));
    expect(e).toBeInstanceOf(InvalidInputError);
    expect((e as InvalidInputError).code).toBe('invalid-config');
    expect((e as Error).message).toContain('acquire options: unknown option "retry" (did you mean retries?); known: ');
    await free(b, r);
  });

  it(`refuses a key of another backend's acquire`, async () => {
    const r = resource();
    const e = await rejection(b.lock().acquire(r, { ...b.base, [b.foreign]: 10 }));
    expect(e).toBeInstanceOf(InvalidInputError);
    expect((e as Error).message).toContain(`acquire options: unknown option "${b.foreign}"`);
    await free(b, r);
  });

  it('takes its known keys, an undefined one included', async () => {
    const lock = b.lock();
    const lease = granted(await lock.acquire(resource(), { ...b.base, retries: 0, retryDelayMs: undefined }));
    await lock.release(lease);
  });

  it.runIf(b.usable)('using() hands the lock its acquire options only, and the lock refuses an unknown one', async () => {
    const lock = b.lock() as unknown as LeaseLock;
    expect(await using(lock, resource(), { ...b.base, extendAtFraction: 0 } as never, async (signal) => signal.aborted)).toBe(false);
    const r = resource();
    const e = await rejection(using(lock, r, { ...b.base, extendAtFraction: 0, retry: 1 } as never, async () => 1));
    expect((e as Error).message).toContain('acquire options: unknown option "retry" (did you mean retries?)');
    await free(b, r);
  });
});

describe('each backend refuses by its own list', () => {
  it('ZooKeeper takes waitMs; the PostgreSQL locks refuse a ttl as unsupported, not as unknown', async () => {
    const zk = zookeeperLock();
    await zk.release(granted(await zk.acquire(resource(), { ttlMs: 10_000, waitMs: 0 })));
    const pg = postgresLock(PostgresSessionLock)();
    const e = await rejection(pg.acquire(resource(), { ttlMs: 1000 }));
    expect(e).toBeInstanceOf(InvalidInputError);
    expect((e as InvalidInputError).code).toBe('unsupported-operation');
  });
});
