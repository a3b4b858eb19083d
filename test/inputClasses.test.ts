import type { Etcd3 } from 'etcd3';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdCluster } from '../conformance/env/etcdCluster.ts';
import { PostgresServer } from '../conformance/env/postgresServer.ts';
import { RedisServer } from '../conformance/env/redisServer.ts';
import { systemClock } from '../impl/clock.ts';
import { using } from '../impl/using.ts';
import { EtcdLock, etcd3Node, etcdClient, etcdFencedStore } from '../impl/etcd/index.ts';
import type { FencedStore } from '../impl/fencedStore.ts';
import { openPostgresFencedStore } from '../impl/postgres/index.ts';
import { createRedisLock, redisFencedStore, redisLeaseNode } from '../impl/redis/index.ts';
import { ZookeeperLock, zookeeperFencedStore, zookeeperNode } from '../impl/zookeeper/index.ts';
import { LeaseLock } from '../impl/leaseLock.ts';
import { InvalidInputError } from '../model/errors.ts';

/**
 * Classes of input found by session h17's audit of the public surface, each
 * refused by one shared check on every backend: store values that the
 * backends cannot keep as given; key prefixes and ZooKeeper roots.
 */

/** Values a store would not give back as written: lone surrogates (no UTF-8 form), NUL (PostgreSQL text cannot hold it). */
const UNKEEPABLE = ['x\uD800y', 'x\uDC00', '\uDBFF', 'a\0b'];

describe('store values every backend keeps as given', () => {
  let redisServer: RedisServer;
  let pgServer: PostgresServer;
  const ends: Array<() => unknown> = [];
  beforeAll(async () => {
    [redisServer, pgServer] = await Promise.all([RedisServer.start({ persistence: 'none' }), PostgresServer.start({ parentDir: '/dev/shm' })]);
  });
  afterAll(async () => {
    for (const end of ends) await end();
    await Promise.all([redisServer?.stop(), pgServer?.stop()]);
  });

  const stores = (): Array<[string, FencedStore]> => {
    const redis = new Redis({ ...redisServer.connection, maxRetriesPerRequest: 0, commandTimeout: 2_000 });
    ends.push(() => redis.disconnect());
    const pg = openPostgresFencedStore({ connection: pgServer.connection }, 'strict');
    ends.push(() => pg.close());
    // Refused before any I/O: the etcd and ZooKeeper nodes point at a port nobody listens on, and are never dialled.
    const etcd = etcdClient({ hosts: ['127.0.0.1:9'], dialTimeoutMs: 500 });
    ends.push(() => etcd.close());
    const zk = zookeeperNode({ connectString: '127.0.0.1:9', clock: systemClock, requestTimeoutMs: 500 });
    ends.push(() => zk.close());
    return [
      ['redis', redisFencedStore(redis, 'strict')],
      ['postgres', pg],
      ['etcd', etcdFencedStore(etcd3Node(etcd, { clock: systemClock, requestTimeoutMs: 500 }), 'strict')],
      ['zookeeper', zookeeperFencedStore(zk, 'strict')],
    ];
  };

  it('a value with a lone surrogate or NUL is an InvalidInputError naming the value on every store, before anything is sent (Redis and PostgreSQL read a lone surrogate back as U+FFFD; PostgreSQL refused NUL only after a round trip)', async () => {
    for (const [name, store] of stores()) {
      for (const [i, value] of UNKEEPABLE.entries()) {
        const e = await store.write('cell', BigInt(i + 1), value).then(
          () => null,
          (error: unknown) => error,
        );
        expect(e, `${name} ${JSON.stringify(value)}`).toBeInstanceOf(InvalidInputError);
        expect(e).toMatchObject({ code: 'precondition', message: 'precondition: value must be well-formed Unicode without NUL characters' });
      }
    }
  });

  it('what a store keeps is what it gives back (astral characters, a well-formed pair, empty text)', async () => {
    const [[, redis], [, pg]] = stores() as [[string, FencedStore], [string, FencedStore]];
    for (const store of [redis, pg]) {
      for (const [i, value] of ['😀 \uD83D\uDE00', '', 'plain'].entries()) {
        await expect(store.write(`kept${i}`, 1n, value)).resolves.toEqual({ kind: 'accepted' });
        await expect(store.read(`kept${i}`)).resolves.toEqual({ value, token: 1n });
      }
    }
  });
});

describe('key prefixes and ZooKeeper roots, refused by one check at construction', () => {
  // Two prefixes that differ only in a lone surrogate were one prefix on the wire (the second lock read the first's key as 'held');
  // NUL, control characters and '.' components were refused by ZooKeeper at the first call (BAD_ARGUMENTS) or read as an outage;
  // a prefix too long for a request read as no-quorum on every acquire.
  const BAD_PREFIXES = ['\uD800', 'a\uDC00b', 'a\0b', 'p'.repeat(257)];
  const BAD_ROOTS = ['/\uD800', '/a\0b', '/a\u0001b', '/.', '/a/..', `/${'p'.repeat(256)}`];

  it('a prefix that is not well-formed Unicode without NUL, or longer than 256, is invalid-config naming it, on every lock and store that takes one', () => {
    const redis = new Redis({ lazyConnect: true });
    const etcd = etcdClient({ hosts: ['127.0.0.1:9'] });
    const zk = zookeeperNode({ connectString: '127.0.0.1:9', clock: systemClock });
    try {
      const node = etcd3Node(etcd, { clock: systemClock });
      const makers: Array<[string, (prefix: string) => unknown]> = [
        ['createRedisLock', (prefix) => createRedisLock({ nodes: [redis], prefix })],
        ['redisLeaseNode', (prefix) => redisLeaseNode(redis, { prefix })],
        ['redisFencedStore', (prefix) => redisFencedStore(redis, 'strict', { prefix })],
        ['EtcdLock', (prefix) => new EtcdLock({ node, clock: systemClock, prefix })],
        ['etcdFencedStore', (prefix) => etcdFencedStore(node, 'strict', { prefix })],
      ];
      for (const [name, make] of makers) {
        for (const prefix of BAD_PREFIXES) {
          expect(() => make(prefix), `${name} ${JSON.stringify(prefix.slice(0, 8))}`).toThrow(expect.objectContaining({ code: 'invalid-config', message: expect.stringMatching(/^invalid-config: prefix must be a string of at most 256 characters, well-formed Unicode without NUL, got /) as unknown }));
        }
        expect(() => make(''), name).not.toThrow();
        expect(() => make('app:😀'), name).not.toThrow();
      }
      for (const root of BAD_ROOTS) {
        for (const make of [() => new ZookeeperLock({ node: zk, clock: systemClock, root }), () => zookeeperFencedStore(zk, 'strict', { root })]) {
          expect(make, JSON.stringify(root.slice(0, 8))).toThrow(expect.objectContaining({ code: 'invalid-config', message: expect.stringMatching(/^invalid-config: root must be /) as unknown }));
        }
      }
      expect(() => new ZookeeperLock({ node: zk, clock: systemClock, root: '/app/locks-1.x' })).not.toThrow();
    } finally {
      redis.disconnect();
      etcd.close();
      zk.close();
    }
  });
});

describe('numeric lock options bounded as durations', () => {
  it('a safetyMarginMs past 2^31-1 (2^31, 2^63, 1e308: integers all) is invalid-config on every lease lock; before, each lease was granted with its signal already fired', () => {
    const redis = new Redis({ lazyConnect: true });
    const etcd = etcdClient({ hosts: ['127.0.0.1:9'] });
    const zk = zookeeperNode({ connectString: '127.0.0.1:9', clock: systemClock });
    try {
      const node = etcd3Node(etcd, { clock: systemClock });
      const makers: Array<[string, (safetyMarginMs: number) => unknown]> = [
        ['LeaseLock', (safetyMarginMs) => new LeaseLock({ nodes: [redisLeaseNode(redis)], clock: systemClock, safetyMarginMs })],
        ['createRedisLock', (safetyMarginMs) => createRedisLock({ nodes: [redis], safetyMarginMs })],
        ['EtcdLock', (safetyMarginMs) => new EtcdLock({ node, clock: systemClock, safetyMarginMs })],
        ['ZookeeperLock', (safetyMarginMs) => new ZookeeperLock({ node: zk, clock: systemClock, safetyMarginMs })],
      ];
      for (const [name, make] of makers) {
        for (const bad of [2 ** 31, 2 ** 63, 1e308]) {
          expect(() => make(bad), `${name} ${bad}`).toThrow(expect.objectContaining({ code: 'invalid-config', message: `invalid-config: safetyMarginMs must be an integer in [0, 2147483647], got ${bad}` }));
        }
        expect(() => make(2 ** 31 - 1), name).not.toThrow();
      }
    } finally {
      redis.disconnect();
      etcd.close();
      zk.close();
    }
  });
});

describe('using() with an extendAtFraction near 1', () => {
  let server: RedisServer;
  const clients: Redis[] = [];
  beforeAll(async () => {
    server = await RedisServer.start({ persistence: 'none' });
  });
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await server?.stop();
  });

  it('extends at most about ten times per validity, not back to back (0.99 of a 1 s ttl: over 1000 extends in 300 ms before)', async () => {
    const redis = new Redis({ ...server.connection, maxRetriesPerRequest: 0, commandTimeout: 2_000 });
    clients.push(redis);
    const lock = createRedisLock({ nodes: [redis] });
    let extends_ = 0;
    const extend = lock.extend.bind(lock);
    lock.extend = (lease, ttlMs) => {
      extends_++;
      return extend(lease, ttlMs);
    };
    const started = performance.now();
    // Real time on a real server: the task ends on a timer, the bound on extends holds however slow the machine.
    await using(lock, 'near-one', { ttlMs: 1000, extendAtFraction: 0.99 }, (signal) => new Promise<boolean>((done) => setTimeout(() => done(signal.aborted), 300)));
    const elapsedMs = performance.now() - started;
    // A tenth of at most 988 ms left apart: at most one extend per ~98 ms of the run, and the first at once.
    expect(extends_).toBeGreaterThanOrEqual(1);
    expect(extends_).toBeLessThanOrEqual(2 + Math.ceil(elapsedMs / 90));
  });
});

describe('an etcd request larger than the member takes', () => {
  let cluster: EtcdCluster;
  const clients: Etcd3[] = [];
  beforeAll(async () => {
    cluster = await EtcdCluster.start({ members: 1 });
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await cluster?.stop();
  });

  it('is refused before it is sent (InvalidInputError precondition: etcd\'s default request bound), not an outage to retry; the store goes on', async () => {
    const client = etcdClient(cluster.clientOptions());
    clients.push(client);
    const store = etcdFencedStore(etcd3Node(client, { clock: systemClock, requestTimeoutMs: 5_000 }), 'strict');
    // 1.4 MB of value, sent twice in the write's transaction (the first write's branch and the judged one): past gRPC's 2 MiB.
    for (const token of [1n, 2n]) {
      const e = await store.write('big', token, 'x'.repeat(1_400_000)).then(
        () => null,
        (error: unknown) => error,
      );
      // Before the up-front check the member refused it (ServerRefusedError 'statement', ResourceExhausted): never an outage.
      expect(e).toBeInstanceOf(InvalidInputError);
      expect(e).toMatchObject({ code: 'precondition' });
    }
    await expect(store.write('big', 3n, 'small')).resolves.toEqual({ kind: 'accepted' });
    await expect(store.read('big')).resolves.toEqual({ value: 'small', token: 3n });
  });

  it("etcd3Node's calls refuse wrong arguments as InvalidInputError naming them, before anything is sent: they were read as outages, or taken (a token -1n broke its cell for good)", async () => {
    const client = etcdClient(cluster.clientOptions());
    clients.push(client);
    const node = etcd3Node(client, { clock: systemClock, requestTimeoutMs: 5_000 });
    const key = Buffer.from('junk/k');
    const highest = Buffer.from('junk/h');
    const refusedWith = async (call: Promise<unknown>, named: string): Promise<void> => {
      const e = await call.then(
        () => null,
        (error: unknown) => error,
      );
      expect(e, named).toBeInstanceOf(InvalidInputError);
      expect((e as Error).message, named).toContain(named);
    };
    for (const ttl of [Number.NaN, -1, 0, 1.5, 1e308]) await refusedWith(node.grant(ttl), 'ttlSeconds');
    await refusedWith(node.keepAlive('not-a-lease'), 'leaseId');
    await refusedWith(node.revoke(7 as never), 'leaseId');
    await refusedWith(node.get('junk/k' as never), 'key');
    await refusedWith(node.owns(key, '1', 2n ** 64n), 'createRevision');
    await refusedWith(node.deleteIfOwned(key, '1', 5 as never), 'createRevision');
    await refusedWith(node.putIfAbsent(key, 'v', 'x'), 'leaseId');
    await refusedWith(node.fencedWrite(key, highest, 5 as never, '{}', 'strict'), 'token');
    await refusedWith(node.fencedWrite(key, highest, -1n, '{}', 'strict'), 'token');
    await refusedWith(node.fencedWrite(key, highest, 1n, '{}', 'bogus' as never), 'policy');
    // Nothing was written: the cell takes its first token.
    await expect(node.fencedWrite(key, highest, 1n, '{}', 'strict')).resolves.toEqual({ kind: 'accepted' });
    await expect(node.fencedWrite(key, highest, 2n, '{}', 'strict')).resolves.toEqual({ kind: 'accepted' });
  });
});
