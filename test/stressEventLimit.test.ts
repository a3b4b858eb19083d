import { describe, expect, it } from 'vitest';
import { checkStressOptions, MAX_STRESS_EVENTS, runStress } from '../conformance/stress/runner.ts';
import { SEED } from './pauseHolderStress.ts';

/**
 * A stress run holds every event in memory until it is judged: bounded in
 * events, it ends when the history is full (the clients finish their
 * cycles), not at --seconds, which let a long run with fast clients grow
 * until the process ran out of memory, and its file past what check reads.
 */
describe('stress: the history is bounded in events', () => {
  it('a run of 300 s with a limit of 40 events ends once it holds them, and says so', async () => {
    const started = performance.now();
    const run = await runStress({ backend: 'redis-single', clients: 2, seconds: 300, nemesis: [], seed: SEED, store: 'unfenced', resources: 1, ttlMinMs: 2_000, ttlMaxMs: 3_000, maxEvents: 40 });
    expect(run.eventLimitReached).toBe(true);
    expect(run.history.length).toBeGreaterThanOrEqual(40);
    // The clients finish the cycle they are in: a few events past the limit, not a minute of them.
    expect(run.history.length).toBeLessThan(200);
    // Seconds, not the 300 the run was given (far more than a loaded machine adds).
    expect(performance.now() - started).toBeLessThan(120_000);
  }, 180_000);

  it('the limit is checked: at most MAX_STRESS_EVENTS', () => {
    const o = { seconds: 1, nemesis: [], seed: 1, store: 'unfenced', resources: 1, ttlMinMs: 100, ttlMaxMs: 200 } as const;
    expect(() => checkStressOptions('redis-single', { ...o, maxEvents: MAX_STRESS_EVENTS + 1 })).toThrow(RangeError);
    expect(() => checkStressOptions('redis-single', { ...o, maxEvents: 0 })).toThrow(RangeError);
  });
});
