import { InvalidInputError, MAX_TOKEN, MAX_TTL_MS } from '../model/errors.ts';
import type { ModelErrorCode } from '../model/errors.ts';
import type { PropertyId } from '../model/properties.ts';
import { holdsValid } from '../model/world.ts';
import { hasTtl } from '../model/design.ts';
import type { World } from '../model/state.ts';
import type { AcquireResult, ExtendResult } from '../impl/leaseLock.ts';
import type { Lease } from '../impl/lease.ts';
import type { ReadResult, WriteResult } from '../impl/fencedStore.ts';
import type { LockClient } from './adapter.ts';
import { entryOf } from '../model/record.ts';

/**
 * What the harness checks of a backend beyond its outcomes: that every
 * result is one the adapter API defines (nothing is mapped to a neighbouring
 * outcome), that a lease's signal (held once, as user code holds it) fires
 * exactly when the model says the lease is over and with the reason the
 * model gives, and that invalid input is refused with InvalidInputError.
 */

/** The backend broke the adapter API's contract; `property` is what a user trusting the answer would lose. */
export class ContractBreach extends Error {
  override readonly name = 'ContractBreach';
  constructor(
    readonly property: PropertyId,
    message: string,
  ) {
    super(message);
  }
}

const LOSS_REASONS = ['expired', 'released', 'connection-lost'] as const;
export type LossReason = (typeof LOSS_REASONS)[number];

const isToken = (t: unknown): t is bigint => typeof t === 'bigint' && t >= 0n && t <= MAX_TOKEN;
const isDeadline = (v: unknown): v is number | null => v === null || (typeof v === 'number' && Number.isFinite(v));
const shown = (v: unknown): string => JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x instanceof AbortSignal ? 'AbortSignal' : x)) ?? String(v);

/** An acquire's result as the API defines it, or a breach (a user would act on an answer it cannot read: MUTEX-1). */
export function checkAcquireResult(r: unknown): AcquireResult {
  const x = r as AcquireResult | undefined;
  const ok =
    x !== undefined &&
    x !== null &&
    ((x.kind === 'granted' &&
      typeof x.lease === 'object' &&
      x.lease !== null &&
      typeof x.lease.resource === 'string' &&
      typeof x.lease.owner === 'string' &&
      isToken(x.lease.token) &&
      isDeadline(x.lease.validUntilMs) &&
      // The signal is read when user code first needs it, and checked then (a lease makes it on first read).
      'signal' in x.lease) ||
      (x.kind === 'denied' && ['held', 'no-quorum', 'validity-exhausted'].includes(x.reason)) ||
      (x.kind === 'timed-out' && Object.keys(x).length === 1));
  // A token out of range breaks fencing; any other shape leaves the user not knowing whether it holds the lock.
  const badToken = x?.kind === 'granted' && typeof x.lease === 'object' && x.lease !== null && !isToken(x.lease.token);
  if (!ok) throw new ContractBreach(badToken ? 'FENCE-1' : 'MUTEX-1', `acquire answered ${shown(r)}, which the adapter API does not define`);
  return x;
}

export function checkExtendResult(r: unknown): ExtendResult {
  const x = r as ExtendResult | undefined;
  const ok = x !== undefined && x !== null && ((x.kind === 'extended' && typeof x.validUntilMs === 'number' && Number.isFinite(x.validUntilMs)) || (x.kind === 'not-extended' && ['expired', 'no-quorum'].includes(x.reason)));
  if (!ok) throw new ContractBreach('MUTEX-1', `extend answered ${shown(r)}, which the adapter API does not define`);
  return x;
}

export function checkWriteResult(r: unknown): WriteResult {
  const x = r as WriteResult | undefined;
  const ok = x !== undefined && x !== null && ((x.kind === 'accepted' && Object.keys(x).length === 1) || (x.kind === 'rejected' && isToken(x.highest)));
  if (!ok) throw new ContractBreach('FENCE-2', `the store's write answered ${shown(r)}, which the adapter API does not define`);
  return x;
}

export function checkReadResult(r: unknown): ReadResult {
  const x = r as ReadResult | undefined;
  const ok = x !== undefined && x !== null && (x.value === null || typeof x.value === 'string') && (x.token === null || isToken(x.token)) && (x.value === null) === (x.token === null);
  if (!ok) throw new ContractBreach('STORE-1', `the store's read answered ${shown(r)}, which the adapter API does not define`);
  return x;
}

/** Why a held signal fired, if it carries a reason the API defines (a LeaseLostError). */
export function lossReason(signal: AbortSignal): LossReason | null {
  const reason = (signal.reason as { name?: unknown; reason?: unknown } | undefined) ?? {};
  return reason.name === 'LeaseLostError' && LOSS_REASONS.includes(reason.reason as LossReason) ? (reason.reason as LossReason) : null;
}

/**
 * The held signals against the model, after an agreed step: a signal that
 * has not fired although every model state has the lease over lets user code
 * go on (MUTEX-1); one that fired while every state holds the lease valid
 * gives it away (LIVE-1, the safe direction); a fired signal must give the
 * reason the model has for the loss. Paused clients whose session the server
 * dropped learn it only at resume: not judged until then.
 */
export function signalProblem(worlds: readonly World[], held: ReadonlyArray<ReadonlyMap<string, HeldLease>>): ContractBreach | null {
  for (const [client, leases] of held.entries()) {
    for (const [resource, { lease, signal }] of leases) {
      if (worlds.some((w) => w.clients[client]!.sessionLost)) continue;
      // A paused client runs no timers and no user code: its signal is judged once it resumes.
      if (worlds.some((w) => w.clients[client]!.paused)) continue;
      const valid = worlds.map((w) => holdsValid(w, client, resource));
      const who = `client ${client}'s lease on '${resource}'`;
      if (signal.aborted && valid.every(Boolean)) return new ContractBreach('LIVE-1', `${who} signalled its loss (${lossReason(signal) ?? shown(signal.reason)}) while the model holds it valid`);
      if (!signal.aborted && valid.every((v) => !v)) return new ContractBreach('MUTEX-1', `${who} is over in the model but its signal has not fired: user code holding it goes on`);
      if (signal.aborted && valid.every((v) => !v)) {
        const reason = lossReason(signal);
        // A ttl lease expires (also one whose client keeps no deadline and drops it); one that lives with its session is lost with the connection.
        const wanted = worlds.map((w): LossReason => (entryOf(w.clients[client]!.leases, resource) !== undefined || lease.validUntilMs !== null || hasTtl(w.config.design) ? 'expired' : 'connection-lost'));
        if (reason === null || !wanted.includes(reason)) return new ContractBreach('LIVE-1', `${who} signalled its loss with reason ${reason ?? shown(signal.reason)}; the model has it ${[...new Set(wanted)].join(' or ')}`);
      }
    }
  }
  return null;
}

/** A lease the harness holds as user code holds it: the signal read once, when it was granted. */
export interface HeldLease {
  readonly lease: Lease;
  readonly signal: AbortSignal;
}

/** After a release that ended the lease, the held signal has fired with reason 'released' (unless it had fired already). */
export function checkReleasedSignal(signal: AbortSignal, firedBefore: boolean, resource: string): void {
  if (!signal.aborted) throw new ContractBreach('MUTEX-1', `the lease on '${resource}' was released but its signal did not fire: user code holding it goes on`);
  if (!firedBefore && lossReason(signal) !== 'released') throw new ContractBreach('LIVE-1', `the released lease on '${resource}' signalled reason ${lossReason(signal) ?? shown(signal.reason)}, not 'released'`);
}

/** One invalid call a client must refuse with InvalidInputError, naming what is wrong, before it touches any state. */
export interface Probe {
  readonly what: string;
  /** The input the error message must name: a clear error says what to fix. */
  readonly names: string;
  /** The error's code (spec: the table of InvalidInputError codes). */
  readonly code: ModelErrorCode;
  readonly call: () => Promise<unknown>;
}

/**
 * The invalid inputs the harness sends, turn by turn: a bad resource, ttls
 * out of range or not integers, retries and retry delays out of range, an
 * extension to a bad ttl, tokens below 0 and above 2^63-1 at the store.
 */
export function probes(client: LockClient, resource: string, ttl: boolean, lease: Lease | undefined): Probe[] {
  const CODES: Record<string, ModelErrorCode> = { resource: 'invalid-resource', ttl: 'invalid-ttl', retries: 'precondition', retryDelayMs: 'invalid-duration' };
  const acquire = (what: string, names: string, r: string, options: Record<string, unknown>): Probe => ({ what, names, code: CODES[names]!, call: () => client.acquire(r, options as never) });
  const ttlMs = ttl ? { ttlMs: 10 } : {};
  const list: Probe[] = [
    acquire("acquire('')", 'resource', '', ttlMs),
    acquire(`acquire of a ${300}-character resource`, 'resource', 'x'.repeat(300), ttlMs),
    acquire('acquire with retries -1', 'retries', resource, { ...ttlMs, retries: -1 }),
    // Just past each end of the range, and not a whole number: a bound off by one or a missing integer check shows.
    acquire('acquire with retries 101', 'retries', resource, { ...ttlMs, retries: 101 }),
    acquire('acquire with retries 0.5', 'retries', resource, { ...ttlMs, retries: 0.5 }),
    acquire('acquire with retryDelayMs -1', 'retryDelayMs', resource, { ...ttlMs, retries: 1, retryDelayMs: -1 }),
    { what: 'write with token -1', names: 'token', code: 'invalid-token', call: () => client.store.write(resource, -1n, 'x') },
    { what: 'write with token 2^63', names: 'token', code: 'invalid-token', call: () => client.store.write(resource, MAX_TOKEN + 1n, 'x') },
  ];
  if (ttl) {
    list.push(acquire('acquire with ttl 0', 'ttl', resource, { ttlMs: 0 }), acquire('acquire with ttl 1.5', 'ttl', resource, { ttlMs: 1.5 }), acquire(`acquire with ttl ${MAX_TTL_MS + 1}`, 'ttl', resource, { ttlMs: MAX_TTL_MS + 1 }));
    const extend = client.extend?.bind(client);
    if (lease !== undefined && extend !== undefined) list.push({ what: 'extend to ttl -1', names: 'ttl', code: 'invalid-ttl', call: () => extend(lease, -1) });
  }
  return list;
}

/** Whether an error is the typed InvalidInputError (by class or, across module copies, by name). */
export function isInvalidInput(e: unknown): boolean {
  return e instanceof InvalidInputError || (e instanceof Error && e.name === 'InvalidInputError');
}
