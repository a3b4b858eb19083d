/**
 * ZooKeeper lock benchmark: lockcheck's ZookeeperLock (a session per lease,
 * spec 7.10) against the plain recipe on one long-lived session, written here
 * on the same client library (node-zookeeper-client has no lock recipe of its
 * own): create an ephemeral sequential contender, list the line, own it when
 * lowest, delete it. Acquire + release pairs per second, sequential
 * (1 worker) and 50 concurrent workers (each on its own resource, so every
 * attempt is granted), on one 3-member ensemble this script starts on
 * loopback (data on /dev/shm) and stops in a finally.
 *
 *   npm run bench:zookeeper [-- --seconds N]   (or: npx tsx bench/zookeeper.ts --seconds N)
 *
 * Per pair, lockcheck opens a session (a quorum write), lists the line,
 * creates its contender, reads its stat, lists the line again, then deletes
 * the contender and closes the session (a quorum write); the shared-session
 * recipe creates, lists and deletes. The ratio is the price of a lease that
 * ends by itself when its holder stops renewing it. Every configuration runs
 * 3 times, interleaved (rotated order); the median is reported with the ratio
 * from the same run. Progress goes to stderr, the markdown table to stdout.
 */
import zookeeper from 'node-zookeeper-client';
import type { Client } from 'node-zookeeper-client';
import { ZookeeperEnsemble } from '../conformance/env/zookeeperEnsemble.ts';
import { systemClock } from '../impl/clock.ts';
import { ZookeeperLock, zookeeperNode } from '../impl/zookeeper/index.ts';
import { lockcheckAgainstPeer, log, out, pairsPerSecond, parseSeconds } from './common.ts';

const ROUNDS = 3;
const WORKERS = [1, 50] as const;
const TTL_MS = 10_000;

type Kind = 'lockcheck' | 'recipe';

function cb<T>(start: (done: (error: unknown, value: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => start((error, value) => (error ? reject(error as Error) : resolve(value))));
}

/** The recipe on a shared session: one acquire + release, granted since every worker has its own resource. */
/** What the recipe creates is its run identity's alone (the ensemble's tree admits no one else). */
const OWN = [new zookeeper.ACL(zookeeper.Permission.ALL, new zookeeper.Id('auth', ''))];

async function recipePair(client: Client, dir: string): Promise<void> {
  const path = await cb<string>((done) => client.create(`${dir}/c-`, Buffer.alloc(0), OWN, zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL, done));
  const line = await cb<string[]>((done) => client.getChildren(dir, done));
  if (line.sort()[0] !== path.slice(dir.length + 1)) throw new Error('recipe: not first in line');
  // At the version it was created with (0), not -1: no write of lockcheck's, a baseline's included, is unconditional.
  await cb<void>((done) => client.remove(path, 0, (error) => done(error, undefined)));
}

function measure(kind: Kind, client: Client, lock: ZookeeperLock, workers: number, seconds: number, round: number): Promise<number> {
  return pairsPerSecond(workers, seconds, async (w) => {
    const resource = `bench-${kind}-${round}-${workers}-${w}`;
    if (kind === 'lockcheck') {
      return async () => {
        const r = await lock.acquire(resource, { ttlMs: TTL_MS });
        if (r.kind !== 'granted') throw new Error(`lockcheck: not granted (${r.kind})`);
        await lock.release(r.lease);
      };
    }
    const dir = `/bench/${resource}`;
    await cb<string>((done) => client.mkdirp(dir, OWN, done));
    return () => recipePair(client, dir);
  });
}

async function main(): Promise<void> {
  const seconds = parseSeconds('bench/zookeeper.ts', process.argv.slice(2));
  log('starting a 3-member ZooKeeper ensemble (data on /dev/shm)');
  const ensemble = await ZookeeperEnsemble.start({ parentDir: '/dev/shm' });
  const client = zookeeper.createClient(ensemble.connectString, { sessionTimeout: TTL_MS, retries: 0 });
  // The ensemble's tree is open only to its run's credentials.
  for (const a of ensemble.auth) client.addAuthInfo(a.scheme, Buffer.from(a.credentials, 'utf8'));
  const node = zookeeperNode({ ...ensemble.clientOptions(), clock: systemClock, requestTimeoutMs: 5000 });
  try {
    await new Promise<void>((resolve) => {
      client.once('connected', () => resolve());
      client.connect();
    });
    const lock = new ZookeeperLock({ node, clock: systemClock });
    await measure('lockcheck', client, lock, 4, 0.5, -1);
    await measure('recipe', client, lock, 4, 0.5, -1);
    await lockcheckAgainstPeer(['lockcheck', 'recipe'], WORKERS, ROUNDS, (kind, workers, round) => measure(kind, client, lock, workers, seconds, round), [
      'lockcheck ZookeeperLock (pairs/s)',
      'recipe on one session (pairs/s)',
      'ratio lockcheck / recipe',
    ]);
    out();
    out(`(median of ${ROUNDS} interleaved runs of ${seconds} s each; ZooKeeper 3.8.0, 3 members on loopback, data on /dev/shm, no fsync)`);
  } finally {
    client.close();
    node.close();
    await ensemble.stop();
  }
}

await main();
