import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runFailover } from '../conformance/failover.ts';
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

describe('redis-replicated as a conformance backend: the runner follows the model step by step (spec 7.9)', () => {
  let servers: ReplicatedServers;
  beforeAll(async () => {
    servers = await ReplicatedServers.start();
  }, 60_000);
  afterAll(async () => {
    await servers?.stop();
  });
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
