import type { Clock } from '../../model/clock.ts';
import { read, trueTimeOf } from '../../model/clock.ts';
import type { MonotonicClock } from '../../impl/clock.ts';

/**
 * Virtual true time for in-process backends: a queue of events at true
 * times, and per-process clocks (the model's Clock data) whose timers fire
 * when their reading arrives. Nothing here reads the machine's clock; time
 * moves only when the runner advances it.
 */
interface Timer {
  readonly seq: number;
  /** True time at which it is due, recomputed because clocks can change. */
  readonly dueMs: () => number;
  readonly fire: () => void;
  cancelled: boolean;
}

/** Lets promise chains run to their next wait on virtual time. */
export function flush(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Bound on the events one advance may fire: a runaway loop is a bug, not a wait. */
const MAX_EVENTS_PER_ADVANCE = 100_000;

export class VirtualTime {
  #nowMs = 0;
  #seq = 0;
  #timers: Timer[] = [];

  nowMs(): number {
    return this.#nowMs;
  }

  /** Runs `fn` at true time `trueMs`. */
  at(trueMs: number, fn: () => void): () => void {
    return this.add(() => trueMs, fn);
  }

  /** A monotonic clock for one process, reading `clock()` (which faults may replace). */
  clockOf(clock: () => Clock): MonotonicClock {
    return {
      now: () => read(clock(), this.#nowMs),
      schedule: (atMs, fn) => this.add(() => trueTimeOf(clock(), atMs, this.#nowMs), fn),
    };
  }

  /** Resolves at true time now + ms. */
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.at(this.#nowMs + ms, resolve));
  }

  /** Moves true time to `targetMs`, firing every event due on the way, in order. */
  async advanceTo(targetMs: number): Promise<void> {
    await this.runUntil(null, targetMs);
    this.#nowMs = Math.max(this.#nowMs, targetMs);
  }

  /**
   * Fires due events one at a time until `work` settles or the next event
   * lies beyond `limitMs`. Returns whether `work` settled. Time stops at the
   * last event fired (not at the limit).
   */
  async runUntil(work: Promise<unknown> | null, limitMs: number): Promise<boolean> {
    let settled = false;
    work?.then(
      () => (settled = true),
      () => (settled = true),
    );
    await flush();
    for (let fired = 0; !settled || work === null; fired++) {
      if (fired > MAX_EVENTS_PER_ADVANCE) throw new Error(`virtual time: more than ${MAX_EVENTS_PER_ADVANCE} events before t=${limitMs}`);
      this.#timers = this.#timers.filter((t) => !t.cancelled);
      let next: { timer: Timer; dueMs: number } | undefined;
      for (const timer of this.#timers) {
        const dueMs = Math.max(this.#nowMs, timer.dueMs());
        if (next === undefined || dueMs < next.dueMs || (dueMs === next.dueMs && timer.seq < next.timer.seq)) next = { timer, dueMs };
      }
      if (next === undefined || next.dueMs > limitMs) break;
      this.#nowMs = next.dueMs;
      next.timer.cancelled = true;
      next.timer.fire();
      await flush();
    }
    return settled;
  }

  private add(dueMs: () => number, fire: () => void): () => void {
    const timer: Timer = { seq: this.#seq++, dueMs, fire, cancelled: false };
    this.#timers.push(timer);
    return () => {
      timer.cancelled = true;
    };
  }
}
