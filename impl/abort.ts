import type { Lease } from './lease.ts';
import type { AcquireResult } from './leaseLock.ts';
import { refuse } from './options.ts';

/**
 * Cancelling a waiting acquire (its `signal` option), the same way on every
 * lock: a signal already aborted rejects before anything is sent; one that
 * fires during a wait (between retries, in ZooKeeper's line) ends the wait at
 * once; one that fires while an attempt is in flight lets the attempt finish
 * (each is bounded by the lock's timeouts), and a grant it brings is released
 * before the acquire rejects, so the resource is free when the caller hears.
 * The rejection is the signal's reason, as fetch's: an AbortError
 * DOMException for a plain abort(). Every listener an acquire adds to the
 * signal is removed when the wait ends, whichever way.
 */

/** The acquire's `signal` option: absent, or an AbortSignal (one of another realm too: what it has, not its class). */
export function checkSignal(value: unknown): AbortSignal | undefined {
  if (value === undefined || value instanceof AbortSignal) return value;
  const s = value as Partial<AbortSignal> | null;
  if (typeof s !== 'object' || s === null || typeof s.aborted !== 'boolean' || typeof s.addEventListener !== 'function' || typeof s.removeEventListener !== 'function') refuse('signal', 'an AbortSignal', value);
  return value as AbortSignal;
}

/** The signal's reason, as the acquire's rejection: the caller's own value, or the AbortError DOMException of a plain abort(). */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason;
}

/**
 * `work`'s outcome, or the signal's reason as soon as it fires. The work goes
 * on (the caller cleans up after it by its own rules); its outcome is then
 * handled here, never left unhandled. The listener goes when either settles.
 */
export function unlessAborted<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return work;
  return new Promise<T>((resolve, reject) => {
    if (signal.aborted) {
      work.catch(() => undefined);
      reject(abortReason(signal));
      return;
    }
    const onAbort = (): void => reject(abortReason(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error as Error);
      },
    );
  });
}

/**
 * After an attempt that was in flight when the signal fired: its grant, if it
 * brought one, is released (awaited, its failure swallowed: the lease is
 * dropped either way and the backend frees what is left by its own rules),
 * and the acquire rejects with the signal's reason. Unaborted, the result as
 * it is.
 */
export async function settleAborted(result: AcquireResult, signal: AbortSignal | undefined, release: (lease: Lease) => Promise<unknown>): Promise<AcquireResult> {
  if (signal === undefined || !signal.aborted) return result;
  if (result.kind === 'granted') await release(result.lease).catch(() => undefined);
  throw abortReason(signal);
}
