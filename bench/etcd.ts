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
import { fmtRate, fmtRatio, log, median, out, parseSeconds } from './common.ts';

const ROUNDS = 3;
const WORKERS = [1, 50] as const;
const TTL_S = 10;

type Kind = 'lockcheck' | 'etcd3';

/** Pairs per second of `workers` loops of acquire + release for `seconds`. */
async function measure(kind: Kind, client: Etcd3, lock: EtcdLock, workers: number, seconds: number, round: number): Promise<number> {
  const until = performance.now() + seconds * 1000;
  let pairs = 0;
  const loop = async (w: number): Promise<void> => {
    const resource = `bench-${kind}-${round}-${workers}-${w}`;
    while (performance.now() < until) {
      if (kind === 'lockcheck') {
        const r = await lock.acquire(resource, { ttlMs: TTL_S * 1000 });
        if (r.kind !== 'granted') throw new Error(`lockcheck: not granted (${r.kind})`);
        await lock.release(r.lease);
      } else {
        const l = client.lock(resource).ttl(TTL_S);
        await l.acquire();
        await l.release();
      }
      pairs++;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: workers }, (_v, w) => loop(w)));
  return pairs / ((performance.now() - started) / 1000);
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
    const rates = new Map<string, number[]>();
    const kinds: Kind[] = ['lockcheck', 'etcd3'];
    for (let round = 0; round < ROUNDS; round++) {
      for (const workers of WORKERS) {
        const order = round % 2 === 0 ? kinds : [...kinds].reverse();
        for (const kind of order) {
          const rate = await measure(kind, client, lock, workers, seconds, round);
          log(`round ${round + 1}/${ROUNDS}  ${kind.padEnd(9)} ${String(workers).padStart(2)} workers: ${fmtRate(rate)} pairs/s`);
          const key = `${kind}/${workers}`;
          rates.set(key, [...(rates.get(key) ?? []), rate]);
        }
      }
    }
    out(`| workers | lockcheck EtcdLock (pairs/s) | etcd3 client.lock() (pairs/s) | ratio lockcheck / etcd3 |`);
    out(`|---:|---:|---:|---:|`);
    for (const workers of WORKERS) {
      const a = median(rates.get(`lockcheck/${workers}`)!);
      const b = median(rates.get(`etcd3/${workers}`)!);
      out(`| ${workers} | ${fmtRate(a)} | ${fmtRate(b)} | ${fmtRatio(a / b)} |`);
    }
    out();
    out(`(median of ${ROUNDS} interleaved runs of ${seconds} s each; etcd 3.4, 3 members on loopback, data on /dev/shm, one etcd3 client to all three)`);
  } finally {
    client.close();
    await cluster.stop();
  }
}

await main();
