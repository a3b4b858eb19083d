import { AsyncLocalStorage, createHook } from 'node:async_hooks';
import type { MonotonicClock } from '../impl/clock.ts';

/**
 * The runner's clocks for in-process lock libraries: Date.now(), setTimeout
 * and setInterval on the client's virtual clock.
 *
 * The runner owns time: every simulated client has a virtual monotonic clock,
 * and lockcheck's servers run under libfaketime so that their wall clocks are
 * the model's. A library that reads Date.now() or sleeps on setTimeout uses
 * the machine's clock instead, which neither follows virtual time (a 40 ms
 * delay fault takes no real time) nor stands still between two reads. Its
 * deadlines would be off by an amount that depends on the machine, and its
 * retries and refresh timers would fire at real times the model knows
 * nothing of (a false LIVE-1, or none where there should be one).
 *
 * This is the in-process counterpart of libfaketime: while a client's call
 * into the library runs (and every continuation of it: the context follows
 * awaits and the timers it starts), Date.now() reads that client's wall clock,
 * `WALL_EPOCH_MS` plus its monotonic clock's reading, and setTimeout /
 * setInterval schedule on its monotonic clock (virtual time). The model's
 * client has one clock, so its wall clock runs with it (drift included) and
 * never steps. Code outside a client's call (the runner, vitest, a database
 * driver's own timeouts, which the kit runs outside it) keeps the real clock.
 *
 * A timer the library starts past the patch (node:timers/promises, a
 * setTimeout it kept a reference to before the install) is a real timer in a
 * client's call: it is counted (`LibraryClockNotes.realTimers`) and the kit
 * warns, because the run no longer follows the model's time.
 */
export const WALL_EPOCH_MS = Date.UTC(2030, 0, 1);

/** What a run's library did past the runner's clocks, for the run's warnings. */
export interface LibraryClockNotes {
  /** Real timers started inside a client's call (past the patch): they run on the machine's clock. */
  realTimers: number;
  /** Library timer callbacks that threw (a real timer's would be an uncaught exception). */
  timerErrors: string[];
}

interface ClientContext {
  readonly clock: MonotonicClock;
  readonly notes: LibraryClockNotes;
}

const current = new AsyncLocalStorage<ClientContext>();
const real = {
  now: Date.now,
  setTimeout: globalThis.setTimeout,
  clearTimeout: globalThis.clearTimeout,
  setInterval: globalThis.setInterval,
  clearInterval: globalThis.clearInterval,
};

/** A timer on a client's virtual clock; shaped like Node's Timeout (ref, unref, refresh, a numeric id). */
class VirtualTimer {
  static #ids = 1;
  readonly #id = VirtualTimer.#ids++;
  #cancel: (() => void) | null = null;

  constructor(
    private readonly context: ClientContext,
    private readonly callback: (...args: unknown[]) => void,
    private readonly delayMs: number,
    private readonly args: unknown[],
    private readonly repeat: boolean,
  ) {
    this.#arm();
  }

  #arm(): void {
    const clock = this.context.clock;
    this.#cancel = clock.schedule(clock.now() + this.delayMs, () => {
      if (this.repeat) this.#arm();
      else this.#cancel = null;
      current.run(this.context, () => {
        try {
          this.callback(...this.args);
        } catch (e) {
          this.context.notes.timerErrors.push(e instanceof Error ? `${e.name}: ${e.message}` : String(e));
        }
      });
    });
  }

  cancel(): void {
    this.#cancel?.();
    this.#cancel = null;
  }

  refresh(): this {
    this.cancel();
    this.#arm();
    return this;
  }

  ref(): this {
    return this;
  }

  unref(): this {
    return this;
  }

  hasRef(): boolean {
    return false;
  }

  [Symbol.toPrimitive](): number {
    return this.#id;
  }
}

/**
 * A timer's delay on virtual time: as given, and 0 for a delay that is not a
 * positive number (Node makes that 1 ms of real time, which stands for "the
 * next turn", not for time the model should see pass; a runaway loop of them
 * is caught by VirtualTime's bound on events).
 */
function delayOf(ms: unknown): number {
  const n = Number(ms);
  return Number.isFinite(n) && n > 0 ? Math.min(n, 2 ** 31 - 1) : 0;
}

const fakes = {
  now: (): number => {
    const c = current.getStore();
    return c === undefined ? real.now.call(Date) : WALL_EPOCH_MS + c.clock.now();
  },
  setTimeout: ((fn: unknown, ms?: unknown, ...args: unknown[]) => {
    const c = current.getStore();
    if (c === undefined || typeof fn !== 'function') return (real.setTimeout as (...a: unknown[]) => NodeJS.Timeout)(fn, ms, ...args);
    return new VirtualTimer(c, fn as (...a: unknown[]) => void, delayOf(ms), args, false);
  }) as unknown as typeof setTimeout,
  setInterval: ((fn: unknown, ms?: unknown, ...args: unknown[]) => {
    const c = current.getStore();
    if (c === undefined || typeof fn !== 'function') return (real.setInterval as (...a: unknown[]) => NodeJS.Timeout)(fn, ms, ...args);
    return new VirtualTimer(c, fn as (...a: unknown[]) => void, delayOf(ms), args, true);
  }) as unknown as typeof setInterval,
  clearTimeout: ((t: unknown) => {
    if (t instanceof VirtualTimer) t.cancel();
    else real.clearTimeout(t as NodeJS.Timeout);
  }) as typeof clearTimeout,
  clearInterval: ((t: unknown) => {
    if (t instanceof VirtualTimer) t.cancel();
    else real.clearInterval(t as NodeJS.Timeout);
  }) as typeof clearInterval,
};

/** Counts the real timers started inside a client's call: the kit's own are virtual, so these went past it. */
const watch = createHook({
  init(_asyncId, type) {
    const c = current.getStore();
    if (c !== undefined && type === 'Timeout') c.notes.realTimers++;
  },
});

let installed = 0;

/** Routes Date.now() and the timers through the clients' clocks until the returned function is called. Nests. */
export function installLibraryClock(): () => void {
  if (installed++ === 0) {
    Date.now = fakes.now;
    globalThis.setTimeout = fakes.setTimeout;
    globalThis.setInterval = fakes.setInterval;
    globalThis.clearTimeout = fakes.clearTimeout;
    globalThis.clearInterval = fakes.clearInterval;
    watch.enable();
  }
  let done = false;
  return () => {
    if (done) return;
    done = true;
    if (--installed > 0) return;
    watch.disable();
    if (Date.now === fakes.now) Date.now = real.now;
    if (globalThis.setTimeout === fakes.setTimeout) globalThis.setTimeout = real.setTimeout;
    if (globalThis.setInterval === fakes.setInterval) globalThis.setInterval = real.setInterval;
    if (globalThis.clearTimeout === fakes.clearTimeout) globalThis.clearTimeout = real.clearTimeout;
    if (globalThis.clearInterval === fakes.clearInterval) globalThis.clearInterval = real.clearInterval;
  };
}

export function libraryClockNotes(): LibraryClockNotes {
  return { realTimers: 0, timerErrors: [] };
}

/** Runs `fn` (and everything it awaits, and the timers it starts) on `clock`: Date.now() reads WALL_EPOCH_MS + clock.now(). */
export function onClientClock<T>(clock: MonotonicClock, fn: () => T, notes: LibraryClockNotes = libraryClockNotes()): T {
  return current.run({ clock, notes }, fn);
}

/** The notes of the client's call running now, or undefined outside every client's call. */
export function currentNotes(): LibraryClockNotes | undefined {
  return current.getStore()?.notes;
}

/** Runs `fn` outside any client's call: on the real clock (a driver's own I/O timeouts must stay real). */
export function offClientClock<T>(fn: () => T): T {
  return current.exit(fn);
}

/** The warnings a run's notes call for (empty when the library kept to the runner's clocks). */
export function clockWarnings(notes: LibraryClockNotes): string[] {
  return [
    ...(notes.realTimers > 0
      ? [`${notes.realTimers} real timer(s) started inside the library's calls, on the machine's clock, not the run's (node:timers/promises, or a setTimeout kept from before the install): the run did not follow the model's time there`]
      : []),
    ...notes.timerErrors.map((e) => `a library timer threw: ${e}`),
  ];
}
