import { describe, expect, it } from 'vitest';
import { checkHistory } from '../conformance/history/check.ts';
import type { History } from '../conformance/history/event.ts';
import type { StressOptions } from '../conformance/stress/runner.ts';
import { runStress } from '../conformance/stress/runner.ts';

/**
 * Jepsen's etcd 3.4.3 lock finding with real client processes on a real
 * 3-member etcd cluster: the targeted nemesis pauses a client that holds the
 * lock between its read and its write of the register until its lease has
 * expired and another client has written; then resumes it (one strike).
 * Unfenced, its write loses that update; with the revision fence the store
 * rejects it.
 */
const SEED = Number(process.env['LOCKCHECK_SEED'] ?? 20161010);

const base: StressOptions = {
  backend: 'etcd',
  clients: 3,
  seconds: 30,
  nemesis: ['pause-holder'],
  seed: SEED,
  store: 'unfenced',
  resources: 1,
  ttlMinMs: 1000,
  ttlMaxMs: 1000,
  maxFaults: 1,
};

async function run(o: StressOptions) {
  const result = await runStress(o);
  const history: History = [{ type: 'meta', store: o.store }, ...result.history];
  const report = checkHistory(history, { storePolicy: o.store });
  const strikes = result.history.filter((e) => e.process === 'nemesis' && e.type === 'ok' && 'fault' in e && e.fault === 'pause-client');
  return { result, report, strikes, replay: `LOCKCHECK_SEED=${o.seed}` };
}

describe('lockcheck stress --backend etcd (real etcd, real client processes)', () => {
  it('unfenced: a holder paused past its lease between read and write loses the next holder\'s update (STORE-1)', async () => {
    const { result, report, strikes, replay } = await run(base);
    expect(result.clientErrors, replay).toEqual([]);
    expect(strikes.length, replay).toBe(1);
    expect(strikes[0]!.type === 'ok' && 'detail' in strikes[0]! ? strikes[0].detail : '', replay).toMatch(/another client wrote/);
    expect(report.counts.lostUpdates, replay).toBeGreaterThan(0);
    expect(report.verdict, replay).toBe('violation');
  }, 120_000);

  it('strict (the create revision checked by the store): the same pause loses nothing, the stale write is rejected', async () => {
    const { result, report, strikes, replay } = await run({ ...base, store: 'strict' });
    expect(result.clientErrors, replay).toEqual([]);
    expect(strikes.length, replay).toBe(1);
    expect(strikes[0]!.type === 'ok' && 'detail' in strikes[0]! ? strikes[0].detail : '', replay).toMatch(/another client wrote/);
    expect(report.counts.staleWritesAccepted, replay).toBe(0);
    expect(report.counts.writesRejected, replay).toBeGreaterThan(0);
    expect(report.counts.lostUpdates, replay).toBe(0);
    expect(report.verdict, replay).toBe('safe');
  }, 120_000);
});
