import type { MonotonicClock } from '../impl/clock.ts';
import { systemClock } from '../impl/clock.ts';
import type { LeaseNode } from '../impl/leaseNode.ts';

/**
 * A client process that can be paused, in-process: while paused nothing it
 * scheduled runs (timers wait), no request it makes goes out, and no reply
 * reaches it; all of it happens at resume, as after SIGSTOP/SIGCONT. Its
 * clock keeps reading real time, so on resume it sees how long it was gone.
 */
export class PausableClient {
  #paused = false;
  #waiting: Array<() => void> = [];
  /** How many times this client was paused; a lease records it at grant to tell whether a pause fell into its life. */
  pauses = 0;

  /**
   * While a timer of this clock runs: how late it runs, ms past its due
   * instant (the load's share of any lateness of what it does); else null.
   */
  timerLateMs: number | null = null;

  readonly clock: MonotonicClock = {
    now: () => systemClock.now(),
    schedule: (atMs, fn) =>
      systemClock.schedule(atMs, () => {
        if (this.#paused) return void this.#waiting.push(fn);
        this.timerLateMs = Math.max(0, systemClock.now() - atMs);
        try {
          fn();
        } finally {
          this.timerLateMs = null;
        }
      }),
  };

  get paused(): boolean {
    return this.#paused;
  }

  pause(): void {
    this.#paused = true;
    this.pauses++;
  }

  resume(): void {
    this.#paused = false;
    for (const go of this.#waiting.splice(0)) go();
  }

  /** Resolves at once, or at resume. */
  gate(): Promise<void> {
    return this.#paused ? new Promise((resolve) => this.#waiting.push(resolve)) : Promise.resolve();
  }

  /** A request that waits for resume before it goes out and before its reply is seen. */
  async call<T>(request: () => Promise<T>): Promise<T> {
    await this.gate();
    try {
      return await request();
    } finally {
      await this.gate();
    }
  }

  /** A lease node seen through this client. */
  node(node: LeaseNode): LeaseNode {
    return {
      acquire: (r, o, t) => this.call(() => node.acquire(r, o, t)),
      release: (r, o) => this.call(() => node.release(r, o)),
      extend: (r, o, t) => this.call(() => node.extend(r, o, t)),
      raiseToken: (r, t) => this.call(() => node.raiseToken(r, t)),
    };
  }

  /** Resolves after `ms` on this client's clock (later if it is paused then). */
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.clock.schedule(this.clock.now() + ms, resolve));
  }
}
