import { InvalidInputError } from '../model/errors.ts';
import { systemClock, type MonotonicClock } from './clock.ts';
import { boundedUntil } from './errors.ts';
import { shown } from './options.ts';

/**
 * `clock` with each reading checked: now() must return a finite number of
 * ms, no lower than the last it returned, and must not throw. Deadlines are
 * sums of readings: a reading that is a numeric string ('3271') made
 * `startedMs + ttlMs` the string '3271200', a lease valid for 54 minutes on a
 * 200 ms key (a second holder beside it), and a round's bound as far off;
 * NaN, Infinity or undefined denied every acquire `validity-exhausted`, a
 * bigint threw a TypeError; a reading that went back made a lease look valid
 * past its deadline. A bad reading (or a throw of now(), its cause) throws
 * InvalidInputError('invalid-config') instead; the first reading of an
 * acquire, extend, write or read is taken before anything is sent, so the
 * call rejects with it. Where a throw would escape (a timer, a library's
 * callback) the reading is taken with readingOrNaN. The system clock is
 * returned as it is (its readings are performance.now(); awaitedAt knows it
 * by identity).
 */
export function checkedClock(clock: MonotonicClock, name = 'clock'): MonotonicClock {
  if (clock === systemClock) return clock;
  let lastMs = Number.NEGATIVE_INFINITY;
  return {
    now: () => {
      let ms: unknown;
      try {
        ms = clock.now();
      } catch (e) {
        throw Object.assign(new InvalidInputError('invalid-config', `${name}.now() must return a finite number of ms, threw ${shown(e instanceof Error ? e.message : e)}`), { cause: e });
      }
      if (typeof ms !== 'number' || !Number.isFinite(ms)) throw new InvalidInputError('invalid-config', `${name}.now() must return a finite number of ms, returned ${shown(ms)}`);
      if (ms < lastMs) throw new InvalidInputError('invalid-config', `${name}.now() must never step backwards, returned ${ms} after ${lastMs}`);
      lastMs = ms;
      return ms;
    },
    schedule: (atMs, fn) => clock.schedule(atMs, fn),
  };
}

/**
 * A reading of a checked clock, or NaN when it cannot be read: for a timer's
 * or a library's callback, where a throw would be an uncaught exception (or
 * break the library). Each caller reads NaN as the safe side: a bound over,
 * a member not passed over.
 */
export function readingOrNaN(clock: MonotonicClock): number {
  try {
    return clock.now();
  } catch {
    return Number.NaN;
  }
}

/**
 * `start()`'s work bounded by `ms` on `clock` (a TimeoutError naming `what`
 * after it), from one reading taken before the work starts: a reading the
 * clock refuses rejects with nothing started, and no reading after the
 * start can throw. (Read again once the work was out, a refused reading
 * rejected the call while its work went on, unbounded, and its failure was
 * an unhandled rejection.) `onUnreadable: 'send'` is for a call that gives
 * back what a lease holds (a revoke, a session's close): on a clock that
 * cannot be read it goes all the same, bounded by its own real-time bound
 * alone (refused, it left a key or a contender held for no one until the
 * lease's ttl).
 */
export function boundedFromNow<T>(clock: MonotonicClock, ms: number, what: string, start: () => Promise<T>, onUnreadable: 'refuse' | 'send' = 'refuse'): Promise<T> {
  let atMs: number | null;
  let work: Promise<T>;
  try {
    try {
      atMs = clock.now() + ms;
    } catch (e) {
      if (onUnreadable === 'refuse') throw e;
      atMs = null;
    }
    work = start();
  } catch (e) {
    return Promise.reject(e as Error);
  }
  if (atMs === null) return work;
  return boundedUntil(clock, atMs, ms, what, work);
}
