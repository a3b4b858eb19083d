import { checkTtl } from '../../model/errors.ts';
import type { MonotonicClock } from '../clock.ts';
import { driftMarginMs, leaseMargins, type LeaseMargins } from '../leaseMargins.ts';
import { checkedClock } from '../checkedClock.ts';
import { checkClock, checkLease, checkMethods, checkObject, checkPrefix, knownOptions, grantNamed } from '../options.ts';
import { abortReason, checkSignal } from '../abort.ts';
import { checkLeaseAcquire } from '../leaseAcquireInput.ts';
import { retryDenied } from '../retryDenied.ts';
import { isDefect, isRefusal, mustThrow, TimeoutError, TokenOverflowError } from '../errors.ts';
import { HeldLeases } from '../heldLeases.ts';
import { LeaseHandle } from '../lease.ts';
import { renewal } from '../renewal.ts';
import type { Lease } from '../lease.ts';
import { ACQUIRE_OPTIONS, type AcquireOptions, type AcquireResult, type ExtendResult } from '../leaseLock.ts';
import { DEFAULT_PREFIX, lockKey } from './keys.ts';
import { isLeaseId, type EtcdNode } from './node.ts';
import { MAX_TOKEN } from '../../model/errors.ts';

/**
 * A lease lock on one etcd cluster (spec 7.6 `etcd-lease`). One attempt
 * grants a fresh etcd lease and, in one transaction, puts the resource's key
 * under it only if the key is absent; the key's create revision is the
 * fencing token, strictly increasing across the whole cluster. The lease's
 * validity is measured on the client's monotonic clock from before the
 * grant, less the same drift allowance as Redlock (ceil(driftFactor * ttl) +
 * clockMarginMs): etcd expires the lease on the leader's clock, which this
 * client cannot see. Extend is one keep-alive round and, beside it, a check
 * that the key is still ours; release deletes the key
 * only while it is under our lease with our create revision, and revokes
 * the lease.
 *
 * etcd's ttls are whole seconds: the lease is granted for ceil(ttl / 1 s)
 * (or etcd's minimum, if larger), so the key may outlive the validity the
 * client computes from the ttl it asked for, never the other way round.
 */
export interface EtcdLockOptions {
  /** The etcd calls (etcd3Node over an etcdClient). */
  readonly node: EtcdNode;
  /** The client's monotonic clock: validity is measured on it and the lease's deadline is on it. */
  readonly clock: MonotonicClock;
  /** Allowance for clock drift, a fraction of the ttl in [0, 1). Default 0.01. */
  readonly driftFactor?: number;
  /** The fixed part of the allowance, ms. Default 2. */
  readonly clockMarginMs?: number;
  /** The lease's signal fires this many ms before its validity deadline; an acquire that would leave less usable time than that is denied `validity-exhausted` (the key released). Default 0. */
  readonly safetyMarginMs?: number;
  /** Key prefix. Default 'lockcheck/'. */
  readonly prefix?: string;
}

const checkLockKeys = knownOptions('EtcdLock options', ['node', 'clock', 'driftFactor', 'clockMarginMs', 'safetyMarginMs', 'prefix']);
const checkAcquireKeys = knownOptions('acquire options', ACQUIRE_OPTIONS);

interface Held {
  readonly handle: LeaseHandle;
  readonly leaseId: string;
  /** The ttl the lease was granted with, ms: a keep-alive renews exactly that. */
  readonly ttlMs: number;
}

/**
 * The etcd lease lock of EtcdLockOptions: acquire, extend and release, each
 * lease carrying the key's create revision as its fencing token and a
 * signal that fires when it may no longer be used. The constructor throws
 * InvalidInputError('invalid-config') for bad options.
 */
export class EtcdLock {
  readonly #node: EtcdNode;
  readonly #clock: MonotonicClock;
  /** The clock as given, for clockOf. */
  readonly #given: MonotonicClock;
  readonly #margins: LeaseMargins;
  readonly #prefix: string;
  readonly #held = new HeldLeases<Held>((held) => held.handle);

  constructor(options: EtcdLockOptions) {
    checkObject(options, 'EtcdLock options');
    checkLockKeys(options);
    checkMethods(options.node, 'node', 'an EtcdNode', ['grant', 'putIfAbsent', 'keepAlive', 'owns', 'deleteIfOwned', 'revoke']);
    this.#given = checkClock(options.clock);
    // Each reading checked (impl/checkedClock.ts): a reading that is no finite number is InvalidInputError before anything is sent.
    this.#clock = checkedClock(this.#given);
    this.#margins = leaseMargins(options, 10_000);
    this.#prefix = checkPrefix(options.prefix ?? DEFAULT_PREFIX, 'prefix');
    this.#node = options.node;
  }

  /** The clock this lock times its leases by. */
  clockOf(): MonotonicClock {
    return this.#given;
  }

  /**
   * One or more attempts, as `options` says. Throws InvalidInputError for a
   * bad resource or options, and ConnectionConfigError or ServerRefusedError
   * (no further attempt) when etcd refuses the credentials or the calls.
   */
  async acquire(resource: string, options: AcquireOptions): Promise<AcquireResult> {
    const plan = checkLeaseAcquire(resource, options, checkAcquireKeys);
    const signal = checkSignal(options.signal);
    if (signal?.aborted) throw abortReason(signal);
    // An attempt in flight when the signal fires finishes (its calls are bounded); a grant it brings is released.
    return retryDenied(plan, signal, this.#clock, () => Math.random(), () => this.#attempt(resource, plan.ttlMs), (lease) => this.release(lease));
  }

  /**
   * One keep-alive round, and beside it one transaction that checks the key
   * is still ours (its create revision and our lease). etcd renews a lease
   * to the ttl it was granted with, so the lease is extended by that ttl
   * whatever `ttlMs` asks. A lease etcd no longer knows, or a key deleted or
   * replaced behind the holder's back (an operator's delete or put: the
   * lease lives on without the key, and another client can be granted), is
   * lost: its signal fires at once, and the lease is revoked. Nothing
   * watches the key between extends: a deletion is seen at the next extend.
   * A refused call (ConnectionConfigError, ServerRefusedError) is thrown,
   * not read as no-quorum; the lease stays valid until its deadline.
   */
  async extend(lease: Lease, ttlMs: number): Promise<ExtendResult> {
    checkTtl(ttlMs);
    checkLease(lease, 'extend');
    // Read first: a clock that cannot be read is the caller's error to hear (InvalidInputError), before the lease reads it as lost.
    const startedMs = this.#clock.now();
    const held = this.#held.get(lease);
    if (held === undefined || held.handle.lost) return { kind: 'not-extended', reason: 'expired' };
    const [renewed, owned] = await Promise.allSettled([this.#node.keepAlive(held.leaseId), this.#node.owns(lockKey(lease.resource, this.#prefix), held.leaseId, lease.token)]);
    // A loss either call proves wins over the other's failure: the lock is free for others already.
    if ((renewed.status === 'fulfilled' && renewed.value <= 0) || (owned.status === 'fulfilled' && !owned.value)) {
      held.handle.lose('expired');
      if (renewed.status === 'fulfilled' && renewed.value > 0) void this.#node.revoke(held.leaseId).catch(() => undefined);
      return { kind: 'not-extended', reason: 'expired' };
    }
    for (const r of [renewed, owned]) if (r.status === 'rejected' && mustThrow(r.reason)) throw r.reason;
    if (renewed.status === 'rejected' || owned.status === 'rejected') return { kind: 'not-extended', reason: 'no-quorum' };
    return renewal(held.handle, startedMs, held.ttlMs, this.#margins, this.#clock);
  }

  /**
   * Deletes the key while it is ours and revokes the lease; fires the
   * lease's signal. Never throws for an outage: the lease is dropped
   * whatever etcd says, and a key etcd would neither delete nor revoke goes
   * with its lease's ttl. A refusal (ConnectionConfigError,
   * ServerRefusedError) is thrown, after the lease is dropped, when it kept
   * the lock from being freed: the delete and the revoke both failed, one
   * refused (as the Redis lock's release throws a refusal that kept it off a
   * quorum); either one done frees the key (the revoke deletes it too).
   * A programming error (a TypeError, ...) from either call is thrown too.
   * Resolves to whether the release is known: true when the delete or the
   * revoke landed (or an earlier release of the lease did), false when
   * both failed (the key may stay until the lease's ttl; a later release of
   * the same lease tries again). A lease lost on the client's clock is
   * released as a held one: its key may still be there. A lease this lock
   * did not grant (another lock's, another process's: a record of its
   * resource, owner and token) is released by what it names, as the Redis
   * lock's by owner: its key is deleted only while it carries that etcd
   * lease and create revision, and then the etcd lease is revoked; `true`
   * when etcd answered the delete. A token that is no bigint in
   * [0, 2^63-1] is InvalidInputError('precondition'), a resource acquire
   * refuses InvalidInputError('invalid-resource'), before any call.
   */
  async release(lease: Lease): Promise<boolean> {
    checkLease(lease, 'release');
    const held = this.#held.release(lease);
    // Not tracked: released before (an answered release did the work), or granted by another lock (another
    // process's, say). A lost lease is still tracked, pruned or not (HeldLeases).
    if (held === undefined) return this.#held.released(lease) || this.#releaseUntracked(lease);
    // The delete is conditional on lease and create revision; the revoke frees the lease (and would delete the key too).
    const [deleted, revoked] = await Promise.allSettled([this.#node.deleteIfOwned(lockKey(lease.resource, this.#prefix), held.leaseId, lease.token), this.#node.revoke(held.leaseId)]);
    // A programming error is no etcd failure: the caller hears it, as from the Redis lock's release.
    for (const r of [deleted, revoked]) if (r.status === 'rejected' && isDefect(r.reason)) throw r.reason;
    if (deleted.status === 'rejected' && revoked.status === 'rejected') for (const r of [deleted, revoked]) if (isRefusal(r.reason)) throw r.reason;
    // Known when either landed (the revoke deletes the key too); else the key may stay until the lease's ttl, and the next release tries again.
    const known = deleted.status === 'fulfilled' || revoked.status === 'fulfilled';
    if (known) this.#held.answered(lease);
    else this.#held.unanswered(held);
    return known;
  }

  /**
   * A lease this lock does not track is released by what it names, as the
   * Redis lock releases by owner: its key is deleted only while it still
   * carries the lease's etcd lease and create revision (so a released or
   * replaced grant is never touched), and only then is that etcd lease
   * revoked. An owner that is no etcd lease id names nothing in etcd.
   */
  async #releaseUntracked(lease: Lease): Promise<boolean> {
    const token = grantNamed(lease, 'release');
    if (!isLeaseId(lease.owner)) return true;
    let deleted: boolean;
    try {
      deleted = await this.#node.deleteIfOwned(lockKey(lease.resource, this.#prefix), lease.owner, token);
    } catch (error) {
      if (isDefect(error) || isRefusal(error)) throw error;
      return false;
    }
    if (deleted) await this.#node.revoke(lease.owner).catch((error: unknown) => {
      if (isDefect(error)) throw error;
    });
    this.#held.answered(lease);
    return true;
  }

  /** Leases this lock still tracks: held, or lost but not yet forgotten. */
  get trackedLeases(): number {
    return this.#held.size;
  }

  /**
   * A failed attempt's way out: its lease revoked, and with it any key the put left, before the attempt answers (the
   * revoke is bounded as every call of the node). Left in the background, the key stayed after the attempt had said it
   * holds nothing: the next acquire, this process's or another's, read the lock `held`, by no one.
   */
  async #revoke(leaseId: string): Promise<void> {
    await this.#node.revoke(leaseId).catch(() => undefined);
  }

  async #attempt(resource: string, ttlMs: number): Promise<AcquireResult> {
    const startedMs = this.#clock.now();
    let leaseId: string;
    try {
      leaseId = (await this.#node.grant(Math.ceil(ttlMs / 1000))).id;
    } catch (error) {
      if (mustThrow(error)) throw error;
      // No lease, so no key: nothing is held. A wait that reached the ttl is a give-up, as for any attempt.
      return error instanceof TimeoutError && this.#clock.now() - startedMs >= ttlMs ? { kind: 'timed-out' } : { kind: 'denied', reason: 'no-quorum' };
    }
    const key = lockKey(resource, this.#prefix);
    let put: Awaited<ReturnType<EtcdNode['putIfAbsent']>>;
    try {
      put = await this.#node.putIfAbsent(key, leaseId, leaseId);
    } catch (error) {
      // The put may have landed: revoking our lease takes the key with it, whichever way it went. After a put that got
      // no answer in time the revoke would likely meet the same silence: it goes on in the background (a timed-out
      // attempt's key may stay, spec 4.2), so the give-up is not one more bound late.
      const revoked = this.#revoke(leaseId);
      if (!(error instanceof TimeoutError)) await revoked;
      if (mustThrow(error)) throw error;
      return error instanceof TimeoutError ? { kind: 'timed-out' } : { kind: 'denied', reason: 'no-quorum' };
    }
    if (put.kind === 'exists' && put.lease !== leaseId) {
      await this.#revoke(leaseId);
      return { kind: 'denied', reason: 'held' };
    }
    const token = put.createRevision;
    if (token > MAX_TOKEN) {
      await this.#revoke(leaseId);
      throw new TokenOverflowError(resource);
    }
    let elapsed: number;
    try {
      elapsed = this.#clock.now() - startedMs;
    } catch (error) {
      // A clock that turned unreadable with the key ours: revoked (the key goes with the lease) before the acquire
      // rejects, else the lock stayed held for no one until the lease ran out.
      await this.#revoke(leaseId);
      throw error;
    }
    if (elapsed >= ttlMs) {
      await this.#revoke(leaseId);
      return { kind: 'timed-out' };
    }
    // Usable until the signal fires, safetyMarginMs before the deadline: no usable time left is no grant.
    if (ttlMs - elapsed - driftMarginMs(this.#margins, ttlMs) - this.#margins.safetyMarginMs <= 0) {
      await this.#revoke(leaseId);
      return { kind: 'denied', reason: 'validity-exhausted' };
    }
    const handle = new LeaseHandle(resource, leaseId, token, startedMs + ttlMs - driftMarginMs(this.#margins, ttlMs), this.#clock, this.#margins.safetyMarginMs);
    this.#held.add({ handle, leaseId, ttlMs });
    return { kind: 'granted', lease: handle };
  }
}
