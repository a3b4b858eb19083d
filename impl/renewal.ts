import type { MonotonicClock } from './clock.ts';
import type { LeaseHandle } from './lease.ts';
import { driftMarginMs, type LeaseMargins } from './leaseMargins.ts';
import type { ExtendResult } from './leaseLock.ts';

/**
 * A renewal the service granted for `ttlMs`, counted from `startedMs` (when
 * it was sent, the latest the service can have started it): the lease's new
 * deadline, less the drift allowance; 'no-quorum' when that has passed
 * already or the lease was lost meanwhile (the renewal came too late to
 * count on).
 */
export function renewal(handle: LeaseHandle, startedMs: number, ttlMs: number, margins: LeaseMargins, clock: MonotonicClock): ExtendResult {
  const validUntilMs = startedMs + ttlMs - driftMarginMs(margins, ttlMs);
  if (clock.now() >= validUntilMs || handle.lost) return { kind: 'not-extended', reason: 'no-quorum' };
  handle.extendTo(validUntilMs);
  return { kind: 'extended', validUntilMs };
}
