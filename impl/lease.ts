import type { MonotonicClock } from './clock.ts';
import { LeaseLostError, relabelLoss } from './errors.ts';

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
 *
 * The deadline is judged from the clock whenever the lease is looked at
 * (`lost`, `signal`, and the signal's `aborted`, `reason` and
 * `throwIfAborted()`), not only when the timer runs: a timer fires only when
 * the event loop gets to it, so after a stall (GC, a busy loop, a paused
 * process) it can be late, and a lease read in that gap would look usable
 * past its deadline. Read at the moment of use, it never does.
 */
export class LeaseHandle implements Lease {
  #controller: AbortController | null = null;
  #lost: LeaseLostError['reason'] | null = null;
  #validUntilMs: number | null;
  #cancelTimer: () => void = noTimer;
  // ES-private, not TS-private: a caller's code cannot reach (or change) the clock or the margin the deadline is judged by.
  readonly #clock: MonotonicClock;
  readonly #safetyMarginMs: number;

  constructor(
    readonly resource: string,
    readonly owner: string,
    readonly token: bigint,
    validUntilMs: number | null,
    clock: MonotonicClock,
    /** The signal fires this long before the deadline: room for the work it guards to stop. */
    safetyMarginMs = 0,
  ) {
    this.#validUntilMs = validUntilMs;
    this.#clock = clock;
    this.#safetyMarginMs = safetyMarginMs;
  }

  /** The deadline now, on the client's monotonic clock (an extension moves it); null for a session lock. */
  get validUntilMs(): number | null {
    return this.#validUntilMs;
  }

  /** Aborts when the lease must no longer be used (made on first read); its reason is a LeaseLostError. */
  get signal(): AbortSignal {
    this.#judge();
    if (this.#controller === null) {
      this.#controller = new AbortController();
      if (this.#lost !== null) this.#controller.abort(LeaseLostError.of(this.#lost, this.resource));
      else {
        this.#judgedOnRead(this.#controller.signal);
        this.#arm();
      }
    }
    return this.#controller.signal;
  }

  /** Whether the lease must no longer be used: what `signal.aborted` says, without making the signal. */
  get lost(): boolean {
    this.#judge();
    return this.#lost !== null;
  }

  /** Moves the deadline (after a successful extension); a lease past its deadline stays lost. */
  extendTo(validUntilMs: number): void {
    this.#judge();
    if (this.#lost !== null) return;
    this.#validUntilMs = validUntilMs;
    if (this.#controller !== null) this.#arm();
  }

  /** Brings the deadline forward to `validUntilMs` if that is earlier (an extension with a shorter ttl, at its send). */
  limitTo(validUntilMs: number): void {
    this.#judge();
    if (this.#lost !== null || (this.#validUntilMs !== null && this.#validUntilMs <= validUntilMs)) return;
    this.#validUntilMs = validUntilMs;
    if (this.#controller !== null) this.#arm();
    this.#judge();
  }

  /** Ends the lease for `reason`, unless it is lost already (past its deadline it is, as 'expired'). */
  lose(reason: LeaseLostError['reason']): void {
    this.#judge();
    this.#end(reason);
  }

  /**
   * A release that went out (its signal fired 'released') whose session ended
   * before the release was confirmed: the lock went with the session, not with
   * a release the caller may take as landed, so the reason reads
   * 'connection-lost' from now on (listeners that ran at the send saw
   * 'released'). Nothing for a lease lost for another reason.
   */
  releaseUnconfirmed(): void {
    if (this.#lost !== 'released') return;
    this.#lost = 'connection-lost';
    const fired: unknown = this.#controller === null ? undefined : Reflect.get(AbortSignal.prototype, 'reason', this.#controller.signal);
    if (fired instanceof LeaseLostError) relabelLoss(fired, 'connection-lost', this.resource);
  }

  #end(reason: LeaseLostError['reason']): void {
    if (this.#lost !== null) return;
    this.#cancelTimer();
    this.#lost = reason;
    this.#controller?.abort(LeaseLostError.of(reason, this.resource));
  }

  /** When the signal fires: the deadline less the safety margin. Overridable only to build broken fixtures. */
  protected fireAtMs(validUntilMs: number): number {
    return validUntilMs - this.#safetyMarginMs;
  }

  /** Past the deadline by the clock and not lost yet: lost now, as 'expired', as the timer would have had it. */
  #judge(): void {
    if (this.#lost !== null || this.#validUntilMs === null) return;
    const nowMs = this.#readable();
    if (Number.isNaN(nowMs) || nowMs >= this.fireAtMs(this.#validUntilMs)) this.#end('expired');
  }

  /** The clock's reading; NaN when it cannot be read (a checked clock refused it): a deadline no one can judge is over, the safe side. */
  #readable(): number {
    try {
      return this.#clock.now();
    } catch {
      return Number.NaN;
    }
  }

  /**
   * Makes the signal judge the deadline whenever user code reads it: its
   * instance shadows `aborted`, `reason` and `throwIfAborted` with versions
   * that first consult the clock. Listeners and APIs that take the signal
   * (fetch, streams) see the same object; the timer still fires the event.
   */
  #judgedOnRead(signal: AbortSignal): void {
    const judge = (): void => this.#judge();
    Object.defineProperties(signal, {
      // AbortSignal's own accessors, run on this signal.
      aborted: { configurable: true, get: () => (judge(), Reflect.get(AbortSignal.prototype, 'aborted', signal) as boolean) },
      reason: { configurable: true, get: () => (judge(), Reflect.get(AbortSignal.prototype, 'reason', signal) as unknown) },
      throwIfAborted: { configurable: true, value: () => (judge(), AbortSignal.prototype.throwIfAborted.call(signal)) },
    });
  }

  #arm(): void {
    this.#cancelTimer();
    const until = this.#validUntilMs;
    if (until === null) return;
    this.#cancelTimer = this.#clock.schedule(this.fireAtMs(until), () => this.#end('expired'));
  }
}

/** The timer of a lease without one (shared: a closure per lease would be made for every grant). */
function noTimer(): void {}
