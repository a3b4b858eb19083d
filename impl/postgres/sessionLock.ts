import { checkLease } from '../options.ts';
import pg from 'pg';
import type { MonotonicClock } from '../clock.ts';
import type { Lease } from '../lease.ts';
import { LeaseHandle } from '../lease.ts';
import type { AcquireResult } from '../leaseLock.ts';
import type { LockSettings } from './attempts.ts';
import { acquireWithRetries, lockSettings, NUMERIC_OUT_OF_RANGE, refusal, replyMissing, TokenOverflowError } from './attempts.ts';
import { InvalidInputError, UnavailableError } from '../errors.ts';
import { advisoryKeyText } from './keys.ts';
import { TRY_LOCK_AND_MINT } from './schema.ts';
import type { SessionConnection } from './sessionConnection.ts';
import { openSessionConnection } from './sessionConnection.ts';
import type { Row } from './wire/connection.ts';
import { EncodedCall, PreparedStatement } from './wire/connection.ts';

/**
 * PostgreSQL session-scoped advisory locks (spec: pg-session) on one
 * dedicated connection. A lock lives as long as that connection: when it
 * fails (an error, a terminated backend, SQLSTATE 57P01, a network drop seen
 * by keepalive) every lease on it fires its signal. Locks stack as
 * PostgreSQL's do: an acquire by the holder takes the lock once more (same
 * lease, same token) and needs its own release. Each new grant mints the next
 * durable token of the resource in the same statement.
 *
 * Unknown outcomes fail safe (spec: "Unknown outcomes"). A statement that
 * fails on a live connection (a reply later than statementTimeoutMs, or an
 * error after pg_try_advisory_lock ran) may have left the lock held by this
 * session. The client then destroys the connection at once: the server ends
 * the session and with it every lock it held, and every lease on it fires
 * 'connection-lost'. The acquire returns `timed-out` (after a timeout) or
 * `denied: no-quorum`; a release throws UnavailableError. Nothing is held
 * behind a denial for longer than it takes the server to see the close.
 */
export interface PostgresLockOptions {
  /**
   * How to reach the database, as node-postgres takes it. Each lock client
   * opens its own connection(s). The session lock speaks the protocol itself
   * over plain TCP or a Unix socket; a configuration that needs more (TLS,
   * a custom stream, a password function or file, connection-string options)
   * runs it on node-postgres instead (docs/postgres.md, "Driver").
   */
  readonly connection: pg.ClientConfig;
  /** The client's monotonic clock, which times retries and statement bounds (leases have no deadline). Default: performance.now(). */
  readonly clock?: MonotonicClock;
  /** Where fresh token rows start (the first token is tokenBase + 1). Default 0. */
  readonly tokenBase?: bigint;
  /** Bound on every statement, in ms (also sent as statement_timeout). Default 5000. */
  readonly statementTimeoutMs?: number;
  /** Carries each round trip to the server (connect, query). Default: direct. Test environments route it through their links. */
  readonly link?: <T>(roundTrip: () => Promise<T>) => Promise<T>;
  /** Called when a connection the lock lives on is lost (after its leases' signals fired). */
  readonly onConnectionLost?: () => void;
}

/** A PostgreSQL lock's acquire options: retries, no ttl. */
export interface SessionAcquireOptions {
  /** After a denial, try again up to this many times. Default 0. */
  readonly retries?: number;
  /** Pause between attempts, in ms. Default 0. */
  readonly retryDelayMs?: number;
  /** Cancels the acquire, as a lease lock's `signal` (a pause between attempts ends at once; a grant that lands after the abort is released). */
  readonly signal?: AbortSignal;
  /** A ttl is not supported: a session lock lives with its connection. Passing one is an error. */
  readonly ttlMs?: never;
}

/** The two statements of a grant and its release, prepared once per connection. */
const LOCK_AND_MINT = new PreparedStatement('lockcheck_try_lock_and_mint', TRY_LOCK_AND_MINT);
const UNLOCK = new PreparedStatement('lockcheck_unlock', 'SELECT pg_advisory_unlock($1::bigint)');
/** The lock once more, for a holder that takes it again. */
const LOCK = new PreparedStatement('lockcheck_lock', 'SELECT pg_advisory_lock($1::bigint)');
const STATEMENTS = [LOCK_AND_MINT, UNLOCK, LOCK];

/**
 * A resource's calls, encoded once per lock (its tokenBase is in the grant's
 * bytes): each acquire and release of the resource sends the same bytes.
 * They name the statements, which every connection of the lock prepares
 * under the same names before its first call, so they hold across
 * reconnections.
 */
interface Calls {
  /** The advisory key, as the statements take it. */
  readonly key: string;
  readonly mint: EncodedCall;
  readonly unlock: EncodedCall;
  /** The lock once more, for a holder that takes it again (encoded at its first use). */
  relock: EncodedCall | null;
}

/** Bound on a lock's encoded calls: emptied when full, so a stream of distinct names costs an encoding each, as without it. */
const CALLS_KEPT = 1024;

interface Held {
  readonly lease: LeaseHandle;
  readonly calls: Calls;
  count: number;
}

const NO_OPTIONS: SessionAcquireOptions = Object.freeze({});

const closedError = (): InvalidInputError => new InvalidInputError('precondition', 'the lock was closed');

/**
 * The session advisory lock (see PostgresLockOptions): leases without a
 * deadline, each lost with its connection; a holder's acquire stacks. Throws
 * InvalidInputError for bad options, an acquire rejects with it for a bad
 * resource or options (a ttl: 'unsupported-operation'); close() ends the
 * connection and with it every lock.
 */
export class PostgresSessionLock {
  readonly #options: PostgresLockOptions;
  readonly #s: LockSettings;
  #client: SessionConnection | null = null;
  #connecting: Promise<SessionConnection> | null = null;
  readonly #held = new Map<string, Held>();
  readonly #calls = new Map<string, Calls>();
  #attempts = 0;
  #closed = false;
  /** Fired by close(): a connection still opening is abandoned. */
  readonly #abandon = new AbortController();
  /** The attempt and the release as acquireWithRetries takes them, made once (not two closures per acquire). */
  readonly #attemptOf = (resource: string): Promise<AcquireResult> => this.#attempt(resource);
  readonly #releaseOf = (lease: Lease): Promise<void> => this.release(lease);

  constructor(options: PostgresLockOptions) {
    this.#options = options;
    this.#s = lockSettings(options, 'PostgresSessionLock options');
  }

  /** The backend pid of the current connection (for pg_terminate_backend), or null when not connected. */
  get backendPid(): number | null {
    return this.#client?.processId ?? null;
  }

  /**
   * One or more attempts, none waiting on the server (pg_try_advisory_lock):
   * granted (a fresh token, or the holder's own lease once more), denied
   * ('held'; 'no-quorum' after a failed statement), or timed-out (see
   * PostgresLockOptions on unknown outcomes). Rejects with InvalidInputError
   * for a bad resource or options.
   */
  acquire(resource: string, options: SessionAcquireOptions = NO_OPTIONS): Promise<AcquireResult> {
    return acquireWithRetries('session', resource, options, { closed: this.#closed, clock: this.#s.clock }, this.#attemptOf, this.#releaseOf);
  }

  /**
   * Gives up one level of the lease's stack (the lock goes with the last);
   * rejects with UnavailableError when the unlock may not have run (the
   * session is then ended, so the server frees the lock, and the lease's
   * signal, fired 'released' as the unlock went out, reads 'connection-lost'
   * from then on). Not async: the
   * unlock's reply settles the one promise straight from the read callback.
   */
  release(lease: Lease): Promise<void> {
    try {
      checkLease(lease, 'release');
      // The unlock's bound starts here: a clock that cannot be read refuses the release (InvalidInputError) with the lease still held, nothing sent.
      this.#s.clock.now();
    } catch (e) {
      return Promise.reject(e as Error);
    }
    const held = this.#held.get(lease.resource);
    if (held === undefined || held.lease !== lease) return Promise.resolve();
    held.count--;
    const last = held.count === 0;
    if (last) {
      this.#held.delete(lease.resource);
      held.lease.lose('released');
    }
    const client = this.#client;
    if (client === null) return Promise.resolve();
    return new Promise<void>((resolve, reject) =>
      client.call(held.calls.unlock, (e) => {
        if (e === null) return resolve();
        try {
          // The unlock may not have run: end the session, which frees every lock it held, and say so.
          if (this.#client === client) this.#destroy(client);
          // The lock went with the session (this end, or a FATAL before it), not with a release the caller may count as landed.
          if (last) held.lease.releaseUnconfirmed();
          reject(new UnavailableError(`release of '${lease.resource}' failed (${e.message}); the session was ended, so the server frees the lock`, { cause: e }));
        } catch (thrown) {
          reject(thrown as Error);
        }
      }),
    );
  }

  /**
   * Ends the connection: every lease on it fires its signal and the server
   * frees their locks. An acquire in flight settles as the connection ends:
   * one whose statement was out when close() came and whose reply grants
   * the lock gets a lease whose signal fired already ('connection-lost':
   * the session ends with the close, and the server frees the lock); one
   * still waiting for the first connection rejects with
   * InvalidInputError('precondition'), and that connection is ended before
   * close() resolves. Every later call rejects with 'precondition'.
   */
  async close(): Promise<void> {
    this.#closed = true;
    const client = this.#client;
    const connecting = this.#connecting;
    // A connection still opening holds nothing yet: its socket goes at once, not after its connect's bound and a goodbye.
    this.#abandon.abort(closedError());
    this.#lost();
    if (client !== null) await client.end();
    // A first connection still opening: it ends itself as it opens (see #connection); wait for that.
    if (connecting !== null) await connecting.catch(() => undefined);
  }

  /** Not async on a live connection: the reply settles the attempt's one promise from the read callback (see attemptOn). */
  #attempt(resource: string): Promise<AcquireResult> {
    // The attempt's bound starts here: a clock that cannot be read rejects it (InvalidInputError; the caller's try makes the throw a rejection), nothing sent.
    this.#s.clock.now();
    const client = this.#client;
    return client === null ? this.#connectThenAttempt(resource) : this.#attemptOn(client, resource);
  }

  async #connectThenAttempt(resource: string): Promise<AcquireResult> {
    let client: SessionConnection;
    try {
      client = await this.#connection();
    } catch (e) {
      // The lock was closed (before or while the connection opened: close() abandons it), or a connection parameter the wire client refuses.
      if (this.#closed) throw closedError();
      if (e instanceof InvalidInputError) throw e;
      const refused = refusal(e);
      if (refused !== null) throw refused;
      // A connect with no reply in time is an unknown outcome too (nothing is held: there was no session yet).
      return replyMissing(e) ? { kind: 'timed-out' } : { kind: 'denied', reason: 'no-quorum' };
    }
    return this.#attemptOn(client, resource);
  }

  #attemptOn(client: SessionConnection, resource: string): Promise<AcquireResult> {
    const held = this.#held.get(resource);
    const calls = held?.calls ?? this.#callsOf(resource);
    // PostgreSQL stacks session locks: a holder takes it once more; the grant (and its token) stays the same.
    const call = held === undefined ? calls.mint : (calls.relock ??= new EncodedCall(LOCK, [calls.key]));
    // The callback is passed as it is written, not held in a named const: tsx (the benches) names such a closure with a defineProperty at each creation.
    return new Promise<AcquireResult>((resolve, reject) =>
      client.call(call, (e, rows) => {
        let result: AcquireResult | Promise<AcquireResult>;
        try {
          if (e !== null) result = this.#failed(client, resource, e);
          else {
            try {
              result = this.#granted(client, resource, held, calls, rows);
            } catch (unreadable) {
              result = this.#failed(client, resource, unreadable as Error);
            }
          }
        } catch (refused) {
          return reject(refused as Error);
        }
        resolve(result);
      }),
    );
  }

  /** The resource's calls, encoded at its first acquire (or again after the bound emptied them). */
  #callsOf(resource: string): Calls {
    let calls = this.#calls.get(resource);
    if (calls === undefined) {
      const key = advisoryKeyText(resource);
      calls = { key, mint: new EncodedCall(LOCK_AND_MINT, [key, resource, this.#s.base]), unlock: new EncodedCall(UNLOCK, [key]), relock: null };
      if (this.#calls.size >= CALLS_KEPT) this.#calls.clear();
      this.#calls.set(resource, calls);
    }
    return calls;
  }

  /**
   * The reply to a grant's statement. Which statement went out (mint or
   * relock) was chosen by what the lock held when it was sent; the lock's
   * other calls on the session may have changed that since, so it is read
   * again here: the server applied them in the order they were sent.
   */
  #granted(client: SessionConnection, resource: string, held: Held | undefined, calls: Calls, rows: Row[]): AcquireResult | Promise<AcquireResult> {
    const now = this.#held.get(resource);
    if (held !== undefined) {
      // Its lease fired already if the connection went (close() or a loss) since the call went out.
      if (client !== this.#client || now === held) {
        held.count++;
        return { kind: 'granted', lease: held.lease };
      }
      // Released to its last level while the relock was out: the session holds the lock once more for a lease that is over. Give that level back and try afresh (both go out in order on the session).
      return this.#retake(client, resource, calls);
    }
    const token = rows[0]?.[0];
    if (token === undefined) return { kind: 'denied', reason: 'held' };
    if (token === null) throw new Error('TRY_LOCK_AND_MINT returned no token');
    if (now !== undefined && client === this.#client) {
      // Another acquire of this lock was granted first on the same session while this one was out: the session stacked the lock, so this is the holder's acquire once more (same lease, same token; the token this statement drew goes unused, a gap).
      now.count++;
      return { kind: 'granted', lease: now.lease };
    }
    const lease = new LeaseHandle(resource, `pg:${client.processId}:${++this.#attempts}`, BigInt(token), null, this.#s.clock);
    if (client !== this.#client) {
      // Granted on a connection the lock has let go of since the call went out (close() ends it): the session, and the lock with it, ends with it, so the lease comes back lost, and is not kept.
      lease.lose('connection-lost');
      return { kind: 'granted', lease };
    }
    this.#held.set(resource, { lease, calls, count: 1 });
    return { kind: 'granted', lease };
  }

  /** Gives back the level a relock took for a lease released meanwhile, then attempts again (a fresh grant, or the current holder's lease). */
  #retake(client: SessionConnection, resource: string, calls: Calls): Promise<AcquireResult> {
    client.call(calls.unlock, (e) => {
      // The unlock may not have run: end the session, which frees every lock it held (the attempt that follows fails with it).
      if (e !== null && this.#client === client) this.#destroy(client);
    });
    return this.#attemptOn(client, resource);
  }

  /** A statement that failed or could not be read: it may have taken the lock, so the session ends (the server drops whatever it holds; on a broken connection it went already). */
  #failed(client: SessionConnection, resource: string, e: Error): AcquireResult {
    // Refused before it was sent (the clock's reading): the session is as it was, and the caller hears why.
    if (e instanceof InvalidInputError) throw e;
    if (this.#client === client) this.#destroy(client);
    if ((e as { code?: string }).code === NUMERIC_OUT_OF_RANGE) throw new TokenOverflowError(resource);
    const refused = refusal(e);
    if (refused !== null) throw refused;
    return replyMissing(e) ? { kind: 'timed-out' } : { kind: 'denied', reason: 'no-quorum' };
  }

  /** Drops the connection without a round trip: the server ends the session (and its locks) as soon as it sees the close. */
  #destroy(client: SessionConnection): void {
    client.destroy();
    this.#lost(client);
  }

  #connection(): Promise<SessionConnection> {
    if (this.#closed) return Promise.reject(closedError());
    if (this.#client !== null) return Promise.resolve(this.#client);
    this.#connecting ??= Promise.resolve()
      .then(() => openSessionConnection(this.#options.connection, this.#s, this.#options.link !== undefined, STATEMENTS, (c) => this.#lost(c), this.#abandon.signal))
      .then(async (client) => {
        if (this.#closed) {
          // close() came while it opened: ended here, before close() resolves (it waits for this), and never used.
          await client.end();
          throw closedError();
        }
        this.#client = client;
        return client;
      })
      .finally(() => {
        this.#connecting = null;
      });
    return this.#connecting;
  }

  #lost(client?: SessionConnection): void {
    if (client !== undefined && client !== this.#client) return;
    this.#client = null;
    for (const h of this.#held.values()) h.lease.lose('connection-lost');
    this.#held.clear();
    if (client !== undefined) this.#options.onConnectionLost?.();
  }
}

