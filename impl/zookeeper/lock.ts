import { checkDuration, checkTtl, MAX_TOKEN } from '../../model/errors.ts';
import type { MonotonicClock } from '../clock.ts';
import { driftMarginMs, leaseMargins, type LeaseMargins } from '../leaseMargins.ts';
import { abortReason, checkSignal, unlessAborted } from '../abort.ts';
import { checkLeaseAcquire } from '../leaseAcquireInput.ts';
import { retryDenied } from '../retryDenied.ts';
import { isDefect, mustThrow, TimeoutError, TokenOverflowError } from '../errors.ts';
import { HeldLeases } from '../heldLeases.ts';
import { LeaseHandle } from '../lease.ts';
import { renewal } from '../renewal.ts';
import type { Lease } from '../lease.ts';
import { ACQUIRE_OPTIONS, type AcquireOptions, type AcquireResult, type ExtendResult } from '../leaseLock.ts';
import { checkRoot, CONTENDER, inLine, lockDir } from './paths.ts';
import { checkedClock } from '../checkedClock.ts';
import { checkClock, checkLease, checkMethods, checkObject, knownOptions, grantNamed } from '../options.ts';
import type { ZookeeperNode, ZookeeperSession } from './node.ts';

/**
 * A lease lock on a ZooKeeper ensemble (spec 7.10 `zookeeper`, judged by the
 * `etcd-lease` model): ZooKeeper's lock recipe with a session per lease.
 * An attempt opens a session whose timeout is the ttl, creates an ephemeral
 * sequential contender under the resource's directory, and owns the lock
 * when its contender has the lowest sequence; the token is the contender's
 * create zxid, strictly increasing across the ensemble (ownership passes in
 * sequence order, which is creation order). The session is renewed only by
 * the lock's own requests (extend is one round trip on it), so the ensemble
 * deletes the contender its timeout after the last renewal it heard. The
 * lease's validity is measured on the client's monotonic clock from before
 * the session was opened, less the same drift allowance as Redlock
 * (ceil(driftFactor * ttl) + clockMarginMs). Release deletes the contender
 * only while its create zxid is ours, then closes the session.
 *
 * A denied attempt leaves nothing behind: a held lock is seen before
 * anything is created; a contender that lost a race is deleted with its
 * session. With `waitMs`, an attempt that is not first in line waits (up to
 * `waitMs`) for its predecessor's deletion, watching only that znode, as the
 * recipe does, renewing its session meanwhile.
 */
export interface ZookeeperLockOptions {
  /** The ZooKeeper calls (zookeeperNode). */
  readonly node: ZookeeperNode;
  /** The client's monotonic clock: validity is measured on it and the lease's deadline is on it. */
  readonly clock: MonotonicClock;
  /** Allowance for clock drift, a fraction of the ttl in [0, 1). Default 0.01. */
  readonly driftFactor?: number;
  /** The fixed part of the allowance, ms. Default 2. */
  readonly clockMarginMs?: number;
  /** The lease's signal fires this many ms before its validity deadline; an acquire that would leave less usable time than that is denied `validity-exhausted` (the key released). Default 0. */
  readonly safetyMarginMs?: number;
  /** Root znode of the lock's and store's paths. Default '/lockcheck'. */
  readonly root?: string;
}

/** ZookeeperLock's acquire options: a lease lock's, and a wait in line. */
export interface ZookeeperAcquireOptions extends AcquireOptions {
  /** Wait in line up to this many ms (watching the predecessor) instead of being denied at once. Default 0. A `signal` ends the wait at once, and the contender goes with its session. */
  readonly waitMs?: number;
}

const checkLockKeys = knownOptions('ZookeeperLock options', ['node', 'clock', 'driftFactor', 'clockMarginMs', 'safetyMarginMs', 'root']);
const checkAcquireKeys = knownOptions('acquire options', [...ACQUIRE_OPTIONS, 'waitMs']);

interface Held {
  readonly handle: LeaseHandle;
  /** The lease's session; null once a release closed it without an answer (a retry deletes on a session of its own). */
  readonly session: ZookeeperSession | null;
  readonly path: string;
  /** The negotiated session timeout, ms: each renewal lasts that long. */
  readonly ttlMs: number;
}

/** The timeout of the session a release of an untracked lease deletes on (closed right after the delete). */
const UNTRACKED_SESSION_MS = 10_000;

/** What the lock calls on its node. */
const LOCK_CALLS = ['openSession', 'contenders', 'enqueue', 'touch', 'watchGone', 'deleteOwned', 'closeSession'];

/**
 * The ZooKeeper lease lock of ZookeeperLockOptions: acquire, extend and
 * release, each lease a session of its own carrying its contender's create
 * zxid as fencing token and a signal that fires when it may no longer be
 * used. The constructor throws InvalidInputError('invalid-config') for bad
 * options.
 */
export class ZookeeperLock {
  readonly #node: ZookeeperNode;
  readonly #clock: MonotonicClock;
  /** The clock as given, for clockOf. */
  readonly #given: MonotonicClock;
  readonly #margins: LeaseMargins;
  readonly #root: string;
  readonly #held = new HeldLeases<Held>((held) => held.handle);

  constructor(options: ZookeeperLockOptions) {
    checkObject(options, 'ZookeeperLock options');
    checkLockKeys(options);
    this.#node = checkMethods(options.node, 'node', 'a ZookeeperNode', LOCK_CALLS);
    this.#given = checkClock(options.clock);
    // Each reading checked (impl/checkedClock.ts): a reading that is no finite number is InvalidInputError before anything is sent.
    this.#clock = checkedClock(this.#given);
    this.#margins = leaseMargins(options, 10_000);
    this.#root = checkRoot(options.root);
  }

  /** The clock this lock times its leases by. */
  clockOf(): MonotonicClock {
    return this.#given;
  }

  /** One or more attempts, as `options` says. Throws InvalidInputError for a bad resource or options. */
  async acquire(resource: string, options: ZookeeperAcquireOptions): Promise<AcquireResult> {
    const plan = checkLeaseAcquire(resource, options, checkAcquireKeys);
    const waitMs = checkDuration(options.waitMs ?? 0, 'waitMs');
    const signal = checkSignal(options.signal);
    if (signal?.aborted) throw abortReason(signal);
    // A cancel ends a wait in line at once (#attempt); a request in flight finishes (bounded), and a grant it brings is released.
    return retryDenied(plan, signal, this.#clock, () => Math.random(), () => this.#attempt(resource, plan.ttlMs, waitMs, signal), (lease) => this.release(lease));
  }

  /**
   * One round trip on the lease's session, which renews it for its timeout.
   * A contender the ensemble no longer has, or one another session deleted
   * and made again (another create zxid), is lost: the signal fires at once.
   * (A deletion fires it before that too: the watch the grant set.)
   */
  async extend(lease: Lease, ttlMs: number): Promise<ExtendResult> {
    checkTtl(ttlMs);
    checkLease(lease, 'extend');
    // Read first: a clock that cannot be read is the caller's error to hear (InvalidInputError), before the lease reads it as lost.
    const startedMs = this.#clock.now();
    const held = this.#held.get(lease);
    // A lease whose session a release closed is lost ('released') too.
    if (held === undefined || held.handle.lost || held.session === null) return { kind: 'not-extended', reason: 'expired' };
    let czxid: bigint | null;
    try {
      czxid = await this.#node.touch(held.session, held.path);
    } catch (error) {
      if (mustThrow(error)) throw error;
      return { kind: 'not-extended', reason: 'no-quorum' };
    }
    if (czxid !== lease.token) {
      held.handle.lose('expired');
      return { kind: 'not-extended', reason: 'expired' };
    }
    return renewal(held.handle, startedMs, held.ttlMs, this.#margins, this.#clock);
  }

  /**
   * Deletes the contender while it is ours and closes the session; fires the
   * lease's signal. Never throws for ZooKeeper failures (the session's close
   * deletes the contender whatever the delete met); a programming error (a
   * TypeError, ...) from the delete is thrown, after the session is closed.
   * Resolves `true` when the release is known: the ensemble answered the
   * conditional delete, which deleted our contender or found it gone or
   * another's (deleted by another session: the lease was lost before, and
   * nothing of it is left in line), as a Redis compare-and-delete that finds
   * another owner; or an earlier release of the lease was answered. A lease
   * this lock did not grant (another lock's, another process's: a record of
   * its resource, owner and token) is released by the contender its owner
   * names, as the Redis lock's by owner, on a session of its own and only
   * while its create zxid is the token; an owner outside this lock's line
   * for the resource names nothing of this lock's (`true`, no call). A token
   * that is no bigint in [0, 2^63-1] is InvalidInputError('precondition'), a
   * resource acquire refuses InvalidInputError('invalid-resource'), before
   * any call. A lease lost on the client's clock is
   * released as a held one: its contender may still be in line. `false` when
   * the delete got no answer (failed, timed out, or met an expired session):
   * the session's close or expiry frees the line all the same, at a time no
   * one saw, and a later release of the lease asks again, on a session of
   * its own.
   */
  async release(lease: Lease): Promise<boolean> {
    checkLease(lease, 'release');
    const held = this.#held.release(lease);
    // Not tracked: released before (an answered release did the work), or granted by another lock (another
    // process's, say): released by the contender it names. A lost lease is still tracked, pruned or not (HeldLeases).
    if (held === undefined) return this.#held.released(lease) || this.#releaseUntracked(lease);
    // Known when the delete was answered, whether it deleted ours or found none of ours (`false` from deleteOwned: gone
    // already, nothing of the lease left in line). Else the contender goes with the session's close or its timeout, and
    // the next release of the lease asks again.
    const known = await this.#answered(held, lease.token, lease);
    if (!known) this.#held.unanswered({ ...held, session: null });
    return known;
  }

  /**
   * A lease this lock does not track is released by what it names, as the
   * Redis lock releases by owner: its contender (the owner, a path in this
   * lock's line for the resource) is deleted, on a session of its own, only
   * while its create zxid is the lease's token, so a released or replaced
   * grant is never touched. An owner outside the line names nothing of
   * this lock's.
   */
  async #releaseUntracked(lease: Lease): Promise<boolean> {
    const token = grantNamed(lease, 'release');
    const dir = `${lockDir(lease.resource, this.#root)}/`;
    const name = lease.owner.slice(dir.length);
    if (!lease.owner.startsWith(dir) || !name.startsWith(CONTENDER) || name.includes('/')) return true;
    return this.#answered({ session: null, path: lease.owner, ttlMs: UNTRACKED_SESSION_MS }, token, lease);
  }

  /**
   * The conditional delete of the lease's contender, and whether ZooKeeper
   * answered it (recorded, so that a later release of the lease asks no
   * more); a programming error is thrown, any other failure is `false`.
   */
  async #answered(target: Pick<Held, 'session' | 'path' | 'ttlMs'>, token: bigint, lease: Lease): Promise<boolean> {
    const failed = await this.#deleteOwned(target, token).then(
      () => undefined,
      (error: unknown) => error,
    );
    if (isDefect(failed)) throw failed;
    if (failed === undefined) this.#held.answered(lease);
    return failed === undefined;
  }

  /** The conditional delete on the lease's session, which is then closed; on a session of its own for a retry (the lease's is closed). */
  async #deleteOwned(held: Pick<Held, 'session' | 'path' | 'ttlMs'>, token: bigint): Promise<void> {
    const session = held.session ?? (await this.#node.openSession(held.ttlMs));
    try {
      await this.#node.deleteOwned(session, held.path, token);
    } finally {
      this.#close(session);
    }
  }

  /** Leases this lock still tracks: held, or lost but not yet forgotten. */
  get trackedLeases(): number {
    return this.#held.size;
  }

  /** Closing a session deletes whatever contender it made: a release's way out, in the background. */
  #close(session: ZookeeperSession): void {
    void this.#node.closeSession(session).catch(() => undefined);
  }

  /**
   * A failed attempt's way out: its session closed, and with it any contender it made, before the attempt answers
   * (the close is bounded as every call of the node). Left in the background, the contender stayed in line after the
   * attempt had said it holds nothing: the next acquire, this process's or another's, read the lock `held`, by no one.
   */
  async #abandon(session: ZookeeperSession): Promise<void> {
    await this.#node.closeSession(session).catch(() => undefined);
  }

  async #attempt(resource: string, ttlMs: number, waitMs: number, signal: AbortSignal | undefined): Promise<AcquireResult> {
    const startedMs = this.#clock.now();
    const dir = lockDir(resource, this.#root);
    let session: ZookeeperSession;
    try {
      session = await this.#node.openSession(ttlMs);
    } catch (error) {
      if (mustThrow(error)) throw error;
      // No session, so no contender. A wait that reached the ttl is a give-up, as for any attempt.
      return error instanceof TimeoutError && this.#clock.now() - startedMs >= ttlMs ? { kind: 'timed-out' } : { kind: 'denied', reason: 'no-quorum' };
    }
    // The ensemble may have negotiated a shorter timeout than asked: the lease is what it granted.
    const grantedMs = Math.min(ttlMs, session.timeoutMs);
    let own: Awaited<ReturnType<ZookeeperNode['enqueue']>>;
    // When the ensemble last heard from the session, at the latest: the lease counts from there.
    let renewedMs = startedMs;
    try {
      // A held lock is refused before anything is created: a refused attempt leaves no contender in line.
      if (waitMs === 0 && (await this.#node.contenders(session, dir)).length > 0) {
        await this.#abandon(session);
        return { kind: 'denied', reason: 'held' };
      }
      own = await this.#node.enqueue(session, dir);
      for (;;) {
        const line = inLine(await this.#node.contenders(session, dir));
        const at = line.indexOf(own.name);
        if (at < 0) throw new TimeoutError('zookeeper: our contender is gone', ttlMs);
        if (at === 0) break;
        const waitedMs = this.#clock.now() - startedMs;
        if (waitedMs >= waitMs) {
          await this.#abandon(session);
          return { kind: 'denied', reason: 'held' };
        }
        // Wait for the one ahead only (no herd), renewing our session at a third of its timeout.
        await unlessAborted(this.#node.watchGone(session, `${dir}/${line[at - 1]!}`, Math.min(waitMs - waitedMs, Math.floor(grantedMs / 3))), signal);
        const touchedMs = this.#clock.now();
        await this.#node.touch(session, `${dir}/${own.name}`);
        renewedMs = touchedMs;
      }
    } catch (error) {
      // Failed or cancelled in line: the session goes, and with it our contender, before the acquire answers (the line
      // moves on at once). After a call that got no answer in time the close would likely meet the same silence: it goes
      // on in the background (a timed-out attempt's contender may stay, spec 4.2), so the give-up is not one more bound late.
      const closed = this.#abandon(session);
      if (signal?.aborted || !(error instanceof TimeoutError)) await closed;
      if (signal?.aborted) throw abortReason(signal);
      if (mustThrow(error)) throw error;
      return error instanceof TimeoutError ? { kind: 'timed-out' } : { kind: 'denied', reason: 'no-quorum' };
    }
    if (own.czxid > MAX_TOKEN) {
      await this.#abandon(session);
      throw new TokenOverflowError(resource);
    }
    let nowMs: number;
    try {
      nowMs = this.#clock.now();
    } catch (error) {
      // A clock that turned unreadable with our contender in line: the session goes, and the contender with it, before
      // the acquire rejects (else it stayed first in line, the lock held for no one, until the session timed out).
      await this.#abandon(session);
      throw error;
    }
    const elapsed = nowMs - renewedMs;
    if (elapsed >= grantedMs) {
      await this.#abandon(session);
      return { kind: 'timed-out' };
    }
    const validUntilMs = renewedMs + grantedMs - driftMarginMs(this.#margins, grantedMs);
    // Usable until the signal fires, safetyMarginMs before the deadline: no usable time left is no grant.
    if (validUntilMs - this.#margins.safetyMarginMs <= nowMs) {
      await this.#abandon(session);
      return { kind: 'denied', reason: 'validity-exhausted' };
    }
    const handle = new LeaseHandle(resource, `${dir}/${own.name}`, own.czxid, validUntilMs, this.#clock, this.#margins.safetyMarginMs);
    // Ended by the node's close(), the session took the contender with it: the lease is lost at once, not at its deadline.
    void session.expired.then((why) => handle.lose(why === 'closed' ? 'connection-lost' : 'expired'));
    // Deleted by another session (an operator's delete): the lock is free for others at once, so the lease is lost at once.
    void own.deleted?.then(() => handle.lose('expired'));
    this.#held.add({ handle, session, path: `${dir}/${own.name}`, ttlMs: grantedMs });
    return { kind: 'granted', lease: handle };
  }
}
