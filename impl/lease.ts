import type { MonotonicClock } from './clock.ts';
import { LeaseLostError } from './errors.ts';

/**
 * A granted lock. `validUntilMs` is on the client's monotonic clock; the
 * signal fires when that deadline arrives (unless an extension moved it),
 * when the lease is released, or when the backend learns it was lost.
 */
export interface Lease {
  readonly resource: string;
  /** The random value that identifies this grant to the lock service. */
  readonly owner: string;
  /** Fencing token: strictly increasing per resource; exact up to 2^63-1. */
  readonly token: bigint;
  /** Deadline on the client's monotonic clock; null for a lock that lives with its session. */
  readonly validUntilMs: number | null;
  /** Aborts when the lease must no longer be used; `signal.reason` is a LeaseLostError. */
  readonly signal: AbortSignal;
}

/** The mutable side of a Lease, kept by the client that granted it. */
export class LeaseHandle implements Lease {
  readonly #controller = new AbortController();
  #validUntilMs: number | null;
  #cancelTimer: () => void = () => undefined;

  constructor(
    readonly resource: string,
    readonly owner: string,
    readonly token: bigint,
    validUntilMs: number | null,
    private readonly clock: MonotonicClock,
    /** The signal fires this long before the deadline: room for the work it guards to stop. */
    private readonly safetyMarginMs = 0,
  ) {
    this.#validUntilMs = validUntilMs;
    this.arm();
  }

  get validUntilMs(): number | null {
    return this.#validUntilMs;
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Moves the deadline (after a successful extension). */
  extendTo(validUntilMs: number): void {
    if (this.signal.aborted) return;
    this.#validUntilMs = validUntilMs;
    this.arm();
  }

  lose(reason: LeaseLostError['reason']): void {
    this.#cancelTimer();
    if (!this.signal.aborted) this.#controller.abort(LeaseLostError.of(reason, this.resource));
  }

  /** When the signal fires: the deadline less the safety margin. Overridable only to build broken fixtures. */
  protected fireAtMs(validUntilMs: number): number {
    return validUntilMs - this.safetyMarginMs;
  }

  private arm(): void {
    this.#cancelTimer();
    const until = this.#validUntilMs;
    if (until === null) return;
    this.#cancelTimer = this.clock.schedule(this.fireAtMs(until), () => this.lose('expired'));
  }
}
