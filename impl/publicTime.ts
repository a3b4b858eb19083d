import { checkSignal } from './abort.ts';
import { sleep as sleepOn, type MonotonicClock } from './clock.ts';
import { withTimeout as boundOn } from './errors.ts';
import { checkClock, refuse } from './options.ts';
import { MAX_TTL_MS } from '../model/errors.ts';

/**
 * sleep and withTimeout as lockcheck/lock gives them to users, with their
 * arguments checked (InvalidInputError('invalid-config') naming the argument,
 * as a rejection: they return promises); the lock clients call the unchecked
 * ones (clock.ts, errors.ts) on every request. A signal is taken as an
 * acquire takes one: by what it has, so a polyfill's or another realm's too.
 */

function checkMs(ms: unknown): void {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0 || ms > MAX_TTL_MS) refuse('ms', `a number of ms in [0, ${MAX_TTL_MS}]`, ms);
}

/** Resolves after `ms` on `clock`, or rejects when `signal` aborts first. */
export function sleep(clock: MonotonicClock, ms: number, signal?: AbortSignal): Promise<void> {
  try {
    checkClock(clock);
    checkMs(ms);
    checkSignal(signal);
  } catch (e) {
    return Promise.reject(e);
  }
  return sleepOn(clock, ms, signal);
}

/** Bounds a promise by a deadline on `clock`. */
export function withTimeout<T>(clock: MonotonicClock, ms: number, what: string, work: Promise<T>): Promise<T> {
  try {
    checkClock(clock);
    checkMs(ms);
    if (typeof what !== 'string') refuse('what', 'a string naming the call', what);
    if (typeof (work as { then?: unknown } | null)?.then !== 'function') refuse('work', 'a Promise', work);
  } catch (e) {
    return Promise.reject(e);
  }
  return boundOn(clock, ms, what, work);
}
