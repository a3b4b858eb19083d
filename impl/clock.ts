import { InvalidInputError, shown } from '../model/errors.ts';

/**
 * The client's clock. Lock clients measure elapsed time and lease deadlines
 * on a monotonic clock read through this interface, so tests can drive it.
 */
export interface MonotonicClock {
  /** Milliseconds on a clock that never steps backwards. */
  now(): number;
  /** Calls `fn` once, when `now()` reaches `atMs`. Returns a function that cancels the call. */
  schedule(atMs: number, fn: () => void): () => void;
}

/** The longest delay a Node timer takes: a longer one (Infinity, 1e308) fires after 1 ms instead. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * A timer at `atMs` on performance.now(). `keepAlive`: whether it holds the
 * process open. A watch (a lease's deadline, a round's bound on late
 * replies) does not: a program that is done exits without waiting for it. A
 * wait that a caller awaits (a retry pause, sleep, withTimeout) does: were it
 * the last thing pending, the process would exit with the caller's promise
 * never settled, and with exit code 0.
 */
function timerAt(atMs: number, fn: () => void, keepAlive: boolean): () => void {
  // NaN is no instant: now() never reaches it, and a timer for it fired every ms to find that out, for ever.
  if (typeof atMs !== 'number' || Number.isNaN(atMs)) throw new InvalidInputError('invalid-duration', `atMs must be a number of ms on the clock, got ${shown(atMs)}`);
  const delayMs = atMs - performance.now();
  // Due already: run after this turn's I/O callbacks, not after setTimeout's 1 ms floor (an immediate keeps the process open until it runs).
  if (delayMs <= 0) {
    const immediate = setImmediate(fn);
    return () => clearImmediate(immediate);
  }
  let cancel: () => void;
  // Node times timers on its loop's cached ms clock, which can run up to 1 ms behind performance.now(): a timer that
  // fires before `atMs` waits out the rest, so that `now()` has reached `atMs` when `fn` runs.
  const fire = (): void => {
    if (performance.now() >= atMs) fn();
    else cancel = timerAt(atMs, fn, keepAlive);
  };
  // A whole number of ms: Node keeps one timer list per distinct delay, so fractional delays would each make a list of their own.
  // At most the longest delay a timer takes: past it Node fired after 1 ms, and `fire` asked again, every ms for ever
  // (with a TimeoutOverflowWarning each time); a far deadline is waited for in steps.
  const timer = setTimeout(fire, Math.min(Math.ceil(delayMs), MAX_TIMER_MS));
  if (!keepAlive) timer.unref?.();
  cancel = () => clearTimeout(timer);
  return () => cancel();
}

/** The process's own monotonic clock: performance.now() and timers, which do not hold the process open (see awaitedAt). */
export const systemClock: MonotonicClock = {
  now: () => performance.now(),
  schedule: (atMs, fn) => timerAt(atMs, fn, false),
};

/**
 * clock.schedule for a wait that a caller awaits: on the system clock its
 * timer holds the process open until it fires or is cancelled (timerAt); on
 * any other clock, the clock's own schedule.
 */
export function awaitedAt(clock: MonotonicClock, atMs: number, fn: () => void): () => void {
  return clock === systemClock ? timerAt(atMs, fn, true) : clock.schedule(atMs, fn);
}

/** Resolves after `ms` on `clock`, or rejects when `signal` aborts first. A caller awaits it: on the system clock it holds the process open. */
export function sleep(clock: MonotonicClock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const cancel = awaitedAt(clock, clock.now() + ms, () => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    });
    const onAbort = (): void => {
      cancel();
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
