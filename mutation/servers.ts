import type { TestProject } from 'vitest/node';
import { EtcdCluster } from '../conformance/env/etcdCluster.ts';
import { PostgresServer } from '../conformance/env/postgresServer.ts';
import { RedisServer } from '../conformance/env/redisServer.ts';
import { ZookeeperEnsemble } from '../conformance/env/zookeeperEnsemble.ts';
import '../test/impl/servers.ts';

/**
 * Vitest global setup of `npm run mutation`: one Redis, PostgreSQL, etcd and ZooKeeper
 * per Stryker worker, started once and shared by every mutant's run of the
 * test/impl/ files (each test cleans up after itself). Stopped when the
 * worker's vitest closes; the watchdog kills them should the worker die.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const [redis, postgres, etcd, zookeeper] = await Promise.all([
    RedisServer.start({ persistence: 'none' }),
    PostgresServer.start({ parentDir: '/dev/shm', startTimeoutMs: 60_000 }),
    EtcdCluster.start({ members: 1, parentDir: '/dev/shm' }),
    ZookeeperEnsemble.start({ members: 1, parentDir: '/dev/shm' }),
  ]);
  project.provide('lockcheckServers', { redis: redis.connection, postgres: postgres.connection, etcd: etcd.clientOptions(), zookeeper: { ...zookeeper.clientOptions(), pid: zookeeper.pid(0) } });
  return async () => {
    await Promise.all([redis.stop(), postgres.stop(), etcd.stop(), zookeeper.stop()]);
  };
}
