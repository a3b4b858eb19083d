import type { AcquireResult } from '../../impl/leaseLock.ts';
import { MAX_TOKEN } from '../../model/errors.ts';

/**
 * An adapter's concurrent client broke its contract (docs/adapter.md): an
 * answer of the wrong shape, or a call that never settled. Not a finding
 * about the library, and not a failure the history can record as an
 * unknown outcome: the client stops, and the run ends as the adapter's
 * error (exit 2), whatever its history says.
 */
export class AdapterBreach extends Error {
  override readonly name = 'AdapterBreach';
}

/** Bound on one call as the workload sees it, beyond the clients' own timeouts (docs/adapter.md, docs/stress.md). */
export const CALL_GUARD_MS = 15_000;

/** `r` if it is an AcquireResult for `resource` as ConcurrentLock.acquire promises one; else AdapterBreach saying what is wrong. */
export function checkedAcquire(r: unknown, resource: string, tokens: boolean): AcquireResult {
  const bad = (what: string): never => {
    throw new AdapterBreach(`acquire('${resource}') resolved ${what}: it must resolve { kind: 'granted', lease } | { kind: 'denied', reason } | { kind: 'timed-out' } (docs/adapter.md)`);
  };
  if (typeof r !== 'object' || r === null) return bad(r === null ? 'null' : typeof r === 'undefined' ? 'undefined' : `a ${typeof r}`);
  const kind = (r as { kind?: unknown }).kind;
  if (kind === 'timed-out') return r as AcquireResult;
  if (kind === 'denied') {
    if (typeof (r as { reason?: unknown }).reason !== 'string') bad('a denial without a reason string');
    return r as AcquireResult;
  }
  if (kind !== 'granted') return bad(`an unknown kind ${typeof kind === 'string' ? JSON.stringify(kind.slice(0, 40)) : String(kind)}`);
  const lease = (r as { lease?: unknown }).lease as Record<string, unknown> | null | undefined;
  if (typeof lease !== 'object' || lease === null) return bad('a grant without a lease');
  if (lease['resource'] !== resource) bad(`a lease for another resource (${typeof lease['resource'] === 'string' ? JSON.stringify(lease['resource'].slice(0, 60)) : String(lease['resource'])})`);
  if (typeof lease['owner'] !== 'string' || lease['owner'] === '') bad('a lease without an owner (a non-empty string)');
  const token = lease['token'];
  if (tokens && (typeof token !== 'bigint' || token < 0n || token > MAX_TOKEN)) bad(`a lease whose token is not a bigint in [0, 2^63-1] (got ${typeof token === 'bigint' ? `${token}n` : typeof token}; an adapter without tokens declares tokens: false)`);
  const until = lease['validUntilMs'];
  if (until !== null && (typeof until !== 'number' || !Number.isFinite(until))) bad('a lease whose validUntilMs is neither a finite number of ms nor null');
  const signal = lease['signal'] as { aborted?: unknown; addEventListener?: unknown } | null | undefined;
  if (typeof signal !== 'object' || signal === null || typeof signal.aborted !== 'boolean' || typeof signal.addEventListener !== 'function') bad('a lease without an AbortSignal');
  return r as AcquireResult;
}

/** `work`, or AdapterBreach naming `call` once CALL_GUARD_MS pass without it settling. */
export function withinGuard<T>(work: Promise<T>, call: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new AdapterBreach(`${call} had no answer within ${CALL_GUARD_MS} ms (every call of an adapter must settle: docs/adapter.md)`)), CALL_GUARD_MS);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}
