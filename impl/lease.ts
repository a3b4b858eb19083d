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

/**
 * The mutable side of a Lease, kept by the client that granted it. The
 * signal (an AbortController and its deadline timer) is made when first
 * asked for: most leases are released without anyone listening, and the
 * controller, the timer and the abort event are most of what a lease costs.
 * Until then the deadline is judged from the clock when it matters.
 */
export class LeaseHandle implements Lease {
  #controller: AbortController | null = null;
  #lost: LeaseLostError['reason'] | null = null;
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
  }

  get validUntilMs(): number | null {
    return this.#validUntilMs;
  }

  get signal(): AbortSignal {
    if (this.#controller === null) {
      const lost = this.#isLost(); // judged before the controller exists: until then no timer says so
      this.#controller = new AbortController();
      if (lost) this.#controller.abort(LeaseLostError.of(this.#lost!, this.resource));
      else this.#arm();
    }
    return this.#controller.signal;
  }

  /** Whether the lease must no longer be used: what `signal.aborted` would say, without making the signal. */
  get lost(): boolean {
    return this.#controller !== null ? this.#controller.signal.aborted : this.#isLost();
  }

  /** Moves the deadline (after a successful extension). */
  extendTo(validUntilMs: number): void {
    if (this.#isLost()) return;
    this.#validUntilMs = validUntilMs;
    if (this.#controller !== null) this.#arm();
  }

  lose(reason: LeaseLostError['reason']): void {
    if (this.#isLost()) return;
    this.#cancelTimer();
    this.#lost = reason;
    this.#controller?.abort(LeaseLostError.of(reason, this.resource));
  }

  /** When the signal fires: the deadline less the safety margin. Overridable only to build broken fixtures. */
  protected fireAtMs(validUntilMs: number): number {
    return validUntilMs - this.safetyMarginMs;
  }

  /** Lost already, or (with no timer to say so) past the deadline: then it is lost as 'expired', as the timer would have had it. */
  #isLost(): boolean {
    if (this.#lost === null && this.#controller === null && this.#validUntilMs !== null && this.clock.now() >= this.fireAtMs(this.#validUntilMs)) this.#lost = 'expired';
    return this.#lost !== null;
  }

  #arm(): void {
    this.#cancelTimer();
    const until = this.#validUntilMs;
    if (until === null) return;
    this.#cancelTimer = this.clock.schedule(this.fireAtMs(until), () => this.lose('expired'));
  }
}
