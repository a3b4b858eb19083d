import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresServer } from '../conformance/env/postgresServer.ts';
import { RedisServer } from '../conformance/env/redisServer.ts';
import { systemClock } from '../impl/clock.ts';
import { etcd3Node, etcdClient, etcdFencedStore } from '../impl/etcd/index.ts';
import type { FencedStore } from '../impl/fencedStore.ts';
import { openPostgresFencedStore } from '../impl/postgres/index.ts';
import { redisFencedStore } from '../impl/redis/index.ts';
import { zookeeperFencedStore, zookeeperNode } from '../impl/zookeeper/index.ts';
import { InvalidInputError } from '../model/errors.ts';

/**
 * Classes of input found by session h17's audit of the public surface, each
 * refused by one shared check on every backend: store values that the
 * backends cannot keep as given.
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
