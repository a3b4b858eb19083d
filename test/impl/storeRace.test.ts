import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, describe, it } from 'vitest';
import { systemClock } from '../../impl/clock.ts';
import { etcd3Node, etcdClient, etcdFencedStore } from '../../impl/etcd/index.ts';
import type { FencedStore } from '../../impl/fencedStore.ts';
import { ensureSchema, openPostgresFencedStore, postgresFencedStore } from '../../impl/postgres/index.ts';
import { redisFencedStore } from '../../impl/redis/index.ts';
import { zookeeperFencedStore, zookeeperNode } from '../../impl/zookeeper/index.ts';
import { expectRaceJudgedRight } from '../storeRace.ts';
import { sharedEtcd, sharedPostgres, sharedRedis, sharedZookeeper } from './servers.ts';

/**
 * Every real fenced store under many concurrent writers (test/storeRace.ts):
 * each policy on its own keys, eight clients, three seeds.
 */
const postgres = sharedPostgres();
const redis = sharedRedis();
const etcd = sharedEtcd();
const zk = sharedZookeeper();
const ends: Array<() => Promise<unknown> | void> = [];
afterAll(async () => {
  await Promise.all(ends.splice(0).map(async (end) => end()));
});

const CLIENTS = 8;
const POLICIES = ['strict', 'monotonic', 'unfenced'] as const;
const SEEDS = [1, 2, 3];
/** Unique per run: under `npm run mutation` one server serves every run of this file. */
const run = `${process.pid}-${Date.now().toString(36)}`;

describe('PostgreSQL', () => {
  async function clients(): Promise<pg.Client[]> {
    const all = Array.from({ length: CLIENTS }, () => new pg.Client({ ...postgres(), connectionTimeoutMillis: 5_000, query_timeout: 10_000 }));
    ends.push(() => Promise.all(all.map((c) => c.end().catch(() => undefined))));
    await Promise.all(all.map((c) => c.connect()));
    await ensureSchema(all[0]!);
    return all;
  }
  it('postgresFencedStore (the caller\'s connections)', async () => {
    const all = await clients();
    for (const policy of POLICIES) {
      for (const seed of SEEDS) {
        await expectRaceJudgedRight(
          all.map((c) => postgresFencedStore(c, policy)),
          policy,
          seed,
          `${run}-own-${policy}-${seed}-`,
        );
      }
    }
  }, 60_000);

  it('openPostgresFencedStore (connections of its own)', async () => {
    await clients();
    for (const policy of POLICIES) {
      for (const seed of SEEDS) {
        const stores = Array.from({ length: CLIENTS }, () => openPostgresFencedStore({ connection: postgres(), statementTimeoutMs: 10_000 }, policy));
        try {
          // Connections opened first (each store opens its own at its first call): the writes then race, not the connects.
          await Promise.all(stores.map((s) => s.read('warm')));
          await expectRaceJudgedRight(stores, policy, seed, `${run}-open-${policy}-${seed}-`);
        } finally {
          await Promise.all(stores.map((s) => s.close()));
        }
      }
    }
  }, 60_000);
});

describe('Redis', () => {
  it('redisFencedStore', async () => {
    const all = Array.from({ length: CLIENTS }, () => new Redis({ ...redis(), maxRetriesPerRequest: 1, connectTimeout: 5_000, commandTimeout: 10_000 }));
    ends.push(() => Promise.all(all.map((c) => c.quit().catch(() => undefined))));
    for (const policy of POLICIES) {
      for (const seed of SEEDS) {
        await expectRaceJudgedRight(
          all.map((c) => redisFencedStore(c, policy, { prefix: `race-${run}-${policy}-${seed}`, timeoutMs: 10_000 })),
          policy,
          seed,
        );
      }
    }
  }, 60_000);
});

describe('etcd', () => {
  it('etcdFencedStore', async () => {
    const all = Array.from({ length: CLIENTS }, () => etcdClient({ hosts: etcd().hosts, tls: etcd().tls }));
    ends.push(() => all.forEach((c) => c.close()));
    for (const policy of POLICIES) {
      for (const seed of SEEDS) {
        await expectRaceJudgedRight(
          all.map((c) => etcdFencedStore(etcd3Node(c, { clock: systemClock, requestTimeoutMs: 10_000 }), policy, { prefix: `race-${run}-${policy}-${seed}/` })),
          policy,
          seed,
        );
      }
    }
  }, 60_000);
});

describe('ZooKeeper', () => {
  it('zookeeperFencedStore', async () => {
    const all = Array.from({ length: CLIENTS }, () => zookeeperNode({ connectString: zk().connectString, auth: zk().auth, clock: systemClock, requestTimeoutMs: 10_000 }));
    ends.push(() => all.forEach((n) => n.close()));
    for (const policy of POLICIES) {
      for (const seed of SEEDS) {
        const stores: FencedStore[] = all.map((n) => zookeeperFencedStore(n, policy, { root: `/race-${run}-${policy}-${seed}` }));
        await expectRaceJudgedRight(stores, policy, seed);
      }
    }
  }, 60_000);
});
