/**
 * consensusGroup.ts's start (etcd clusters, ZooKeeper ensembles): a stop that
 * comes while a group starts leaves no member running, no member nor gate
 * listening, no directory, and start() rejects StoppedWhileStarting; and
 * boot()'s retry on fresh ports keeps to its deadline.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { GroupMember, type MemberCommand } from '../conformance/env/consensusGroup.ts';
import { TestGroup } from './testGroups.ts';
import { EtcdCluster, stopAllEtcdClusters } from '../conformance/env/etcdCluster.ts';
import { EnvironmentError } from '../conformance/env/faketime.ts';
import { StoppedWhileStarting } from '../conformance/env/stoppedWhileStarting.ts';
import { stopAllZookeeperEnsembles, ZookeeperEnsemble } from '../conformance/env/zookeeperEnsemble.ts';
import { alive, descendantsNamed, listening, pollFor, settledOf } from './probes.ts';

// A failed test's groups go with it: the next test looks for this process's members.
afterEach(async () => {
  await Promise.all([stopAllEtcdClusters(), stopAllZookeeperEnsembles()]);
});

afterAll(async () => {
  await Promise.all([stopAllEtcdClusters(), stopAllZookeeperEnsembles()]);
});

/** Every loopback port named on process `pid`'s command line (its own and the gates' it dials). */
function portsOf(pid: number): number[] {
  const text = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  return [...new Set([...text.matchAll(/127\.0\.0\.1:(\d+)/g)].map((m) => Number(m[1])))];
}

describe('EtcdCluster: stopped while it starts', () => {
  it('a stop as its directory is made (before the cluster exists) is not missed: no member spawned, the directory removed, start() rejects StoppedWhileStarting', async () => {
    const parent = mkdtempSync(join('/dev/shm', 'lockcheck-etcdstop-'));
    try {
      const settled = settledOf(EtcdCluster.start({ members: 1, parentDir: parent }), (g) => g.stop());
      await pollFor(() => (readdirSync(parent).length > 0 ? true : null), 10_000, 'the cluster directory');
      await stopAllEtcdClusters();
      const error = await settled;
      expect([...descendantsNamed('etcd'), ...descendantsNamed('openssl')], 'processes left').toEqual([]);
      expect(error).toBeInstanceOf(StoppedWhileStarting);
      expect(readdirSync(parent)).toEqual([]);
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  }, 60_000);

  it('a stop while the members run and elect no leader yet kills them, closes their gates, removes the directory, and start() rejects StoppedWhileStarting', async () => {
    // No member campaigns before 10 s: the start is still waiting for a leader when the stop comes.
    const settled = settledOf(EtcdCluster.start({ members: 3, heartbeatMs: 1000, electionMs: 10_000, peerGates: true, startTimeoutMs: 60_000, parentDir: '/dev/shm' }), (g) => g.stop());
    const pids = await pollFor(() => {
      const found = descendantsNamed('etcd');
      return found.length === 3 ? found : null;
    }, 30_000, 'three etcd members');
    const ports = pids.flatMap(portsOf);
    const dataDir = readFileSync(`/proc/${pids[0]}/cmdline`, 'utf8').split('\0')[4]!;
    expect(ports.length, 'client, peer and gate ports').toBeGreaterThanOrEqual(9);
    await stopAllEtcdClusters();
    for (const pid of pids) expect(alive(pid), `etcd ${pid} after the stop`).toBe(false);
    const error = await settled;
    expect(error).toBeInstanceOf(StoppedWhileStarting);
    expect(descendantsNamed('etcd')).toEqual([]);
    for (const port of ports) expect(await listening(port), `port ${port}`).toBe(false);
    expect(existsSync(dataDir)).toBe(false);
  }, 90_000);
});

describe('ZookeeperEnsemble: stopped while it starts', () => {
  it('a stop while the member starts kills it, removes the directory, and start() rejects StoppedWhileStarting', async () => {
    const parent = mkdtempSync(join('/dev/shm', 'lockcheck-zkstop-'));
    try {
      const settled = settledOf(ZookeeperEnsemble.start({ members: 1, parentDir: parent, startTimeoutMs: 60_000 }), (g) => g.stop());
      const pid = await pollFor(() => descendantsNamed('java')[0] ?? null, 30_000, 'the ZooKeeper member');
      await stopAllZookeeperEnsembles();
      expect(alive(pid), `java ${pid} after the stop`).toBe(false);
      const error = await settled;
      expect(error).toBeInstanceOf(StoppedWhileStarting);
      expect(descendantsNamed('java')).toEqual([]);
      expect(readdirSync(parent)).toEqual([]);
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  }, 90_000);
});

/** A group whose ports always collide (two members given one client port): boot() must give up at its deadline. */
class CollidingGroup extends TestGroup {
  prepared = 0;
  readonly #startedAt = Date.now();

  private constructor(dir: string, startTimeoutMs: number) {
    super('CollidingGroup', 'group', dir, [new GroupMember(0, 'a'), new GroupMember(1, 'b')], startTimeoutMs, false);
  }

  static async start(startTimeoutMs: number): Promise<CollidingGroup> {
    const group = new CollidingGroup(await mkdtemp(join('/dev/shm', 'lockcheck-colliding-')), startTimeoutMs);
    await group.boot();
    return group;
  }

  protected async prepareStart(): Promise<void> {
    this.prepared++;
    // What ends the retries when boot() does not: well past its deadline.
    if (Date.now() - this.#startedAt > 5 * this.startTimeoutMs) throw new Error('still retrying at five times the start bound');
    const port = await this.claimedPort();
    for (const m of this.members) m.clientPort = port;
  }

}

describe('ConsensusGroup.boot: the retry on fresh ports keeps to the deadline', () => {
  it('ports that always collide fail the start at startTimeoutMs, naming why, spawning nothing', async () => {
    const startedAt = Date.now();
    const error: unknown = await CollidingGroup.start(400).then(
      () => null,
      (e: unknown) => e,
    );
    const took = Date.now() - startedAt;
    expect(error).toBeInstanceOf(EnvironmentError);
    expect(String((error as Error).message)).toMatch(/distinct ports within 400 ms/);
    // The bug retries to prepareStart's guard (five times the bound, then its own message); this only catches a hang.
    expect(took).toBeLessThan(10_000);
  }, 30_000);
});

/** The bound of every status look a SilentGroup was asked for, in order: what a wait's cut is judged by, not the wall time a loaded machine took. */
const silentLooks: number[] = [];

/** A group of `sleep` processes whose status looks each take their whole bound: a wait that keeps to its deadline cuts the last look short. */
class SilentGroup extends TestGroup {
  /** While true, member 0 leads (each look still takes its whole bound). */
  leads = false;

  private constructor(dir: string, startTimeoutMs: number) {
    super('SilentGroup', 'group', dir, [new GroupMember(0, 'a')], startTimeoutMs, false);
  }

  static async start(startTimeoutMs: number, leads: boolean): Promise<SilentGroup> {
    const group = new SilentGroup(await mkdtemp(join('/dev/shm', 'lockcheck-silent-')), startTimeoutMs);
    group.leads = leads;
    await group.boot();
    return group;
  }

  protected async prepareStart(): Promise<void> {
    this.members[0]!.clientPort = await this.claimedPort();
  }
  protected override command(): MemberCommand {
    return { file: 'sleep', args: ['600'], dropEnv: /^LD_PRELOAD$/ };
  }
  protected override memberStatus(m: GroupMember, timeoutMs: number): Promise<{ readonly member: number }> {
    silentLooks.push(timeoutMs);
    return new Promise((resolve) => setTimeout(() => resolve({ member: m.index }), timeoutMs));
  }
  protected override leaderOf(): number | null {
    return this.leads ? 0 : null;
  }
}

describe('ConsensusGroup: waits keep to their deadline when the members answer slowly', () => {
  it('boot(): the wait for a leader ends at startTimeoutMs, not a whole status look (500 ms) past it', async () => {
    silentLooks.length = 0;
    const startedAt = Date.now();
    const error: unknown = await SilentGroup.start(100, false).then(
      async (g) => {
        await g.stop();
        return null;
      },
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(EnvironmentError);
    // Each look is cut to what is left of the 100 ms (an uncut one asks for 500); the wall bound only catches a hang.
    expect(silentLooks.length).toBeGreaterThan(0);
    for (const ms of silentLooks) expect(ms).toBeLessThanOrEqual(100);
    expect(Date.now() - startedAt).toBeLessThan(10_000);
    expect(descendantsNamed('sleep')).toEqual([]);
  }, 30_000);

  it('leader(timeoutMs): ends at timeoutMs, not a whole status look past it', async () => {
    const group = await SilentGroup.start(5000, true);
    try {
      group.leads = false;
      silentLooks.length = 0;
      const startedAt = Date.now();
      await expect(group.leader(100)).rejects.toThrow(/no a leader within 100 ms/);
      expect(silentLooks.length).toBeGreaterThan(0);
      for (const ms of silentLooks) expect(ms).toBeLessThanOrEqual(100);
      expect(Date.now() - startedAt).toBeLessThan(10_000);
    } finally {
      await group.stop();
    }
  }, 30_000);
});
