import pg from 'pg';
import { checkDuration, checkRetries, checkResource, InvalidInputError, isKeepableText } from '../../model/errors.ts';
import type { MonotonicClock } from '../clock.ts';
import { sleep, systemClock } from '../clock.ts';
import { boundedFromNow, checkedClock } from '../checkedClock.ts';
import { ConnectionConfigError, isRefusal, ServerRefusedError, TimeoutError, TokenOverflowError, UnavailableError } from '../errors.ts';
import type { AcquireResult } from '../leaseLock.ts';
import type { PostgresLockOptions, SessionAcquireOptions } from './sessionLock.ts';
import { WireProtocolError, WireServerError } from './wire/errors.ts';
import { checkClock, checkObject, checkOptionalFunction, checkTimeoutMs, checkTokenBase, knownOptions, refuse, shown } from '../options.ts';
import { abortReason, checkSignal, settleAborted } from '../abort.ts';
import type { Lease } from '../lease.ts';

/** What both PostgreSQL locks take from their options, checked once (InvalidInputError otherwise). */
export interface LockSettings {
  readonly clock: MonotonicClock;
  /** Bound on every statement, in ms. */
  readonly timeoutMs: number;
  /** tokenBase, as the statements take it. */
  readonly base: string;
  /** Carries one round trip to the server (the options' link, or directly). */
  link<T>(roundTrip: () => Promise<T>): Promise<T>;
  /** One round trip (a goodbye), over the link and bounded by the statement timeout. */
  statement<T>(roundTrip: () => Promise<T>): Promise<T>;
  /**
   * A connection's opening (connect, schema, prepares), over the link and
   * bounded by `connectMs` (openingBoundMs): it holds no lock yet, so its
   * bound is about waiting, not about an unknown outcome.
   */
  opening<T>(connectMs: number, roundTrip: () => Promise<T>): Promise<T>;
  /** One statement on `client`, over the link and bounded by the statement timeout (or `ms`): the hot path of every acquire and release. */
  query(client: pg.ClientBase, statement: Statement, values?: readonly unknown[], ms?: number): Promise<Row[]>;
  /**
   * Statements sent together in one round trip (the client in pipeline mode:
   * each with its own Sync, so each commits or fails on its own), over the
   * link and bounded by one statement timeout. Their replies in order, or
   * the first error.
   */
  pipelined(client: pg.ClientBase, statements: readonly Sent[]): Promise<Row[][]>;
}

/** A statement and its values, as one of several sent together. */
export type Sent = readonly [statement: Statement, values?: readonly unknown[]];

/** A statement as node-postgres takes it: text, or a named (prepared once per connection) one. */
export type Statement = string | { readonly name: string; readonly text: string };

/** A reply's rows as the locks read them: each column as the server's text, or null (the wire client's Row). */
export type Row = (string | null)[];

type Callback = (error: Error | undefined, rows: Row[]) => void;

/**
 * A lock statement handed to node-postgres, its rows kept as the server sent
 * them: the locks read a token or a flag from a fixed column, so
 * node-postgres's result (the field descriptions, an object per row through
 * the type parsers, the command tag parsed, a 'row' and an 'end' event) is
 * work for nothing, and the largest part of node-postgres's own CPU per
 * statement. A pg.Query still (pipeline mode takes no other kind), built from
 * the statement's text with the name set after (node-postgres copies a config
 * object property by property, about 3 µs per named statement), and submitted
 * as it is, through its callback: no promise and no stack-rewriting catch of
 * the promise form.
 */
class LockQuery extends pg.Query {
  readonly #rows: Row[] = [];

  constructor(statement: Statement, values: readonly unknown[] | undefined, callback: Callback) {
    super(typeof statement === 'string' ? statement : statement.text, values as unknown[] | undefined, callback as never);
    if (typeof statement !== 'string') (this as unknown as { name: string }).name = statement.name;
  }

  /** Text columns always: a client configured `binary` sets this on every query, and the rows would be bytes the locks do not read. */
  get binary(): boolean {
    return false;
  }

  set binary(_: boolean) {}

  handleRowDescription(): void {}

  handleDataRow(message: { readonly fields: Row }): void {
    this.#rows.push(message.fields);
  }

  handleCommandComplete(): void {}

  /** Through node-postgres's callback: its query_timeout, when set, wraps it to clear its timer. */
  handleReadyForQuery(): void {
    (this as unknown as { callback: Callback }).callback(undefined, this.#rows);
  }
}

/** `readTimeoutMs`: node-postgres's own query_timeout for this statement, when it must differ from the client's (withLock's longer wait). */
function submit(client: pg.ClientBase, statement: Statement, values: readonly unknown[] | undefined, callback: Callback, readTimeoutMs?: number): void {
  const query = new LockQuery(statement, values, callback);
  if (readTimeoutMs !== undefined) (query as unknown as { query_timeout: number }).query_timeout = readTimeoutMs;
  client.query(query);
}

function send(client: pg.ClientBase, statement: Statement, values: readonly unknown[] | undefined, readTimeoutMs?: number): Promise<Row[]> {
  return new Promise((resolve, reject) => submit(client, statement, values, (e, r) => (e ? reject(e) : resolve(r)), readTimeoutMs));
}

/**
 * Every statement of `statements` submitted at once, in one write; settles
 * when the last reply came, or at the first error. node-postgres corks its
 * socket around each statement's messages only, so each statement was a
 * write syscall of its own (and a server wakeup): the socket stays corked
 * across all of them (cork nests; the last uncork writes).
 */
function sendAll(client: pg.ClientBase, statements: readonly Sent[], done: (error: Error | undefined, results: Row[][]) => void): void {
  const stream = (client as unknown as { connection?: { stream?: { cork?(): void; uncork?(): void } } }).connection?.stream;
  stream?.cork?.();
  try {
    submitAll(client, statements, done);
  } finally {
    stream?.uncork?.();
  }
}

function submitAll(client: pg.ClientBase, statements: readonly Sent[], done: (error: Error | undefined, results: Row[][]) => void): void {
  const results: Row[][] = [];
  let settled = false;
  for (const [statement, values] of statements) {
    submit(client, statement, values, (e, r) => {
      if (settled) return;
      if (e) {
        settled = true;
        done(e, results);
        return;
      }
      results.push(r);
      if (results.length === statements.length) {
        settled = true;
        done(undefined, results);
      }
    });
  }
}

/** A statement bounded by a timer of the clock, in one promise (no link: nothing between the client and the socket). */
function bounded(clock: MonotonicClock, ms: number, client: pg.ClientBase, statement: Statement, values: readonly unknown[] | undefined, readTimeoutMs?: number): Promise<Row[]> {
  return new Promise((resolve, reject) => {
    const cancel = clock.schedule(clock.now() + ms, () => reject(new TimeoutError('statement', ms)));
    submit(
      client,
      statement,
      values,
      (e, r) => {
        cancel();
        if (e) reject(e);
        else resolve(r);
      },
      readTimeoutMs,
    );
  });
}

/** `start()`'s round trip bounded by `ms` on `clock` from a reading taken before it starts (a refused reading sends nothing). */
function clockFirst<T>(clock: MonotonicClock, ms: number, start: () => Promise<T>): Promise<T> {
  return boundedFromNow(clock, ms, 'statement', start);
}

/** What both PostgreSQL locks' constructors take (`connection` itself is node-postgres's ClientConfig, open to its keys; checkConnection checks the fields it can). */
const LOCK_OPTIONS = ['connection', 'clock', 'tokenBase', 'statementTimeoutMs', 'link', 'onConnectionLost'];
/** ttlMs is known so that it is refused as what it is (a session or transaction lock has none), and not listed as one it takes. */
const checkAcquireKeys = knownOptions('acquire options', ['retries', 'retryDelayMs', 'signal', 'ttlMs'], ['retries', 'retryDelayMs', 'signal']);

export function lockSettings(options: PostgresLockOptions, what = 'PostgreSQL lock options'): LockSettings {
  checkObject(options, what);
  knownOptions(what, LOCK_OPTIONS)(options);
  checkObject(options.connection, 'connection', 'a node-postgres ClientConfig object');
  checkConnection(options.connection as unknown as Record<string, unknown>);
  // Each reading checked (impl/checkedClock.ts), and each bound's clock read before its work starts: a bad reading rejects the call with InvalidInputError, nothing sent.
  const clock = options.clock === undefined ? systemClock : checkedClock(checkClock(options.clock));
  const timeoutMs = checkTimeoutMs(options.statementTimeoutMs ?? 5000, 'statementTimeoutMs');
  const base = checkTokenBase(options.tokenBase ?? 0n).toString();
  checkOptionalFunction(options.link, 'link');
  checkOptionalFunction(options.onConnectionLost, 'onConnectionLost');
  const via = options.link;
  const link = via ?? (<T>(roundTrip: () => Promise<T>): Promise<T> => roundTrip());
  return {
    clock,
    timeoutMs,
    base,
    link,
    statement: (roundTrip) => clockFirst(clock, timeoutMs, () => link(roundTrip)),
    opening: (connectMs, roundTrip) => clockFirst(clock, connectMs, () => link(roundTrip)),
    query:
      via === undefined
        ? (client, statement, values, ms = timeoutMs) => bounded(clock, ms, client, statement, values, ms === timeoutMs ? undefined : ms)
        : (client, statement, values, ms = timeoutMs) => clockFirst(clock, ms, () => via(() => send(client, statement, values, ms === timeoutMs ? undefined : ms))),
    pipelined: (client, statements) => clockFirst(clock, timeoutMs, () => link(() => new Promise<Row[][]>((resolve, reject) => sendAll(client, statements, (e, r) => (e ? reject(e) : resolve(r)))))),
  };
}

/**
 * The bound on opening a connection: `connectionTimeoutMillis` when the
 * configuration sets a positive one (node-postgres's 0, no bound, is not
 * taken: nothing may hang), the statement timeout otherwise. A connect costs
 * far more than a statement (a backend forked, SCRAM, the schema on a cold
 * backend): cut at a short statement timeout it never opened on a loaded
 * machine, every attempt starting again from nothing, whatever
 * connectionTimeoutMillis said.
 */
export function openingBoundMs(config: pg.ClientConfig, statementTimeoutMs: number): number {
  const ms = config.connectionTimeoutMillis;
  return typeof ms === 'number' && Number.isInteger(ms) && ms > 0 ? ms : statementTimeoutMs;
}

/** A port as node-postgres takes it (it parses a string with parseInt): an integer in [1, 65535], or its decimal digits. */
function isPort(value: unknown): boolean {
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^[0-9]{1,5}$/.test(value) ? Number(value) : Number.NaN;
  return Number.isInteger(n) && n >= 1 && n <= 65535;
}

/** The port of a postgres:// or postgresql:// connection string, as written (after the host, before the path), if it names one. */
const URL_PORT = /^postgres(?:ql)?:\/\/(?:[^@/?#]*@)?(?:\[[^\]/?#]*\]|[^:/?#]*)(?::([^/?#]*))?/i;

/** node-postgres's text fields the locks can check: each a string without NUL (the wire client would cut it there; node-postgres sends it as given). */
const TEXT_FIELDS = ['host', 'user', 'database', 'application_name', 'options', 'connectionString'] as const;
/** node-postgres's bounds, in ms: each an integer in [0, 2^31-1], or false (unset). */
const MS_FIELDS = ['connectionTimeoutMillis', 'query_timeout', 'statement_timeout', 'lock_timeout', 'idle_in_transaction_session_timeout'] as const;

/**
 * The fields of a node-postgres ClientConfig the locks and the store can
 * check before anything connects (the object stays open to every other key
 * node-postgres takes): a port outside [1, 65535] or not a number (from
 * `port`, the connection string, or PGPORT when neither names one) reached
 * node-postgres, whose socket refused it with a pending promise and then an
 * unhandled 'error' event that ended the process. InvalidInputError('invalid-config')
 * naming the field, the password only by kind.
 */
export function checkConnection(connection: Readonly<Record<string, unknown>>, env: NodeJS.ProcessEnv = process.env): void {
  const text = (field: string, value: unknown): void => {
    // A lone surrogate has no UTF-8 form: it went out as U+FFFD, so two passwords (or users, databases) differing only there were one.
    if (value !== undefined && !isKeepableText(value)) refuse(`connection.${field}`, 'a string of well-formed Unicode without NUL characters', value);
  };
  for (const field of TEXT_FIELDS) text(field, connection[field]);
  if (typeof connection.password !== 'function') text('password', connection.password);
  if (connection.port !== undefined && !isPort(connection.port)) refuse('connection.port', 'an integer in [1, 65535] (or its decimal digits)', connection.port);
  const urlPort = typeof connection.connectionString === 'string' ? URL_PORT.exec(connection.connectionString)?.[1] : undefined;
  if (urlPort !== undefined && urlPort !== '' && !isPort(urlPort)) {
    // Only digits are echoed: a password with an unencoded '#', '?' or '/' ends the authority early, and what this reads as the port is then the password's start.
    const got = /^[0-9]{1,10}$/.test(urlPort) ? urlPort : 'text that is no number (not shown: it may be a part of a password)';
    throw new InvalidInputError('invalid-config', `connection.connectionString must name a port in [1, 65535], got ${got}`);
  }
  if (connection.port === undefined && (urlPort === undefined || urlPort === '') && env.PGPORT !== undefined && env.PGPORT !== '' && !isPort(env.PGPORT)) {
    throw new InvalidInputError('invalid-config', `the environment's PGPORT (read when connection names no port) must be an integer in [1, 65535], got ${shown(env.PGPORT)}`);
  }
  for (const field of MS_FIELDS) {
    const v = connection[field];
    if (v !== undefined && v !== false && (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 2 ** 31 - 1)) refuse(`connection.${field}`, 'an integer number of ms in [0, 2^31-1], or false', v);
  }
  if (connection.keepAlive !== undefined && typeof connection.keepAlive !== 'boolean') refuse('connection.keepAlive', 'a boolean', connection.keepAlive);
  const ssl: unknown = connection.ssl;
  if (ssl !== undefined && typeof ssl !== 'boolean' && (typeof ssl !== 'object' || ssl === null || Array.isArray(ssl))) refuse('connection.ssl', 'a boolean or an object of TLS options', ssl);
}

/**
 * The acquire loop both PostgreSQL locks share: validate, then one attempt
 * and, after a denial, up to `retries` more, `retryDelayMs` apart on the
 * lock's clock. A `signal` that fires ends the pause at once; an attempt in
 * flight (one statement, bounded) finishes, and a grant it brings is
 * released (`release`) before the acquire rejects with the signal's reason.
 * An invalid input rejects (never throws). One attempt with no signal (the
 * common call) is the attempt's own promise: no async level around it.
 */
export function acquireWithRetries(
  what: string,
  resource: string,
  options: SessionAcquireOptions,
  state: { readonly closed: boolean; readonly clock: MonotonicClock },
  attempt: (resource: string) => Promise<AcquireResult>,
  release: (lease: Lease) => Promise<unknown>,
): Promise<AcquireResult> {
  try {
    checkResource(resource);
    checkObject(options, 'acquire options');
    checkAcquireKeys(options);
    if (state.closed) throw new InvalidInputError('precondition', 'the lock was closed');
    if ((options as { ttlMs?: unknown }).ttlMs !== undefined) throw new InvalidInputError('unsupported-operation', `a PostgreSQL ${what} lock has no ttl`);
    const retries = checkRetries(options.retries);
    const retryDelayMs = checkDuration(options.retryDelayMs ?? 0, 'retryDelayMs');
    const signal = checkSignal(options.signal);
    if (signal?.aborted) throw abortReason(signal);
    if (retries === 0 && signal === undefined) return attempt(resource);
    return retryLoop(resource, retries, retryDelayMs, signal, state.clock, attempt, release);
  } catch (e) {
    return Promise.reject(e as Error);
  }
}

async function retryLoop(
  resource: string,
  retries: number,
  retryDelayMs: number,
  signal: AbortSignal | undefined,
  clock: MonotonicClock,
  attempt: (resource: string) => Promise<AcquireResult>,
  release: (lease: Lease) => Promise<unknown>,
): Promise<AcquireResult> {
  for (let tries = 0; ; tries++) {
    const result = await settleAborted(await attempt(resource), signal, release);
    if (result.kind !== 'denied' || tries >= retries) return result;
    await sleep(clock, retryDelayMs, signal);
  }
}

/** SQLSTATE of a bigint overflow: the token sequence reached 2^63-1. */
export const NUMERIC_OUT_OF_RANGE = '22003';

export { TokenOverflowError };

/**
 * Node's codes for a TLS handshake that refuses the configuration: the
 * server's certificate not trusted, not for this host, or out of date. A
 * handshake timeout is not among them: that is an outage.
 */
const TLS_CODES = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'CERT_SIGNATURE_FAILURE',
  'HOSTNAME_MISMATCH',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);
/** node-postgres's errors when the server will not speak TLS at all (it answered the SSLRequest with a refusal). */
const TLS_UNSUPPORTED = /^The server does not support SSL connections$|^There was an error establishing an SSL connection$/;

/** A connection that can never succeed as configured: wrong password, unknown user, database or host, or a TLS setting the server or its certificate refuses. */
export function configError(e: unknown): ConnectionConfigError | null {
  const code = (e as { code?: string } | null)?.code;
  const message = e instanceof Error ? e.message : String(e);
  // OpenSSL's protocol errors (ERR_SSL_WRONG_VERSION_NUMBER, an alert such as unknown ca) are the configuration's too.
  if ((typeof code === 'string' && (TLS_CODES.has(code) || code.startsWith('ERR_SSL_'))) || (e instanceof Error && TLS_UNSUPPORTED.test(message))) {
    return new ConnectionConfigError('tls', `the TLS handshake refused the configuration: ${message}`, { cause: e });
  }
  if (code === '28P01' || code === '28000' || /client password must be a string/.test(message)) return new ConnectionConfigError('authentication', `the server refused the credentials: ${message}`, { cause: e });
  if (code === '3D000') return new ConnectionConfigError('unknown-database', message, { cause: e });
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return new ConnectionConfigError('unknown-host', `the host name does not resolve: ${message}`, { cause: e });
  return null;
}

/**
 * SQLSTATE classes that say the server is unreachable (08), going away or
 * starting up, or that a statement was cancelled (57: 57P01-57P05, 57014),
 * out of resources such as connections (53), a race lost (40), or a system
 * error (58): an outage or a timeout, retried as `no-quorum`.
 */
const TRANSIENT_CLASSES = new Set(['08', '40', '53', '57', '58']);

/**
 * Single SQLSTATEs of other classes that pass as well: 25P02, a statement
 * refused only because an earlier one of its transaction failed (that one's
 * class is what counts, and a lock client that meets it drops the
 * connection); 25P03 and 25P04, a session ended by a timeout; 25006, a
 * read-only server (a standby not yet promoted, or read-only for a moment);
 * 55P03, a lock not available in time. Every other SQLSTATE is a refusal.
 */
const TRANSIENT_STATES = new Set(['25P02', '25P03', '25P04', '25006', '55P03']);

/** Missing objects: the schema lockcheck expects is not there, or not as it expects. */
const SCHEMA_STATES = new Set(['3F000', '42P01', '42703', '42704', '42883', '42P02']);

/**
 * A failure no retry can fix, typed: wrong credentials, database or host
 * (ConnectionConfigError), a statement the server refused
 * (ServerRefusedError: permission 42501, a missing schema or table, any other
 * SQL error), or a server whose replies the wire client cannot read
 * (WireProtocolError: not PostgreSQL, or a stream out of step). Null for
 * connection loss and timeouts (errors with no SQLSTATE, or one of an
 * outage): only those are `no-quorum` or an unknown outcome.
 */
export function refusal(e: unknown): ConnectionConfigError | ServerRefusedError | WireProtocolError | null {
  // Typed already (the wire client's authentication).
  if (isRefusal(e)) return e;
  const config = configError(e);
  if (config !== null) return config;
  // Only an error the server sent carries a SQLSTATE; a socket's code (EPIPE, ECONNRESET) is a lost connection.
  if (!(e instanceof pg.DatabaseError) && !(e instanceof WireServerError)) return null;
  const code = e.code;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code) || TRANSIENT_CLASSES.has(code.slice(0, 2)) || TRANSIENT_STATES.has(code)) return null;
  const message = e instanceof Error ? e.message : String(e);
  if (code === '42501') return new ServerRefusedError('permission', code, message, { cause: e });
  if (SCHEMA_STATES.has(code)) return new ServerRefusedError('schema', code, message, { cause: e });
  return new ServerRefusedError('statement', code, message, { cause: e });
}

/**
 * The outcome of a failed statement is unknown when no reply said what
 * happened: our own deadline or pg's query_timeout fired (the reply may still
 * come), as opposed to an error the server sent (a SQLSTATE) or a connection
 * already known to be gone.
 */
export function replyMissing(e: unknown): boolean {
  return e instanceof TimeoutError || (e instanceof Error && (e.message === 'Query read timeout' || NODE_POSTGRES_CONNECT_TIMEOUTS.has(e.message)));
}

/** node-postgres's errors when its connectionTimeoutMillis fires during a connect (plain Errors, no code). */
const NODE_POSTGRES_CONNECT_TIMEOUTS = new Set(['timeout expired', 'Connection terminated due to connection timeout']);

/**
 * A failure of a call that has no result to carry an outage in (withLock,
 * the store on its own connection), typed as docs/errors.md lists them: an
 * error typed already as it is; a refusal no retry fixes (refusal()); a
 * token sequence at 2^63-1 (TokenOverflowError for `resource`); no reply
 * in time, ours or node-postgres's (TimeoutError, the driver's as cause);
 * anything else (a lost connection, a server going away) UnavailableError
 * with the driver's error, and its SQLSTATE if any, as cause.
 */
export function typedFailure(e: unknown, what: string, timeoutMs: number, resource?: string): Error {
  if (e instanceof InvalidInputError || e instanceof TimeoutError || e instanceof UnavailableError || e instanceof TokenOverflowError) return e;
  if (resource !== undefined && (e as { code?: unknown } | null)?.code === NUMERIC_OUT_OF_RANGE) return new TokenOverflowError(resource);
  const refused = refusal(e);
  if (refused !== null) return refused;
  if (replyMissing(e)) return new TimeoutError(what, timeoutMs, { cause: e });
  return new UnavailableError(`${what} failed: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
}

/** Closes the socket at once, no goodbye: the server sees the connection end and terminates the session. */
export function destroyConnection(client: pg.Client): void {
  (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
}

/**
 * Closes a connection, bounded: a server that never answers the goodbye (paused, gone) must not hold
 * the caller. After `ms` the socket is destroyed.
 */
export function endWithin(client: { end(): Promise<void> }, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
      resolve();
    }, ms);
    timer.unref();
    client.end().then(
      () => {
        clearTimeout(timer);
        resolve();
      },
      () => {
        clearTimeout(timer);
        resolve();
      },
    );
  });
}
