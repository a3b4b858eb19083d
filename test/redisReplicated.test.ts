import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeClockFile } from '../conformance/env/faketime.ts';
import { RedisReplicated } from '../conformance/env/redisReplicated.ts';
import { runFailover } from '../conformance/failover.ts';
import { checkHistory } from '../conformance/history/check.ts';
import type { StressOptions } from '../conformance/stress/runner.ts';
import { runStress } from '../conformance/stress/runner.ts';
import { runLockstep } from '../conformance/index.ts';
import { ReplicatedServers, realReplicatedBackend } from '../conformance/env/replicatedBackend.ts';
import type { Command } from '../model/index.ts';
import { designs } from '../model/index.ts';

/**
 * redis-replicated on real servers (spec 7.9): a primary, an asynchronous
 * replica and a Sentinel. One schedule, the one the exploration finds
 * (crash-restart, MUTEX-1 in four steps): the grant does not reach the
 * replica, the primary fails, Sentinel promotes the replica, a second client
 * acquires. Without WAIT both hold the lock with the same token; with WAIT 1
 * the first grant never counted (the replica did not acknowledge it).
 * No timing decides anything: replication is held back by dropping the
 * replica's link and giving it a wrong masterauth, and every wait is bounded.
 */
describe('redis-replicated: failover on real servers (spec 7.9)', () => {
  it('without WAIT: the grant had not reached the replica, and the promoted replica grants it again (MUTEX-1, FENCE-1)', async () => {
    const run = await runFailover({ wait: false, holdReplication: true });
    expect(run.first.kind).toBe('granted');
    expect(run.second.kind).toBe('granted');
    expect(run.doubleGrant).toBe(true);
    // The counter went back with the failover: the same token twice.
    const tokens = [run.first, run.second].map((r) => (r.kind === 'granted' ? r.lease.token : null));
    expect(tokens).toEqual([1n, 1n]);
  }, 60_000);

  it('with WAIT 1, the same schedule: the unacknowledged grant is not returned, so no double grant', async () => {
    const run = await runFailover({ wait: true, holdReplication: true });
    expect(run.first).toEqual({ kind: 'denied', reason: 'no-quorum' });
    // The price: the promoted primary has no replica to acknowledge until the old one rejoins.
    expect(run.beforeRejoin).toEqual({ kind: 'denied', reason: 'no-quorum' });
    expect(run.second).toMatchObject({ kind: 'granted' });
    expect(run.doubleGrant).toBe(false);
  }, 60_000);

  it('with WAIT 1 and replication running: the grant survives the failover and the second client is denied', async () => {
    const run = await runFailover({ wait: true, holdReplication: false });
    expect(run.first.kind).toBe('granted');
    expect(run.second).toEqual({ kind: 'denied', reason: 'held' });
    expect(run.doubleGrant).toBe(false);
  }, 60_000);
});

/** The crash-restart counterexample as a lockstep schedule: the crash is the failover. */
const failover: Command[] = [
  { kind: 'acquire', client: 0, resource: 'r', ttlMs: 60 },
  { kind: 'write', client: 0, resource: 'r', value: 'a' },
  { kind: 'crash', node: 0 },
  { kind: 'restart', node: 0 },
  { kind: 'acquire', client: 1, resource: 'r', ttlMs: 60 },
  { kind: 'write', client: 1, resource: 'r', value: 'b' },
  { kind: 'advance', ms: 70 },
  { kind: 'acquire', client: 0, resource: 'r', ttlMs: 60 },
];

describe('redis-replicated as a conformance backend: the runner follows the model step by step (spec 7.9)', () => {
  let servers: ReplicatedServers;
  beforeAll(async () => {
    servers = await ReplicatedServers.start();
  }, 60_000);
  afterAll(async () => {
    await servers?.stop();
  });

  it('takes the timing faults: a black-holed primary ends the acquire at the request timeout with nothing granted, a late reply past the ttl grants nothing, as the model has it', async () => {
    const schedule: Command[] = [
      { kind: 'node-delay', node: 0, ms: 'never' },
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 30 },
      { kind: 'node-delay', node: 0, ms: 0 },
      { kind: 'acquire', client: 1, resource: 'r', ttlMs: 30, latencyMs: 40 },
      { kind: 'advance', ms: 40 },
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 30 },
    ];
    const report = await runLockstep(realReplicatedBackend(servers, designs.redisReplicated(), 'unfenced'), schedule, { clients: 2, tokenBase: 0n, requestTimeoutMs: 10 });
    expect(report.verdict).toEqual({ kind: 'pass' });
    expect(report.steps.map((s) => s.actual.kind)).toEqual(['ok', 'denied', 'ok', report.steps[3]!.actual.kind, 'ok', 'granted']);
    expect(report.steps[3]!.actual.kind).not.toBe('granted');
  }, 60_000);

  it('without WAIT: the failover loses the grant and its counter, as the model has it (MUTEX-1, FENCE-1, DUR-1)', async () => {
    const report = await runLockstep(realReplicatedBackend(servers, designs.redisReplicated(), 'unfenced'), failover, { clients: 2, tokenBase: 0n, continueAfterViolation: true });
    expect(report.verdict).toEqual({ kind: 'pass' });
    expect(report.steps[4]!.actual).toMatchObject({ kind: 'granted', token: 1n });
    expect([...new Set(report.findings.flatMap((f) => f.violations.map((v) => v.property)))].sort()).toEqual(['DUR-1', 'FENCE-1', 'MUTEX-1']);
  }, 60_000);

  it('with WAIT 1: the promoted replica knew the grant; the second client is denied until the lease is over', async () => {
    const report = await runLockstep(realReplicatedBackend(servers, designs.redisReplicated({ wait: true }), 'unfenced'), failover, { clients: 2, tokenBase: 0n, continueAfterViolation: true });
    expect(report.verdict).toEqual({ kind: 'pass' });
    expect(report.steps[4]!.actual).toEqual({ kind: 'denied', reason: 'held' });
    expect(report.findings).toEqual([]);
  }, 60_000);
});

/**
 * Sentinel promotes only a replica whose link has been down less than ten
 * times down-after-milliseconds (plus the primary's down time). A replica
 * held for a whole run has its link down that long: with down-after 60 s
 * (the failover is asked for, SENTINEL FAILOVER) the limit is 600 s. Both
 * data servers run on a faked wall clock here, so "held for five minutes" is
 * a clock step, not a wait; Sentinel runs on the real clock.
 */
describe('redis-replicated: a long-held replica, and a failover Sentinel refuses (spec 7.9)', () => {
  const T0 = Date.UTC(2031, 0, 1);

  it('a replica whose link has been held down 300 s (15 times the 20 s limit down-after 2 s gave) is still promoted', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lockcheck-held-'));
    const clock = new FakeClockFile(dir, 'clock');
    clock.set(T0);
    const cluster = await RedisReplicated.start({ clockFile: clock, timeoutMs: 30_000 });
    try {
      await cluster.holdReplication();
      clock.set(T0 + 300_000);
      // Sentinel has seen it (its INFO of the replica): the link down for 300 s.
      await until(async () => Number((await cluster.sentinelViewOfReplica())?.['master-link-down-time']) >= 300_000);
      await cluster.failover();
      expect(await cluster.primaryPort()).toBe(cluster.replica.port);
    } finally {
      await cluster.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('a failover Sentinel refuses (the link held down 700 s, past the limit) fails that run only, as an environment error; the next run gets a fresh topology', async () => {
    const servers = await ReplicatedServers.start({ timeoutMs: 3_000 });
    try {
      const backend = realReplicatedBackend(servers, designs.redisReplicated(), 'unfenced');
      const refused: Command[] = [
        { kind: 'acquire', client: 0, resource: 'r', ttlMs: 60 },
        { kind: 'clock-step', node: 0, deltaMs: 700_000 },
        { kind: 'crash', node: 0 },
        { kind: 'restart', node: 0 },
        { kind: 'acquire', client: 1, resource: 'r', ttlMs: 60 },
      ];
      const report = await runLockstep(backend, refused, { clients: 2, tokenBase: 0n, continueAfterViolation: true });
      expect(report.verdict).toMatchObject({ kind: 'inconclusive', cause: 'environment', reason: expect.stringMatching(/^environment error, run not judged: .*Sentinel to accept the failover/) });
      expect(report.warnings).toEqual([(report.verdict as { reason: string }).reason]);
      expect(report.steps.map((s) => s.command.kind)).toEqual(['acquire', 'clock-step']);
      const broken = servers.cluster;
      const next = await runLockstep(backend, failover, { clients: 2, tokenBase: 0n, continueAfterViolation: true });
      expect(next.verdict).toEqual({ kind: 'pass' });
      expect(next.steps[4]!.actual).toMatchObject({ kind: 'granted', token: 1n });
      expect(servers.cluster).not.toBe(broken);
    } finally {
      await servers.stop();
    }
  }, 90_000);
});

/** Polls `check` every 50 ms until it holds; fails after 15 s. */
async function until(check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error('condition not reached within 15 s');
    await sleep(50);
  }
}

/**
 * The concurrent oracle on redis-replicated: real client processes follow
 * Sentinel to the primary while the nemesis holds replication back, waits for
 * a client granted since (neither its key nor its token can be on the
 * replica) at its gate, kills the primary and has Sentinel promote the
 * replica, and lets the holder write only once another client was granted
 * the same resource and wrote it. What that makes certain, however long the
 * failover takes on a loaded machine: the other client's token is not above
 * the holder's (FENCE-1), and the holder's write loses the other's update
 * (STORE-1). Whether the two holds overlap (MUTEX-1) depends on the failover
 * being shorter than the lease, so it is not asserted.
 */
describe('lockcheck stress on redis-replicated: the failover nemesis (spec 7.9)', () => {
  it('a holder granted while replication was held loses its grant and its token to the failover: the next holder repeats its token (FENCE-1) and the holder loses its update (STORE-1)', async () => {
    const seed = Number(process.env['LOCKCHECK_SEED'] ?? 20161010);
    const o: StressOptions = { backend: 'redis-replicated', clients: 3, seconds: 60, nemesis: ['failover-holder'], seed, store: 'unfenced', resources: 1, ttlMinMs: 1_000, ttlMaxMs: 2_000, maxFaults: 1 };
    const result = await runStress(o);
    const replay = `LOCKCHECK_SEED=${seed}`;
    const report = checkHistory([{ type: 'meta', store: 'unfenced' }, ...result.history], { storePolicy: 'unfenced' });
    const failovers = result.history.filter((e) => e.process === 'nemesis' && 'fault' in e && e.fault === 'failover');
    expect(result.clientErrors, replay).toEqual([]);
    expect(failovers.map((e) => e.type), replay).toEqual(['invoke', 'ok']);
    expect('detail' in failovers[0]! ? failovers[0].detail : '', replay).toMatch(/granted while replication was held/);
    expect('detail' in failovers[1]! ? failovers[1].detail : '', replay).toMatch(/another client acquired \S+ .*, and wrote it$/);
    expect(report.counts.tokenOrderViolations, replay).toBeGreaterThan(0);
    expect(report.counts.lostUpdates, replay).toBeGreaterThan(0);
    expect(report.verdict, replay).toBe('violation');
  }, 120_000);
});
