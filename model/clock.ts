/**
 * Clocks as plain data. True time is the model's global ms counter; every
 * process reads its own clock, which may run fast or slow (drift, in parts per
 * million) and, for wall clocks, may be stepped. A clock reading is a pure
 * function of true time, so nothing here reads the machine's time.
 */
import { checkTime } from './checks.ts';
import { InvalidInputError, MAX_TIME_MS } from './errors.ts';

export { MAX_TIME_MS };

/** One process's clock: a reading anchored at a true time, and its rate error from then on. */
export interface Clock {
  /** True time (ms) at which `readingMs` was taken. */
  readonly anchorTrueMs: number;
  /** The clock's reading at `anchorTrueMs`. */
  readonly readingMs: number;
  /** Rate error in parts per million: +10_000 runs 1 % fast, -10_000 1 % slow. */
  readonly driftPpm: number;
}

/** The slowest drift, in ppm: a clock at 10 % of true rate (a rate of 0 or less would never reach a reading). */
export const MIN_DRIFT_PPM = -900_000;
/** The fastest drift, in ppm: a clock at 10 times true rate. */
export const MAX_DRIFT_PPM = 9_000_000;

/** A clock reading `readingMs` at true time `trueMs` (both default 0), without drift. Throws InvalidInputError for a non-number or one outside [-MAX_TIME_MS, MAX_TIME_MS]. */
export function clockAt(readingMs = 0, trueMs = 0): Clock {
  checkTime(readingMs, 'clockAt readingMs');
  checkTime(trueMs, 'clockAt trueMs');
  return { anchorTrueMs: trueMs, readingMs, driftPpm: 0 };
}

/** The reading at true time `trueMs` (integer ms, rounded down; never before the anchor). */
export function read(clock: Clock, trueMs: number): number {
  const elapsed = trueMs - clock.anchorTrueMs;
  return clock.readingMs + Math.floor((elapsed * (1_000_000 + clock.driftPpm)) / 1_000_000);
}

/** Steps the search walks from its estimate before it bisects (the estimate is off by a step or two wherever times are exact). */
const WALK = 8;

/**
 * The first true time at or after `fromMs` at which `clock` reads at least
 * `readingMs`. Always ends: a few steps from the estimate, then a bisection
 * up to MAX_TIME_MS (a reading is a non-decreasing function of true time, the
 * rate being positive). Throws InvalidInputError('invalid-duration') when the
 * clock reaches the reading only after MAX_TIME_MS.
 */
export function trueTimeOf(clock: Clock, readingMs: number, fromMs: number): number {
  if (read(clock, fromMs) >= readingMs) return fromMs;
  let t = clock.anchorTrueMs + Math.ceil(((readingMs - clock.readingMs) * 1_000_000) / (1_000_000 + clock.driftPpm));
  t = Math.max(t - 1, fromMs);
  for (let i = 0; i < WALK && t <= MAX_TIME_MS; i++, t++) if (read(clock, t) >= readingMs) return t;
  return bisect(clock, readingMs, fromMs);
}

/** The search's bounded fallback: read(lo) < readingMs <= read(hi), halved until adjacent (at most ~60 rounds in the safe range). */
function bisect(clock: Clock, readingMs: number, fromMs: number): number {
  let lo = fromMs;
  let hi = MAX_TIME_MS;
  if (!(lo < hi) || read(clock, hi) < readingMs) {
    throw new InvalidInputError('invalid-duration', `the clock reads ${readingMs} only after true time ${MAX_TIME_MS} (2^53-1 ms, where the model's times end); keep readings, times and drift within it`);
  }
  for (let round = 0; round < 200 && hi - lo > 1; round++) {
    const mid = lo + Math.floor((hi - lo) / 2);
    // Rounding could leave mid on an end: the interval no longer shrinks, and hi is a time that reads enough.
    if (!(mid > lo && mid < hi)) break;
    if (read(clock, mid) >= readingMs) hi = mid;
    else lo = mid;
  }
  return hi;
}

/** A wall-clock step (NTP step, operator, VM migration): forwards or backwards. */
export function step(clock: Clock, trueMs: number, deltaMs: number): Clock {
  return { anchorTrueMs: trueMs, readingMs: read(clock, trueMs) + deltaMs, driftPpm: clock.driftPpm };
}

/** Changes the rate from now on; the reading stays continuous. */
export function setDrift(clock: Clock, trueMs: number, driftPpm: number): Clock {
  return { anchorTrueMs: trueMs, readingMs: read(clock, trueMs), driftPpm };
}
