import { finishWithin } from '../realTimeLimit.ts';
import { RunEnvironmentError } from './runEnvironment.ts';

/**
 * One run at a time on servers the runner resets. A run starts by resetting
 * the servers it was given (restart, flush, clocks back to the start), so a
 * second run started while the first is open would wipe the first's keys,
 * restart its nodes and move their clocks under it, and the first would
 * report that as a conformance failure of the backend. That happened: a test
 * timed out, its check went on in the background (vitest does not stop it),
 * and the next test's runs, on the same cluster, failed OWN-1 ("holds
 * nothing" after a crash-restart that AOF should have survived).
 *
 * Runs enter in order; each waits for the ones before it to close, at most
 * `limitMs` of real time (a run left behind by a close that never finished),
 * and is then failed as an environment error: inconclusive, never judged on
 * servers someone else is using.
 */
export class RunSlot {
  #tail: Promise<void> = Promise.resolve();
  #waiting = 0;

  constructor(
    readonly what: string,
    readonly limitMs = RUN_SLOT_LIMIT_MS,
  ) {
    if (!Number.isFinite(limitMs) || limitMs <= 0) throw new RangeError(`RunSlot: limitMs must be positive, got ${String(limitMs)}`);
  }

  /** Runs waiting for an earlier one to close. */
  get waiting(): number {
    return this.#waiting;
  }

  /**
   * Resolves, once every run that entered before has left, with this run's
   * leave (idempotent). Joins the queue synchronously: a run entered before
   * another's enter() is called goes first.
   */
  enter(): Promise<() => void> {
    const before = this.#tail;
    let leave!: () => void;
    const left = new Promise<void>((resolve) => {
      leave = resolve;
    });
    this.#tail = before.then(() => left);
    this.#waiting++;
    return new Promise<() => void>((resolve, reject) => {
      let gaveUp = false;
      const timer = setTimeout(() => {
        gaveUp = true;
        this.#waiting--;
        // Gives up its turn: the runs behind it wait only for the ones before.
        leave();
        reject(new RunEnvironmentError(`${this.what}: another run on these servers was still open after ${this.limitMs} ms; this run was not started (its reset would have wiped that run's state)`));
      }, this.limitMs);
      void before.then(() => {
        if (gaveUp) return;
        clearTimeout(timer);
        this.#waiting--;
        resolve(leave);
      });
    });
  }
}

/** How long a run waits for the one before it on the same servers: far past any run's length, short of a test's timeout. */
export const RUN_SLOT_LIMIT_MS = 120_000;

/**
 * The slot of one set of servers: named by the object that holds them (a
 * cluster, an ensemble) or by a URL. Every run that resets those servers or
 * injects a fault into their processes (a crash, a failover) takes it.
 */
export function slotOf(servers: object | string, what: string): RunSlot {
  if (typeof servers === 'string') {
    let slot = byUrl.get(servers);
    if (slot === undefined) byUrl.set(servers, (slot = new RunSlot(what)));
    return slot;
  }
  let slot = byObject.get(servers);
  if (slot === undefined) byObject.set(servers, (slot = new RunSlot(what)));
  return slot;
}
const byObject = new WeakMap<object, RunSlot>();
const byUrl = new Map<string, RunSlot>();

/**
 * Starts a run (a plain instance object) once it has the slot; the run's
 * close leaves the slot (also when the close fails), and so does a start
 * that fails. A close still running after `closeLimitMs` leaves it too: the
 * runner has given up on that close by then (lockstep's CLOSE_LIMIT_MS, a
 * warning of a teardown defect), and a close that never ends (a goodbye held
 * for a client still paused) must not keep every later run waiting.
 */
export async function inSlot<I extends { close(): Promise<void> }>(slot: RunSlot, start: () => Promise<I>, closeLimitMs = SLOT_CLOSE_LIMIT_MS): Promise<I> {
  const leave = await slot.enter();
  let instance: I;
  try {
    instance = await start();
  } catch (e) {
    leave();
    throw e;
  }
  return {
    ...instance,
    close: async () => {
      const closing = instance.close();
      // Leaves at the end of the close or at the limit, whichever comes first; the close's own failure goes to the caller below.
      void finishWithin(closing, closeLimitMs).then(leave, leave);
      try {
        await closing;
      } finally {
        leave();
      }
    },
  };
}

/** How long a run's close holds its slot at most: the runner's own bound on a close (lockstep's CLOSE_LIMIT_MS). */
export const SLOT_CLOSE_LIMIT_MS = 60_000;
