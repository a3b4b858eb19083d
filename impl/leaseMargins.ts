import { InvalidInputError, MAX_TTL_MS } from '../model/errors.ts';
import { shown } from './options.ts';

/** How much earlier than the service's expiry a lease client stops trusting its lease. */
export interface LeaseMargins {
  /** The clocks' drift allowance per ms of ttl, in [0, 1) (default 0.01). */
  readonly driftFactor: number;
  /** A fixed allowance, ms, on top of the drift (default 2). */
  readonly clockMarginMs: number;
  /** The signal fires this long before the deadline (default 0). */
  readonly safetyMarginMs: number;
}

/** The margins of a lock's options, defaulted and validated (InvalidInputError 'invalid-config'). */
export function leaseMargins(options: Partial<LeaseMargins>, maxClockMarginMs: number): LeaseMargins {
  const driftFactor: unknown = options.driftFactor ?? 0.01;
  // typeof first: a string such as '0.5' compares as a number and would pass the range test.
  if (typeof driftFactor !== 'number' || !(driftFactor >= 0 && driftFactor < 1)) throw new InvalidInputError('invalid-config', `driftFactor must be in [0, 1), got ${shown(driftFactor)}`);
  const clockMarginMs: unknown = options.clockMarginMs ?? 2;
  if (typeof clockMarginMs !== 'number' || !Number.isInteger(clockMarginMs) || clockMarginMs < 0 || clockMarginMs > maxClockMarginMs) {
    throw new InvalidInputError('invalid-config', `clockMarginMs must be an integer in [0, ${maxClockMarginMs}], got ${shown(clockMarginMs)}`);
  }
  const safetyMarginMs: unknown = options.safetyMarginMs ?? 0;
  // Bounded as a duration: 1e308 and 2^63 are integers too, and with them every lease was granted with its signal already fired.
  if (typeof safetyMarginMs !== 'number' || !Number.isInteger(safetyMarginMs) || safetyMarginMs < 0 || safetyMarginMs > MAX_TTL_MS) {
    throw new InvalidInputError('invalid-config', `safetyMarginMs must be an integer in [0, ${MAX_TTL_MS}], got ${shown(safetyMarginMs)}`);
  }
  return { driftFactor, clockMarginMs, safetyMarginMs };
}

/** What a lease's validity gives up to clock drift: ceil(driftFactor * ttl) + clockMarginMs (Redlock's allowance). */
export function driftMarginMs(margins: LeaseMargins, ttlMs: number): number {
  return Math.ceil(margins.driftFactor * ttlMs) + margins.clockMarginMs;
}
