import net from 'node:net';
import type { MonotonicClock } from '../../clock.ts';
import { readingOrNaN } from '../../checkedClock.ts';
import { ConnectionConfigError, InvalidInputError, TimeoutError } from '../../errors.ts';
import { isKeepableText } from '../../../model/errors.ts';
import { shown } from '../../options.ts';
import { md5Password, Scram } from './auth.ts';
import type { Param } from './codec.ts';
import { callMessage, MessageReader, parseMessages, passwordMessage, queryMessage, saslInitialResponse, startupMessage, TERMINATE } from './codec.ts';
import { readFields, serverError, WireConnectionError, WireProtocolError, WireServerError } from './errors.ts';
import { endsSession } from '../sessionEnd.ts';

/**
 * A minimal PostgreSQL frontend (protocol 3.0) for the lock's few
 * statements: start-up with trust, cleartext, MD5 or SCRAM-SHA-256
 * authentication; a simple query (the schema); the statements Parsed once;
 * then each call is Bind/Execute/Sync in one Buffer and settles at its
 * ReadyForQuery.
 * Calls of concurrent callers go out at once and their replies come back in
 * order (pipelining, a Sync each). No TLS: a plain TCP or Unix-socket link.
 *
 * Every wait is bounded: the connect (start-up and authentication) and each
 * query, Parse and call by `timeoutMs` on the clock. A call that runs out, a socket error, a close
 * or a message this client cannot read drops the connection at once: every
 * call in flight fails (the timed-out one with TimeoutError, a call whose
 * ErrorResponse had come with that error, the others with the error that
 * ended the connection: WireConnectionError, or WireProtocolError for a
 * message not expected in the connection's state or not well formed) and
 * `onLost` runs once. What it refuses is listed in docs/postgres.md
 * ("What the wire client refuses").
 */

/** How long end() waits for the server's close after its Terminate (real time). */
const END_GRACE_MS = 2_000;

/** A statement prepared once per connection under its name. */
export class PreparedStatement {
  /** The name as the Bind message carries it. */
  readonly nameBytes: Buffer;
  constructor(
    readonly name: string,
    readonly text: string,
  ) {
    // Bind carries the name as a C string: a NUL would cut it (the text's NUL is refused by Parse's encoder).
    if (name.includes('\0')) throw new InvalidInputError('invalid-config', 'a NUL character in a statement name');
    this.nameBytes = Buffer.from(name);
  }
}

/**
 * A call of a prepared statement with its parameters, encoded once
 * (Bind/Execute/Sync): a lock sends the same call for a resource every time,
 * so it keeps this and skips the encoding per call. The bytes name the
 * statement, not a connection: they go to whichever connection prepared the
 * statement under that name (each connection Parses its statements before
 * its first call).
 */
export class EncodedCall {
  /** Bind/Execute/Sync, never changed after: the same Buffer may be written any number of times. */
  readonly bytes: Buffer;
  constructor(
    readonly statement: PreparedStatement,
    /** As encoded (the node-postgres path sends these): not to be changed after. */
    readonly params: readonly Param[],
  ) {
    this.bytes = callMessage(statement.nameBytes, params);
  }
}

/** How a call given a callback settles: the server's error (or the connection's), or its rows. Called once, and must not throw. */
export type CallDone = (error: Error | null, rows: Row[]) => void;

/** The socket's read buffer: replies to the lock's statements are a few dozen bytes; a longer one arrives in several reads. */
const READ_BUFFER = 16 * 1024;

/** A row: each column as text, or null. */
export type Row = (string | null)[];

export interface WireConnectOptions {
  /** TCP host (default 127.0.0.1) and port (default 5432), or `path`: a Unix socket (…/.s.PGSQL.5432). */
  readonly host?: string;
  readonly port?: number;
  readonly path?: string;
  readonly user: string;
  readonly password?: string;
  readonly database?: string;
  /** Start-up parameters beside user and database (statement_timeout, application_name, ...). */
  readonly parameters?: Readonly<Record<string, string>>;
  /** Bound on each query, Parse and call, in ms; and on the connect unless `connectTimeoutMs` is given. */
  readonly timeoutMs: number;
  readonly connectTimeoutMs?: number;
  readonly clock: MonotonicClock;
  /** TCP keepalive on the socket. Default true. */
  readonly keepAlive?: boolean;
  /** Abandons the connect: the socket is destroyed at once and connect() rejects with the signal's reason. */
  readonly signal?: AbortSignal;
}

/** A call in flight: its rows, the server's error if one came, and how it settles (`done`, called once from the read callback or at the loss). */
class Pending {
  rows: Row[] = [];
  error: WireServerError | null = null;
  /** When the call runs out, on the clock (Infinity: bounded by the connect's own timer). */
  deadline = Number.POSITIVE_INFINITY;
  constructor(readonly done: CallDone) {}
}

const NO_ROWS: Row[] = [];

export class WireConnection {
  readonly #socket: net.Socket;
  readonly #options: WireConnectOptions;
  readonly #reader: MessageReader;
  readonly #pending: Pending[] = [];
  #lost: Error | null = null;
  /** Set by end(): no call may start (the Terminate is on its way). */
  #ending = false;
  #onLost: ((e: Error) => void) | null = null;
  #scram: Scram | null = null;
  #processId = 0;
  /** Set at the first ReadyForQuery: the start-up is over (authenticated, parameters and key data sent). */
  #ready = false;
  #authenticated = false;
  /** The one timer of the connection, armed at the oldest call's deadline (null: none armed). */
  #timer: (() => void) | null = null;

  private constructor(socket: net.Socket, options: WireConnectOptions) {
    this.#socket = socket;
    this.#options = options;
    this.#reader = new MessageReader((type, buf, start, end) => this.#message(type, buf, start, end));
    socket.setNoDelay(true);
    socket.on('error', (e: NodeJS.ErrnoException) => this.destroy(connectionError(`connection failed: ${e.message}`, e)));
    socket.on('close', () => this.destroy(new WireConnectionError('the server closed the connection')));
  }

  /** Bytes from the socket, read into its one buffer: chunk[0, length) (valid only during this call: the reader copies what it keeps). */
  #data(chunk: Buffer, length: number): void {
    try {
      this.#reader.push(chunk, length);
    } catch (e) {
      this.destroy(e instanceof WireProtocolError ? e : new WireProtocolError(`unreadable reply: ${(e as Error).message}`));
    }
  }

  /** Opens and authenticates; bounded by `timeoutMs`. */
  static connect(options: WireConnectOptions): Promise<WireConnection> {
    const { clock } = options;
    const timeoutMs = options.connectTimeoutMs ?? options.timeoutMs;
    let startup: Buffer;
    try {
      // Validated before a socket opens: a NUL in a parameter (or the password) would cut it and smuggle what follows in as protocol bytes.
      // And a lone surrogate has no UTF-8 form: it went out as U+FFFD, so two passwords (or users) differing only there were one.
      if (options.password !== undefined && !isKeepableText(options.password)) throw new InvalidInputError('invalid-config', 'the password must be well-formed Unicode without NUL characters (not shown: it is a secret)');
      const parameters: Record<string, string> = { user: options.user, database: options.database ?? options.user, client_encoding: 'UTF8', ...options.parameters };
      for (const [key, value] of Object.entries(parameters)) if (!isKeepableText(value)) throw new InvalidInputError('invalid-config', `the start-up parameter ${shown(key)} must be well-formed Unicode without NUL characters, got ${shown(value, key)}`);
      startup = startupMessage(parameters);
    } catch (e) {
      return Promise.reject(e as Error);
    }
    let connection: WireConnection | null = null;
    // Replies are read into one buffer per connection and handed over in place (`onread`): no chunk allocated and no stream 'data' event per reply.
    const readBuffer = Buffer.allocUnsafe(READ_BUFFER);
    const onread: net.OnReadOpts = {
      buffer: readBuffer,
      callback: (n: number, buf: Uint8Array): boolean => {
        // Node hands back the buffer it was given: read in place, with no view made per read.
        if (connection !== null) connection.#data(buf === readBuffer ? readBuffer : Buffer.from(buf.buffer, buf.byteOffset, n), n);
        return true;
      },
    };
    let connectBy: number;
    try {
      // The bound's start, read before a socket opens: a clock that throws (a checked one refusing its reading) opens nothing.
      connectBy = clock.now() + timeoutMs;
    } catch (e) {
      return Promise.reject(e as Error);
    }
    const socket = options.path !== undefined ? net.connect({ path: options.path, onread }) : net.connect({ host: options.host ?? '127.0.0.1', port: options.port ?? 5432, onread });
    if (options.keepAlive ?? true) socket.setKeepAlive(true);
    const created = new WireConnection(socket, options);
    connection = created;
    return new Promise<WireConnection>((resolve, reject) => {
      const connection = created;
      const { signal } = options;
      const abandon = (): void => fail(signal?.reason instanceof Error ? signal.reason : new WireConnectionError('the connect was abandoned'));
      const scheduled = clock.schedule(connectBy, () => connection.destroy(new TimeoutError('connect', timeoutMs)));
      // The signal is listened to while the connect runs only: a lock's signal outlives its connections.
      const cancel = (): void => {
        scheduled();
        signal?.removeEventListener('abort', abandon);
      };
      const fail = (e: Error): void => {
        cancel();
        connection.destroy(e);
        reject(e);
      };
      socket.once('connect', () => {
        // The start-up settles at the first ReadyForQuery (after authentication), or fails with the server's FATAL error.
        connection.#pending.push(
          new Pending((e) => {
            if (e !== null) return fail(e);
            cancel();
            resolve(connection);
          }),
        );
        socket.write(startup);
      });
      // Before the socket connects, a failure only reaches us through destroy: route it to this promise.
      connection.#onLost = (e) => {
        cancel();
        reject(e);
      };
      if (signal?.aborted === true) abandon();
      else signal?.addEventListener('abort', abandon, { once: true });
    });
  }

  /** The backend's process id (BackendKeyData), for pg_terminate_backend. */
  get processId(): number {
    return this.#processId;
  }

  /** Null while the connection is up; the error that ended it after. */
  get lostWith(): Error | null {
    return this.#lost;
  }

  /** Called once when the connection ends for any reason (destroy, close, error, timeout). Replaces the previous listener. */
  onLost(listener: (e: Error) => void): void {
    this.#onLost = listener;
  }

  /** A simple query (several statements allowed; rows are not kept), bounded by `timeoutMs`: the schema, once per connection. */
  simpleQuery(sql: string): Promise<void> {
    if (this.#lost !== null || this.#ending) return Promise.reject(this.#gone());
    return this.#encodeAndSend(() => queryMessage(sql)).then(() => undefined);
  }

  /** Parses the statements (one round trip), so that each call is Bind/Execute/Sync only; bounded by `timeoutMs`. */
  prepare(statements: readonly PreparedStatement[]): Promise<void> {
    if (this.#lost !== null || this.#ending) return Promise.reject(this.#gone());
    return this.#encodeAndSend(() => parseMessages(statements)).then(() => undefined);
  }

  /** One call of a prepared statement: its rows, or the server's error; bounded by `timeoutMs`. */
  call(statement: PreparedStatement, params: readonly Param[]): Promise<Row[]> {
    if (this.#lost !== null || this.#ending) return Promise.reject(this.#gone());
    return this.#send(callMessage(statement.nameBytes, params), true);
  }

  /** A call encoded once (EncodedCall), as `call`: its rows, or the server's error; bounded by `timeoutMs`. */
  send(call: EncodedCall): Promise<Row[]> {
    if (this.#lost !== null || this.#ending) return Promise.reject(this.#gone());
    return this.#send(call.bytes, true);
  }

  /**
   * As `send`, settled through `done` straight from the read callback that
   * ends the reply (no promise of its own: a caller that makes one promise
   * per operation saves a hop per call). On a connection already gone or
   * ending, `done` runs at once with the error. `done` must not throw: it
   * runs inside the connection's read loop.
   */
  sendWith(call: EncodedCall, done: CallDone): void {
    if (this.#lost !== null || this.#ending) return done(this.#gone(), NO_ROWS);
    const p = new Pending(done);
    try {
      this.#write(call.bytes, p, true);
    } catch (e) {
      // The clock's schedule (a caller's own clock) threw: this call fails with it, as the promise form's would.
      const at = this.#pending.indexOf(p);
      if (at >= 0) this.#pending.splice(at, 1);
      done(e as Error, NO_ROWS);
    }
  }

  #gone(): WireConnectionError {
    return new WireConnectionError(this.#lost === null ? 'the connection is closing (end() was called)' : `the connection is gone: ${this.#lost.message}`);
  }

  /** Closes the socket at once, no goodbye: the server ends the session as soon as it sees the close. Calls in flight fail. */
  destroy(reason: Error = new WireConnectionError('connection destroyed')): void {
    if (this.#lost !== null) return;
    this.#lost = reason;
    this.#socket.destroy();
    this.#timer?.();
    this.#timer = null;
    const pending = this.#pending.splice(0);
    for (const p of pending) {
      p.done(p.error ?? reason, NO_ROWS);
    }
    const listener = this.#onLost;
    this.#onLost = null;
    listener?.(reason);
  }

  /**
   * Terminate, then wait for the server's close: the server ends the session
   * (and releases its advisory locks) before it closes its side, so a lock
   * given up by end() is free for others once end() resolves. The wait is
   * bounded in real time, not on the lock's clock (nothing may be driving
   * that at a teardown): a server that never closes (a cut link) costs at
   * most END_GRACE_MS (or `timeoutMs`, if shorter), then the socket goes.
   */
  end(): Promise<void> {
    if (this.#lost !== null) return Promise.resolve();
    this.#ending = true;
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.destroy(), Math.min(this.#options.timeoutMs, END_GRACE_MS));
      this.#socket.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
      this.#socket.end(TERMINATE);
    });
  }

  /** An encoder's refusal (a NUL in a C string) is this call's rejection, not a throw, and nothing is sent. */
  #encodeAndSend(encode: () => Buffer): Promise<Row[]> {
    let message: Buffer;
    try {
      message = encode();
    } catch (e) {
      return Promise.reject(e as Error);
    }
    return this.#send(message, true);
  }

  #send(message: Buffer, bounded = false): Promise<Row[]> {
    return new Promise<Row[]>((resolve, reject) => this.#write(message, new Pending((e, rows) => (e === null ? resolve(rows) : reject(e))), bounded));
  }

  #write(message: Buffer, p: Pending, bounded: boolean): void {
    // Read before the call joins the line: a clock that throws (a checked one refusing its reading) fails this call with
    // nothing sent, and leaves no entry behind that a later reply would be matched to.
    if (bounded) p.deadline = this.#options.clock.now() + this.#options.timeoutMs;
    this.#pending.push(p);
    if (bounded && this.#timer === null) this.#arm(p.deadline);
    this.#socket.write(message);
  }

  /**
   * One timer per connection, not one per call: replies come in order, so
   * the oldest call in flight is the first to run out. When the timer fires
   * it checks that call and re-arms for the call then oldest.
   */
  #arm(at: number): void {
    const { clock, timeoutMs } = this.#options;
    this.#timer = clock.schedule(at, () => {
      this.#timer = null;
      const head = this.#pending.find((p) => p.deadline !== Number.POSITIVE_INFINITY);
      if (head === undefined) return;
      // A clock that can no longer be read (NaN) has every bound over: the call fails and the connection goes, the safe
      // side (thrown here, in a timer, it was an uncaught exception).
      if (head.deadline > readingOrNaN(clock)) return this.#arm(head.deadline);
      // No reply in time: its outcome is unknown, and every call behind it waits on it; drop the connection.
      this.#pending.splice(this.#pending.indexOf(head), 1);
      head.done(new TimeoutError('statement', timeoutMs), NO_ROWS);
      this.destroy(new WireConnectionError(`a call got no reply within ${timeoutMs} ms`));
    });
  }

  #message(type: number, buf: Buffer, start: number, end: number): void {
    // The rest of a read that ended the connection is not acted on (a FATAL then an authentication request: no answer goes out).
    if (this.#lost !== null) return;
    const head = this.#pending[0];
    // During the start-up only authentication, parameters, key data, notices, errors and the first ReadyForQuery (after AuthenticationOk) may come.
    if (this.#ready ? type === 0x52 || type === 0x4b : !(type === 0x52 || type === 0x53 || type === 0x4b || type === 0x4e || type === 0x45 || (type === 0x5a && this.#authenticated))) throw unexpected(type);
    switch (type) {
      case 0x44: // D DataRow
        if (head === undefined) throw unexpected(type);
        head.rows.push(dataRow(buf, start, end));
        return;
      case 0x5a: {
        // Z ReadyForQuery: the call at the head is complete. Each call is one implicit transaction: any status but idle means the session is not in the state the lock's statements assume.
        if (head === undefined) throw unexpected(type);
        if (end - start !== 1) throw new WireProtocolError('ReadyForQuery of the wrong length');
        if (buf[start] !== 0x49) throw new WireProtocolError(`ReadyForQuery with transaction status '${String.fromCharCode(buf[start]!)}' (a transaction left open): the session is not idle`);
        this.#ready = true;
        this.#pending.shift();
        head.done(head.error, head.error === null ? head.rows : NO_ROWS);
        return;
      }
      case 0x45: {
        // E ErrorResponse: the call fails at its ReadyForQuery; a FATAL one ends the session (the close follows).
        const e = serverError(readFields(buf, start, end));
        const fatal = endsSession(e);
        // An idle session may be ended by the server (pg_terminate_backend, a shutdown: 57P01 and the close); any other error needs a call.
        if (head === undefined && !fatal) throw new WireProtocolError(`an error with no call in flight: ${e.message}`, { cause: e });
        if (head !== undefined) head.error ??= e;
        if (fatal) this.destroy(e);
        return;
      }
      case 0x31: // 1 ParseComplete
      case 0x32: // 2 BindComplete
      case 0x43: // C CommandComplete
      case 0x6e: // n NoData
      case 0x49: // I EmptyQueryResponse
      case 0x54: // T RowDescription (the setup query's)
        if (head === undefined) throw unexpected(type);
        return;
      case 0x53: // S ParameterStatus
        parameterStatus(buf, start, end);
        return;
      case 0x4e: // N NoticeResponse
      case 0x41: // A NotificationResponse
        return;
      case 0x4b: // K BackendKeyData
        if (end - start !== 8) throw new WireProtocolError('BackendKeyData of the wrong length');
        this.#processId = buf.readInt32BE(start);
        return;
      case 0x52: // R Authentication*
        return this.#authenticate(buf, start, end);
      default:
        throw unexpected(type);
    }
  }

  #authenticate(buf: Buffer, start: number, end: number): void {
    if (end - start < 4) throw new WireProtocolError('an Authentication message without its kind');
    const kind = buf.readInt32BE(start);
    const { user, password } = this.#options;
    // After AuthenticationOk the exchange is over: a later request is a server (or a party in the middle) fishing for the password.
    if (this.#authenticated) throw new WireProtocolError(`authentication request ${kind} after AuthenticationOk`);
    const needPassword = (): string => {
      if (password === undefined) throw new ConnectionConfigError('authentication', 'the server asks for a password and none was given');
      return password;
    };
    try {
      // Once SCRAM began, the server must finish it and prove it knows the password: no downgrade, no skipped proof (a server in the middle could otherwise pose as the database).
      if (this.#scram !== null && (kind === 0 ? !this.#scram.verified : kind !== 11 && kind !== 12)) {
        throw new ConnectionConfigError('authentication', `the server left SCRAM-SHA-256 unfinished (${kind === 0 ? 'AuthenticationOk without its signature' : `authentication request ${kind}`}): not trusted`);
      }
      switch (kind) {
        case 0: // AuthenticationOk
          this.#authenticated = true;
          return;
        case 3: // cleartext
          this.#socket.write(passwordMessage(needPassword(), true));
          return;
        case 5: // MD5, with a 4-byte salt
          if (end - start !== 8) throw new WireProtocolError('AuthenticationMD5Password without its salt');
          this.#socket.write(passwordMessage(md5Password(user, needPassword(), buf.subarray(start + 4, end)), true));
          return;
        case 10: {
          // SASL: the mechanisms, each a C string.
          const mechanisms = buf.toString('utf8', start + 4, end).split('\0');
          if (!mechanisms.includes('SCRAM-SHA-256')) throw new ConnectionConfigError('authentication', `no supported SASL mechanism offered (${mechanisms.filter(Boolean).join(', ')})`);
          this.#scram = new Scram(needPassword());
          this.#socket.write(saslInitialResponse('SCRAM-SHA-256', this.#scram.first()));
          return;
        }
        case 11: {
          // SASLContinue: the server-first-message. PBKDF2 runs off the loop; the reply goes when it is done.
          const scram = this.#scram;
          if (scram === null) throw new WireProtocolError('SASLContinue before SASL');
          scram.final(buf.toString('utf8', start + 4, end)).then(
            (final) => {
              if (this.#lost === null) this.#socket.write(passwordMessage(final, false));
            },
            (e: Error) => this.destroy(e),
          );
          return;
        }
        case 12: // SASLFinal: check the server's signature
          if (this.#scram === null) throw new WireProtocolError('SASLFinal before SASL');
          this.#scram.verify(buf.toString('utf8', start + 4, end));
          return;
        default:
          throw new ConnectionConfigError('authentication', `unsupported authentication method ${kind} (this client speaks trust, password, md5 and scram-sha-256)`);
      }
    } catch (e) {
      this.destroy(e as Error);
    }
  }
}

/** A DataRow's columns as text. */
function dataRow(buf: Buffer, start: number, end: number): Row {
  if (end - start < 2) throw new WireProtocolError('a DataRow without its column count');
  const n = buf.readInt16BE(start);
  if (n < 0) throw new WireProtocolError(`a DataRow of ${n} columns`);
  const row: Row = new Array<string | null>(n);
  let o = start + 2;
  for (let i = 0; i < n; i++) {
    if (o + 4 > end) throw new WireProtocolError('a DataRow shorter than its columns');
    const len = buf.readInt32BE(o);
    o += 4;
    if (len < -1) throw new WireProtocolError(`a DataRow column of length ${len}`);
    if (len === -1) {
      row[i] = null;
      continue;
    }
    if (o + len > end) throw new WireProtocolError('a DataRow column past the message end');
    row[i] = buf.toString('utf8', o, o + len);
    o += len;
  }
  if (o !== end) throw new WireProtocolError('a DataRow longer than its columns');
  return row;
}

/**
 * A ParameterStatus: the reply text is read as UTF-8, so the client encoding
 * must stay UTF8 (an `options` of `-c client_encoding=…` would change it).
 * The others do not matter here: parameters go bound, never as literals
 * (standard_conforming_strings), and results are text (integer_datetimes,
 * DateStyle).
 */
function parameterStatus(buf: Buffer, start: number, end: number): void {
  const zero = buf.indexOf(0, start);
  if (zero < 0 || zero >= end - 1 || buf[end - 1] !== 0 || buf.indexOf(0, zero + 1) !== end - 1) throw new WireProtocolError('a ParameterStatus that is not two C strings');
  if (buf.toString('latin1', start, zero) === 'client_encoding' && buf.toString('latin1', zero + 1, end - 1) !== 'UTF8') {
    throw new WireProtocolError(`the server set client_encoding to ${buf.toString('latin1', zero + 1, end - 1)}: this client reads UTF8 only`);
  }
}

function unexpected(type: number): WireProtocolError {
  return new WireProtocolError(`unexpected backend message '${String.fromCharCode(type)}' (0x${type.toString(16)})`);
}

function connectionError(message: string, cause: NodeJS.ErrnoException): WireConnectionError {
  const e = new WireConnectionError(message, { cause });
  if (cause.code !== undefined) Object.defineProperty(e, 'code', { value: cause.code, enumerable: true });
  return e;
}
