import { describe, expect, it } from 'vitest';
import { runFailover } from '../conformance/failover.ts';

/**
 * redis-replicated on real servers (spec 7.9): a primary, an asynchronous
 * replica and a Sentinel. One schedule, the one the exploration finds
 * (crash-restart, MUTEX-1 in four steps): the grant does not reach the
 * replica, the primary fails, Sentinel promotes the replica, a second client
 * acquires. Without WAIT both hold the lock with the same token; with WAIT 1
 * the first grant never counted (the replica did not acknowledge it).
 * No timing decides anything: replication is held back by pausing the
 * replica and dropping its link, and every wait is bounded.
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
