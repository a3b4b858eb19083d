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

/** The process's own monotonic clock: performance.now() and timers. */
export const systemClock: MonotonicClock = {
  now: () => performance.now(),
  schedule(atMs, fn) {
    const delayMs = atMs - performance.now();
    // Due already: run after this turn's I/O callbacks, not after setTimeout's 1 ms floor.
    if (delayMs <= 0) {
      const immediate = setImmediate(fn);
      return () => clearImmediate(immediate);
    }
    let cancel: () => void;
    // Node times timers on its loop's cached ms clock, which can run up to 1 ms behind performance.now(): a timer that
    // fires before `atMs` waits out the rest, so that `now()` has reached `atMs` when `fn` runs.
    const fire = (): void => {
      if (performance.now() >= atMs) fn();
      else cancel = systemClock.schedule(atMs, fn);
    };
    // A whole number of ms: Node keeps one timer list per distinct delay, so fractional delays would each make a list of their own.
    const timer = setTimeout(fire, Math.ceil(delayMs));
    timer.unref?.();
    cancel = () => clearTimeout(timer);
    return () => cancel();
  },
};

/** Resolves after `ms` on `clock`, or rejects when `signal` aborts first. */
export function sleep(clock: MonotonicClock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const cancel = clock.schedule(clock.now() + ms, () => {
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
