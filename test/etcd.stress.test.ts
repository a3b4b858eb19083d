import { describe, expect, it } from 'vitest';
import { expectOneStrikeAfterAnotherWrite, expectStaleWriteRejected, expectUpdateLost, judgedStress, pauseHolder } from './pauseHolderStress.ts';

/**
 * Jepsen's etcd 3.4.3 lock finding with real client processes on a real
 * 3-member etcd cluster: the targeted nemesis pauses a client that holds the
 * lock between its read and its write of the register until its lease has
 * expired and another client has written; then resumes it (one strike).
 * Unfenced, its write loses that update; with the revision fence the store
 * rejects it.
 */
const base = pauseHolder('etcd', 1000, 1000);

describe('lockcheck stress --backend etcd (real etcd, real client processes)', () => {
  it('unfenced: a holder paused past its lease between read and write loses the next holder\'s update (STORE-1)', async () => {
    const run = await judgedStress(base);
    expectOneStrikeAfterAnotherWrite(run);
    expectUpdateLost(run);
  }, 120_000);

  it('strict (the create revision checked by the store): the same pause loses nothing, the stale write is rejected', async () => {
    const run = await judgedStress({ ...base, store: 'strict' });
    expectOneStrikeAfterAnotherWrite(run);
    expectStaleWriteRejected(run);
    expect(run.report.verdict, run.replay).toBe('safe');
  }, 120_000);
});
