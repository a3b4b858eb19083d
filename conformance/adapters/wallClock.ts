import { AsyncLocalStorage } from 'node:async_hooks';
import type { BackendInstance, Environment, LockClient } from '../adapter.ts';

/**
 * A faked wall clock for in-process lock libraries that read Date.now().
 *
 * The runner owns time: every simulated client has a virtual monotonic clock,
 * and lockcheck's servers run under libfaketime so that their wall clocks are
 * the model's. A library that reads Date.now() reads the machine's clock
 * instead, which neither follows virtual time (a 40 ms delay fault takes no
 * real time) nor stands still between two reads (real I/O takes a ms or two,
 * differently on every run). The library's deadlines would then be off by an
 * amount that depends on the machine, not on the schedule.
 *
 * This is the in-process counterpart of libfaketime: while a client's call
 * into the library runs (and every continuation of it: the context follows
 * awaits), Date.now() reads that client's wall clock, `WALL_EPOCH_MS` plus its
 * monotonic clock's reading. The model's client has one clock, so its wall
 * clock runs with it (drift included) and never steps. Code outside a client's
 * call (the runner, vitest, ioredis's own timers) still reads the real clock.
 */
export const WALL_EPOCH_MS = Date.UTC(2030, 0, 1);

const current = new AsyncLocalStorage<() => number>();
const systemNow = Date.now;
const fakedNow = (): number => {
  const now = current.getStore();
  return now === undefined ? systemNow.call(Date) : now();
};
let installed = 0;

/** Routes Date.now() through the faked clocks until the returned function is called. Nests. */
export function installWallClock(): () => void {
  if (installed++ === 0) Date.now = fakedNow;
  let done = false;
  return () => {
    if (done) return;
    done = true;
    if (--installed === 0 && Date.now === fakedNow) Date.now = systemNow;
  };
}

/** Runs `fn` (and everything it awaits) with Date.now() reading `readingMs()` + WALL_EPOCH_MS. */
export function onWallClock<T>(readingMs: () => number, fn: () => T): T {
  return current.run(() => WALL_EPOCH_MS + readingMs(), fn);
}

/**
 * A library's backend instance over one run: Date.now() goes through the faked
 * clocks (when `faked`) from before the clients are built until the instance
 * closes; a failed build closes the run too.
 */
export async function onWallClockInstance(
  run: { readonly env: Environment; close(): Promise<void> },
  clients: () => Promise<LockClient[]>,
  faked = true,
): Promise<BackendInstance> {
  const restoreDateNow = faked ? installWallClock() : () => undefined;
  try {
    const built = await clients();
    return {
      clients: built,
      env: run.env,
      close: async () => {
        restoreDateNow();
        await run.close();
      },
    };
  } catch (e) {
    restoreDateNow();
    await run.close();
    throw e;
  }
}
