import { checkLease, checkObject, knownOptions, refuse } from '../options.ts';
import { abortReason, checkSignal, unlessAborted } from '../abort.ts';
import pg from 'pg';
import { checkDuration, checkResource, InvalidInputError } from '../../model/errors.ts';
import type { Lease } from '../lease.ts';
import { LeaseHandle } from '../lease.ts';
import type { AcquireResult } from '../leaseLock.ts';
import { LockNotAcquiredError } from '../using.ts';
import type { LockSettings, Row } from './attempts.ts';
import { acquireWithRetries, destroyConnection, endWithin, lockSettings, openingBoundMs, NUMERIC_OUT_OF_RANGE, refusal, replyMissing, TokenOverflowError, typedFailure } from './attempts.ts';
import { isRefusal, UnavailableError } from '../errors.ts';
import { advisoryKeyText } from './keys.ts';
import { ensureSchema, MINT, TRY_LOCK_AND_MINT } from './schema.ts';
import { abandonable } from './abandon.ts';
import { leaseQueryable } from './leaseQueryable.ts';
import { loseOnSessionEnd } from './sessionEnd.ts';
import type { PostgresLockOptions, SessionAcquireOptions } from './sessionLock.ts';
import type { Queryable } from './store.ts';

/**
 * PostgreSQL transaction-scoped advisory locks (spec: pg-xact). Each lease is
 * an open transaction on its own connection holding pg_advisory_xact_lock;
 * the caller's data changes go through that transaction (`queryable(lease)`),
 * and release commits them together with the lock's release. A rollback, an
 * error or a lost connection releases the lock and discards the changes.
 *
 * Unknown outcomes fail safe (spec: "Unknown outcomes"): a statement of an
 * acquire that fails or answers after statementTimeoutMs drops its
 * connection at once (the server aborts the transaction and frees the lock,
 * at session and transaction level; a token already minted is a gap)
 * and the acquire returns `timed-out` (or `denied: no-quorum` on an error);
 * a COMMIT that fails likewise drops the connection and release throws
 * UnavailableError: the changes may or may not have been committed.
 */
/**
 * An acquire in one round trip on one connection, three statements each with
 * its own Sync (so each is its own transaction until BEGIN):
 * 1. LOCK_AND_MINT takes the lock at session level and, only if it got it,
 *    mints the next token, committed on its own: a rollback of the lock's
 *    transaction cannot undo it, so no token is ever handed out twice.
 * 2. BEGIN.
 * 3. HAND_OVER: the transaction takes the lock while the session still holds
 *    it (a backend never conflicts with itself), then the session's hold goes.
 *    The lock is never free in between, and the token was minted under it.
 * In one simple query the three would be one transaction, and the token
 * would roll back with it.
 */
const LOCK_AND_MINT = { name: 'lockcheck_try_lock_and_mint', text: TRY_LOCK_AND_MINT } as const;
const BEGIN = { name: 'lockcheck_begin', text: 'BEGIN' } as const;
const HAND_OVER = {
  name: 'lockcheck_xact_hand_over',
  text: 'SELECT CASE WHEN pg_try_advisory_xact_lock($1::bigint) THEN pg_advisory_unlock($1::bigint) ELSE false END AS moved',
} as const;
/** withLock's token, on the minting connection (its lock is taken waiting in the transaction), prepared once per connection. */
const MINT_STATEMENT = { name: 'lockcheck_mint', text: MINT } as const;
/** The lock once more inside a transaction that holds it, or (withLock) waiting up to lock_timeout. */
const XACT_LOCK = { name: 'lockcheck_xact_lock', text: 'SELECT pg_advisory_xact_lock($1::bigint)' } as const;

const closedError = (): InvalidInputError => new InvalidInputError('precondition', 'the lock was closed');

/** withLock's options. */
export interface WithLockOptions {
  /**
   * Cancels the wait for the lock: aborted already, nothing is sent; fired
   * while the server makes the transaction wait, the wait is cancelled on
   * the server (pg_cancel_backend, from the lock's minting connection) and
   * the connection dropped, and withLock rejects with the signal's reason,
   * `fn` never run; fired as the lock comes, the transaction is rolled back.
   * Once `fn` runs, the signal is no longer looked at.
   */
  readonly signal?: AbortSignal;
}

const checkWithLockKeys = knownOptions('withLock options', ['signal']);

interface Open {
  readonly lease: LeaseHandle;
  readonly client: pg.Client;
  /** The transaction as the holder gets it: refuses once the lease is over (leaseQueryable). */
  readonly tx: pg.Client;
  /** Acquires stacked on it: an aborted stacked acquire gives its level back here (the server's levels all go with the commit). */
  count: number;
}

/**
 * The transaction-scoped advisory lock (see the module comment): each lease
 * an open transaction that guards the caller's changes (`queryable`),
 * committed by release. Throws InvalidInputError for bad options.
 */
export class PostgresTransactionLock {
  readonly #options: PostgresLockOptions;
  readonly #s: LockSettings;
  readonly #open = new Map<string, Open>();
  /** withLock's leases while `fn` may run, by their connection: close() and a lost connection fire them as they fire acquire's. */
  readonly #running = new Map<LeaseHandle, pg.Client>();
  readonly #connections = new Set<pg.Client>();
  #minter: Promise<pg.Client> | null = null;
  /** Connections with no transaction open, kept for the next acquire (a new connection costs more than the lock). */
  readonly #idleClients: pg.Client[] = [];
  #schemaReady = false;
  #closed = false;
  /** Connections still opening: close() abandons them (#abandon) and waits for that. */
  readonly #opening = new Set<Promise<pg.Client>>();
  /** Fired by close(): a connection still opening is abandoned. */
  readonly #abandon = new AbortController();
  #attempts = 0;
  /** The attempt in flight for each resource, settled (never rejecting): a later one waits for it (see #attempt). */
  readonly #inFlight = new Map<string, Promise<void>>();

  constructor(options: PostgresLockOptions) {
    this.#options = options;
    this.#s = lockSettings(options, 'PostgresTransactionLock options');
  }

  /** Backend pids of this client's open connections (for pg_terminate_backend). */
  get backendPids(): number[] {
    return [...this.#connections].map((c) => (c as unknown as { processID: number }).processID);
  }

  /** Takes the lock without waiting, mints its durable token and opens its transaction, in one round trip (see HAND_OVER). */
  acquire(resource: string, options: SessionAcquireOptions = {}): Promise<AcquireResult> {
    return acquireWithRetries('transaction', resource, options, { closed: this.#closed, clock: this.#s.clock }, (r) => this.#attempt(r), (lease) => this.#giveBack(lease));
  }

  /**
   * Undoes a grant an abort came too late for: a fresh one is committed (an
   * empty transaction); a stacked one only gives its level back. Its lease
   * is the holder's, whose transaction a COMMIT would end under it: the
   * lock freed, the holder's writes so far committed, the rest refused.
   */
  #giveBack(lease: Lease): Promise<void> {
    const open = this.#open.get(lease.resource);
    if (open?.lease === lease && open.count > 1) {
      open.count--;
      return Promise.resolve();
    }
    return this.release(lease);
  }


  /** The open lease on `resource`, if any. */
  leaseFor(resource: string): Lease | undefined {
    return this.#open.get(resource)?.lease;
  }

  /**
   * The transaction a lease lives in: run the data changes it guards here.
   * Its `query` refuses (InvalidInputError 'precondition', nothing sent) once
   * the lease is released, rolled back or lost: the connection goes on to
   * serve later leases.
   */
  queryable(lease: Lease): Queryable {
    checkLease(lease, 'queryable');
    const open = this.#open.get(lease.resource);
    if (open === undefined || open.lease !== lease) throw new InvalidInputError('precondition', `no open transaction for '${lease.resource}'`);
    return open.tx;
  }

  /**
   * COMMIT: the data changes and the lock's release happen together. A COMMIT
   * with no reply rejects with UnavailableError (the connection is dropped, so
   * the lock is freed, the changes committed or not) and the lease's signal,
   * fired 'released' as the COMMIT went out, reads 'connection-lost'.
   */
  async release(lease: Lease): Promise<void> {
    await this.#finish(lease, 'COMMIT');
  }

  /** ROLLBACK: the changes are discarded and the lock released; a failed ROLLBACK rejects as a failed COMMIT does. */
  async rollback(lease: Lease): Promise<void> {
    await this.#finish(lease, 'ROLLBACK');
  }

  /**
   * Ends every connection: open transactions are rolled back by the server
   * (their changes discarded) and their leases' signals fire. An acquire in
   * flight whose reply grants the lock after close() came gets a lease whose
   * signal fired already ('connection-lost'; its connection is dropped, so
   * nothing is held); one that had not yet sent its statements, and
   * withLock before its lock, reject with InvalidInputError('precondition').
   * A connection still opening is ended before close() resolves. Every later
   * call rejects with 'precondition'.
   */
  async close(): Promise<void> {
    this.#closed = true;
    for (const o of this.#open.values()) o.lease.lose('released');
    for (const lease of this.#running.keys()) lease.lose('released');
    this.#running.clear();
    this.#open.clear();
    this.#minter = null;
    // Connections still opening hold nothing yet: their sockets go at once, not after their connect's bound and a goodbye.
    this.#abandon.abort(closedError());
    await Promise.all([...this.#opening].map((p) => p.catch(() => undefined)));
    await Promise.all([...this.#connections].map((c) => endWithin(c, this.#s.timeoutMs)));
    this.#connections.clear();
    this.#idleClients.length = 0;
  }

  /**
   * Runs `fn` in a transaction holding the lock on `resource`, waiting for it
   * at most `waitMs` (lock_timeout). Commits when `fn` resolves; rolls back
   * and rethrows when it throws. Throws LockNotAcquiredError when the wait
   * runs out. `options.signal` cancels the wait (WithLockOptions).
   *
   * The wait is bounded by `waitMs` plus statementTimeoutMs (a `waitMs` at or
   * above statementTimeoutMs raises the transaction's statement_timeout for
   * the wait alone, and `fn`'s statements have the connection's own again).
   * Its own failures are typed as acquire's (docs/errors.md): a refusal
   * (ConnectionConfigError, ServerRefusedError, WireProtocolError),
   * TokenOverflowError, TimeoutError (no reply in time), UnavailableError (the
   * connection lost; a COMMIT that failed: the changes may or may not have
   * been committed), InvalidInputError('precondition') on a closed lock (also
   * when close() came before the lock did); `fn`'s own error as it threw it.
   * A COMMIT of unknown fate leaves the lease handed to `fn` reading
   * 'connection-lost' (the dropped connection freed the lock), not 'released'.
   */
  async withLock<T>(resource: string, waitMs: number, fn: (tx: Queryable, lease: Lease) => Promise<T>, options: WithLockOptions = {}): Promise<T> {
    checkResource(resource);
    checkDuration(waitMs, 'waitMs');
    // Checked before the connection, the lock and a token are taken for it (a TypeError came only after all three).
    if (typeof fn !== 'function') refuse('fn', 'a function', fn);
    checkWithLockKeys(checkObject(options, 'withLock options'));
    const signal = checkSignal(options.signal);
    if (this.#closed) throw closedError();
    if (signal?.aborted) throw abortReason(signal);
    // Its bounds start here: a clock that cannot be read rejects it (InvalidInputError) before a connection is taken.
    this.#s.clock.now();
    let client: pg.Client;
    try {
      client = await this.#take();
    } catch (e) {
      throw typedFailure(e, `withLock's connect`, this.#s.timeoutMs);
    }
    const key = advisoryKeyText(resource);
    let lease: LeaseHandle | null = null;
    let clean = false;
    /** Cancelled while the server made us wait: the wait is cancelled on the server and the connection dropped, not rolled back (the statement is still out). */
    let cancelled = false;
    /** Where it failed: `fn`'s own error passes as it is; a COMMIT's leaves the changes unknown. */
    let stage: 'lock' | 'fn' | 'commit' = 'lock';
    let commitUnknown = false;
    // The wait's bound: waitMs, and a statement's time for the reply. The server's statement_timeout (statementTimeoutMs) would cut a longer wait: raised for it, and set back below.
    const waitBoundMs = Math.min(waitMs + this.#s.timeoutMs, 2 ** 31 - 1);
    const raise = waitMs >= this.#s.timeoutMs;
    try {
      await this.#s.query(client, `BEGIN; SET LOCAL lock_timeout = ${waitMs === 0 ? 1 : waitMs}${raise ? `; SET LOCAL statement_timeout = ${waitBoundMs}` : ''}`);
      try {
        await unlessAborted(this.#s.query(client, XACT_LOCK, [key], waitBoundMs), signal);
      } catch (e) {
        cancelled = signal?.aborted === true;
        if (cancelled) throw abortReason(signal!);
        if ((e as { code?: string }).code === '55P03') throw new LockNotAcquiredError(resource, 'held');
        throw e;
      }
      // Cancelled as the lock came: not used, and rolled back below (the lock goes with the transaction).
      if (signal?.aborted) throw abortReason(signal);
      // The token, minted on its own connection, and (after a raised wait) fn's statement_timeout back to the connection's, together.
      const [token] = await Promise.all([this.#mint(resource), raise ? this.#s.query(client, 'SET LOCAL statement_timeout TO DEFAULT') : undefined]);
      lease = new LeaseHandle(resource, `pgx:${++this.#attempts}`, token, null, this.#s.clock);
      if (this.#closed) throw closedError();
      this.#running.set(lease, client);
      stage = 'fn';
      let live = true;
      let result: T;
      try {
        // fn's tx refuses once fn is done: the connection is kept for later holders, and a statement sent after the COMMIT or ROLLBACK ran unlocked or in their transaction.
        result = await fn(leaseQueryable(client, resource, () => live), lease);
      } finally {
        live = false;
      }
      // The COMMIT's bound starts here: a clock that cannot be read is refused before it is sent, so the changes are
      // known not committed (rolled back, or dropped with the connection), not an unknown outcome.
      this.#s.clock.now();
      stage = 'commit';
      await this.#s.query(client, 'COMMIT');
      clean = true;
      return result;
    } catch (e) {
      clean =
        !cancelled &&
        stage !== 'commit' &&
        (await this.#s.query(client, 'ROLLBACK').then(
          () => true,
          () => false,
        ));
      if (stage === 'fn' || e instanceof LockNotAcquiredError || (signal?.aborted === true && e === signal.reason)) throw e;
      if (stage === 'commit') {
        const refused = refusal(e);
        // The server refused the COMMIT (a deferred constraint): nothing was committed; otherwise the outcome is unknown.
        commitUnknown = refused === null;
        throw refused ?? new UnavailableError(`COMMIT of '${resource}' failed (${(e as Error).message}); the connection was dropped, so the lock is freed, but the changes may or may not have been committed`, { cause: e });
      }
      // close() ended the connection under it: the lock was closed, not an outage.
      if (this.#closed && !isRefusal(e)) throw closedError();
      throw typedFailure(e, `withLock on '${resource}'`, this.#s.timeoutMs, resource);
    } finally {
      if (lease !== null) {
        this.#running.delete(lease);
        // A COMMIT of unknown fate released nothing it knows of: the dropped connection frees the lock.
        lease.lose(commitUnknown ? 'connection-lost' : 'released');
      }
      if (cancelled) await this.#cancelWait(client);
      else await (clean ? this.#give(client) : this.#disconnect(client));
    }
  }

  /**
   * Ends the statement `client` is still running on the server (withLock's
   * wait for the lock): pg_cancel_backend from the minting connection (a
   * backend waiting for a lock does not see its client go until the wait
   * ends), then the connection is dropped.
   */
  async #cancelWait(client: pg.Client): Promise<void> {
    const pid = (client as unknown as { processID: number }).processID;
    try {
      await this.#s.query(await this.#minting(), 'SELECT pg_cancel_backend($1)', [pid]);
    } catch {
      // Not cancelled: the dropped connection ends the transaction when the server next looks (lock_timeout at the latest).
    }
    this.#drop(client);
  }

  /**
   * One attempt, after any attempt on the same resource already in flight on
   * this lock: that one's grant opens the transaction this one stacks on
   * (spec 7.4, step 3), where both went out together and the second was
   * denied 'held' by this lock's own transaction.
   */
  async #attempt(resource: string): Promise<AcquireResult> {
    for (let before = this.#inFlight.get(resource); before !== undefined; before = this.#inFlight.get(resource)) await before;
    const attempt = this.#attemptNow(resource);
    const settled = attempt.then(
      () => undefined,
      () => undefined,
    );
    this.#inFlight.set(resource, settled);
    // Registered before any later attempt waits on it: gone by the time those run again.
    void settled.then(() => {
      if (this.#inFlight.get(resource) === settled) this.#inFlight.delete(resource);
    });
    return attempt;
  }

  async #attemptNow(resource: string): Promise<AcquireResult> {
    // Closed between the attempts of one acquire (its retries).
    if (this.#closed) throw closedError();
    // The attempt's bounds start here: a clock that cannot be read rejects it (InvalidInputError), nothing sent.
    this.#s.clock.now();
    const key = advisoryKeyText(resource);
    const open = this.#open.get(resource);
    try {
      if (open !== undefined) {
        // Stacks inside the same transaction; released all at once at commit.
        await this.#s.query(open.client, XACT_LOCK, [key]);
        open.count++;
        return { kind: 'granted', lease: open.lease };
      }
    } catch (e) {
      // One more level of the same transaction's lock: whatever happened is released at its commit.
      const refused = refusal(e);
      if (refused !== null) throw refused;
      return replyMissing(e) ? { kind: 'timed-out' } : { kind: 'denied', reason: 'no-quorum' };
    }
    let client = this.#idle();
    if (client === undefined) {
      try {
        client = await this.#connect();
      } catch (e) {
        // Closed while the connection opened: nothing was sent.
        if (e instanceof InvalidInputError) throw e;
        const refused = refusal(e);
        if (refused !== null) throw refused;
        // A connect with no reply in time is an unknown outcome too (nothing is held: there was no session yet).
        return replyMissing(e) ? { kind: 'timed-out' } : { kind: 'denied', reason: 'no-quorum' };
      }
    }
    let replies: Row[][];
    try {
      // One round trip: the three statements go out together, each with its own Sync (see ACQUIRE).
      setPipeline(client, true);
      replies = await this.#s.pipelined(client, [[LOCK_AND_MINT, [key, resource, this.#s.base]], [BEGIN], [HAND_OVER, [key]]]);
      setPipeline(client, false);
    } catch (e) {
      // The session lock or the transaction's may be held: drop the connection so the server frees both.
      this.#drop(client);
      // Refused before anything was sent (the clock's reading): the caller hears why, not an outage.
      if (e instanceof InvalidInputError) throw e;
      if ((e as { code?: string }).code === NUMERIC_OUT_OF_RANGE) throw new TokenOverflowError(resource);
      const refused = refusal(e);
      if (refused !== null) throw refused;
      return replyMissing(e) ? { kind: 'timed-out' } : { kind: 'denied', reason: 'no-quorum' };
    }
    const token = replies[0]?.[0]?.[0];
    if (token === undefined) {
      // Held: no token was minted, but the transaction may have taken the lock if its holder let go meanwhile.
      await this.#s.query(client, 'ROLLBACK').then(
        () => this.#give(client),
        () => this.#drop(client),
      );
      return { kind: 'denied', reason: 'held' };
    }
    if (replies[2]?.[0]?.[0] !== 't' || token === null) {
      // Cannot happen: a session holding the lock always gets it for its own transaction too, and the token column is NOT NULL.
      this.#drop(client);
      throw new Error(token === null ? 'TRY_LOCK_AND_MINT returned no token' : `the transaction did not take over the lock on '${resource}' from its session`);
    }
    const lease = new LeaseHandle(resource, `pgx:${++this.#attempts}`, BigInt(token), null, this.#s.clock);
    if (this.#closed || !this.#connections.has(client)) {
      // Granted on a connection the lock let go of while the statements were out (close() ends it): dropped, so the server frees the lock, and the lease comes back lost, not kept.
      this.#drop(client);
      lease.lose('connection-lost');
      return { kind: 'granted', lease };
    }
    const tx = leaseQueryable(client, resource, () => this.#open.get(resource)?.lease === lease);
    this.#open.set(resource, { lease, client, tx, count: 1 });
    return { kind: 'granted', lease };
  }

  /** Closes the socket without a round trip: the server aborts the transaction and frees its locks when it sees the close. */
  #drop(client: pg.Client): void {
    this.#connections.delete(client);
    const idle = this.#idleClients.indexOf(client);
    if (idle >= 0) this.#idleClients.splice(idle, 1);
    destroyConnection(client);
  }

  /**
   * withLock's token, minted on a separate autocommit connection while the
   * lock is held: a counter row updated inside the lock's transaction would
   * be rolled back with it, and the next holder would get the same token again.
   */
  async #mint(resource: string): Promise<bigint> {
    const token = (await this.#s.query(await this.#minting(), MINT_STATEMENT, [resource, this.#s.base]))[0]?.[0];
    if (token === undefined || token === null) throw new Error('MINT returned no token');
    return BigInt(token);
  }

  /**
   * The minting connection: an idle one when there is one, a new one
   * otherwise. Every connection counts against the role's and the server's
   * limits: with idle ones kept beside a new minter, withLock at the limit
   * was refused (too many connections) by the lock's own idle connections.
   */
  async #minting(): Promise<pg.Client> {
    this.#minter ??= ((idle) => (idle !== undefined ? Promise.resolve(idle) : this.#connect()))(this.#idle());
    return this.#minter.catch((e: unknown) => {
      this.#minter = null;
      throw e;
    });
  }

  async #finish(lease: Lease, statement: 'COMMIT' | 'ROLLBACK'): Promise<void> {
    checkLease(lease, statement === 'COMMIT' ? 'release' : 'rollback');
    // The statement's bound starts here: a clock that cannot be read refuses the call (InvalidInputError) with the transaction still open, nothing sent.
    this.#s.clock.now();
    const open = this.#open.get(lease.resource);
    if (open === undefined || open.lease !== lease) return;
    this.#open.delete(lease.resource);
    open.lease.lose('released');
    try {
      await this.#s.query(open.client, statement);
    } catch (e) {
      // Did the COMMIT land? Unknown: drop the connection (a transaction still open is aborted) and say so.
      this.#drop(open.client);
      // The lock goes with the connection, not with a release the caller may count as landed.
      open.lease.releaseUnconfirmed();
      throw new UnavailableError(`${statement} of '${lease.resource}' failed (${(e as Error).message}); the connection was dropped, so the lock is freed, but the changes may or may not have been committed`, { cause: e });
    }
    await this.#give(open.client);
  }

  /** An idle connection, or a new one. */
  async #take(): Promise<pg.Client> {
    return this.#idle() ?? this.#connect();
  }

  /** An idle connection still open, if any. */
  #idle(): pg.Client | undefined {
    for (let c = this.#idleClients.pop(); c !== undefined; c = this.#idleClients.pop()) if (this.#connections.has(c)) return c;
    return undefined;
  }

  /** Back to the idle list (at most four kept), with no transaction open on it. */
  #give(client: pg.Client): Promise<void> {
    if (!this.#connections.has(client) || this.#idleClients.length >= 4) return this.#disconnect(client);
    this.#idleClients.push(client);
    return Promise.resolve();
  }

  /** A new connection, its schema made; close() waits for it while it opens, and it refuses ('precondition') when the lock is closed before or while it opens. */
  #connect(): Promise<pg.Client> {
    if (this.#closed) return Promise.reject(closedError());
    const opening = this.#newConnection();
    this.#opening.add(opening);
    const forget = (): void => void this.#opening.delete(opening);
    opening.then(forget, forget);
    return opening;
  }

  async #newConnection(): Promise<pg.Client> {
    const client = new pg.Client({
      keepAlive: true,
      connectionTimeoutMillis: this.#s.timeoutMs,
      statement_timeout: this.#s.timeoutMs,
      query_timeout: this.#s.timeoutMs,
      ...this.#options.connection,
    });
    const lost = (): void => {
      // A minter that never connected has nothing to forget (its failure is mint()'s to report).
      void this.#minter?.then(
        (m) => {
          if (m === client) this.#minter = null;
        },
        () => undefined,
      );
      // The transaction is gone: its lock and its changes with it.
      for (const [resource, o] of this.#open) {
        if (o.client !== client) continue;
        this.#open.delete(resource);
        o.lease.lose('connection-lost');
      }
      for (const [lease, c] of this.#running) {
        if (c !== client) continue;
        this.#running.delete(lease);
        lease.lose('connection-lost');
      }
      if (this.#connections.delete(client)) this.#options.onConnectionLost?.();
    };
    client.on('error', lost);
    client.on('end', lost);
    // A release after a FATAL then finds the lease lost ('connection-lost'), not 'released' over a freed lock.
    loseOnSessionEnd(client, lost);
    try {
      await abandonable(this.#abandon.signal, () => destroyConnection(client), () =>
        this.#s.opening(openingBoundMs(this.#options.connection, this.#s.timeoutMs), async () => {
          await client.connect();
          if (!this.#schemaReady) await ensureSchema(client);
        }),
      );
      this.#schemaReady = true;
    } catch (e) {
      // No reply within the opening's bound (it may yet connect), or abandoned by close(): drop the socket rather than wait on a goodbye.
      if (replyMissing(e) || this.#closed) destroyConnection(client);
      else await endWithin(client, this.#s.timeoutMs);
      throw this.#closed ? closedError() : e;
    }
    if (this.#closed) {
      // close() came while it opened: ended here (close() waits for it), never used.
      await endWithin(client, this.#s.timeoutMs);
      throw closedError();
    }
    this.#connections.add(client);
    return client;
  }

  async #disconnect(client: pg.Client): Promise<void> {
    this.#connections.delete(client);
    const idle = this.#idleClients.indexOf(client);
    if (idle >= 0) this.#idleClients.splice(idle, 1);
    // Closing is a round trip too; if the link is gone, close it directly.
    await this.#s.link(() => endWithin(client, this.#s.timeoutMs)).catch(() => endWithin(client, this.#s.timeoutMs));
  }
}

/**
 * Pipeline mode only while the acquire's statements are out: node-postgres
 * refuses cursors and query streams on a pipelined connection, and the user's
 * transaction (queryable) may use them. Switched only with nothing in flight.
 */
function setPipeline(client: pg.Client, on: boolean): void {
  (client as unknown as { pipeline: boolean }).pipeline = on;
}
