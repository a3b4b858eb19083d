import type { Clock } from '../../model/clock.ts';
import { read, trueTimeOf } from '../../model/clock.ts';
import type { MonotonicClock } from '../../impl/clock.ts';
import { checkObject, checkOptionalFunction, knownOptions, refuse, shown } from '../../impl/options.ts';
import { InvalidInputError } from '../../model/errors.ts';
import { messageText } from '../../impl/errorText.ts';

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

/** Turns of the event loop a pending operation gets to settle in before time moves on (a promise library's hops). */
const SETTLE_TURNS = 8;

/** Bound on the events one advance may fire: a runaway loop is a bug, not a wait. */
const MAX_EVENTS_PER_ADVANCE = 100_000;

/** How a VirtualTime waits for real work: all absent for a run wholly in process. */
export interface VirtualTimeOptions {
  /** Waits for work outside the process (real servers) before time moves on; says whether there was any. */
  readonly settle?: () => Promise<boolean>;
  /** Called whenever true time moves, with the new time (to drive real servers' clocks). */
  readonly onTick?: (nowMs: number) => void;
  /**
   * For servers on their own real clocks: true time never runs ahead of real
   * time (each move waits for it), and real time may run at most
   * `toleranceMs` ahead of true time when a server answers (noteServerReply);
   * further, and the run's timing is broken (TimingError).
   */
  readonly realTime?: { readonly toleranceMs: number; readonly now?: () => number };
}

/**
 * Real time strayed further from the run's true time than its tolerance
 * while a server on its own clock was answering: what the server saw can no
 * longer be told from the model's time. The run is inconclusive, not failed.
 */
export class TimingError extends Error {
  override readonly name = 'TimingError';
  constructor(message?: string, options?: ErrorOptions) {
    super(messageText(message), options);
  }
}

/**
 * Virtual time hit one of its runaway bounds: more than 100,000 events in
 * one advance (a timer that re-arms itself at the same time), outside work
 * that never settles (`settle` says there is work after 10,000 passes), or a
 * real-time pace whose `now()` stopped moving. A bug in what the run drives,
 * not a wait; `limit` says which bound.
 */
export class VirtualTimeLimitError extends Error {
  override readonly name = 'VirtualTimeLimitError';
  constructor(
    readonly limit: 'events' | 'settle' | 'pace',
    message: string,
  ) {
    super(messageText(message));
  }
}

/** Passes of the real-time pace in a row in which real time did not move before it gives up (a stopped `realTime.now`). */
const MAX_STILL_PACES = 1_000;

const checkKeys = knownOptions('VirtualTime options', ['settle', 'onTick', 'realTime']);
const checkRealTimeKeys = knownOptions('realTime', ['toleranceMs', 'now']);

/**
 * A clock reading no run reaches (about 8,900 years of ms): a timer for it
 * never fires. Its true time, on the slowest clock (a tenth of the rate),
 * stays below 2^53: past it a time has no next ms, and the search for the
 * true time a reading comes at (trueTimeOf) would never end.
 */
const NEVER_READING_MS = 2 ** 48;

/** A true time: a finite number of ms (NaN or a non-number would stop time or break every later advance). */
function checkTimeMs(ms: unknown, name: string): void {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) refuse(name, 'a finite number of ms', ms);
}

/**
 * A run's true time, in ms from 0, moved only by the runner: timers and
 * sleeps on it fire as it advances, in order, after the process's pending
 * work has settled (and, with `realTime`, paced to real time). Every clock of
 * a simulated run reads it (clockOf). Throws InvalidInputError for bad
 * options or arguments.
 */
export class VirtualTime {
  #nowMs = 0;
  #seq = 0;
  #timers: Timer[] = [];
  /** Real time (ms) at which true time was 0; set at the first use. */
  #realStartMs: number | null = null;
  #late: string | null = null;

  constructor(private readonly options: VirtualTimeOptions = {}) {
    checkKeys(checkObject(options, 'VirtualTime options'));
    // Checked here, not at the first advance (a TypeError there), nor never (a tolerance of NaN switched the real-time check off).
    checkOptionalFunction(options.settle, 'settle');
    checkOptionalFunction(options.onTick, 'onTick');
    if (options.realTime !== undefined) {
      const rt = checkObject(options.realTime, 'realTime');
      checkRealTimeKeys(rt);
      if (typeof rt.toleranceMs !== 'number' || !Number.isFinite(rt.toleranceMs) || rt.toleranceMs < 0) refuse('realTime.toleranceMs', 'a finite number of ms >= 0', rt.toleranceMs);
      checkOptionalFunction(rt.now, 'realTime.now');
    }
  }

  /** True time now, in ms. */
  nowMs(): number {
    return this.#nowMs;
  }

  /** Runs `fn` at true time `trueMs`. */
  at(trueMs: number, fn: () => void): () => void {
    // Checked where a user's call enters (here and clockOf's schedule): a junk timer would break every later advance.
    checkTimeMs(trueMs, 'trueMs');
    if (typeof fn !== 'function') refuse('fn', 'a function', fn);
    return this.add(() => trueMs, fn);
  }

  /** A monotonic clock for one process, reading `clock()` (which faults may replace). */
  clockOf(clock: () => Clock): MonotonicClock {
    if (typeof clock !== 'function') refuse('clock', 'a function returning the process\'s Clock', clock);
    return {
      now: () => read(clock(), this.#nowMs),
      schedule: (atMs, fn) => {
        // NaN ran the timer at once, at true time NaN; a reading no run reaches never comes (and past 2^53 hung the next advance).
        if (typeof atMs !== 'number' || Number.isNaN(atMs)) throw new InvalidInputError('invalid-duration', `atMs must be a number of ms on the clock, got ${shown(atMs)}`);
        if (typeof fn !== 'function') refuse('fn', 'a function', fn);
        if (atMs >= NEVER_READING_MS) return () => undefined;
        return this.add(() => trueTimeOf(clock(), atMs, this.#nowMs), fn);
      },
    };
  }

  /** Resolves at true time now + ms. */
  sleep(ms: number): Promise<void> {
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) return Promise.reject(new InvalidInputError('invalid-config', `ms must be a finite number of ms >= 0, got ${shown(ms)}`));
    return new Promise((resolve) => this.at(this.#nowMs + ms, resolve));
  }

  /** Moves true time to `targetMs`, firing every event due on the way, in order. */
  async advanceTo(targetMs: number): Promise<void> {
    checkTimeMs(targetMs, 'targetMs');
    await this.runUntil(null, targetMs);
    await this.pace(targetMs);
    this.moveTo(targetMs);
    await this.quiesce();
    this.assertOnTime();
  }

  /** How far real time is ahead of true time, in ms (0 without a real-time pace). */
  lagMs(): number {
    const rt = this.options.realTime;
    if (rt === undefined) return 0;
    const now = rt.now !== undefined ? rt.now() : performance.now();
    this.#realStartMs ??= now - this.#nowMs;
    return now - this.#realStartMs - this.#nowMs;
  }

  /** A server on its own clock has just answered: it saw real time, which must still be within tolerance of true time. */
  noteServerReply(): void {
    const rt = this.options.realTime;
    if (rt === undefined || this.#late !== null) return;
    const lag = this.lagMs();
    if (lag > rt.toleranceMs) this.#late = `real time ran ${lag.toFixed(1)} ms ahead of true time t=${this.#nowMs} while a server answered (tolerance ${rt.toleranceMs} ms): the machine was too busy to keep pace`;
  }

  /**
   * A real-time bound of the harness ran out on a request the model has
   * answered at once (a driver's command timeout on a server lockcheck
   * started): the machine stalled the test process or the server, which is
   * no fault the runner injected, and the request's failure says nothing of
   * the backend. The run is out of pace from here (TimingError at the next
   * check): judged neither way, and tried again.
   */
  stalled(what: string): void {
    if (typeof what !== 'string') refuse('what', 'a string', what);
    this.#late ??= `${what}: the machine stalled the run (no fault the runner injected takes real time), so that failure is not the backend's`;
  }

  /** Throws TimingError if a server answered while real time was beyond tolerance, or a request ran out of real time (stalled). */
  assertOnTime(): void {
    if (this.#late !== null) throw new TimingError(this.#late);
  }

  /** With a real-time pace, waits until real time has reached true time `targetMs`. */
  private async pace(targetMs: number): Promise<void> {
    if (this.options.realTime === undefined) return;
    let last = Number.POSITIVE_INFINITY;
    for (let still = 0; ; ) {
      const behind = targetMs - (this.#nowMs + this.lagMs());
      if (behind <= 0) return;
      // Real time that stops (a `now` that never moves) would be waited for for ever.
      still = behind < last ? 0 : still + 1;
      last = behind;
      if (still > MAX_STILL_PACES) throw new VirtualTimeLimitError('pace', `virtual time: real time (realTime.now) stopped moving ${behind} ms before t=${targetMs}`);
      // A timer for the bulk (it may fire late by a ms or so), then turns of the event loop for the rest.
      await (behind > 2 ? new Promise((resolve) => setTimeout(resolve, behind - 1.5)) : flush());
    }
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
      if (passes > 10_000) throw new VirtualTimeLimitError('settle', 'virtual time: outside work never settles');
    }
  }

  /**
   * Fires due events one at a time until `work` settles or the next event
   * lies beyond `limitMs`. Returns whether `work` settled. Time stops at the
   * last event fired (not at the limit).
   */
  async runUntil(work: Promise<unknown> | null, limitMs: number): Promise<boolean> {
    if (work !== null && typeof (work as { then?: unknown } | undefined)?.then !== 'function') refuse('work', 'a Promise, or null to run to limitMs', work);
    if (typeof limitMs !== 'number' || Number.isNaN(limitMs)) refuse('limitMs', 'a number of ms (Infinity for no limit)', limitMs);
    let settled = false;
    work?.then(
      () => (settled = true),
      () => (settled = true),
    );
    await this.quiesce();
    for (let fired = 0; !settled || work === null; fired++) {
      if (fired > MAX_EVENTS_PER_ADVANCE) throw new VirtualTimeLimitError('events', `virtual time: more than ${MAX_EVENTS_PER_ADVANCE} events before t=${limitMs}`);
      if (work !== null) {
        // A library's own promises may settle a few macrotask turns after its last reply (bluebird resolves on
        // setImmediate): they get those turns before time moves on, or the work is called unsettled.
        const seq = this.#seq;
        for (let i = 0; i < SETTLE_TURNS && !settled; i++) await flush();
        if (settled) break;
        // What settled late may have sent requests (a refused Redlock attempt's unlocks) or set a timer (an adapter's
        // retry sleep after a late denial): follow them, as after any event, before the next event is chosen.
        if (this.options.settle !== undefined && (await this.options.settle())) {
          await this.quiesce();
          continue;
        }
        if (this.#seq !== seq) continue;
      }
      this.#timers = this.#timers.filter((t) => !t.cancelled);
      let next: { timer: Timer; dueMs: number } | undefined;
      for (const timer of this.#timers) {
        const dueMs = Math.max(this.#nowMs, timer.dueMs());
        if (next === undefined || dueMs < next.dueMs || (dueMs === next.dueMs && timer.seq < next.timer.seq)) next = { timer, dueMs };
      }
      if (next === undefined || next.dueMs > limitMs) break;
      await this.pace(next.dueMs);
      this.moveTo(next.dueMs);
      next.timer.cancelled = true;
      next.timer.fire();
      await this.quiesce();
    }
    this.assertOnTime();
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
