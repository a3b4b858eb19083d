import { expect } from 'vitest';
import type { MonotonicClock } from '../impl/clock.ts';
import type { LeaseLostError } from '../impl/errors.ts';

/**
 * A client clock the test moves by hand (leases' deadlines), with a real server underneath: a timer runs only
 * when `advance` reaches it, never on its own (one already due waits for the next advance).
 */
export class HandClock implements MonotonicClock {
  #now = 0;
  #timers: Array<{ at: number; fn: () => void }> = [];
  now(): number {
    return this.#now;
  }
  schedule(atMs: number, fn: () => void): () => void {
    const t = { at: atMs, fn };
    this.#timers.push(t);
    return () => {
      this.#timers = this.#timers.filter((x) => x !== t);
    };
  }
  advance(ms: number): void {
    this.#now += ms;
    const due = this.#timers.filter((t) => t.at <= this.#now);
    this.#timers = this.#timers.filter((t) => t.at > this.#now);
    for (const t of due) t.fn();
  }
}

/** `signal` holds until `ms` more on `clock` and fires at that instant, its lease lost as 'expired'. */
export function expectLostAfter(clock: HandClock, signal: AbortSignal, ms: number): void {
  clock.advance(ms - 1);
  expect(signal.aborted).toBe(false);
  clock.advance(1);
  expect(signal.aborted).toBe(true);
  expect((signal.reason as LeaseLostError).reason).toBe('expired');
}
