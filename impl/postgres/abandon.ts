/**
 * A connection the lock is still opening when close() comes holds nothing
 * yet (no session lock was taken on it, no transaction begun): close()
 * abandons it, its socket destroyed at once, rather than wait for its connect
 * to finish or run out (statementTimeoutMs) and then for its goodbye.
 */

/** Runs `onAbort` should `signal` fire while `opening` runs (not after it: the listener goes with the opening). */
export async function abandonable<T>(signal: AbortSignal | undefined, onAbort: () => void, opening: () => Promise<T>): Promise<T> {
  if (signal === undefined) return opening();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    if (signal.aborted) onAbort();
    return await opening();
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}
