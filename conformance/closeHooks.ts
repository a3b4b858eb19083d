import { valueWithin } from './realTimeLimit.ts';
import { describeThrown } from './thrown.ts';

/**
 * The kit's per-run close hooks (parts.onClose), run at the run's close:
 * each the adapter's code, so each is bounded in real time and none keeps
 * the others, or the kit's own teardown after them, from running.
 */

/** How long one close hook may take: the instance's whole close is bounded by CLOSE_LIMIT_MS (60 s), and the kit's teardown comes after. */
export const CLOSE_HOOK_LIMIT_MS = 10_000;

/**
 * Runs `hooks`, the last registered first (a pool closes before what it
 * was built on), each at most `limitMs` of real time. Returns the first
 * failure (a throw, sync or not, or a hook still pending at its bound) as
 * an Error saying so, the hook's error its cause; null when all ran.
 */
export async function runCloseHooks(hooks: ReadonlyArray<() => unknown>, limitMs = CLOSE_HOOK_LIMIT_MS): Promise<Error | null> {
  let first: Error | null = null;
  for (const hook of [...hooks].reverse()) {
    const what = 'a close hook of the run (parts.onClose)';
    try {
      const done = await valueWithin(Promise.resolve().then(hook), limitMs);
      if (!done.done) first ??= new Error(`${what} had not settled after ${limitMs} ms of real time`);
    } catch (e) {
      first ??= new Error(`${what} threw ${describeThrown(e).split('\n')[0]}`, { cause: e });
    }
  }
  return first;
}
