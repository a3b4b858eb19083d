import { checkLease } from '../options.ts';
import pg from 'pg';
import type { MonotonicClock } from '../clock.ts';
import type { Lease } from '../lease.ts';
import { LeaseHandle } from '../lease.ts';
import type { AcquireResult } from '../leaseLock.ts';
import type { LockSettings } from './attempts.ts';
import { acquireWithRetries, lockSettings, NUMERIC_OUT_OF_RANGE, refusal, replyMissing, TokenOverflowError } from './attempts.ts';
import { UnavailableError } from '../errors.ts';
import { advisoryKeyText } from './keys.ts';
import { TRY_LOCK_AND_MINT } from './schema.ts';
import type { SessionConnection } from './sessionConnection.ts';
import { openSessionConnection } from './sessionConnection.ts';
import { PreparedStatement } from './wire/connection.ts';

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

interface Held {
  readonly lease: LeaseHandle;
  /** The advisory key, as the statements take it (hashed once per grant). */
  readonly key: string;
  count: number;
}

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
  #attempt = 0;
  #closed = false;

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
  acquire(resource: string, options: SessionAcquireOptions = {}): Promise<AcquireResult> {
    return acquireWithRetries('session', resource, options, { closed: this.#closed, clock: this.#s.clock }, (r) => this.attempt(r), (lease) => this.release(lease));
  }

  /** Gives up one level of the lease's stack (the lock goes with the last); throws UnavailableError when the unlock may not have run (the session is then ended, so the server frees the lock). */
  async release(lease: Lease): Promise<void> {
    checkLease(lease, 'release');
    const held = this.#held.get(lease.resource);
    if (held === undefined || held.lease !== lease) return;
    held.count--;
    if (held.count === 0) {
      this.#held.delete(lease.resource);
      held.lease.lose('released');
    }
    const client = this.#client;
    if (client === null) return;
    try {
      await client.call(UNLOCK, [held.key]);
    } catch (e) {
      // The unlock may not have run: end the session, which frees every lock it held, and say so.
      if (this.#client === client) this.destroy(client);
      throw new UnavailableError(`release of '${lease.resource}' failed (${(e as Error).message}); the session was ended, so the server frees the lock`, { cause: e });
    }
  }

  /** Ends the connection: every lease on it fires its signal and the server frees their locks. */
  async close(): Promise<void> {
    this.#closed = true;
    const client = this.#client;
    this.lost();
    if (client !== null) await client.end();
  }

  private async attempt(resource: string): Promise<AcquireResult> {
    let client = this.#client;
    if (client === null) {
      try {
        client = await this.connection();
      } catch (e) {
        const refused = refusal(e);
        if (refused !== null) throw refused;
        // A connect with no reply in time is an unknown outcome too (nothing is held: there was no session yet).
        return replyMissing(e) ? { kind: 'timed-out' } : { kind: 'denied', reason: 'no-quorum' };
      }
    }
    const held = this.#held.get(resource);
    const key = held?.key ?? advisoryKeyText(resource);
    try {
      if (held !== undefined) {
        // PostgreSQL stacks session locks: take it once more; the grant (and its token) stays the same.
        await client.call(LOCK, [key]);
        held.count++;
        return { kind: 'granted', lease: held.lease };
      }
      const rows = await client.call(LOCK_AND_MINT, [key, resource, this.#s.base]);
      const token = rows[0]?.[0];
      if (token === undefined) return { kind: 'denied', reason: 'held' };
      if (token === null) throw new Error('TRY_LOCK_AND_MINT returned no token');
      const lease = new LeaseHandle(resource, `pg:${this.backendPid}:${++this.#attempt}`, BigInt(token), null, this.#s.clock);
      this.#held.set(resource, { lease, key, count: 1 });
      return { kind: 'granted', lease };
    } catch (e) {
      // The statement may have taken the lock before it failed or its reply came too late:
      // end the session so the server drops whatever it holds (on a broken connection it went already).
      if (this.#client === client) this.destroy(client);
      if ((e as { code?: string }).code === NUMERIC_OUT_OF_RANGE) throw new TokenOverflowError(resource);
      const refused = refusal(e);
      if (refused !== null) throw refused;
      return replyMissing(e) ? { kind: 'timed-out' } : { kind: 'denied', reason: 'no-quorum' };
    }
  }

  /** Drops the connection without a round trip: the server ends the session (and its locks) as soon as it sees the close. */
  private destroy(client: SessionConnection): void {
    client.destroy();
    this.lost(client);
  }

  private connection(): Promise<SessionConnection> {
    if (this.#closed) return Promise.reject(new Error('lock closed'));
    if (this.#client !== null) return Promise.resolve(this.#client);
    this.#connecting ??= openSessionConnection(this.#options.connection, this.#s, this.#options.link !== undefined, STATEMENTS, (c) => this.lost(c))
      .then((client) => {
        this.#client = client;
        return client;
      })
      .finally(() => {
        this.#connecting = null;
      });
    return this.#connecting;
  }

  private lost(client?: SessionConnection): void {
    if (client !== undefined && client !== this.#client) return;
    this.#client = null;
    for (const h of this.#held.values()) h.lease.lose('connection-lost');
    this.#held.clear();
    if (client !== undefined) this.#options.onConnectionLost?.();
  }
}

