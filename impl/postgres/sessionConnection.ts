import pg from 'pg';
import { abandonable } from './abandon.ts';
import type { LockSettings } from './attempts.ts';
import { destroyConnection, endWithin, openingBoundMs, replyMissing } from './attempts.ts';
import { ensureSchema } from './schema.ts';
import { loseOnSessionEnd } from './sessionEnd.ts';
import type { Param } from './wire/codec.ts';
import type { CallDone, PreparedStatement, Row } from './wire/connection.ts';
import { EncodedCall, WireConnection } from './wire/connection.ts';
import { WireConnectionError } from './wire/errors.ts';
import { wireEndpoint } from './wire/endpoint.ts';

/**
 * The one connection a session lock lives on: its statements prepared, each
 * call bounded by the statement timeout and carried over the lock's link.
 * Through lockcheck's own wire client (wire/) when the configuration allows
 * it: about half node-postgres's client CPU per statement (docs/postgres.md,
 * "Driver"); through node-postgres otherwise (TLS, a custom stream, a
 * password function or file, connection-string options: wire/endpoint.ts).
 * Either way the lock sees the same calls, errors and loss.
 */
export interface SessionConnection {
  readonly driver: 'wire' | 'node-postgres';
  /** The backend's process id, for pg_terminate_backend. */
  readonly processId: number | null;
  /**
   * One call of a prepared statement, encoded once (EncodedCall): `done`
   * gets its rows (columns as text) or the error, once, and must not throw.
   * On the wire client without a link it runs from the read callback that
   * ends the reply: the caller's one promise settles there, no hop between.
   */
  call(call: EncodedCall, done: CallDone): void;
  /** Drops the socket at once, no goodbye: the server ends the session (and its locks) when it sees the close. */
  destroy(): void;
  /** A goodbye, bounded by the statement timeout. */
  end(): Promise<void>;
}

/**
 * Opens the connection, creates the schema and prepares `statements`, in
 * one bounded step. `onLost(connection)` runs when the connection ends for
 * any reason after it opened.
 */
export function openSessionConnection(
  config: pg.ClientConfig,
  s: LockSettings,
  viaLink: boolean,
  statements: readonly PreparedStatement[],
  onLost: (connection: SessionConnection) => void,
  /** Abandons the opening (the owner's close()): the socket is destroyed at once, and the open rejects. */
  signal?: AbortSignal,
): Promise<SessionConnection> {
  const endpoint = wireEndpoint(config);
  return 'unsupported' in endpoint ? openNodePostgres(config, s, onLost, signal) : openWire(endpoint, s, viaLink, statements, onLost, signal);
}


async function openWire(
  endpoint: Exclude<ReturnType<typeof wireEndpoint>, { unsupported: string }>,
  s: LockSettings,
  viaLink: boolean,
  statements: readonly PreparedStatement[],
  onLost: (connection: SessionConnection) => void,
  signal: AbortSignal | undefined,
): Promise<SessionConnection> {
  const timeoutMs = Math.min(s.timeoutMs, endpoint.queryTimeoutMs ?? s.timeoutMs);
  let abandoned = false;
  let opened: WireConnection | null = null;
  try {
    // Abandoned after the connect, in the schema's or the statements' round trips: the socket goes at once.
    const c = await abandonable(signal, () => (opened as WireConnection | null)?.destroy(), () => s.opening(endpoint.connectTimeoutMs ?? s.timeoutMs, async () => {
      const wire = await WireConnection.connect({
        ...(signal !== undefined ? { signal } : {}),
        ...endpoint,
        // As node-postgres's path: the lock's bound as statement_timeout unless the configuration sets its own.
        parameters: { statement_timeout: String(s.timeoutMs), ...endpoint.parameters },
        timeoutMs,
        connectTimeoutMs: endpoint.connectTimeoutMs ?? s.timeoutMs,
        clock: s.clock,
      });
      opened = wire;
      if (abandoned) wire.destroy();
      await ensureSchema({ query: (sql) => wire.simpleQuery(sql) });
      await wire.prepare(statements);
      return wire;
    }));
    if (c.lostWith !== null) throw new WireConnectionError(`the connection was lost while it opened: ${c.lostWith.message}`);
    const connection: SessionConnection = {
      driver: 'wire',
      get processId() {
        return c.processId;
      },
      // The wire client bounds each call by its own timer; through a link, the link's round trip is bounded as a whole.
      call: viaLink ? (call, done) => settleWith(() => s.statement(() => c.send(call)), done) : (call, done) => c.sendWith(call, done),
      destroy: () => c.destroy(),
      end: () => c.end(),
    };
    c.onLost(() => onLost(connection));
    return connection;
  } catch (e) {
    // No reply in time, or a failure after the socket opened: nothing may be left behind.
    abandoned = true;
    (opened as WireConnection | null)?.destroy();
    throw e;
  }
}

async function openNodePostgres(config: pg.ClientConfig, s: LockSettings, onLost: (connection: SessionConnection) => void, signal: AbortSignal | undefined): Promise<SessionConnection> {
  const client = new pg.Client({
    keepAlive: true,
    connectionTimeoutMillis: s.timeoutMs,
    statement_timeout: s.timeoutMs,
    // No query_timeout: every statement is bounded by the lock's own timer already (one timer per query, not two).
    ...config,
    // Statements of concurrent callers go out at once, in order, and their replies come back in that order (extended-protocol pipelining, a Sync each).
    pipeline: true,
  });
  const connection: SessionConnection = {
    driver: 'node-postgres',
    get processId() {
      return (client as unknown as { processID?: number }).processID ?? null;
    },
    call: (call, done) => settleWith(() => s.query(client, call.statement, call.params), done),
    destroy: () => destroyConnection(client),
    end: () => endWithin(client, s.timeoutMs),
  };
  let open = false;
  // Any failure of the connection ends the session and every lock on it.
  const lost = (): void => {
    if (open) onLost(connection);
  };
  client.on('error', lost);
  client.on('end', lost);
  loseOnSessionEnd(client, lost);
  try {
    await abandonable(signal, () => destroyConnection(client), () =>
      s.opening(openingBoundMs(config, s.timeoutMs), async () => {
        await client.connect();
        await ensureSchema(client);
      }),
    );
  } catch (e) {
    // No reply within the opening's bound (it may yet connect), or abandoned: drop the socket rather than wait on a goodbye.
    if (replyMissing(e) || signal?.aborted === true) destroyConnection(client);
    else await endWithin(client, s.timeoutMs);
    throw e;
  }
  // node-postgres prepares a named statement with its first use.
  open = true;
  return connection;
}

const NO_ROWS: Row[] = [];

/** A promise's outcome through `done`; a throw before the promise exists (a link's) goes there too, as `await` would have taken it. */
function settleWith(rows: () => Promise<Row[]>, done: CallDone): void {
  let p: Promise<Row[]>;
  try {
    p = rows();
  } catch (e) {
    return done(e as Error, NO_ROWS);
  }
  p.then(
    (r) => done(null, r),
    (e: Error) => done(e, NO_ROWS),
  );
}

/** One call as a promise of its rows, encoded for this call only (for a statement whose parameters differ each time: the fenced store's). */
export function callRows(connection: SessionConnection, statement: PreparedStatement, params: readonly Param[]): Promise<Row[]> {
  return new Promise((resolve, reject) => connection.call(new EncodedCall(statement, params), (e, rows) => (e === null ? resolve(rows) : reject(e))));
}
