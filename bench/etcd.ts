/**
 * etcd lock benchmark: lockcheck's EtcdLock against etcd3's own lock helper
 * (`client.lock(key).ttl(s).acquire()` / `release()`), acquire + release
 * pairs per second, sequential (1 worker) and 50 concurrent workers (each on
 * its own resource, so every attempt is granted), on one 3-member etcd
 * cluster this script starts on loopback (data on /dev/shm: the disk's fsyncs
 * would dominate both) and stops in a finally.
 *
 *   npm run bench:etcd [-- --seconds N]      (or: npx tsx bench/etcd.ts --seconds N)
 *
 * Both go through the same etcd3 client (all three members, no retries).
 * Per pair, etcd3's helper sends lease grant, put-if-absent txn, lease
 * revoke; lockcheck's sends lease grant, put-if-absent txn, then the owned
 * delete txn and the lease revoke in parallel. Every configuration runs 3
 * times, interleaved (rotated order); the median is reported, with the
 * ratio lockcheck / etcd3 from the same run. Progress goes to stderr, the
 * markdown table to stdout.
 */
import type { Etcd3 } from 'etcd3';
import { EtcdCluster } from '../conformance/env/etcdCluster.ts';
import { systemClock } from '../impl/clock.ts';
import { EtcdLock, etcd3Node, etcdClient } from '../impl/etcd/index.ts';
import { lockcheckAgainstPeer, log, out, pairsPerSecond, parseSeconds } from './common.ts';

const ROUNDS = 3;
const WORKERS = [1, 50] as const;
const TTL_S = 10;

type Kind = 'lockcheck' | 'etcd3';

/** Pairs per second of `workers` loops of acquire + release for `seconds`. */
function measure(kind: Kind, client: Etcd3, lock: EtcdLock, workers: number, seconds: number, round: number): Promise<number> {
  return pairsPerSecond(workers, seconds, async (w) => {
    const resource = `bench-${kind}-${round}-${workers}-${w}`;
    if (kind === 'lockcheck') {
      return async () => {
        const r = await lock.acquire(resource, { ttlMs: TTL_S * 1000 });
        if (r.kind !== 'granted') throw new Error(`lockcheck: not granted (${r.kind})`);
        await lock.release(r.lease);
      };
    }
    return async () => {
      const l = client.lock(resource).ttl(TTL_S);
      await l.acquire();
      await l.release();
    };
  });
}

async function main(): Promise<void> {
  const seconds = parseSeconds('bench/etcd.ts', process.argv.slice(2));
  log('starting a 3-member etcd cluster (data on /dev/shm)');
  const cluster = await EtcdCluster.start({ parentDir: '/dev/shm' });
  const client = etcdClient(cluster.clientOptions());
  try {
    const lock = new EtcdLock({ node: etcd3Node(client, { clock: systemClock, requestTimeoutMs: 5000 }), clock: systemClock });
    // Warm-up: connections to every member, the leader's lessor.
    await measure('lockcheck', client, lock, 4, 0.5, -1);
    await measure('etcd3', client, lock, 4, 0.5, -1);
    await lockcheckAgainstPeer(['lockcheck', 'etcd3'], WORKERS, ROUNDS, (kind, workers, round) => measure(kind, client, lock, workers, seconds, round), [
      'lockcheck EtcdLock (pairs/s)',
      'etcd3 client.lock() (pairs/s)',
      'ratio lockcheck / etcd3',
    ]);
    out();
    out(`(median of ${ROUNDS} interleaved runs of ${seconds} s each; etcd 3.4, 3 members on loopback, data on /dev/shm, one etcd3 client to all three)`);
  } finally {
    client.close();
    await cluster.stop();
  }
}

await main();
