import type { MonotonicClock } from '../../impl/clock.ts';

/**
 * The history's clock: CLOCK_MONOTONIC in ms (process.hrtime), which every
 * process on a Linux machine reads alike, so times recorded by different
 * client processes and the runner compare directly. The clients' locks time
 * their leases on it too, so a lease's validUntil needs no conversion.
 */
export function sharedNowMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

export const sharedClock: MonotonicClock = {
  now: sharedNowMs,
  schedule(atMs, fn) {
    const timer = setTimeout(fn, Math.max(0, atMs - sharedNowMs()));
    timer.unref?.();
    return () => clearTimeout(timer);
  },
};
