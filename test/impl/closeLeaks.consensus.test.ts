/**
 * The etcd and ZooKeeper locks after their error paths (a cluster that is
 * not there, an acquire that times out on a paused member, a member killed
 * while a call is out, close() while an acquire is out): once the client is
 * closed, nothing of it is left in this process (no timer, no socket),
 * counted by process.getActiveResourcesInfo() against the count before the
 * client was made.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdCluster } from '../../conformance/env/etcdCluster.ts';
import { freeLoopbackPort } from '../../conformance/env/processes.ts';
import { ZookeeperEnsemble } from '../../conformance/env/zookeeperEnsemble.ts';
import { systemClock } from '../../impl/clock.ts';
import { EtcdLock, etcd3Node, etcdClient } from '../../impl/etcd/index.ts';
import { ZookeeperLock, zookeeperNode } from '../../impl/zookeeper/index.ts';
import { activeResources, backToBaseline, outcome, rebased, within } from './resources.ts';

let etcd: EtcdCluster;
let zk: ZookeeperEnsemble;
beforeAll(async () => {
  [etcd, zk] = await Promise.all([EtcdCluster.start({ members: 1, parentDir: '/dev/shm' }), ZookeeperEnsemble.start({ members: 1, parentDir: '/dev/shm' })]);
}, 120_000);
afterAll(async () => {
  await Promise.all([etcd?.stop(), zk?.stop()]);
});

interface Client {
  readonly lock: { acquire(resource: string, options: { ttlMs: number }): Promise<{ readonly kind: string }> };
  close(): void;
}

const clients: ReadonlyArray<readonly [string, (where: 'cluster' | 'nowhere', nowhere: number, requestTimeoutMs: number) => Client]> = [
  [
    'EtcdLock',
    (where, nowhere, requestTimeoutMs) => {
      const options = etcd.clientOptions(where === 'cluster' ? etcd.endpoints : [`https://127.0.0.1:${nowhere}`]);
      const client = etcdClient({ ...options, dialTimeoutMs: requestTimeoutMs });
      const lock = new EtcdLock({ node: etcd3Node(client, { clock: systemClock, requestTimeoutMs }), clock: systemClock, prefix: `leaks-${process.pid}/` });
      return { lock, close: () => client.close() };
    },
  ],
  [
    'ZookeeperLock',
    (where, nowhere, requestTimeoutMs) => {
      const options = zk.clientOptions(where === 'cluster' ? zk.connectString : `127.0.0.1:${nowhere}`);
      const node = zookeeperNode({ ...options, clock: systemClock, requestTimeoutMs });
      return { lock: new ZookeeperLock({ node, clock: systemClock }), close: () => node.close() };
    },
  ],
];

const group = (name: string): EtcdCluster | ZookeeperEnsemble => (name === 'EtcdLock' ? etcd : zk);

describe.each(clients)('%s: nothing left after close, whatever the acquire met', (name, make) => {
  it('a cluster that is not there (connection refused)', async () => {
    const nowhere = await freeLoopbackPort();
    const baseline = activeResources();
    const c = make('nowhere', nowhere, 1000);
    expect(await within(outcome(c.lock.acquire('r-refused', { ttlMs: 30_000 })), 10_000, 'the acquire')).not.toBe('granted');
    c.close();
    await backToBaseline(baseline, 'after a refused connection');
  }, 30_000);

  it('an acquire that times out on a paused member', async () => {
    const baseline = activeResources();
    // 5 s bounds: the warm acquire on the live member needs its answer whatever a loaded machine adds.
    const c = make('cluster', 0, 5000);
    expect(await outcome(c.lock.acquire('r-warm', { ttlMs: 30_000 }))).toBe('granted');
    group(name).pause(0);
    try {
      expect(await within(outcome(c.lock.acquire('r-timeout', { ttlMs: 30_000 })), 10_000, 'the acquire')).not.toBe('granted');
    } finally {
      group(name).resume(0);
    }
    c.close();
    // Shorter than the client's 5 s bounds: a timer of it left running is still there when the wait ends.
    await backToBaseline(baseline, 'after a timed-out acquire', 3000);
  }, 30_000);

  it('close while an acquire is out on a paused member', async () => {
    const baseline = activeResources();
    const c = make('cluster', 0, 10_000);
    expect(await outcome(c.lock.acquire('r-first', { ttlMs: 30_000 }))).toBe('granted');
    group(name).pause(0);
    try {
      const acquiring = outcome(c.lock.acquire('r-closed', { ttlMs: 30_000 }));
      c.close();
      expect(await within(acquiring, 5000, 'the acquire after close')).not.toBe('granted');
    } finally {
      group(name).resume(0);
    }
    await backToBaseline(baseline, 'after close with an acquire out');
  }, 30_000);

  it('a member killed while an acquire is out', async () => {
    const baseline = activeResources();
    const c = make('cluster', 0, 3000);
    expect(await outcome(c.lock.acquire('r-before', { ttlMs: 30_000 }))).toBe('granted');
    group(name).pause(0);
    const acquiring = outcome(c.lock.acquire('r-killed', { ttlMs: 30_000 }));
    await group(name).kill(0);
    expect(await within(acquiring, 10_000, 'the acquire after the kill')).not.toBe('granted');
    c.close();
    const before = activeResources();
    await group(name).restart(0);
    await backToBaseline(rebased(baseline, before), 'after a member killed mid-call', 2000);
  }, 60_000);
});
