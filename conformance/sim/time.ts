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

export interface VirtualTimeOptions {
  /** Waits for work outside the process (real servers) before time moves on; says whether there was any. */
  readonly settle?: () => Promise<boolean>;
  /** Called whenever true time moves, with the new time (to drive real servers' clocks). */
  readonly onTick?: (nowMs: number) => void;
}

export class VirtualTime {
  #nowMs = 0;

  constructor(private readonly options: VirtualTimeOptions = {}) {}
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
    this.moveTo(targetMs);
    await this.quiesce();
  }

  private moveTo(ms: number): void {
    if (ms <= this.#nowMs) return;
    this.#nowMs = ms;
    this.options.onTick?.(ms);
  }

  /** Lets in-process promise chains and any outside work finish before time moves. */
  private async quiesce(): Promise<void> {
    // A reply can set off the next request a few ticks later: settle until a pass finds nothing on the wire.
    for (let passes = 0; ; passes++) {
      await flush();
      if (this.options.settle === undefined || !(await this.options.settle())) return;
      if (passes > 10_000) throw new Error('virtual time: outside work never settles');
    }
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
    await this.quiesce();
    for (let fired = 0; !settled || work === null; fired++) {
      if (fired > MAX_EVENTS_PER_ADVANCE) throw new Error(`virtual time: more than ${MAX_EVENTS_PER_ADVANCE} events before t=${limitMs}`);
      this.#timers = this.#timers.filter((t) => !t.cancelled);
      let next: { timer: Timer; dueMs: number } | undefined;
      for (const timer of this.#timers) {
        const dueMs = Math.max(this.#nowMs, timer.dueMs());
        if (next === undefined || dueMs < next.dueMs || (dueMs === next.dueMs && timer.seq < next.timer.seq)) next = { timer, dueMs };
      }
      if (next === undefined || next.dueMs > limitMs) break;
      this.moveTo(next.dueMs);
      next.timer.cancelled = true;
      next.timer.fire();
      await this.quiesce();
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
