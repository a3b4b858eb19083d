import type pg from 'pg';
import type { StorePolicy } from '../../model/design.ts';
import { checkResource, checkToken, checkValue, InvalidInputError } from '../../model/errors.ts';
import { checkValueBytes } from '../valueSize.ts';
import { passes } from '../../model/store.ts';
import { UnavailableError } from '../errors.ts';
import type { MonotonicClock } from '../clock.ts';
import { systemClock } from '../clock.ts';
import { boundedFromNow, checkedClock } from '../checkedClock.ts';
import type { FencedStore, WriteResult } from '../fencedStore.ts';
import { lockSettings, refusal, typedFailure as typedCallFailure } from './attempts.ts';
import { checkClock, checkMethods, checkObject, checkPolicy, checkTimeoutMs, FENCES, knownOptions } from '../options.ts';
import type { SessionConnection } from './sessionConnection.ts';
import { callRows, openSessionConnection } from './sessionConnection.ts';
import type { Row } from './wire/connection.ts';
import { PreparedStatement } from './wire/connection.ts';
import { isLeaseTransaction } from './leaseQueryable.ts';

/**
 * The fenced store as a table: each write is one conditional statement,
 * never a read followed by a write. The policy is the WHERE of the upsert:
 * strict updates only when token > highest, monotonic when token >= highest.
 */
const GUARD: Readonly<Record<Exclude<StorePolicy, 'transactional'>, string>> = {
  strict: 'WHERE EXCLUDED.token > lockcheck_store.highest',
  monotonic: 'WHERE EXCLUDED.token >= lockcheck_store.highest',
  unfenced: '',
};

function writeStatement(policy: StorePolicy): string {
  const guard = policy === 'transactional' ? '' : GUARD[policy];
  // The outer SELECT reads the table as it was before the upsert: on a rejection, that is the highest token that won.
  return `
WITH w AS (
  INSERT INTO lockcheck_store (resource, value, token, highest) VALUES ($1, $2, $3::bigint, $3::bigint)
  ON CONFLICT (resource) DO UPDATE SET value = EXCLUDED.value, token = EXCLUDED.token,
    highest = GREATEST(lockcheck_store.highest, EXCLUDED.token)
  ${guard}
  RETURNING 1
)
SELECT (SELECT count(*) FROM w)::int AS accepted, (SELECT highest::text FROM lockcheck_store WHERE resource = $1) AS highest`;
}

/** Anything that runs a query: a pool, a client, or a client inside a transaction. */
export type Queryable = Pick<pg.ClientBase, 'query'>;

/** A cell's value, token and highest (the highest read again after a refusal the write's own statement saw too early: see judged). */
const READ = 'SELECT value, token::text AS token, highest::text AS highest FROM lockcheck_store WHERE resource = $1';

/**
 * The most a value may take: PostgreSQL bounds a field (1 GB less its header) and a Bind message (1 GB) alike;
 * the write's other parameters (a resource of at most 768 bytes, a token, the statement's name) need less than the
 * room left. Past it the server ended the session (ECONNRESET), an outage every retry met again.
 */
const MAX_VALUE_BYTES = 2 ** 30 - 1024;

function checkWrite(resource: string, token: bigint, value: string): void {
  checkResource(resource);
  checkToken(token);
  checkValueBytes(checkValue(value), MAX_VALUE_BYTES, 'a PostgreSQL store cell', "PostgreSQL's 1 GB bound on a field and on a message, less room for the write's other parameters");
}

/** A refusal no retry fixes (a permission, a missing schema or table, an SQL error) typed as the locks' (ServerRefusedError, ConnectionConfigError, the driver's error as cause); any other failure as it came. */
function typedFailure(e: unknown): never {
  throw refusal(e) ?? e;
}

/**
 * The write's answer. A refusal names the highest token that refused it; the
 * statement reads it with the snapshot it started with, which under READ
 * COMMITTED may predate the writer it waited on (a row inserted, or a highest
 * raised, by a write that committed meanwhile): that highest is then absent
 * or does not refuse the token. It is read again, in a statement of its own,
 * which sees that writer: highests never go down (the rows' triggers), so
 * what it reads refuses the token too.
 */
async function judged(policy: StorePolicy, token: bigint, accepted: unknown, highest: unknown, readHighest: () => Promise<unknown>): Promise<WriteResult> {
  // The count as the connection's parsers give it: a number by default, a string or a bigint when the
  // caller's client parses int4 so (its `types`): a landed write read as refused, before.
  if (String(accepted) === '1') return { kind: 'accepted' };
  let seen = typeof highest === 'string' ? BigInt(highest) : null;
  if (passes(policy, token, seen)) {
    const again = await readHighest();
    seen = typeof again === 'string' ? BigInt(again) : null;
  }
  if (seen === null) throw new UnavailableError('postgres fenced write: refused, and the row that refused it is gone');
  return { kind: 'rejected', highest: seen };
}

/** postgresFencedStore's options. */
export interface PostgresFencedStoreOptions {
  /**
   * Bound on each write and read, in ms on `clock`. Default 5000. The
   * connection is the caller's, so nothing of it is cut: a call with no reply
   * in time is a TimeoutError while its statement may still run (a write may
   * have landed: a later write with a larger token settles it), and the
   * caller's next statements on that client wait behind it.
   */
  readonly timeoutMs?: number;
  /** The clock the bound is on. Default: performance.now(). */
  readonly clock?: MonotonicClock;
}

const checkCallerStoreKeys = knownOptions('postgresFencedStore options', ['timeoutMs', 'clock']);

/**
 * A fenced store on a connection the caller owns: a pool, a client, or the lock's transaction (policy `transactional`).
 * Each call is bounded by `options.timeoutMs` whatever the connection's own settings (a client without query_timeout on
 * a paused server waited for ever).
 */
export function postgresFencedStore(db: Queryable, policy: StorePolicy, options: PostgresFencedStoreOptions = {}): FencedStore {
  checkMethods(db, 'db', 'a pg Pool or Client', ['query']);
  checkPolicy(policy, [...FENCES, 'transactional']);
  // The transactional policy has no guard: the lock's transaction is the fence. On any other connection its writes landed unfenced, a stale token's too (reads are the same under every policy).
  const unfencedWrites = policy === 'transactional' && !isLeaseTransaction(db);
  checkObject(options, 'postgresFencedStore options');
  checkCallerStoreKeys(options);
  const timeoutMs = checkTimeoutMs(options.timeoutMs ?? 5000, 'timeoutMs');
  // Each reading checked (impl/checkedClock.ts), the bound's start read before the statement goes: a bad reading is InvalidInputError, nothing sent.
  const clock = options.clock === undefined ? systemClock : checkedClock(checkClock(options.clock));
  const bounded = <T>(what: 'write' | 'read', work: () => Promise<T>): Promise<T> => boundedFromNow(clock, timeoutMs, `postgres fenced store ${what}`, work);
  // Named: prepared once per connection, so the server does not parse and plan the upsert on every write (one name per policy: the texts differ).
  // Rows as arrays: no object with named properties built per reply.
  const statement = { name: `lockcheck_fenced_write_${policy}`, text: writeStatement(policy), rowMode: 'array' } as const;
  return {
    async write(resource, token, value) {
      checkWrite(resource, token, value);
      if (unfencedWrites) {
        throw new InvalidInputError('invalid-config', "a transactional PostgreSQL store writes through a lease's transaction (PostgresTransactionLock.queryable(lease), or withLock's tx), not another connection: there its writes are unfenced");
      }
      return bounded('write', async () => {
        const r = await db.query<[accepted: number, highest: string | null]>(statement, [resource, value, token.toString()]).catch(typedFailure);
        const [accepted, highest] = r.rows[0]!;
        return judged(policy, token, accepted, highest, async () => (await db.query<{ highest: string }>(READ, [resource]).catch(typedFailure)).rows[0]?.highest);
      });
    },
    async read(resource) {
      checkResource(resource);
      const r = await bounded('read', () => db.query<{ value: string; token: string }>(READ, [resource]).catch(typedFailure));
      const row = r.rows[0];
      return row === undefined ? { value: null, token: null } : { value: row.value, token: BigInt(row.token) };
    },
  };
}

/** openPostgresFencedStore's options. */
export interface PostgresStoreOptions {
  /** How to reach the database, as node-postgres takes it (the wire client's rules as for the session lock: docs/postgres.md, "Driver"). */
  readonly connection: pg.ClientConfig;
  /** Bound on every statement and on the connect, in ms (also sent as statement_timeout). Default 5000. */
  readonly statementTimeoutMs?: number;
  /** The clock that times the statement bounds. Default: performance.now(). */
  readonly clock?: MonotonicClock;
}

const checkStoreKeys = knownOptions('openPostgresFencedStore options', ['connection', 'statementTimeoutMs', 'clock']);

/** A fenced store on a connection of its own; `close` ends it. */
export interface PostgresFencedStoreConnection extends FencedStore {
  /**
   * Ends the store's connection (one still opening at once, not after its
   * connect bound); a call that had sent nothing yet, and every later call,
   * rejects with InvalidInputError('precondition').
   */
  close(): Promise<void>;
}

/**
 * A fenced store on its own connection, through lockcheck's wire client
 * when the configuration allows it (node-postgres otherwise), with the write
 * and the read prepared once per connection. Opened at the first call; a
 * lost connection is opened again by the next. A write whose connection is
 * lost or whose reply does not come in time throws (its outcome is unknown:
 * a later write with a larger token settles it).
 */
export function openPostgresFencedStore(options: PostgresStoreOptions, policy: Exclude<StorePolicy, 'transactional'>): PostgresFencedStoreConnection {
  checkObject(options, 'openPostgresFencedStore options');
  checkStoreKeys(options);
  const s = lockSettings({ connection: options.connection, ...(options.statementTimeoutMs === undefined ? {} : { statementTimeoutMs: options.statementTimeoutMs }), ...(options.clock === undefined ? {} : { clock: options.clock }) });
  checkPolicy(policy, FENCES);
  const write = new PreparedStatement(`lockcheck_fenced_write_${policy}`, writeStatement(policy));
  const read = new PreparedStatement('lockcheck_fenced_read', READ);
  let live: SessionConnection | null = null;
  let opening: Promise<SessionConnection> | null = null;
  let closed = false;
  const closedError = (): InvalidInputError => new InvalidInputError('precondition', 'the store was closed');
  /** Fired by close(): a connection still opening is abandoned (abandon.ts). */
  const abandon = new AbortController();
  const connection = (): Promise<SessionConnection> => {
    if (closed) return Promise.reject(closedError());
    if (live !== null) return Promise.resolve(live);
    opening ??= Promise.resolve()
      .then(() =>
        openSessionConnection(
          options.connection,
          s,
          false,
          [write, read],
          (c) => {
            if (live === c) live = null;
          },
          abandon.signal,
        ),
      )
      // An opening close() abandoned fails as the driver failed it (node-postgres: "Connection terminated unexpectedly"): nothing was sent, so it is the close's refusal.
      .catch((e: unknown) => {
        throw closed ? closedError() : e;
      })
      .then(async (c) => {
        if (closed) {
          // close() came while it opened: ended here (close() waits for it), never used.
          await c.end();
          throw closedError();
        }
        return (live = c);
      })
      .finally(() => (opening = null));
    return opening;
  };
  /** One call on the connection; refused, with nothing sent, when the store was closed before it could go out. A failure typed: a refusal, TimeoutError (no reply in time), UnavailableError (the connection lost), as docs/errors.md lists for the stores. */
  const call = (statement: PreparedStatement, params: readonly string[]): Promise<Row[]> =>
    connection()
      .then((c) => (closed ? Promise.reject(closedError()) : callRows(c, statement, params)))
      .catch((e: unknown) => {
        throw typedCallFailure(e, `the fenced store's ${statement === write ? 'write' : 'read'}`, s.timeoutMs);
      });
  return {
    async write(resource, token, value) {
      checkWrite(resource, token, value);
      const rows = await call(write, [resource, value, token.toString()]);
      return judged(policy, token, rows[0]?.[0], rows[0]?.[1], async () => (await call(read, [resource]))[0]?.[2]);
    },
    async read(resource) {
      checkResource(resource);
      const row = (await call(read, [resource]))[0];
      return row === undefined ? { value: null, token: null } : { value: row[0] ?? null, token: row[1] === null || row[1] === undefined ? null : BigInt(row[1]) };
    },
    async close() {
      closed = true;
      const c = live;
      live = null;
      // A connection still opening holds nothing yet: its socket goes at once, not after its connect's bound and a goodbye.
      abandon.abort(closedError());
      if (c !== null) await c.end();
      // A connection still opening ends itself as it opens (see connection()); wait for that.
      await opening?.catch(() => undefined);
    },
  };
}
