import { createHash } from 'node:crypto';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ConnectionConfigError, ServerRefusedError, TimeoutError, TokenOverflowError, UnavailableError } from '../../impl/errors.ts';
import { acquireWithRetries, configError, destroyConnection, endWithin, lockSettings, NUMERIC_OUT_OF_RANGE, refusal, replyMissing } from '../../impl/postgres/attempts.ts';
import { advisoryKey, ensureSchema, PostgresSessionLock, PostgresTransactionLock, openPostgresFencedStore, postgresFencedStore, SCHEMA } from '../../impl/postgres/index.ts';
import type { AcquireResult } from '../../impl/leaseLock.ts';
import type { Lease } from '../../impl/lease.ts';
import { LockNotAcquiredError } from '../../impl/using.ts';
import { InvalidInputError } from '../../model/errors.ts';
import { advisoryKeyText } from '../../impl/postgres/keys.ts';
import { ManualClock, sharedPostgres } from './servers.ts';

/**
 * impl/postgres against one real PostgreSQL (tables emptied before each
 * test): grants and tokens, stacking, release, loss of the connection,
 * refusals typed from SQLSTATEs, timeouts, the fenced store's policies.
 * Quick on purpose: `npm run mutation` kills impl/postgres with these.
 */
const server = sharedPostgres();
let admin: pg.Client;
const MAX = 2n ** 63n - 1n;
const opened: Array<{ close(): Promise<void> }> = [];

beforeAll(async () => {
  admin = new pg.Client({ ...server(), connectionTimeoutMillis: 5_000, query_timeout: 5_000 });
  await admin.connect();
  await ensureSchema(admin);
  // Each test starts from empty tables: a reset on purpose (the triggers refuse it otherwise).
  await admin.query('SET lockcheck.reset_tokens = on');
});
afterAll(async () => {
  await admin?.end().catch(() => undefined);
});
beforeEach(async () => {
  await admin.query('TRUNCATE lockcheck_tokens, lockcheck_store');
});
afterEach(async () => {
  await Promise.all(opened.splice(0).map((l) => l.close()));
  expect(await advisoryLocks()).toBe(0);
});

async function advisoryLocks(): Promise<number> {
  // A closed connection's session ends a moment after the close: wait for its backend to go (bounded).
  const deadline = Date.now() + 10_000;
  for (;;) {
    const r = await admin.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory'");
    if (r.rows[0]!.n === 0 || Date.now() > deadline) return r.rows[0]!.n;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The advisory locks granted right now (no waiting for closed sessions to end). */
async function advisoryLocksNow(): Promise<number> {
  return (await admin.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted")).rows[0]!.n;
}

function session(options: Partial<ConstructorParameters<typeof PostgresSessionLock>[0]> = {}): PostgresSessionLock {
  const lock = new PostgresSessionLock({ connection: server(), statementTimeoutMs: 5_000, ...options });
  opened.push(lock);
  return lock;
}
function xact(options: Partial<ConstructorParameters<typeof PostgresTransactionLock>[0]> = {}): PostgresTransactionLock {
  const lock = new PostgresTransactionLock({ connection: server(), statementTimeoutMs: 5_000, ...options });
  opened.push(lock);
  return lock;
}
function granted(r: AcquireResult): Lease {
  if (r.kind !== 'granted') throw new Error(`expected granted, got ${JSON.stringify(r)}`);
  return r.lease;
}
async function thrown(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    (v) => new Error(`expected a rejection, got ${JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x))}`),
    (e: unknown) => e,
  );
}
/** The backend pid of a lease's transaction (node-postgres's client field, not in its types). */
function backendPid(tx: unknown): number {
  return (tx as { processID: number }).processID;
}
/** Lets pending promise callbacks and I/O run (a bounded number of turns). */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}
/** Waits, bounded, until `cond` holds. */
async function until(cond: () => boolean, what = 'the condition'): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}
/**
 * A round trip that never answers; the statement's timeout (on `clock`, armed
 * right after the link is called) then fires: the clock moves past it once
 * this turn's callbacks ran.
 */
function unanswered(clock: ManualClock): Promise<never> {
  setImmediate(() => clock.advance(30_000));
  return new Promise<never>(() => undefined);
}
function dbError(code: string, message = `error ${code}`): pg.DatabaseError {
  const e = new pg.DatabaseError(message, message.length, 'error');
  e.code = code;
  return e;
}

describe('attempts: settings, retries and the error mapping', () => {
  it('lockSettings checks statementTimeoutMs and tokenBase, and defaults to 5000 and 0', () => {
    for (const statementTimeoutMs of [0, -1, 1.5]) {
      expect(() => lockSettings({ connection: {}, statementTimeoutMs })).toThrow(expect.objectContaining({ code: 'invalid-config', message: `invalid-config: statementTimeoutMs must be an integer number of ms in [1, 2147483647], got ${statementTimeoutMs}` }));
    }
    expect(() => lockSettings({ connection: {}, tokenBase: -1n })).toThrow(expect.objectContaining({ code: 'invalid-token', message: 'invalid-token: tokenBase must be a bigint in [0, 2^63-1], got -1n' }));
    const s = lockSettings({ connection: {} });
    expect(s.timeoutMs).toBe(5000);
    expect(s.base).toBe('0');
    expect(lockSettings({ connection: {}, statementTimeoutMs: 1, tokenBase: 2n ** 53n + 1n })).toMatchObject({ timeoutMs: 1, base: '9007199254740993' });
  });

  it('the statement bound: a round trip with no reply is a TimeoutError naming the statement; the link carries it', async () => {
    const clock = new ManualClock();
    const carried: string[] = [];
    const s = lockSettings({ connection: {}, clock, statementTimeoutMs: 50, link: (rt) => (carried.push('link'), rt()) });
    // The clock given, read checked (impl/checkedClock.ts).
    expect(s.clock.now()).toBe(clock.now());
    expect(await s.statement(async () => 7)).toBe(7);
    expect(await s.link(async () => 8)).toBe(8);
    expect(carried).toEqual(['link', 'link']);
    const late = s.statement(() => new Promise<never>(() => undefined));
    clock.advance(49);
    await Promise.resolve();
    clock.advance(1);
    const e = await thrown(late);
    expect(e).toBeInstanceOf(TimeoutError);
    expect((e as Error).message).toBe('statement timed out after 50 ms');
  });

  it('acquireWithRetries: validates, then tries once plus `retries`, retryDelayMs apart on the clock', async () => {
    const clock = new ManualClock();
    const state = { closed: false, clock };
    let calls = 0;
    const denied = async (): Promise<AcquireResult> => (calls++, { kind: 'denied', reason: 'held' });
    const noRelease = async (): Promise<void> => undefined;
    const run = (options: object, s = state) => acquireWithRetries('session', 'r', options, s, denied, noRelease);
    await expect(run({}, { closed: true, clock })).rejects.toThrow(expect.objectContaining({ code: 'precondition', message: 'precondition: the lock was closed' }));
    await expect(run({ ttlMs: 10 })).rejects.toThrow(expect.objectContaining({ code: 'unsupported-operation', message: 'unsupported-operation: a PostgreSQL session lock has no ttl' }));
    for (const retries of [-1, 101, 0.5]) await expect(run({ retries })).rejects.toThrow(expect.objectContaining({ code: 'precondition', message: `precondition: retries must be an integer in [0, 100], got ${retries}` }));
    // An options value that is no object (undefined takes the default {} in the locks' own acquire): typed, not a TypeError.
    for (const options of [null, 5000]) await expect(run(options as never)).rejects.toThrow(expect.objectContaining({ name: 'InvalidInputError', code: 'invalid-config', message: `invalid-config: acquire options must be an object, got ${String(options)}` }));
    await expect(run({ retryDelayMs: -1 })).rejects.toThrow(expect.objectContaining({ code: 'invalid-duration', message: expect.stringContaining('retryDelayMs must be') }));
    await expect(acquireWithRetries('session', '', {}, state, denied, noRelease)).rejects.toThrow(expect.objectContaining({ code: 'invalid-resource' }));
    expect(calls).toBe(0);
    expect(await run({})).toEqual({ kind: 'denied', reason: 'held' });
    expect(calls).toBe(1);
    // Sleeps resolve at once on a clock that is never advanced only if their delay is 0.
    expect(await run({ retries: 100 })).toEqual({ kind: 'denied', reason: 'held' });
    expect(calls).toBe(102);
    expect(clock.delays.slice(-100)).toEqual(Array(100).fill(0));
    calls = 0;
    const before = clock.delays.length;
    const pending = run({ retries: 2, retryDelayMs: 30 });
    await until(() => clock.delays.length > before);
    expect(calls).toBe(1);
    expect(clock.delays.at(-1)).toBe(30);
    clock.advance(29);
    await settle();
    expect(calls).toBe(1);
    clock.advance(1);
    await until(() => clock.delays.length > before + 1);
    expect(calls).toBe(2);
    clock.advance(30);
    expect(await pending).toEqual({ kind: 'denied', reason: 'held' });
    expect(calls).toBe(3);
    // A grant or any other outcome ends the loop at once.
    let n = 0;
    const timedOut = async (): Promise<AcquireResult> => (n++, { kind: 'timed-out' });
    expect(await acquireWithRetries('transaction', 'r', { retries: 5 }, state, timedOut, noRelease)).toEqual({ kind: 'timed-out' });
    expect(n).toBe(1);
  });

  it('configError: credentials, database and host are ConnectionConfigError; anything else is not', () => {
    const codes = (code: string, message = 'm') => configError(Object.assign(new Error(message), { code }));
    expect(codes('28P01')).toMatchObject({ code: 'authentication', message: 'authentication: the server refused the credentials: m' });
    expect(codes('28000')).toMatchObject({ code: 'authentication' });
    expect(configError(new Error('SASL: SCRAM-SERVER-FIRST-MESSAGE: client password must be a string'))).toMatchObject({ code: 'authentication' });
    expect(codes('3D000', 'no such db')).toMatchObject({ code: 'unknown-database', message: 'unknown-database: no such db' });
    expect(codes('ENOTFOUND', 'x')).toMatchObject({ code: 'unknown-host', message: 'unknown-host: the host name does not resolve: x' });
    expect(codes('EAI_AGAIN')).toMatchObject({ code: 'unknown-host' });
    // The driver's error is kept as the cause of each.
    for (const code of ['28P01', '3D000', 'ENOTFOUND']) expect(codes(code)?.cause).toMatchObject({ code });
    expect(codes('ECONNREFUSED')).toBeNull();
    expect(configError('28P01')).toBeNull();
    expect(configError(Object.assign(new Error('x'), { code: '28P02' }))).toBeNull();
    // TLS: a certificate not trusted or not for the host, OpenSSL's protocol errors, a server that will not speak TLS.
    for (const code of ['DEPTH_ZERO_SELF_SIGNED_CERT', 'SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'CERT_HAS_EXPIRED', 'ERR_TLS_CERT_ALTNAME_INVALID', 'ERR_SSL_WRONG_VERSION_NUMBER']) {
      expect(codes(code, 'self-signed certificate'), code).toMatchObject({ code: 'tls', message: 'tls: the TLS handshake refused the configuration: self-signed certificate' });
    }
    expect(configError(new Error('The server does not support SSL connections'))).toMatchObject({ code: 'tls' });
    expect(configError(new Error('There was an error establishing an SSL connection'))).toMatchObject({ code: 'tls' });
    // A handshake that timed out is an outage, and a message that only mentions SSL is not the driver's refusal.
    expect(codes('ERR_TLS_HANDSHAKE_TIMEOUT')).toBeNull();
    expect(configError(new Error('SSL connection has been closed unexpectedly'))).toBeNull();
    expect(configError(null)).toBeNull();
  });

  it('ssl: true against a server without TLS is ConnectionConfigError tls for the session lock, the transaction lock and the fenced store, not an outage', async () => {
    const connection = { ...server(), ssl: true };
    const bare = new PostgresSessionLock({ connection, statementTimeoutMs: 5_000 });
    opened.push(bare);
    const tls = expect.objectContaining({ name: 'ConnectionConfigError', code: 'tls' });
    await expect(bare.acquire('r', { retries: 3 })).rejects.toThrow(tls);
    await expect(xact({ connection }).withLock('r', 100, async () => 1)).rejects.toThrow(tls);
    const store = openPostgresFencedStore({ connection, statementTimeoutMs: 5_000 }, 'strict');
    opened.push(store);
    await expect(store.write('r', 1n, 'v')).rejects.toThrow(tls);
  });

  it('refusal: permission, schema and statement refusals typed; outages, timeouts and sockets are null', () => {
    expect(refusal(dbError('42501', 'denied'))).toMatchObject({ code: 'permission', serverCode: '42501', message: 'permission (42501): denied' });
    for (const code of ['3F000', '42P01', '42703', '42704', '42883', '42P02']) expect(refusal(dbError(code))).toMatchObject({ code: 'schema', serverCode: code });
    for (const code of ['42601', '22P02', '23505', '42P03', '25001', '55000']) expect(refusal(dbError(code))).toMatchObject({ code: 'statement', serverCode: code });
    for (const code of ['42601', '42501', '42P01']) {
      const e = dbError(code);
      expect(refusal(e)?.cause).toBe(e);
    }
    const e = dbError('42601');
    expect(refusal(e)).toBeInstanceOf(ServerRefusedError);
    for (const code of ['08006', '40001', '40P01', '53300', '57P01', '57P02', '57P03', '57P04', '57P05', '57014', '58030']) expect(refusal(dbError(code))).toBeNull();
    // Passing states of other classes: a transaction an earlier statement failed, a session timeout, a read-only server, a lock not available in time.
    for (const code of ['25P02', '25P03', '25P04', '25006', '55P03']) expect(refusal(dbError(code))).toBeNull();
    for (const code of ['4250', '425011', 'a2501', '']) expect(refusal(dbError(code))).toBeNull();
    expect(refusal(Object.assign(dbError('x'), { code: undefined }))).toBeNull();
    expect(refusal(Object.assign(new Error('x'), { code: '42601' }))).toBeNull();
    expect(refusal(Object.assign(new Error('x'), { code: 'EPIPE' }))).toBeNull();
    expect(refusal(Object.assign(new Error('m'), { code: '28P01' }))).toBeInstanceOf(ConnectionConfigError);
    expect(NUMERIC_OUT_OF_RANGE).toBe('22003');
  });

  it('replyMissing: our timeout or pg\'s query_timeout; nothing else', () => {
    expect(replyMissing(new TimeoutError('statement', 1))).toBe(true);
    expect(replyMissing(new Error('Query read timeout'))).toBe(true);
    expect(replyMissing(new Error('Query read timeout!'))).toBe(false);
    expect(replyMissing({ message: 'Query read timeout' })).toBe(false);
    expect(replyMissing(new UnavailableError('x'))).toBe(false);
  });

  it('endWithin: a goodbye that never comes destroys the socket after ms; a goodbye that fails is no error', async () => {
    let destroyed = 0;
    const stream = { destroy: () => void destroyed++ };
    await endWithin({ end: () => new Promise<void>(() => undefined), connection: { stream } } as unknown as pg.Client, 5);
    expect(destroyed).toBe(1);
    await endWithin({ end: () => Promise.reject(new Error('gone')), connection: { stream } } as unknown as pg.Client, 60_000);
    await endWithin({ end: () => Promise.resolve(), connection: { stream } } as unknown as pg.Client, 60_000);
    expect(destroyed).toBe(1);
    destroyConnection({ connection: { stream } } as unknown as pg.Client);
    expect(destroyed).toBe(2);
    destroyConnection({} as unknown as pg.Client);
    // A client that never connected has no socket to destroy: the timer must not throw.
    await endWithin({ end: () => new Promise<void>(() => undefined) } as unknown as pg.Client, 5);
    await endWithin({ end: () => new Promise<void>(() => undefined), connection: {} } as unknown as pg.Client, 5);
  });
});

describe('schema and keys', () => {
  it('advisoryKey is the first 8 bytes of SHA-256, signed, as PostgreSQL computes it', async () => {
    for (const name of ['a', 'résumé/ключ', 'x'.repeat(256)]) {
      const r = await admin.query<{ k: string }>("SELECT ('x' || substr(encode(sha256(convert_to($1, 'UTF8')), 'hex'), 1, 16))::bit(64)::bigint::text AS k", [name]);
      expect(advisoryKey(name)).toBe(BigInt(r.rows[0]!.k));
      expect(advisoryKey(name)).toBe(createHash('sha256').update(name, 'utf8').digest().readBigInt64BE(0));
    }
    expect(() => advisoryKey('')).toThrow(InvalidInputError);
  });

  it('advisoryKeyText: the key as digits, the same for a name asked again, also past the bound of names remembered', () => {
    for (let i = 0; i < 1100; i++) expect(advisoryKeyText(`k${i % 1030}`)).toBe(advisoryKey(`k${i % 1030}`).toString());
    expect(() => advisoryKeyText('')).toThrow(InvalidInputError);
  });

  it('ensureSchema makes the tables with their checks, twice is fine, a concurrent create is tolerated', async () => {
    await ensureSchema(admin);
    await expect(admin.query("INSERT INTO lockcheck_tokens VALUES ('neg', -1)")).rejects.toMatchObject({ code: '23514' });
    await expect(admin.query("INSERT INTO lockcheck_store VALUES ('neg', 'v', 1, -1)")).rejects.toMatchObject({ code: '23514' });
    await expect(admin.query("INSERT INTO lockcheck_store VALUES ('neg', 'v', -1, 1)")).rejects.toMatchObject({ code: '23514' });
    expect(SCHEMA).toContain('CREATE TABLE IF NOT EXISTS lockcheck_tokens');
    for (const code of ['23505', '42P07', '42710', '42723']) await ensureSchema({ query: () => Promise.reject(Object.assign(new Error(code), { code })) });
    // A lost race stops the multi-statement schema at that table: it is sent again, so the tables after it are made too.
    const sent: string[] = [];
    let races = 1;
    await ensureSchema({ query: (sql) => (sent.push(sql), races-- > 0 ? Promise.reject(Object.assign(new Error('type "lockcheck_tokens" already exists'), { code: '42710' })) : Promise.resolve()) });
    expect(sent).toEqual([SCHEMA, SCHEMA]);
    await expect(ensureSchema({ query: () => Promise.reject(Object.assign(new Error('other'), { code: '42501' })) })).rejects.toThrow('other');
  });
});

it('ensureSchema from many sessions at once on fresh databases: every one succeeds, the tables and the three triggers made once', async () => {
  // The races are real: tables, row types, the trigger function and the triggers made by six sessions at the same moment.
  for (let round = 0; round < 3; round++) {
    const db = `lockcheck_schema_race_${round}`;
    await admin.query(`DROP DATABASE IF EXISTS ${db}`);
    await admin.query(`CREATE DATABASE ${db}`);
    const clients = Array.from({ length: 6 }, () => new pg.Client({ ...server(), database: db, connectionTimeoutMillis: 5_000, query_timeout: 20_000 }));
    try {
      await Promise.all(clients.map((c) => c.connect()));
      await Promise.all(clients.map((c) => ensureSchema(c)));
      const triggers = await clients[0]!.query("SELECT count(*)::int AS n FROM pg_trigger WHERE tgrelid IN ('lockcheck_tokens'::regclass, 'lockcheck_store'::regclass) AND NOT tgisinternal");
      expect(triggers.rows[0]).toEqual({ n: 6 });
      await clients[0]!.query("INSERT INTO lockcheck_tokens VALUES ('r', 1)");
      await expect(clients[1]!.query("DELETE FROM lockcheck_tokens WHERE resource = 'r'")).rejects.toMatchObject({ code: '23001' });
    } finally {
      await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
      await admin.query(`DROP DATABASE IF EXISTS ${db}`);
    }
  }
});

describe('the token rows never go down or away (FENCE-1 against a hand edit)', () => {
  /** An operator's session: no lockcheck.reset_tokens. */
  async function operator(): Promise<pg.Client> {
    const c = new pg.Client({ ...server(), connectionTimeoutMillis: 5_000, query_timeout: 5_000 });
    await c.connect();
    return c;
  }

  it('a DELETE, a TRUNCATE, an UPDATE lowering or renaming a row are refused (23001, naming the table); the next grant is above every earlier token', async () => {
    const a = session();
    const first = granted(await a.acquire('r'));
    await a.release(first);
    const op = await operator();
    try {
      for (const sql of ["DELETE FROM lockcheck_tokens WHERE resource = 'r'", 'TRUNCATE lockcheck_tokens', "UPDATE lockcheck_tokens SET token = 0 WHERE resource = 'r'", "UPDATE lockcheck_tokens SET resource = 'moved' WHERE resource = 'r'"]) {
        await expect(op.query(sql), sql).rejects.toMatchObject({ code: '23001', table: 'lockcheck_tokens', message: expect.stringContaining('a fencing token row never goes down or away') });
      }
      // Raising (or leaving it as it is) is no repeat.
      await op.query("UPDATE lockcheck_tokens SET token = token WHERE resource = 'r'");
      await op.query("UPDATE lockcheck_tokens SET token = 10 WHERE resource = 'r'");
    } finally {
      await op.end();
    }
    const next = granted(await a.acquire('r'));
    expect(next.token).toBe(11n);
    await a.release(next);
    // A reset on purpose.
    await admin.query("DELETE FROM lockcheck_tokens WHERE resource = 'r'");
    expect((await admin.query('SELECT count(*)::int AS n FROM lockcheck_tokens')).rows[0]).toEqual({ n: 0 });
  });

  it("the fenced store's rows too: a DELETE, a TRUNCATE, an UPDATE lowering highest or renaming a row are refused (23001, naming the table), so a stale write cannot land after them; a reset on purpose still can", async () => {
    const store = postgresFencedStore(admin, 'strict');
    expect(await store.write('cell', 7n, 'new')).toEqual({ kind: 'accepted' });
    const op = await operator();
    try {
      for (const sql of ["DELETE FROM lockcheck_store WHERE resource = 'cell'", 'TRUNCATE lockcheck_store', "UPDATE lockcheck_store SET highest = 1 WHERE resource = 'cell'", "UPDATE lockcheck_store SET resource = 'moved' WHERE resource = 'cell'"]) {
        await expect(op.query(sql), sql).rejects.toMatchObject({ code: '23001', table: 'lockcheck_store', message: expect.stringContaining('the highest token of a fenced store row never goes down or away') });
      }
      // The value may change by hand; the highest stays, so the stale holder's write (token 3) is still rejected.
      await op.query("UPDATE lockcheck_store SET value = 'edited' WHERE resource = 'cell'");
    } finally {
      await op.end();
    }
    expect(await store.write('cell', 3n, 'stale')).toEqual({ kind: 'rejected', highest: 7n });
    expect(await store.read('cell')).toEqual({ value: 'edited', token: 7n });
    await admin.query("DELETE FROM lockcheck_store WHERE resource = 'cell'");
    expect(await store.write('cell', 3n, 'after a reset')).toEqual({ kind: 'accepted' });
  });

  it('a role that may not make the triggers (not the tables\' owner, no TRIGGER privilege) still makes its schema: the triggers are skipped', async () => {
    await admin.query('DROP TRIGGER lockcheck_tokens_kept ON lockcheck_tokens; DROP TRIGGER lockcheck_tokens_kept_delete ON lockcheck_tokens; DROP TRIGGER lockcheck_tokens_kept_truncate ON lockcheck_tokens');
    await admin.query('DROP TRIGGER lockcheck_store_kept ON lockcheck_store; DROP TRIGGER lockcheck_store_kept_delete ON lockcheck_store; DROP TRIGGER lockcheck_store_kept_truncate ON lockcheck_store');
    const other = await operator();
    try {
      await admin.query("DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lockcheck_not_owner') THEN CREATE ROLE lockcheck_not_owner; END IF; END $$");
      await admin.query('GRANT USAGE, CREATE ON SCHEMA public TO lockcheck_not_owner; GRANT SELECT, INSERT, UPDATE ON lockcheck_tokens, lockcheck_store TO lockcheck_not_owner');
      await other.query('SET ROLE lockcheck_not_owner');
      await ensureSchema(other);
      for (const table of ['lockcheck_tokens', 'lockcheck_store']) expect((await other.query(`SELECT count(*)::int AS n FROM pg_trigger WHERE tgrelid = '${table}'::regclass AND NOT tgisinternal`)).rows[0]).toEqual({ n: 0 });
    } finally {
      await other.end();
      await ensureSchema(admin);
    }
    for (const table of ['lockcheck_tokens', 'lockcheck_store']) expect((await admin.query(`SELECT count(*)::int AS n FROM pg_trigger WHERE tgrelid = '${table}'::regclass AND NOT tgisinternal`)).rows[0]).toEqual({ n: 3 });
  });
});

describe('PostgresSessionLock', () => {
  it('a pair is two round trips; concurrent acquires on one lock (pipelined on its connection) are each answered', async () => {
    let trips = 0;
    const a = session({ link: (rt) => (trips++, rt()) });
    granted(await a.acquire('warm'));
    trips = 0;
    const l = granted(await a.acquire('r'));
    await a.release(l);
    expect(trips).toBe(2);
    // Four resources at once on one connection: each its own grant and first token.
    const leases = await Promise.all(['p', 'q', 'p2', 'q2'].map((r) => a.acquire(r).then(granted)));
    expect(leases.map((x) => x.token)).toEqual([1n, 1n, 1n, 1n]);
    const other = session();
    expect((await Promise.all([a.acquire('p'), other.acquire('p')])).map((x) => x.kind)).toEqual(['granted', 'denied']);
  });

  it('grants mint base + 1, + 2 across clients; a held lock is denied; the owner names the backend', async () => {
    const a = session({ tokenBase: 2n ** 32n });
    const b = session({ tokenBase: 2n ** 32n });
    expect(a.backendPid).toBeNull();
    const la = granted(await a.acquire('r'));
    expect(la.token).toBe(2n ** 32n + 1n);
    expect(la.owner).toBe(`pg:${a.backendPid}:1`);
    expect(typeof a.backendPid).toBe('number');
    expect(la.validUntilMs).toBeNull();
    expect(la.resource).toBe('r');
    expect(await b.acquire('r')).toEqual({ kind: 'denied', reason: 'held' });
    await a.release(la);
    expect(la.signal.aborted).toBe(true);
    expect(la.signal.reason).toMatchObject({ reason: 'released' });
    const lb = granted(await b.acquire('r'));
    expect(lb.token).toBe(2n ** 32n + 2n);
    expect(lb.owner).toBe(`pg:${b.backendPid}:1`);
    const second = granted(await b.acquire('s'));
    expect(second.owner).toBe(`pg:${b.backendPid}:2`);
    const rows = await admin.query<{ resource: string; token: string }>('SELECT resource, token::text AS token FROM lockcheck_tokens ORDER BY resource');
    expect(rows.rows).toEqual([
      { resource: 'r', token: (2n ** 32n + 2n).toString() },
      { resource: 's', token: (2n ** 32n + 1n).toString() },
    ]);
  });

  it('stacks: the holder\'s acquire is the same lease and needs its own release', async () => {
    const a = session();
    const b = session();
    const l1 = granted(await a.acquire('r'));
    const l2 = granted(await a.acquire('r'));
    expect(l2).toBe(l1);
    const locks = await admin.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted");
    expect(locks.rows[0]!.n).toBe(1);
    await a.release(l1);
    expect(l1.signal.aborted).toBe(false);
    expect(await b.acquire('r')).toEqual({ kind: 'denied', reason: 'held' });
    await a.release(l1);
    expect(l1.signal.aborted).toBe(true);
    expect(granted(await b.acquire('r')).token).toBe(2n);
    // A release of a lease this lock does not hold is nothing.
    await a.release(l1);
    await b.release(l1);
    expect(await admin.query("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory'").then((r) => r.rows[0].n)).toBe(1);
  });

  it('stacks concurrent acquires of one resource on one lock: both get the one lease (a relock, not a second grant), and it ends at the second release', async () => {
    const a = session();
    const b = session();
    // Both mints go out before either reply: the session takes the lock twice, and the second draws a token of its own.
    const [l1, l2] = (await Promise.all([a.acquire('r'), a.acquire('r')])).map(granted);
    expect(l2).toBe(l1);
    expect(l1!.token).toBe(1n);
    expect(await advisoryLocksNow()).toBe(1);
    await a.release(l1!);
    expect(l1!.signal.aborted).toBe(false);
    expect(await b.acquire('r')).toEqual({ kind: 'denied', reason: 'held' });
    await a.release(l1!);
    expect(l1!.signal.reason).toMatchObject({ reason: 'released' });
    // The second mint's token went unused: a gap, never a repeat.
    expect(granted(await b.acquire('r')).token).toBe(3n);
  });

  it('a relock in flight when its lease is released to the last level gives that level back: the acquire is a fresh grant, and the lock is free after its release', async () => {
    const a = session();
    const b = session();
    const l1 = granted(await a.acquire('r'));
    const again = a.acquire('r');
    const released = a.release(l1);
    expect(l1.signal.reason).toMatchObject({ reason: 'released' });
    const l2 = granted(await again);
    await released;
    expect(l2).not.toBe(l1);
    expect(l2.signal.aborted).toBe(false);
    expect(l2.token).toBe(2n);
    expect(await advisoryLocksNow()).toBe(1);
    expect(await b.acquire('r')).toEqual({ kind: 'denied', reason: 'held' });
    await a.release(l2);
    expect(l2.signal.reason).toMatchObject({ reason: 'released' });
    expect(granted(await b.acquire('r')).token).toBe(3n);
  });

  it('retries: a denial is tried again; the lock freed in between is granted', async () => {
    const a = session();
    const clock = new ManualClock();
    const b = session({ clock });
    const la = granted(await a.acquire('r'));
    expect(await b.acquire('r', { retries: 1 })).toEqual({ kind: 'denied', reason: 'held' });
    const pending = b.acquire('r', { retries: 3, retryDelayMs: 100 });
    await until(() => clock.delays.includes(100), 'the retry sleep');
    await a.release(la);
    clock.advance(100);
    expect(granted(await pending).token).toBe(2n);
    expect(clock.delays.filter((d) => d === 100)).toHaveLength(1);
    await expect(b.acquire('r', { ttlMs: 5 } as object)).rejects.toThrow(expect.objectContaining({ code: 'unsupported-operation', message: 'unsupported-operation: a PostgreSQL session lock has no ttl' }));
  });

  // node-postgres carries the session where the wire client does not take the configuration (a password function).
  const drivers = [
    ['the wire client', () => server()],
    ['node-postgres', () => ({ ...server(), password: async () => String(server().password) })],
  ] as const;

  it.each(drivers)('%s: a terminated backend loses every lease on it (connection-lost) and calls onConnectionLost once; the next acquire reconnects', async (_driver, connection) => {
    let lostCalls = 0;
    const a = session({ connection: connection(), onConnectionLost: () => void lostCalls++ });
    const l1 = granted(await a.acquire('r'));
    const l2 = granted(await a.acquire('s'));
    const signal = l1.signal;
    const pid = a.backendPid!;
    await admin.query('SELECT pg_terminate_backend($1)', [pid]);
    const deadline = Date.now() + 10_000;
    while (!signal.aborted && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(signal.reason).toMatchObject({ reason: 'connection-lost' });
    expect(l2.signal.reason).toMatchObject({ reason: 'connection-lost', message: "lease on 's' connection-lost" });
    expect(lostCalls).toBe(1);
    expect(a.backendPid).toBeNull();
    await a.release(l1);
    const l3 = granted(await a.acquire('r'));
    expect(l3.token).toBe(2n);
    expect(a.backendPid).not.toBe(pid);
  });

  it('an acquire whose statement is out when close() comes and whose reply grants: the lease comes back lost (connection-lost), never held', async () => {
    const a = session();
    await a.release(granted(await a.acquire('warm')));
    // The statement goes out now; close() then sends its goodbye behind it on the same socket, and the server answers
    // the statement before it reads the goodbye: the grant always comes, to a lock that let its connection go.
    const pending = a.acquire('r');
    await a.close();
    const r = await pending;
    expect(r.kind).toBe('granted');
    if (r.kind === 'granted') expect(r.lease.signal.reason).toMatchObject({ reason: 'connection-lost' });
    // The session ended with the close: nothing of it holds 'r'.
    expect(await advisoryLocks()).toBe(0);
  });

  it.each(drivers)('%s: a refused connect (a wrong password) is ConnectionConfigError, and the lock holds no connection', async (_driver, connection) => {
    const wrong = { ...connection(), password: typeof connection().password === 'function' ? async () => 'wrong' : 'wrong' };
    const a = session({ connection: wrong });
    expect(await thrown(a.acquire('r'))).toMatchObject({ name: 'ConnectionConfigError', code: 'authentication' });
    expect(a.backendPid).toBeNull();
  });

  it('a bad lease given to release is a rejection (InvalidInputError naming the call), not a throw', async () => {
    const a = session();
    await expect(a.release(null as never)).rejects.toMatchObject({ name: 'InvalidInputError', code: 'precondition', message: 'precondition: release needs a lease that acquire returned, got null' });
  });

  it('close loses the held leases, ends the session, and refuses later acquires (a close is not a lost connection)', async () => {
    let lostCalls = 0;
    const a = session({ onConnectionLost: () => void lostCalls++ });
    const b = session();
    const l = granted(await a.acquire('r'));
    await a.close();
    expect(l.signal.reason).toMatchObject({ reason: 'connection-lost' });
    expect(lostCalls).toBe(0);
    expect(a.backendPid).toBeNull();
    await expect(a.acquire('r')).rejects.toThrow(expect.objectContaining({ code: 'precondition', message: 'precondition: the lock was closed' }));
    expect(granted(await b.acquire('r')).token).toBe(2n);
    await a.close();
  });

  it('a token at 2^63-1 is TokenOverflowError, and the session (with the lock it took) is ended', async () => {
    await admin.query("INSERT INTO lockcheck_tokens VALUES ('full', $1)", [MAX.toString()]);
    const a = session();
    const l = granted(await a.acquire('other'));
    const e = await thrown(a.acquire('full'));
    expect(e).toBeInstanceOf(TokenOverflowError);
    expect(e).toMatchObject({ resource: 'full' });
    expect(l.signal.reason).toMatchObject({ reason: 'connection-lost' });
    expect(await advisoryLocks()).toBe(0);
    expect(granted(await session().acquire('other')).token).toBe(2n);
  });

  it('a statement with no reply in time is timed-out and ends the session; a failing connect is typed or no-quorum', async () => {
    let hang = false;
    const clock = new ManualClock();
    const a = session({ clock, statementTimeoutMs: 30_000, link: (rt) => (hang ? unanswered(clock) : rt()) });
    const held = granted(await a.acquire('held'));
    hang = true;
    expect(await a.acquire('r')).toEqual({ kind: 'timed-out' });
    expect(held.signal.reason).toMatchObject({ reason: 'connection-lost' });
    // Connecting with no reply in time.
    expect(await a.acquire('r')).toEqual({ kind: 'timed-out' });
    hang = false;
    expect(granted(await a.acquire('r')).token).toBe(1n);
    const refused = session({ connection: { ...server(), password: 'wrong' } });
    expect(await thrown(refused.acquire('r'))).toMatchObject({ name: 'ConnectionConfigError', code: 'authentication' });
    const noDb = session({ connection: { ...server(), database: 'absent_db' } });
    expect(await thrown(noDb.acquire('r'))).toMatchObject({ name: 'ConnectionConfigError', code: 'unknown-database' });
    const nowhere = session({ connection: { ...server(), port: 1 } });
    expect(await nowhere.acquire('r')).toEqual({ kind: 'denied', reason: 'no-quorum' });
  });

  /**
   * A statement blocked on its token row (locked by another transaction) until the lock's clock passes `boundMs`: it is
   * timed-out then, not before, and the session ends. `connection` adds to the server's.
   */
  async function blockedUntil(boundMs: number, statementTimeoutMs: number, connection: pg.ClientConfig = {}): Promise<void> {
    const clock = new ManualClock();
    const a = session({ clock, statementTimeoutMs, connection: { ...server(), ...connection } });
    const held = granted(await a.acquire('held'));
    const pid = a.backendPid;
    await a.release(granted(await a.acquire('blocked')));
    const blocker = new pg.Client({ ...server(), connectionTimeoutMillis: 5_000, query_timeout: 5_000 });
    await blocker.connect();
    let failed = true;
    try {
      await blocker.query('BEGIN');
      await blocker.query("SELECT 1 FROM lockcheck_tokens WHERE resource = 'blocked' FOR UPDATE");
      let done: AcquireResult | null = null;
      const waiting = a.acquire('blocked').then((r) => (done = r));
      // The statement is in flight once its backend waits on the row lock (a bounded number of looks, not a time).
      const waits = async (): Promise<boolean> =>
        (await blocker.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'", [a.backendPid])).rows[0]!.n === 1;
      let inFlight = false;
      for (let i = 0; i < 1000 && !inFlight; i++) inFlight = await waits();
      expect(inFlight).toBe(true);
      // Its bound runs on the lock's clock (one timer per connection, armed at the oldest call's deadline).
      clock.advance(boundMs - 1);
      await settle();
      expect(done).toBeNull();
      clock.advance(1);
      const still = new Promise<string>((resolve) => setTimeout(() => resolve('still waiting 10 s after its bound'), 10_000).unref());
      expect(await Promise.race([waiting, still])).toEqual({ kind: 'timed-out' });
      expect(held.signal.reason).toMatchObject({ reason: 'connection-lost' });
      failed = false;
    } finally {
      await blocker.query('ROLLBACK').catch(() => undefined);
      // The ended session's backend, blocked on the row, sees its connection gone only once the row is free, and holds
      // 'held' until then: the next call of this function (another test) found it held. Its exit is awaited (a bounded
      // number of looks, not a time).
      const gone = async (): Promise<boolean> => (await blocker.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1', [pid])).rows[0]!.n === 0;
      let exited = false;
      for (let i = 0; i < 1000 && !exited; i++) exited = await gone().catch(() => true);
      await blocker.end().catch(() => undefined);
      // Not over a failure of the test above: that one says what went wrong.
      if (!failed) expect(exited, `backend ${pid} still there`).toBe(true);
    }
  }

  it('without a link, a statement blocked past statementTimeoutMs (its token row locked elsewhere) is timed-out on the lock clock and ends the session', async () => {
    await blockedUntil(30_000, 30_000);
  });

  it("a configuration's query_timeout shorter than statementTimeoutMs bounds each statement; a longer one does not", async () => {
    await blockedUntil(300, 30_000, { query_timeout: 300 });
    await blockedUntil(30_000, 30_000, { query_timeout: 60_000 });
  });

  it('a release whose unlock has no reply in time names the timed-out statement', async () => {
    let hang = false;
    const clock = new ManualClock();
    const a = session({ clock, statementTimeoutMs: 30_000, link: (rt) => (hang ? unanswered(clock) : rt()) });
    const l = granted(await a.acquire('r'));
    hang = true;
    const e = await thrown(a.release(l));
    expect((e as Error).message).toBe("release of 'r' failed (statement timed out after 30000 ms); the session was ended, so the server frees the lock");
  });

  it('a release whose unlock fails ends the session and throws UnavailableError', async () => {
    let fail = false;
    const a = session({ link: (rt) => (fail ? Promise.reject(new Error('link down')) : rt()) });
    const l = granted(await a.acquire('r'));
    const other = granted(await a.acquire('s'));
    await a.release(l);
    const l2 = granted(await a.acquire('r'));
    fail = true;
    const e = await thrown(a.release(l2));
    expect(e).toBeInstanceOf(UnavailableError);
    expect((e as Error).message).toBe("release of 'r' failed (link down); the session was ended, so the server frees the lock");
    expect((e as Error).cause).toMatchObject({ message: 'link down' });
    expect(other.signal.reason).toMatchObject({ reason: 'connection-lost' });
    // A failing statement on a grant: no-quorum, and the session ended too.
    fail = false;
    const l3 = granted(await a.acquire('t'));
    fail = true;
    expect(await a.acquire('u')).toEqual({ kind: 'denied', reason: 'no-quorum' });
    expect(l3.signal.aborted).toBe(true);
  });

  for (const [driver, extra] of [['wire', {}], ['node-postgres', { binary: true }]] as const) {
    it(`${driver}: a FATAL (pg_terminate_backend) while a release is in flight: the release throws UnavailableError and the lease reads connection-lost, never released`, async () => {
      let hold: (() => void) | null = null;
      const held = new Promise<void>((resolve) => (hold = resolve));
      let holding = false;
      const a = session({ connection: { ...server(), ...extra }, link: (rt) => (holding ? held.then(rt) : rt()) });
      const l = granted(await a.acquire('r'));
      const signal = l.signal;
      const pid = a.backendPid!;
      holding = true;
      const releasing = thrown(a.release(l));
      await admin.query('SELECT pg_terminate_backend($1)', [pid]);
      // The FATAL has reached the lock (its connection is gone) while the unlock is still out.
      await until(() => a.backendPid === null, 'the session end');
      hold!();
      const e = await releasing;
      expect(e).toBeInstanceOf(UnavailableError);
      expect(signal.reason).toMatchObject({ reason: 'connection-lost' });
      holding = false;
      expect(granted(await a.acquire('r')).token).toBe(2n);
    });
  }

  // Before the connection opens the statement's prepare meets the change; after, its execution (a refusal of the call).
  it.each([['before', false], ['after', true]] as const)('refusals: a token table without its column (renamed %s the connection opened) is ServerRefusedError, the statement\'s lock is freed', async (_when, warm) => {
    const a = session();
    if (warm) await a.release(granted(await a.acquire('warm')));
    await admin.query('ALTER TABLE lockcheck_tokens RENAME COLUMN token TO t');
    try {
      expect(await thrown(a.acquire('r'))).toMatchObject({ name: 'ServerRefusedError', code: 'schema', serverCode: '42703' });
    } finally {
      await admin.query('ALTER TABLE lockcheck_tokens RENAME COLUMN t TO token');
    }
    expect(await advisoryLocks()).toBe(0);
  });
});

describe('PostgresTransactionLock', () => {
  it('a pair is two round trips on one connection once connected: the acquire (three pipelined statements), COMMIT', async () => {
    let trips = 0;
    const a = xact({ link: (rt) => (trips++, rt()) });
    await a.release(granted(await a.acquire('warm')));
    trips = 0;
    const l = granted(await a.acquire('r'));
    expect(await advisoryLocksNow()).toBe(1);
    await a.release(l);
    expect(trips).toBe(2);
    expect(a.backendPids).toHaveLength(1);
    // The session's hold went to the transaction: its ROLLBACK frees the lock, on a connection that stays open.
    await a.rollback(granted(await a.acquire('r')));
    expect(await advisoryLocksNow()).toBe(0);
    expect(a.backendPids).toHaveLength(1);
    // A denial costs its ROLLBACK too, and mints nothing.
    const b = xact();
    const h = granted(await b.acquire('r'));
    trips = 0;
    expect(await a.acquire('r')).toEqual({ kind: 'denied', reason: 'held' });
    expect(trips).toBe(2);
    expect(await advisoryLocksNow()).toBe(1);
    await b.release(h);
    expect(granted(await a.acquire('r')).token).toBe(4n);
  });

  it("the acquire's three statements go out in one write (node-postgres corks each statement alone), COMMIT in one more", async () => {
    const a = xact();
    const warm = granted(await a.acquire('warm'));
    const client = a.queryable(warm) as pg.Client;
    await a.release(warm);
    // The released connection is the idle one the next acquire takes: count the writes its socket makes.
    const stream = (client as unknown as { connection: { stream: { _write: (...args: unknown[]) => void; _writev: (...args: unknown[]) => void } } }).connection.stream;
    let writes = 0;
    for (const method of ['_write', '_writev'] as const) {
      const original = stream[method];
      stream[method] = (...args: unknown[]) => {
        writes++;
        original.apply(stream, args);
      };
    }
    const l = granted(await a.acquire('r'));
    expect(backendPid(a.queryable(l))).toBe(backendPid(client));
    expect(writes).toBe(1);
    await a.release(l);
    expect(writes).toBe(2);
  });

  it('a client configured `binary` still reads the lock statements as text (the session lock then runs on node-postgres too); the user gets binary results', async () => {
    const connection = { ...server(), binary: true };
    const a = xact({ connection });
    const s = session({ connection });
    const l = granted(await a.acquire('bin'));
    expect(l.token).toBe(1n);
    expect((await a.queryable(l).query('SELECT 7::int4 AS n')).rows).toEqual([{ n: 7 }]);
    await a.release(l);
    expect(granted(await a.acquire('bin')).token).toBe(2n);
    const h = granted(await s.acquire('bin-s'));
    expect(h.token).toBe(1n);
    await s.release(h);
    expect(granted(await s.acquire('bin-s')).token).toBe(2n);
    expect(await a.withLock('bin-w', 100, async (_tx, lease) => lease.token)).toBe(1n);
  });

  it("the user's transaction is out of pipeline mode: a portal query (pg-cursor's and pg-query-stream's way) runs in it", async () => {
    const a = xact();
    const l = granted(await a.acquire('r'));
    const tx = a.queryable(l) as pg.Client;
    const rows = await new Promise<unknown[]>((resolve, reject) => {
      const q = new pg.Query({ text: 'SELECT g FROM generate_series(1, 5) g', rows: 2 } as never);
      const seen: unknown[] = [];
      q.on('row', (row: unknown) => seen.push(row));
      q.on('end', () => resolve(seen));
      q.on('error', reject);
      tx.query(q);
    });
    expect(rows).toHaveLength(5);
    await a.release(l);
  });

  it('a lease is a transaction: its writes commit with release, vanish with rollback', async () => {
    const a = xact({ tokenBase: 99n });
    const b = xact();
    const l = granted(await a.acquire('r'));
    expect(l.token).toBe(100n);
    expect(l.owner).toBe('pgx:1');
    expect(l.validUntilMs).toBeNull();
    expect(a.leaseFor('r')).toBe(l);
    expect(a.leaseFor('s')).toBeUndefined();
    expect(await b.acquire('r')).toEqual({ kind: 'denied', reason: 'held' });
    const store = postgresFencedStore(a.queryable(l), 'transactional');
    expect(await store.write('r', l.token, 'v1')).toEqual({ kind: 'accepted' });
    expect(await postgresFencedStore(admin, 'strict').read('r')).toEqual({ value: null, token: null });
    await a.release(l);
    expect(l.signal.reason).toMatchObject({ reason: 'released' });
    expect(a.leaseFor('r')).toBeUndefined();
    expect(await postgresFencedStore(admin, 'strict').read('r')).toEqual({ value: 'v1', token: 100n });
    const l2 = granted(await b.acquire('r'));
    expect(l2.token).toBe(101n);
    expect(l2.owner).toBe('pgx:1');
    await postgresFencedStore(b.queryable(l2), 'transactional').write('r', l2.token, 'v2');
    await b.rollback(l2);
    expect(l2.signal.aborted).toBe(true);
    expect(await postgresFencedStore(admin, 'strict').read('r')).toEqual({ value: 'v1', token: 100n });
    expect(() => b.queryable(l2)).toThrow(expect.objectContaining({ code: 'precondition', message: "precondition: no open transaction for 'r'" }));
    await b.release(l2);
    await b.rollback(l2);
    // The rolled-back transaction's token stays spent: never handed out again.
    const l3 = granted(await a.acquire('r'));
    expect(l3.owner).toBe('pgx:2');
    expect(l3.token).toBe(102n);
  });

  it("a statement through a lease's transaction kept past its end is refused, not sent: the connection serves the next lease, and the write ran unlocked or in that lease's transaction", async () => {
    await admin.query('CREATE TABLE IF NOT EXISTS stale_cell (k int PRIMARY KEY, v int); TRUNCATE stale_cell; INSERT INTO stale_cell VALUES (1, 0)');
    const cell = async (): Promise<number> => (await admin.query<{ v: number }>('SELECT v FROM stale_cell')).rows[0]!.v;
    const notSent = expect.objectContaining({ code: 'precondition', message: expect.stringContaining("no open transaction for 'r'") });
    const a = xact();
    // Sent while the lease is live, not awaited before release: queued ahead of the COMMIT, so it commits with it.
    const l1 = granted(await a.acquire('r'));
    const tx1 = a.queryable(l1);
    const inside = tx1.query('UPDATE stale_cell SET v = 1');
    await a.release(l1);
    await inside;
    expect(await cell()).toBe(1);
    // After the release: in autocommit, with no lock held.
    await expect(tx1.query('UPDATE stale_cell SET v = 2')).rejects.toEqual(notSent);
    // The same connection now serves the next lease of the resource: the stale write would commit (here: roll back) with it.
    const l2 = granted(await a.acquire('r'));
    expect(backendPid(a.queryable(l2))).toBe(backendPid(tx1));
    await expect(tx1.query('UPDATE stale_cell SET v = 3')).rejects.toEqual(notSent);
    await expect(postgresFencedStore(tx1, 'transactional').write('r', l1.token, 'stale')).rejects.toEqual(notSent);
    // A transactional store has no guard of its own (the lease's transaction is the fence): a write on any other connection is refused, nothing sent, where a stale token's write landed; reads are the same under every policy.
    for (const db of [admin, { query: () => Promise.reject(new Error('sent')) }]) {
      await expect(postgresFencedStore(db as never, 'transactional').write('r', 1n, 'unfenced')).rejects.toEqual(expect.objectContaining({ code: 'invalid-config', message: expect.stringContaining("writes through a lease's transaction") }));
    }
    expect(await postgresFencedStore(admin, 'transactional').read('r')).toEqual({ value: null, token: null });
    await a.release(l2);
    expect(await cell()).toBe(1);
    expect(await postgresFencedStore(admin, 'strict').read('r')).toEqual({ value: null, token: null });
    // After a rollback.
    const l3 = granted(await a.acquire('r'));
    const tx3 = a.queryable(l3);
    await a.rollback(l3);
    await expect(tx3.query('UPDATE stale_cell SET v = 4')).rejects.toEqual(notSent);
    // withLock's tx after fn: committed, or rolled back (fn threw); the callback and submittable forms too.
    let kept: pg.Client | undefined;
    await a.withLock('r', 100, async (tx) => {
      kept = tx as pg.Client;
    });
    await expect(kept!.query('UPDATE stale_cell SET v = 5')).rejects.toEqual(notSent);
    await expect(
      a.withLock('r', 100, async () => {
        throw new Error('fn failed');
      }),
    ).rejects.toThrow('fn failed');
    await expect(new Promise((resolve, reject) => kept!.query('UPDATE stale_cell SET v = 6', [], (e: Error | null) => (e === null ? resolve(null) : reject(e))))).rejects.toEqual(notSent);
    await expect(
      new Promise((resolve, reject) => {
        const q = new pg.Query('UPDATE stale_cell SET v = 7');
        q.on('error', reject);
        q.on('end', resolve);
        kept!.query(q);
      }),
    ).rejects.toEqual(notSent);
    await a.withLock('r', 100, async (tx) => {
      await expect(kept!.query('UPDATE stale_cell SET v = 8')).rejects.toEqual(notSent);
      await tx.query('SELECT 1');
    });
    expect(await cell()).toBe(1);
    await admin.query('DROP TABLE stale_cell');
  });

  it("withLock at the role's connection limit mints on an idle connection of the lock, not on a new one beside it", async () => {
    await admin.query("DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lockcheck_limited') THEN CREATE ROLE lockcheck_limited LOGIN PASSWORD 'limited' CONNECTION LIMIT 2; END IF; END $$");
    await admin.query('GRANT USAGE, CREATE ON SCHEMA public TO lockcheck_limited; GRANT SELECT, INSERT, UPDATE ON lockcheck_tokens, lockcheck_store TO lockcheck_limited');
    const a = xact({ connection: { ...server(), user: 'lockcheck_limited', password: 'limited' } });
    const leases = await Promise.all(['p', 'q'].map(async (r) => granted(await a.acquire(r))));
    expect(await a.acquire('r')).toEqual({ kind: 'denied', reason: 'no-quorum' });
    for (const l of leases) await a.release(l);
    // Two idle connections: withLock takes one, and the other mints (a third was refused: too many connections for the role).
    expect(await a.withLock('w', 100, async (_tx, lease) => lease.token)).toBe(1n);
    expect(await a.withLock('w', 100, async (_tx, lease) => lease.token)).toBe(2n);
    expect(a.backendPids).toHaveLength(2);
  });

  it("concurrent acquires of one resource on one lock stack on the first's transaction (spec 7.4, step 3): none is denied 'held' by the lock's own lease", async () => {
    const a = xact();
    const b = xact();
    const results = await Promise.all([...Array.from({ length: 4 }, () => a.acquire('r')), a.acquire('s')]);
    const leases = results.map(granted);
    const first = leases[0]!;
    expect(leases.slice(0, 4).every((l) => l === first)).toBe(true);
    expect(first.token).toBe(1n);
    expect(leases[4]!.token).toBe(1n);
    expect(await b.acquire('r')).toEqual({ kind: 'denied', reason: 'held' });
    // The commit releases every level at once (7.5).
    await a.release(first);
    await a.release(leases[4]!);
    expect(granted(await b.acquire('r')).token).toBe(2n);
  });

  it("an acquire aborted in flight whose grant stacked on the holder's transaction gives its level back: the holder's transaction is not committed under it", async () => {
    const a = xact();
    const b = xact();
    const held = granted(await a.acquire('r'));
    await a.queryable(held).query("SELECT set_config('lockcheck.probe', 'in the transaction', true)");
    const abort = new AbortController();
    const stacked = a.acquire('r', { signal: abort.signal });
    abort.abort();
    await expect(stacked).rejects.toMatchObject({ name: 'AbortError' });
    expect(held.signal.aborted).toBe(false);
    expect(a.leaseFor('r')).toBe(held);
    // Still the holder's open transaction (a commit would have ended the setting with it), and still held.
    expect((await a.queryable(held).query<{ v: string }>("SELECT current_setting('lockcheck.probe') AS v")).rows).toEqual([{ v: 'in the transaction' }]);
    expect(await b.acquire('r')).toEqual({ kind: 'denied', reason: 'held' });
    await a.release(held);
    // A fresh grant aborted in flight is committed (an empty transaction): nothing held.
    const fresh = new AbortController();
    const p = a.acquire('s', { signal: fresh.signal });
    fresh.abort();
    await expect(p).rejects.toMatchObject({ name: 'AbortError' });
    expect(a.leaseFor('s')).toBeUndefined();
    expect(granted(await b.acquire('s')).token).toBe(2n);
  });

  it('stacks inside the transaction; connections are kept idle, at most four', async () => {
    const a = xact();
    const l = granted(await a.acquire('r'));
    expect(granted(await a.acquire('r'))).toBe(l);
    await a.release(l);
    const leases = [];
    for (const r of ['a', 'b', 'c', 'd', 'e', 'f']) leases.push(granted(await a.acquire(r)));
    // Six transactions, no minter (an acquire mints on its own connection).
    expect(a.backendPids).toHaveLength(6);
    expect(new Set(a.backendPids).size).toBe(6);
    for (const x of leases) await a.release(x);
    // Four kept idle.
    expect(a.backendPids).toHaveLength(4);
    const again = granted(await a.acquire('g'));
    expect(a.backendPids).toHaveLength(4);
    await a.close();
    expect(again.signal.reason).toMatchObject({ reason: 'released' });
    expect(a.backendPids).toHaveLength(0);
    await expect(a.acquire('r')).rejects.toThrow(expect.objectContaining({ message: 'precondition: the lock was closed' }));
    await expect(xact().acquire('r', { ttlMs: 1 } as object)).rejects.toThrow(expect.objectContaining({ message: 'unsupported-operation: a PostgreSQL transaction lock has no ttl' }));
  });

  it('withLock: commits what fn wrote and returns its result; rolls back and rethrows; a wait that runs out is LockNotAcquiredError', async () => {
    const a = xact();
    const b = xact();
    let seen: Lease | undefined;
    const result = await a.withLock('r', 1000, async (tx, lease) => {
      seen = lease;
      expect(lease.token).toBe(1n);
      expect(lease.owner).toBe('pgx:1');
      await postgresFencedStore(tx, 'transactional').write('r', lease.token, 'in');
      return 'done';
    });
    expect(result).toBe('done');
    expect(seen!.signal.reason).toMatchObject({ reason: 'released' });
    expect(await postgresFencedStore(admin, 'strict').read('r')).toEqual({ value: 'in', token: 1n });
    const fnError = new Error('fn failed');
    expect(
      await thrown(
        a.withLock('r', 0, async (tx, lease) => {
          await postgresFencedStore(tx, 'transactional').write('r', lease.token, 'lost');
          throw fnError;
        }),
      ),
    ).toBe(fnError);
    // Rolled back cleanly: its connection is kept for the next call (beside the minter), not dropped.
    expect(a.backendPids).toHaveLength(2);
    expect(await postgresFencedStore(admin, 'strict').read('r')).toEqual({ value: 'in', token: 1n });
    const held = granted(await b.acquire('r'));
    const e = await thrown(a.withLock('r', 0, async () => 'never'));
    expect(e).toBeInstanceOf(LockNotAcquiredError);
    expect(e).toMatchObject({ reason: 'held' });
    await b.release(held);
    for (const waitMs of [-1, 1.5, 2 ** 31]) {
      await expect(a.withLock('r', waitMs, async () => 1)).rejects.toThrow(expect.objectContaining({ code: 'invalid-duration', message: `invalid-duration: waitMs must be an integer number of ms in [0, 2147483647], got ${waitMs}` }));
    }
    // fn is checked before a connection is taken or a token minted: the next grant's token is the next one.
    for (const fn of ['nope', 5, null, undefined]) {
      await expect(a.withLock('r', 1, fn as never)).rejects.toThrow(expect.objectContaining({ code: 'invalid-config', message: expect.stringMatching(/^invalid-config: fn must be a function, got /) as string }));
    }
    await expect(a.withLock('', 1, async () => 1)).rejects.toThrow(expect.objectContaining({ code: 'invalid-resource' }));
    expect(await a.withLock('r', 2 ** 31 - 1, async (_tx, lease) => lease.token)).toBe(4n);
    // The wait is lock_timeout: a holder that lets go within it is waited for.
    const h = granted(await b.acquire('w'));
    const waiting = a.withLock('w', 30_000, async (_tx, lease) => lease.token);
    const waiters = async () => (await admin.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")).rows[0]!.n;
    for (let deadline = Date.now() + 10_000; (await waiters()) === 0; ) if (Date.now() > deadline) throw new Error('withLock never waited');
    await b.release(h);
    expect(await waiting).toBe(2n);
  });

  it('a connection lost while idle is not taken again: the next acquire connects afresh and is granted; release and rollback name themselves when refusing a bad lease', async () => {
    let lostCalls = 0;
    const a = xact({ onConnectionLost: () => void lostCalls++ });
    await a.release(granted(await a.acquire('r')));
    const [idle] = a.backendPids;
    await admin.query('SELECT pg_terminate_backend($1)', [idle]);
    await until(() => a.backendPids.length === 0, 'the idle connection seen lost');
    expect(lostCalls).toBe(1);
    const again = granted(await a.acquire('r'));
    expect(again.token).toBe(2n);
    expect(a.backendPids).toHaveLength(1);
    expect(a.backendPids).not.toContain(idle);
    await a.release(again);
    for (const call of ['release', 'rollback'] as const) {
      expect(await thrown(a[call]({} as never))).toMatchObject({ code: 'precondition', message: `precondition: ${call} needs a lease that acquire returned, got an object` });
    }
  });

  it("an older lease of a resource held again: queryable refuses it, and its release or rollback leaves the newer lease's transaction open", async () => {
    const a = xact();
    const l1 = granted(await a.acquire('r'));
    await a.release(l1);
    const l2 = granted(await a.acquire('r'));
    expect(() => a.queryable(l1)).toThrow(expect.objectContaining({ code: 'precondition', message: "precondition: no open transaction for 'r'" }));
    await postgresFencedStore(a.queryable(l2), 'transactional').write('r', l2.token, 'v2');
    await a.release(l1);
    await a.rollback(l1);
    expect(a.leaseFor('r')).toBe(l2);
    expect(l2.signal.aborted).toBe(false);
    // Not committed by l1's release: nothing is visible outside the transaction yet.
    expect(await postgresFencedStore(admin, 'strict').read('r')).toEqual({ value: null, token: null });
    await a.release(l2);
    expect(await postgresFencedStore(admin, 'strict').read('r')).toEqual({ value: 'v2', token: l2.token });
  });

  it("withLock: a wait as long as statementTimeoutMs or longer runs out at waitMs (lock_timeout: LockNotAcquiredError), not at the connection's statement_timeout; a closed lock refuses it", async () => {
    // A second of statement time: a loaded machine's round trips stay well inside it.
    const a = xact({ statementTimeoutMs: 1000 });
    const b = xact();
    const held = granted(await b.acquire('r'));
    // Raised for the wait: statement_timeout would otherwise cancel it first (57014), the same ms or sooner.
    for (const waitMs of [1000, 2000]) {
      const e = await thrown(a.withLock('r', waitMs, async () => 'never'));
      expect(e).toBeInstanceOf(LockNotAcquiredError);
      expect(e).toMatchObject({ reason: 'held' });
    }
    await b.release(held);
    // fn's statements have the connection's statement_timeout again after a raised wait.
    expect(await a.withLock('r', 2000, async (tx) => (await tx.query<{ statement_timeout: string }>('SHOW statement_timeout')).rows[0]!.statement_timeout)).toBe('1s');
    await a.close();
    let ran = false;
    const closed = await thrown(
      a.withLock('r', 0, async () => {
        ran = true;
      }),
    );
    expect(closed).toMatchObject({ name: 'InvalidInputError', code: 'precondition', message: 'precondition: the lock was closed' });
    expect(ran).toBe(false);
  });

  it('withLock aborted while the server makes it wait: rejects with the reason, fn never runs, the wait is cancelled on the server and its connection dropped', async () => {
    const a = xact();
    const b = xact();
    const held = granted(await b.acquire('r'));
    const waiters = async (): Promise<number> => (await admin.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")).rows[0]!.n;
    const controller = new AbortController();
    const reason = new Error('the caller gave up');
    let ran = false;
    const pending = thrown(
      a.withLock('r', 30_000, async () => {
        ran = true;
      }, { signal: controller.signal }),
    );
    for (let deadline = Date.now() + 10_000; (await waiters()) === 0; ) if (Date.now() > deadline) throw new Error('withLock never waited');
    const waiting = [...a.backendPids];
    expect(waiting).toHaveLength(1);
    controller.abort(reason);
    expect(await pending).toBe(reason);
    expect(ran).toBe(false);
    // The wait's connection is gone from the lock (dropped, not kept idle); the minter that cancelled it stays.
    expect(a.backendPids).not.toContain(waiting[0]);
    for (let deadline = Date.now() + 10_000; (await waiters()) !== 0; ) if (Date.now() > deadline) throw new Error('the wait was not cancelled on the server');
    await b.release(held);
    // The lock is free for another owner at once.
    expect(await a.withLock('r', 0, async (_tx, lease) => lease.token)).toBe(2n);
  });

  it('a token at 2^63-1 is TokenOverflowError and the transaction is dropped', async () => {
    await admin.query("INSERT INTO lockcheck_tokens VALUES ('full', $1)", [MAX.toString()]);
    const a = xact();
    const e = await thrown(a.acquire('full'));
    expect(e).toBeInstanceOf(TokenOverflowError);
    expect(a.leaseFor('full')).toBeUndefined();
    expect(await advisoryLocks()).toBe(0);
  });

  it('withLock: a COMMIT of unknown fate leaves the lease connection-lost, never released', async () => {
    let fail = false;
    const a = xact({ link: (rt) => (fail ? Promise.reject(new Error('link down')) : rt()) });
    let seen: Lease | null = null;
    const e = await thrown(
      a.withLock('r', 100, async (_tx, lease) => {
        seen = lease;
        fail = true;
        return 1;
      }),
    );
    expect(e).toBeInstanceOf(UnavailableError);
    expect((seen as Lease | null)!.signal.reason).toMatchObject({ reason: 'connection-lost' });
    fail = false;
    // The dropped connection's backend may still hold 'r' for a moment on a loaded server: a wait, not a refusal.
    expect(await a.withLock('r', 10_000, async (_tx, lease) => lease.token)).toBe(2n);
  });

  it('no reply in time is timed-out, a failing statement no-quorum, and either drops the transaction; a failed commit is UnavailableError', async () => {
    let mode: 'ok' | 'hang' | 'fail' = 'ok';
    let lostCalls = 0;
    const clock = new ManualClock();
    const a = xact({ clock, statementTimeoutMs: 30_000, onConnectionLost: () => void lostCalls++, link: (rt) => (mode === 'hang' ? unanswered(clock) : mode === 'fail' ? Promise.reject(new Error('link down')) : rt()) });
    const l = granted(await a.acquire('r'));
    mode = 'hang';
    expect(await a.acquire('r')).toEqual({ kind: 'timed-out' });
    expect(await a.acquire('s')).toEqual({ kind: 'timed-out' });
    mode = 'fail';
    expect(await a.acquire('r')).toEqual({ kind: 'denied', reason: 'no-quorum' });
    expect(await a.acquire('s')).toEqual({ kind: 'denied', reason: 'no-quorum' });
    const e = await thrown(a.release(l));
    expect(e).toBeInstanceOf(UnavailableError);
    expect((e as Error).message).toBe("COMMIT of 'r' failed (link down); the connection was dropped, so the lock is freed, but the changes may or may not have been committed");
    expect((e as Error).cause).toMatchObject({ message: 'link down' });
    // The dropped connection's backend ends a moment after the drop, and its transaction's lock with it (a loaded
    // server may still hold it for the next acquire).
    expect(await advisoryLocks()).toBe(0);
    mode = 'ok';
    expect(granted(await a.acquire('r')).token).toBe(2n);
    // Dropping a connection is the lock's own doing, not a loss it reports.
    expect(lostCalls).toBe(0);
    const refused = xact({ connection: { ...server(), password: 'wrong' } });
    expect(await thrown(refused.acquire('r'))).toMatchObject({ name: 'ConnectionConfigError', code: 'authentication' });
    const nowhere = xact({ connection: { ...server(), port: 1 } });
    expect(await nowhere.acquire('r')).toEqual({ kind: 'denied', reason: 'no-quorum' });
    // withLock has no result to carry the outage in: typed, and named for the step that failed.
    expect(await thrown(nowhere.withLock('r', 0, async () => 1))).toMatchObject({ name: 'UnavailableError', message: expect.stringMatching(/^withLock's connect failed: .*ECONNREFUSED/) });
    // Bad arguments are refused by the call they were given to.
    expect(() => a.queryable({} as never)).toThrow(expect.objectContaining({ code: 'precondition', message: 'precondition: queryable needs a lease that acquire returned, got an object' }));
    expect(await thrown(a.withLock('r', 0, async () => 1, null as never))).toMatchObject({ code: 'invalid-config', message: expect.stringContaining('withLock options') });
  });

  it('a failing acquire on an idle connection: timed-out or no-quorum, the connection dropped', async () => {
    let mode: 'ok' | 'hang' | 'fail' = 'ok';
    const clock = new ManualClock();
    const a = xact({ clock, statementTimeoutMs: 30_000, link: (rt) => (mode === 'hang' ? unanswered(clock) : mode === 'fail' ? Promise.reject(new Error('link down')) : rt()) });
    await a.release(granted(await a.acquire('r')));
    expect(a.backendPids).toHaveLength(1);
    mode = 'hang';
    expect(await a.acquire('r')).toEqual({ kind: 'timed-out' });
    expect(a.backendPids).toHaveLength(0);
    mode = 'ok';
    await a.release(granted(await a.acquire('r')));
    mode = 'fail';
    expect(await a.acquire('r')).toEqual({ kind: 'denied', reason: 'no-quorum' });
    expect(a.backendPids).toHaveLength(0);
    mode = 'ok';
    expect(granted(await a.acquire('r')).token).toBe(3n);
  });

  it('withLock: a minter that cannot connect fails that call and is made afresh for the next; acquire needs no minter', async () => {
    let calls = 0;
    // Round trips of a fresh lock's first withLock: connect, BEGIN with SET LOCAL, the lock, the minter's connect (4th), MINT.
    const a = xact({ link: (rt) => (++calls === 4 ? Promise.reject(new Error('minter link down')) : rt()) });
    // A failure before fn is typed as acquire's (an outage), never read as a COMMIT's.
    expect(await thrown(a.withLock('r', 100, async () => 'never'))).toMatchObject({ name: 'UnavailableError', message: "withLock on 'r' failed: minter link down" });
    expect(await a.withLock('r', 10_000, async (_tx, lease) => lease.token)).toBe(1n);
    const before = a.backendPids.length;
    await a.release(granted(await a.acquire('s')));
    expect(a.backendPids).toHaveLength(before);
  });

  it('withLock: a ROLLBACK that fails drops the connection instead of keeping it', async () => {
    let fail = false;
    const a = xact({ link: (rt) => (fail ? Promise.reject(new Error('link down')) : rt()) });
    await expect(
      a.withLock('r', 100, async () => {
        fail = true;
        throw new Error('fn failed');
      }),
    ).rejects.toThrow('fn failed');
    fail = false;
    // Only the minter is left.
    expect(a.backendPids).toHaveLength(1);
  });

  it("withLock: the backend terminated while fn runs loses that fn's lease at once (connection-lost), not another's, and the COMMIT after it is UnavailableError; the minter is kept", async () => {
    let lostCalls = 0;
    const a = xact({ onConnectionLost: () => void lostCalls++ });
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let otherLost: boolean | undefined;
    // Another withLock, on its own connection, running all the while.
    const other = a.withLock('s', 100, async (_tx, lease) => {
      await gate;
      otherLost = lease.signal.aborted;
      return lease.token;
    });
    let reason: unknown;
    const e = await thrown(
      a.withLock('r', 100, async (tx, lease) => {
        const pid = (tx as unknown as { processID: number }).processID;
        await admin.query('SELECT pg_terminate_backend($1)', [pid]);
        await until(() => lease.signal.aborted, "the lease's loss");
        reason = lease.signal.reason;
        return 1;
      }),
    );
    open();
    expect(reason).toMatchObject({ reason: 'connection-lost' });
    expect(e).toBeInstanceOf(UnavailableError);
    expect(await other).toBe(1n);
    expect(otherLost).toBe(false);
    expect(lostCalls).toBe(1);
    // The minter's connection is not the one lost: the next withLock mints on it, on the other's idle connection.
    expect(await a.withLock('r', 10_000, async (_tx, lease) => lease.token)).toBe(2n);
    expect(a.backendPids).toHaveLength(2);
  });

  it("withLock: a COMMIT the server refuses (a deferred constraint) is its ServerRefusedError, nothing committed, the lease released (not connection-lost); a COMMIT with no answer drops its connection even though it still answers", async () => {
    const a = xact();
    let seen: Lease | undefined;
    const refused = await thrown(
      a.withLock('r', 100, async (tx, lease) => {
        seen = lease;
        await postgresFencedStore(tx, 'transactional').write('r', lease.token, 'never');
        await tx.query('CREATE TEMP TABLE twice (x int UNIQUE DEFERRABLE INITIALLY DEFERRED) ON COMMIT DROP');
        await tx.query('INSERT INTO twice VALUES (1), (1)');
        return 1;
      }),
    );
    expect(refused).toMatchObject({ name: 'ServerRefusedError', code: 'statement', serverCode: '23505' });
    expect(seen!.signal.reason).toMatchObject({ reason: 'released' });
    expect(await postgresFencedStore(admin, 'strict').read('r')).toEqual({ value: null, token: null });
    // The COMMIT fails in the link only (the connection itself still answers): its fate is unknown, so it is dropped, not rolled back and kept.
    let failNext = false;
    const b = xact({ link: (rt) => (failNext ? ((failNext = false), Promise.reject(new Error('link down'))) : rt()) });
    let pid = 0;
    const unknown = await thrown(
      b.withLock('r', 100, async (tx) => {
        pid = (tx as unknown as { processID: number }).processID;
        failNext = true;
        return 1;
      }),
    );
    expect(unknown).toMatchObject({ name: 'UnavailableError', message: "COMMIT of 'r' failed (link down); the connection was dropped, so the lock is freed, but the changes may or may not have been committed" });
    expect((unknown as Error).cause).toMatchObject({ message: 'link down' });
    expect(b.backendPids).not.toContain(pid);
  });

  it('refusals on the transaction lock: a token table without its column is ServerRefusedError for acquire and withLock, the connection dropped, no lock left', async () => {
    const a = xact();
    await a.release(granted(await a.acquire('warm')));
    await admin.query('ALTER TABLE lockcheck_tokens RENAME COLUMN token TO t');
    try {
      expect(await thrown(a.acquire('r'))).toMatchObject({ name: 'ServerRefusedError', code: 'schema', serverCode: '42703' });
      expect(await thrown(a.withLock('r', 100, async () => 1))).toMatchObject({ name: 'ServerRefusedError', code: 'schema', serverCode: '42703' });
    } finally {
      await admin.query('ALTER TABLE lockcheck_tokens RENAME COLUMN t TO token');
    }
    expect(await advisoryLocks()).toBe(0);
    expect(granted(await a.acquire('r')).token).toBe(1n);
  });

  it('a FATAL (pg_terminate_backend) while COMMIT is in flight: release throws UnavailableError and the lease reads connection-lost, never released', async () => {
    let hold: (() => void) | null = null;
    const held = new Promise<void>((resolve) => (hold = resolve));
    let holding = false;
    const a = xact({ link: (rt) => (holding ? held.then(rt) : rt()) });
    const l = granted(await a.acquire('r'));
    const signal = l.signal;
    const [pid] = a.backendPids;
    holding = true;
    const releasing = thrown(a.release(l));
    await admin.query('SELECT pg_terminate_backend($1)', [pid]);
    await until(() => a.backendPids.length === 0, 'the session end');
    hold!();
    const e = await releasing;
    expect(e).toBeInstanceOf(UnavailableError);
    expect(signal.reason).toMatchObject({ reason: 'connection-lost' });
    holding = false;
    expect(granted(await a.acquire('r')).token).toBe(2n);
  });

  it('a terminated backend loses its lease (connection-lost)', async () => {
    let lostCalls = 0;
    const a = xact({ onConnectionLost: () => void lostCalls++ });
    const l = granted(await a.acquire('r'));
    const signal = l.signal;
    const pids = a.backendPids;
    expect(pids).toHaveLength(1);
    for (const pid of pids) await admin.query('SELECT pg_terminate_backend($1)', [pid]);
    const deadline = Date.now() + 10_000;
    while ((!signal.aborted || lostCalls < 1) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(signal.reason).toMatchObject({ reason: 'connection-lost' });
    expect(a.leaseFor('r')).toBeUndefined();
    // Nothing more runs in the ended transaction: queryable no longer knows the lease.
    expect(() => a.queryable(l)).toThrow(expect.objectContaining({ code: 'precondition', message: "precondition: no open transaction for 'r'" }));
    expect(lostCalls).toBe(1);
    expect(a.backendPids).toHaveLength(0);
    expect(granted(await a.acquire('r')).token).toBe(2n);
  });

  it("a backend terminated under the caller's own statement: the lease is lost (connection-lost) before that statement's failure reaches the caller, and the release after it commits nothing", async () => {
    const a = xact();
    const l = granted(await a.acquire('r'));
    const [pid] = a.backendPids;
    // What the caller sees in the first turn after its statement fails (the socket's close comes later).
    const seen = a
      .queryable(l)
      .query('SELECT pg_sleep(30)')
      .then(
        () => null,
        (e: { code?: string }) => ({ code: e.code, aborted: l.signal.aborted, reason: (l.signal.reason as { reason?: string } | undefined)?.reason }),
      );
    await admin.query('SELECT pg_terminate_backend($1)', [pid]);
    expect(await seen).toEqual({ code: '57P01', aborted: true, reason: 'connection-lost' });
    // The transaction is gone: release has nothing to commit and says nothing was released over a freed lock.
    await a.release(l);
    expect(l.signal.reason).toMatchObject({ reason: 'connection-lost' });
    expect(granted(await a.acquire('r')).token).toBe(2n);
  });
});

describe('postgresFencedStore', () => {
  it('validates before any statement', async () => {
    const store = postgresFencedStore(admin, 'strict');
    await expect(store.write('', 1n, 'v')).rejects.toThrow(expect.objectContaining({ code: 'invalid-resource' }));
    await expect(store.write('r', -1n, 'v')).rejects.toThrow(expect.objectContaining({ code: 'invalid-token' }));
    await expect(store.write('r', 1n, 1 as unknown as string)).rejects.toThrow(expect.objectContaining({ code: 'precondition', message: 'precondition: value must be a string' }));
    await expect(store.read('')).rejects.toThrow(expect.objectContaining({ code: 'invalid-resource' }));
    expect(await store.read('r')).toEqual({ value: null, token: null });
  });

  it("a value past PostgreSQL's 1 GB bound on a field and a message is refused before it is sent (precondition), and the connection stays up", async () => {
    const c = new pg.Client({ ...server(), connectionTimeoutMillis: 5_000, query_timeout: 60_000 });
    await c.connect();
    try {
      const store = postgresFencedStore(c, 'strict');
      const most = 2 ** 30 - 1024;
      // Characters of three UTF-8 bytes each, never encoded: past the server's bound (it ended the session: an outage, read so at every retry).
      const past = await thrown(store.write('huge', 1n, '\u0939'.repeat(Math.floor(2 ** 30 / 3) + 1)));
      expect(past).toMatchObject({ code: 'precondition', message: `precondition: value too large for a PostgreSQL store cell: ${2 ** 30 + 2} bytes, at most ${most} (PostgreSQL's 1 GB bound on a field and on a message, less room for the write's other parameters)` });
      // Characters of two UTF-8 bytes each (a one-byte string in memory): the bound plus 2 bytes.
      const e = await thrown(store.write('huge', 1n, '\u00e9'.repeat(most / 2 + 1)));
      expect(e).toBeInstanceOf(InvalidInputError);
      expect(e).toMatchObject({ code: 'precondition', message: `precondition: value too large for a PostgreSQL store cell: ${most + 2} bytes, at most ${most} (PostgreSQL's 1 GB bound on a field and on a message, less room for the write's other parameters)` });
      expect(await store.write('huge', 1n, 'small')).toEqual({ kind: 'accepted' });
    } finally {
      await c.end().catch(() => undefined);
    }
  });

  it("a store on the caller's client bounds each write and read by its timeoutMs on its clock, whatever the client's own settings (before: a client without query_timeout on a paused backend waited for ever)", async () => {
    const c = new pg.Client({ ...server(), connectionTimeoutMillis: 5_000 });
    await c.connect();
    const pid = (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const clock = new ManualClock();
    const store = postgresFencedStore(c, 'strict', { timeoutMs: 200, clock });
    process.kill(pid, 'SIGSTOP');
    try {
      const settled = <T>(p: Promise<T>): Promise<unknown> => p.then((v) => ({ resolved: v }), (e: unknown) => e);
      const write = settled(store.write('paused', 1n, 'v'));
      const read = settled(store.read('paused'));
      clock.advance(199);
      clock.advance(1);
      // Real time only tells a hang apart (a generous bound): the bound itself is on the manual clock.
      let hang: NodeJS.Timeout | undefined;
      const hung = new Promise((resolve) => (hang = setTimeout(() => resolve('still waiting after 10 s of real time'), 10_000)));
      const [w, r] = await Promise.race([Promise.all([write, read]), hung.then((why) => [why, why])]);
      clearTimeout(hang);
      expect(w).toBeInstanceOf(TimeoutError);
      expect((w as Error).message).toBe('postgres fenced store write timed out after 200 ms');
      expect(r).toBeInstanceOf(TimeoutError);
      expect((r as Error).message).toBe('postgres fenced store read timed out after 200 ms');
      expect(clock.armed).toBe(0);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    // Resumed, the client serves again: the write that timed out landed (its outcome was unknown, not refused).
    expect(await store.read('paused')).toEqual({ value: 'v', token: 1n });
    await c.end();
  });

  it('postgresFencedStore refuses options it does not know and a bad timeoutMs or clock', () => {
    expect(() => postgresFencedStore(admin, 'strict', { timeoutMS: 5 } as never)).toThrow(expect.objectContaining({ code: 'invalid-config' }));
    expect(() => postgresFencedStore(admin, 'strict', { timeoutMs: -1 })).toThrow(InvalidInputError);
    expect(() => postgresFencedStore(admin, 'strict', { timeoutMs: Number.NaN })).toThrow(InvalidInputError);
    expect(() => postgresFencedStore(admin, 'strict', { clock: {} as never })).toThrow(InvalidInputError);
    expect(() => postgresFencedStore(admin, 'strict', null as never)).toThrow(InvalidInputError);
  });

  it('strict: only a larger token writes, the rejection names the highest', async () => {
    const store = postgresFencedStore(admin, 'strict');
    expect(await store.write('r', 5n, 'a')).toEqual({ kind: 'accepted' });
    expect(await store.write('r', 5n, 'b')).toEqual({ kind: 'rejected', highest: 5n });
    expect(await store.write('r', 3n, 'c')).toEqual({ kind: 'rejected', highest: 5n });
    expect(await store.write('r', MAX, 'd')).toEqual({ kind: 'accepted' });
    expect(await store.read('r')).toEqual({ value: 'd', token: MAX });
  });

  it('monotonic: an equal token writes, a smaller one does not', async () => {
    const store = postgresFencedStore(admin, 'monotonic');
    expect(await store.write('r', 5n, 'a')).toEqual({ kind: 'accepted' });
    expect(await store.write('r', 5n, 'b')).toEqual({ kind: 'accepted' });
    expect(await store.write('r', 4n, 'c')).toEqual({ kind: 'rejected', highest: 5n });
    expect(await store.read('r')).toEqual({ value: 'b', token: 5n });
  });

  it("a caller's client parsing integers its own way (int4 and int8 as bigint, as strings): a landed write is accepted, a stale one rejected, tokens exact", async () => {
    for (const parse of [BigInt, (v: string) => v]) {
      const types = { getTypeParser: (oid: number, format?: string): unknown => (oid === 23 || oid === 20 ? parse : (pg.types.getTypeParser as (o: number, f?: string) => unknown)(oid, format)) };
      const c = new pg.Client({ ...server(), types: types as unknown as pg.CustomTypesConfig, connectionTimeoutMillis: 5_000, query_timeout: 5_000 });
      await c.connect();
      try {
        const store = postgresFencedStore(c, 'strict');
        const r = `typed-${parse.name}`;
        expect(await store.write(r, MAX - 1n, 'a')).toEqual({ kind: 'accepted' });
        expect(await store.write(r, MAX - 1n, 'b')).toEqual({ kind: 'rejected', highest: MAX - 1n });
        expect(await store.write(r, MAX, 'c')).toEqual({ kind: 'accepted' });
        expect(await store.read(r)).toEqual({ value: 'c', token: MAX });
      } finally {
        await c.end();
      }
    }
  });

  it('unfenced and transactional: every write lands; highest stays the largest', async () => {
    const a = xact();
    for (const policy of ['unfenced', 'transactional'] as const) {
      const r = `r-${policy}`;
      // A transactional store writes through a lease's transaction only (its commit is the fence).
      const lease = policy === 'transactional' ? granted(await a.acquire(r)) : null;
      const store = postgresFencedStore(lease === null ? admin : a.queryable(lease), policy);
      expect(await store.write(r, 9n, 'a')).toEqual({ kind: 'accepted' });
      expect(await store.write(r, 2n, 'b')).toEqual({ kind: 'accepted' });
      expect(await store.read(r)).toEqual({ value: 'b', token: 2n });
      if (lease !== null) await a.release(lease);
      const h = await admin.query<{ h: string }>('SELECT highest::text AS h FROM lockcheck_store WHERE resource = $1', [r]);
      expect(h.rows[0]!.h).toBe('9');
    }
  });
});
