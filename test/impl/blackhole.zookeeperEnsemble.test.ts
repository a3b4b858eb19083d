import zookeeper from 'node-zookeeper-client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ZookeeperEnsemble } from '../../conformance/env/zookeeperEnsemble.ts';
import { systemClock } from '../../impl/clock.ts';
import { TimeoutError, UnavailableError } from '../../impl/errors.ts';
import { zookeeperFencedStore, zookeeperNode } from '../../impl/zookeeper/index.ts';
import { acceptedBeforeTheFault, allStopped, backToBaseline, steadyResources, until } from './blackhole.ts';

/**
 * The ZooKeeper fenced store on a 3-member ensemble whose member it talks to
 * is paused (SIGSTOP): its calls time out, and the store must not stay on
 * that member while the other two serve. node-zookeeper-client leaves a
 * member only when its socket closes, which a paused member's never does.
 */
const TIMEOUT_MS = 500;

let ensemble: ZookeeperEnsemble;
beforeAll(async () => {
  ensemble = await ZookeeperEnsemble.start({ members: 3, parentDir: '/dev/shm' });
}, 120_000);
afterAll(async () => {
  for (let i = 0; i < 3; i++) if (ensemble?.paused(i)) ensemble.resume(i);
  await ensemble?.stop();
});

describe('ZooKeeper store: the member it talks to paused, the others serving', () => {
  it('a call that timed out gives that session up: a later call is served by another member', async () => {
    const baseline = await steadyResources();
    const made: zookeeper.Client[] = [];
    const create = zookeeper.createClient.bind(zookeeper);
    const spy = vi.spyOn(zookeeper, 'createClient').mockImplementation((...args: Parameters<typeof zookeeper.createClient>) => {
      const c = create(...args);
      made.push(c);
      return c;
    });
    const options = ensemble.clientOptions();
    const node = zookeeperNode({ ...options, clock: systemClock, requestTimeoutMs: TIMEOUT_MS });
    const store = zookeeperFencedStore(node, 'strict', { root: `/failover${process.pid}` });
    let member = -1;
    try {
      const key = await acceptedBeforeTheFault('store write', 'c', (k) => store.write(k, 1n, 'v'));
      // The member the store's session is on (the last client made: a setup call that timed out gave its own up): its
      // socket's remote port among the connect string's.
      const made0 = made.length;
      const port = (made[made0 - 1] as unknown as { connectionManager: { socket: { remotePort: number } } }).connectionManager.socket.remotePort;
      member = options.connectString.split(',').map((h) => Number(h.split(':')[1])).indexOf(port);
      expect(member).toBeGreaterThanOrEqual(0);
      ensemble.pause(member);
      await until('the member stopped', () => allStopped(ensemble.pid(member)));
      // Each call bounded; the first ones time out on the paused member (and, were it the leader, while the others elect
      // one: seconds, more on a loaded machine). Within 60 s one is served. Before, none was while the member stayed paused.
      let token = 2n;
      let served = false;
      const deadline = performance.now() + 60_000;
      while (!served && performance.now() < deadline) {
        try {
          expect(await store.write(key, token, 'w')).toEqual({ kind: 'accepted' });
          served = true;
        } catch (error) {
          expect(error instanceof TimeoutError || error instanceof UnavailableError, String(error)).toBe(true);
          token++;
        }
      }
      expect(served, 'a store write served by another member while this one is paused').toBe(true);
      expect(made.length).toBeGreaterThan(made0);
      node.close();
    } finally {
      spy.mockRestore();
      if (member >= 0 && ensemble.paused(member)) ensemble.resume(member);
      node.close();
    }
    await backToBaseline(baseline, 10_000);
  });
});
