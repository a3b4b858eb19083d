import { expect } from 'vitest';
import { checkHistory } from '../conformance/history/check.ts';
import type { History } from '../conformance/history/event.ts';
import type { StressOptions } from '../conformance/stress/runner.ts';
import { runStress } from '../conformance/stress/runner.ts';

/**
 * lockcheck stress runs with the targeted nemesis, judged: it pauses a client
 * that holds the lock between its read and its write until its lease has
 * expired and another client has written the register (it records that it
 * saw that write before resuming it). One strike (maxFaults), bounded by
 * `seconds`.
 */
export const SEED = Number(process.env['LOCKCHECK_SEED'] ?? 20161010);

/** Three clients on one resource for up to 30 s, one pause-holder strike, the store unfenced, ttls `ttlMinMs`-`ttlMaxMs`. */
export const pauseHolder = (backend: StressOptions['backend'], ttlMinMs: number, ttlMaxMs: number): StressOptions => ({
  backend,
  clients: 3,
  seconds: 30,
  nemesis: ['pause-holder'],
  seed: SEED,
  store: 'unfenced',
  resources: 1,
  ttlMinMs,
  ttlMaxMs,
  maxFaults: 1,
});

/** A stress run and its history judged on its store policy; `strikes` are the nemesis's completed client pauses, `replay` the seed to say. */
export async function judgedStress(o: StressOptions) {
  const result = await runStress(o);
  const history: History = [{ type: 'meta', store: o.store }, ...result.history];
  const report = checkHistory(history, { storePolicy: o.store });
  const strikes = result.history.filter((e) => e.process === 'nemesis' && e.type === 'ok' && 'fault' in e && e.fault === 'pause-client');
  return { result, report, strikes, replay: `LOCKCHECK_SEED=${o.seed}` };
}

type Judged = Awaited<ReturnType<typeof judgedStress>>;

/** No client error, and exactly one strike, which resumed the holder only after another client's accepted write of the same register. */
export function expectOneStrikeAfterAnotherWrite({ result, strikes, replay }: Judged): void {
  expect(result.clientErrors, replay).toEqual([]);
  expect(strikes.length, replay).toBe(1);
  expect(strikes[0]!.type === 'ok' && 'detail' in strikes[0]! ? strikes[0].detail : '', replay).toMatch(/another client wrote/);
}

/** Unfenced: the paused holder's write lost the other client's update (STORE-1). */
export function expectUpdateLost({ report, replay }: Judged): void {
  expect(report.counts.lostUpdates, replay).toBeGreaterThan(0);
  expect(report.verdict, replay).toBe('violation');
}

/** Fenced: nothing stale accepted, the stale write rejected, no update lost. */
export function expectStaleWriteRejected({ report, replay }: Judged): void {
  expect(report.counts.staleWritesAccepted, replay).toBe(0);
  expect(report.counts.writesRejected, replay).toBeGreaterThan(0);
  expect(report.counts.lostUpdates, replay).toBe(0);
}
