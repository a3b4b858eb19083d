import { InvalidInputError } from '../model/errors.ts';
import { systemClock, type MonotonicClock } from './clock.ts';
import { shown } from './options.ts';

/**
 * `clock` with each reading checked: now() must return a finite number of
 * ms. Deadlines are sums of readings: a reading that is a numeric string
 * ('3271') made `startedMs + ttlMs` the string '3271200', a lease valid for
 * 54 minutes on a 200 ms key (a second holder beside it), and a round's
 * bound as far off; NaN, Infinity or undefined denied every acquire
 * `validity-exhausted`, a bigint threw a TypeError. A bad reading throws
 * InvalidInputError('invalid-config') instead; the first reading of an
 * acquire or extend is taken before anything is sent, so the call rejects
 * with it. The system clock is returned as it is (its readings are
 * performance.now(); awaitedAt knows it by identity).
 */
export function checkedClock(clock: MonotonicClock, name = 'clock'): MonotonicClock {
  if (clock === systemClock) return clock;
  return {
    now: () => {
      const ms: unknown = clock.now();
      if (typeof ms !== 'number' || !Number.isFinite(ms)) throw new InvalidInputError('invalid-config', `${name}.now() must return a finite number of ms, returned ${shown(ms)}`);
      return ms;
    },
    schedule: (atMs, fn) => clock.schedule(atMs, fn),
  };
}
