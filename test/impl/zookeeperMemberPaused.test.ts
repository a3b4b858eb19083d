import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fourLetterWord, ZookeeperEnsemble } from '../../conformance/env/zookeeperEnsemble.ts';
import { systemClock } from '../../impl/clock.ts';
import { ZookeeperLock, zookeeperFencedStore, zookeeperNode } from '../../impl/zookeeper/index.ts';
import { allStopped, until } from './blackhole.ts';
import { ManualClock } from './servers.ts';
import type { Lease } from '../../impl/lease.ts';

/**
 * One member of three paused (SIGSTOP: it takes TCP connections and answers
 * nothing) while the other two keep the quorum: the lock and the store go on
 * serving. Each lease opens a session of its own, and node-zookeeper-client
 * picks its member at random from the connect string and leaves it only when
 * its socket closes, which a paused member's never does: a third of all
 * acquires timed out, for as long as the member stayed paused. A member whose
 * connect or call failed as an outage is now tried last, for a while, when
 * another has not failed; and a lease's session already on the member when
 * it pauses is moved off it by the first call that meets the silence.
 */
let ensemble: ZookeeperEnsemble;
beforeAll(async () => {
  ensemble = await ZookeeperEnsemble.start({ members: 3, parentDir: '/dev/shm' });
}, 120_000);
afterAll(async () => {
  for (let i = 0; i < 3; i++) if (ensemble?.paused(i)) ensemble.resume(i);
  await ensemble?.stop();
});

describe('ZooKeeper, one member of three paused', () => {
  it('sequential acquires, releases and fenced writes keep succeeding once a call has met the paused member', async () => {
    // The client's clock stands still, so the member that failed stays passed over for the whole run (PASS_OVER_MS
    // never ends on it) and the bound below counts no time: it holds however slow a loaded machine makes the rounds.
    // Calls are still bounded in real time: 6 s here, so that a loaded machine's slow reply (a JVM's pause, a session
    // made on a busy machine) is not read as the outage; the two calls that meet the paused member wait it out.
    const clock = new ManualClock();
    const node = zookeeperNode({ ...ensemble.clientOptions(), clock, requestTimeoutMs: 6000 });
    const root = `/paused${process.pid}`;
    const lock = new ZookeeperLock({ node, clock, root });
    const store = zookeeperFencedStore(node, 'strict', { root });
    const failures: string[] = [];
    const round = async (name: string): Promise<void> => {
      const r = await lock.acquire(name, { ttlMs: 5000 });
      if (r.kind !== 'granted') {
        failures.push(`acquire ${name}: ${JSON.stringify(r)}`);
        return;
      }
      await store.write(name, r.lease.token, 'v').then(
        (w) => (w.kind === 'accepted' ? undefined : failures.push(`write ${name}: ${w.kind}`)),
        (e: unknown) => failures.push(`write ${name}: ${String(e)}`),
      );
      const released = await lock.release(r.lease).catch((e: unknown) => `release threw ${String(e)}`);
      if (released !== true) failures.push(`release ${name}: ${String(released)}`);
    };
    let paused = -1;
    try {
      // Every member serving first (the JVMs warm, the store's session open), then one is paused: not the leader, so
      // the quorum keeps its leader.
      // A cold JVM on a loaded machine may answer a first call past its 6 s bound (a release read false, as it should
      // be then): the warm-up goes on until two rounds in a row succeed, at most eight, and only then is a member paused.
      let clean = 0;
      for (let i = 0; i < 8 && clean < 2; i++) {
        const before = failures.length;
        await round(`warm-${i}`);
        clean = failures.length === before ? clean + 1 : 0;
      }
      expect(clean, failures.join('; ')).toBe(2);
      failures.length = 0;
      const leader = await ensemble.leader(10_000);
      paused = (leader + 1) % 3;
      ensemble.pause(paused);
      await until('the member stopped', () => allStopped(ensemble.pid(paused)));
      for (let i = 0; i < 45; i++) await round(`r-${i}`);
      // The first lease session that lands on the paused member fails, and so does the store's session if it is
      // there; from then on every new session starts on another member. Before, a third of the 45 acquires (each a
      // session of its own, on a member picked at random) failed: about 15, and 3 or fewer in fewer than one run in
      // ten thousand. One more than those two is allowed for a reply the loaded machine kept past the bound.
      expect(failures.length, failures.join('\n')).toBeLessThanOrEqual(3);
    } finally {
      if (paused >= 0 && ensemble.paused(paused)) ensemble.resume(paused);
      node.close();
    }
  }, 180_000);

  it("a lease's session on a member that is then paused moves to another member: the extend that met the silence is no-quorum, the next one is extended on the same session", async () => {
    const node = zookeeperNode({ ...ensemble.clientOptions(), clock: systemClock, requestTimeoutMs: 2500 });
    const root = `/moved${process.pid}`;
    const lock = new ZookeeperLock({ node, clock: systemClock, root });
    /** The client connections each member has now (mntr; its own connection counts alike every time). */
    const connections = (): Promise<number[]> =>
      Promise.all(
        ensemble.endpoints.map(async (endpoint) => {
          const text = await fourLetterWord(Number(endpoint.split(':')[1]), 'mntr', 5000);
          return Number(/^zk_num_alive_connections\s+(\d+)$/m.exec(text ?? '')?.[1] ?? Number.NaN);
        }),
      );
    let paused = -1;
    try {
      // A lease whose session is on a member that is not the leader (pausing the leader would start an election):
      // the member whose connections grew by the acquire's session, and only it.
      const leader = await ensemble.leader(10_000);
      let lease: Lease | undefined;
      for (let i = 0; i < 30 && lease === undefined; i++) {
        const before = await connections();
        const r = await lock.acquire(`m-${i}`, { ttlMs: 10_000 });
        if (r.kind !== 'granted') throw new Error(`expected a grant, got ${JSON.stringify(r)}`);
        const grown = (await connections()).map((n, j) => n - before[j]!);
        const on = grown.findIndex((d) => d === 1);
        if (on !== leader && on >= 0 && grown.filter((d) => d !== 0).length === 1) {
          lease = r.lease;
          paused = on;
        } else await lock.release(r.lease);
      }
      if (lease === undefined) throw new Error('no lease session landed on a follower in 30 acquires');
      ensemble.pause(paused);
      await until('the member stopped', () => allStopped(ensemble.pid(paused)));
      // The silence: the extend times out on the paused member, and the session is cut loose from it.
      expect(await lock.extend(lease, 10_000)).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
      // The library reconnects the session to another member, which renews it: the lease goes on, its contender kept.
      // A loaded machine may take longer than one call's bound to move the session: one more try, well inside the
      // session's 10 s (a session that never moves fails both).
      let moved = await lock.extend(lease, 10_000);
      if (moved.kind === 'not-extended' && moved.reason === 'no-quorum') moved = await lock.extend(lease, 10_000);
      expect(moved).toMatchObject({ kind: 'extended' });
      expect(lease.signal.aborted).toBe(false);
      expect(await lock.release(lease)).toBe(true);
    } finally {
      if (paused >= 0 && ensemble.paused(paused)) ensemble.resume(paused);
      node.close();
    }
  }, 120_000);
});
