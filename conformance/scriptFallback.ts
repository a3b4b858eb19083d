import { createHash } from 'node:crypto';
import { setImmediate as nextTurn } from 'node:timers/promises';

/**
 * A script request sent as `EVALSHA`, which a server without the script in
 * its cache answers `NOSCRIPT`, and the library then sends again as `EVAL`
 * with the script's text (redlock's `_executeScript` and
 * `_attemptOperationOnClient`, redis-semaphore's `createEval`): one request
 * of the library's, which the model counts as one round trip. Put through
 * the faults as two, the cache miss reads as a fault the schedule never
 * drew (a release sent before a pause landing after the resume, a slow
 * node's key set one slow round trip late): arithmetic of the kit's, not
 * the library's contract. So the kit hands the library its `NOSCRIPT` at
 * once, takes the `EVAL` it sends for it (the same script, the same keys and
 * arguments, on the same connection) as the rest of that round trip, and
 * the faults deliver the `EVAL`'s reply as the round trip's. Taken into the
 * round trip, the `EVAL` is out before virtual time moves on (the network
 * waits for a request's real I/O), however many turns the library takes to
 * send it. An `EVAL` of another script or other arguments, or any other
 * command, is a request of its own.
 */

/** A reply the kit took over from the driver, and where the library waits for it. */
export interface Taken {
  readonly reply: Promise<unknown>;
  readonly deliver: { readonly resolve: (value: unknown) => void; readonly reject: (error: Error) => void };
}

/**
 * How many turns of the event loop a library gets to send its `EVAL` after
 * the `NOSCRIPT`: the three do it from the rejection's own continuation
 * (microtasks, or a callback one turn on). Turns, not time: virtual time is
 * not moving meanwhile, and a library that sends none is not waited for.
 */
const FOLLOW_TURNS = 50;

/** The fallbacks one client's connection to one node is waiting for. */
export class ScriptFallbacks {
  readonly #waiting = new Map<string, Array<(taken: Taken) => void>>();

  /** Whether an error is a server's answer that the script is not in its cache. */
  static isNoScript(error: unknown): boolean {
    return error instanceof Error && error.message.startsWith('NOSCRIPT');
  }

  /** Waits (bounded) for the EVAL that falls back for an EVALSHA of `args` ([sha, numkeys, ...]); null if none came. */
  async follow(args: readonly unknown[]): Promise<Taken | null> {
    const key = keyOf(String(args[0]), args.slice(1));
    let taken: Taken | null = null;
    const take = (t: Taken): void => {
      taken = t;
    };
    this.#waiting.set(key, [...(this.#waiting.get(key) ?? []), take]);
    for (let turn = 0; turn < FOLLOW_TURNS && taken === null; turn++) await nextTurn();
    const left = (this.#waiting.get(key) ?? []).filter((t) => t !== take);
    if (left.length === 0) this.#waiting.delete(key);
    else this.#waiting.set(key, left);
    return taken;
  }

  /** The waiter an EVAL of `args` ([script, numkeys, ...]) falls back for, taken off the list; undefined if it is a request of its own. */
  claim(name: string, args: readonly unknown[]): ((taken: Taken) => void) | undefined {
    if (name.toLowerCase() !== 'eval' || this.#waiting.size === 0) return undefined;
    const key = keyOf(createHash('sha1').update(String(args[0]), 'utf8').digest('hex'), args.slice(1));
    const waiters = this.#waiting.get(key);
    const first = waiters?.[0];
    if (first === undefined) return undefined;
    if (waiters!.length === 1) this.#waiting.delete(key);
    else this.#waiting.set(key, waiters!.slice(1));
    return first;
  }
}

function keyOf(sha: string, rest: readonly unknown[]): string {
  return JSON.stringify([sha.toLowerCase(), ...rest.map((a) => (Buffer.isBuffer(a) ? a.toString('hex') : String(a)))]);
}
