/**
 * Clocks as plain data. True time is the model's global ms counter; every
 * process reads its own clock, which may run fast or slow (drift, in parts per
 * million) and, for wall clocks, may be stepped. A clock reading is a pure
 * function of true time, so nothing here reads the machine's time.
 */
import { checkNumber } from './checks.ts';

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

/** A clock reading `readingMs` at true time `trueMs` (both default 0), without drift. Throws InvalidInputError for a non-number. */
export function clockAt(readingMs = 0, trueMs = 0): Clock {
  checkNumber(readingMs, 'clockAt readingMs');
  checkNumber(trueMs, 'clockAt trueMs');
  return { anchorTrueMs: trueMs, readingMs, driftPpm: 0 };
}

/** The reading at true time `trueMs` (integer ms, rounded down; never before the anchor). */
export function read(clock: Clock, trueMs: number): number {
  const elapsed = trueMs - clock.anchorTrueMs;
  return clock.readingMs + Math.floor((elapsed * (1_000_000 + clock.driftPpm)) / 1_000_000);
}

/** The first true time at or after `fromMs` at which `clock` reads at least `readingMs`. */
export function trueTimeOf(clock: Clock, readingMs: number, fromMs: number): number {
  if (read(clock, fromMs) >= readingMs) return fromMs;
  let t = clock.anchorTrueMs + Math.ceil(((readingMs - clock.readingMs) * 1_000_000) / (1_000_000 + clock.driftPpm));
  t = Math.max(t - 1, fromMs);
  while (read(clock, t) < readingMs) t++;
  return t;
}

/** A wall-clock step (NTP step, operator, VM migration): forwards or backwards. */
export function step(clock: Clock, trueMs: number, deltaMs: number): Clock {
  return { anchorTrueMs: trueMs, readingMs: read(clock, trueMs) + deltaMs, driftPpm: clock.driftPpm };
}

/** Changes the rate from now on; the reading stays continuous. */
export function setDrift(clock: Clock, trueMs: number, driftPpm: number): Clock {
  return { anchorTrueMs: trueMs, readingMs: read(clock, trueMs), driftPpm };
}
