import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withPostgres } from './postgresFixture.ts';
import { RedisServer } from '../conformance/env/redisServer.ts';
import { ConnectionConfigError, isRefusal, ServerRefusedError, TimeoutError, UnavailableError } from '../impl/errors.ts';
import * as lockEntry from '../impl/index.ts';
import * as postgresEntry from '../impl/postgres/index.ts';
import { WireProtocolError as WireClientProtocolError } from '../impl/postgres/wire/errors.ts';
import { PostgresSessionLock } from '../impl/postgres/sessionLock.ts';
import { openPostgresFencedStore, postgresFencedStore } from '../impl/postgres/store.ts';
import { ensureSchema } from '../impl/postgres/schema.ts';
import { PostgresTransactionLock } from '../impl/postgres/xactLock.ts';
import { createRedisLock } from '../impl/redis/index.ts';

/**
 * Issue 17 item 4: only connection loss and timeouts are `no-quorum`. A
 * permission the role lacks, a schema that is missing and a table that is
 * not as lockcheck expects are refusals no retry fixes: both PostgreSQL locks
 * and the Redis lock throw ServerRefusedError with the server's code and the
 * driver's error as the cause, and leave no lock held.
 */
const db = withPostgres();

/** A fresh database (no lockcheck tables yet), made by the superuser. */
async function database(name: string): Promise<pg.ClientConfig> {
  await db.admin.query(`CREATE DATABASE ${name}`);
  return { ...db.server.connection, database: name };
}

async function advisoryLocks(): Promise<number> {
  const r = await db.admin.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory'");
  return r.rows[0]!.n;
}

const locks = {
  session: (connection: pg.ClientConfig) => new PostgresSessionLock({ connection, statementTimeoutMs: 5_000 }),
  transaction: (connection: pg.ClientConfig) => new PostgresTransactionLock({ connection, statementTimeoutMs: 5_000 }),
};

async function refusedWith(kind: keyof typeof locks, connection: pg.ClientConfig): Promise<ServerRefusedError> {
  const lock = locks[kind](connection);
  try {
    const error: unknown = await lock.acquire('r').then(
      (r) => new Error(`expected a ServerRefusedError, got ${JSON.stringify(r.kind)}`),
      (e: unknown) => e,
    );
    if (!(error instanceof ServerRefusedError)) throw error;
    return error;
  } finally {
    await lock.close();
  }
}

describe('isRefusal', () => {
  it('is true for the two refusals a retry meets again, false for outages, timeouts and anything else', () => {
    expect(isRefusal(new ServerRefusedError('permission', '42501', 'm'))).toBe(true);
    expect(isRefusal(new ConnectionConfigError('authentication', 'm'))).toBe(true);
    for (const e of [new UnavailableError('m'), new TimeoutError('x', 1), new Error('m'), null, 'ServerRefusedError']) expect(isRefusal(e)).toBe(false);
  });

  it('WireProtocolError (the wire client cannot read the replies; refusal() throws it) is exported by lockcheck/lock and lockcheck/postgres, the class the wire client throws, and a refusal', () => {
    expect(lockEntry.WireProtocolError).toBe(WireClientProtocolError);
    expect(postgresEntry.WireProtocolError).toBe(WireClientProtocolError);
    expect(isRefusal(new WireClientProtocolError('a backend message of length 2'))).toBe(true);
  });
});

describe('PostgreSQL fenced stores: refusals are typed as the locks\' are', () => {
  it('a role without privileges on lockcheck_store: write and read throw ServerRefusedError permission 42501 with the cause, on the caller\'s connection and on the store\'s own', async () => {
    const connection = await database('lc_store_perm');
    const setup = new pg.Client({ ...connection, connectionTimeoutMillis: 5_000, query_timeout: 5_000 });
    await setup.connect();
    try {
      await ensureSchema(setup);
      await setup.query("CREATE ROLE lc_store_reader LOGIN PASSWORD 'reader-pw'");
    } finally {
      await setup.end();
    }
    const limited = { ...connection, user: 'lc_store_reader', password: 'reader-pw' };
    const client = new pg.Client({ ...limited, connectionTimeoutMillis: 5_000, query_timeout: 5_000 });
    await client.connect();
    const own = openPostgresFencedStore({ connection: limited, statementTimeoutMs: 5_000 }, 'strict');
    try {
      for (const store of [postgresFencedStore(client, 'strict'), own]) {
        for (const call of [() => store.write('r', 1n, 'v'), () => store.read('r')]) {
          const e: unknown = await call().then(
            (r) => new Error(`expected a ServerRefusedError, got ${JSON.stringify(r, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))}`),
            (x: unknown) => x,
          );
          expect(e).toBeInstanceOf(ServerRefusedError);
          expect(e).toMatchObject({ code: 'permission', serverCode: '42501' });
          expect(((e as Error).cause as { code?: string }).code).toBe('42501');
        }
      }
    } finally {
      await own.close();
      await client.end();
    }
  });
});

describe('openPostgresFencedStore: a lost connection is typed as docs/errors.md lists for the stores', () => {
  it('a write whose connection is ended under it (the backend terminated while the write waits on a row lock): UnavailableError with the server\'s error as cause', async () => {
    const name = 'lc_store_lost';
    const store = openPostgresFencedStore({ connection: { ...db.server.connection, application_name: name }, statementTimeoutMs: 5_000 }, 'strict');
    const blocker = new pg.Client({ ...db.server.connection, connectionTimeoutMillis: 5_000, query_timeout: 5_000 });
    await blocker.connect();
    try {
      expect(await store.write('lost-row', 1n, 'a')).toEqual({ kind: 'accepted' });
      await blocker.query('BEGIN');
      await blocker.query("SELECT * FROM lockcheck_store WHERE resource = 'lost-row' FOR UPDATE");
      const pending = store.write('lost-row', 2n, 'b').then(
        (r) => r,
        (e: unknown) => e,
      );
      // The server's own state says when the write waits on the row (a bounded poll of pg_stat_activity, not a sleep in place of it).
      const deadline = Date.now() + 5_000;
      let pid: number | undefined;
      while (pid === undefined && Date.now() < deadline) {
        pid = (await db.admin.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'", [name])).rows[0]?.pid;
        if (pid === undefined) await new Promise((resolve) => setTimeout(resolve, 10));
      }
      expect(pid).toBeDefined();
      await db.admin.query('SELECT pg_terminate_backend($1)', [pid]);
      const e = await pending;
      expect(e).toBeInstanceOf(UnavailableError);
      expect((e as Error).cause).toBeInstanceOf(Error);
    } finally {
      await blocker.query('ROLLBACK').catch(() => undefined);
      await blocker.end();
      await store.close();
    }
  });
});

describe.each(['session', 'transaction'] as const)('PostgreSQL %s lock: refusals are typed, not no-quorum', (kind) => {
  it('permission denied (a role that may not create lockcheck tables): ServerRefusedError permission 42501', async () => {
    const role = `lc_${kind}_limited`;
    await db.admin.query(`CREATE ROLE ${role} LOGIN PASSWORD 'limited-pw'`);
    const connection = { ...(await database(`lc_${kind}_perm`)), user: role, password: 'limited-pw' };
    const e = await refusedWith(kind, connection);
    expect(e).toMatchObject({ code: 'permission', serverCode: '42501' });
    expect((e.cause as { code?: string }).code).toBe('42501');
  });

  it('a missing schema (search_path names none): ServerRefusedError schema 3F000', async () => {
    const connection = { ...(await database(`lc_${kind}_noschema`)), options: '-c search_path=nowhere' };
    expect(await refusedWith(kind, connection)).toMatchObject({ code: 'schema', serverCode: '3F000' });
  });

  it('a token table without its token column (an SQL error in the grant): ServerRefusedError schema 42703, and no lock left held', async () => {
    const connection = await database(`lc_${kind}_badtable`);
    const setup = new pg.Client({ ...connection, connectionTimeoutMillis: 5_000, query_timeout: 5_000 });
    await setup.connect();
    try {
      await setup.query('CREATE TABLE lockcheck_tokens (resource text PRIMARY KEY)');
    } finally {
      await setup.end();
    }
    expect(await refusedWith(kind, connection)).toMatchObject({ code: 'schema', serverCode: '42703' });
    // The lock client dropped its session: the server freed whatever the statement took.
    const deadline = Date.now() + 5_000;
    while ((await advisoryLocks()) > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await advisoryLocks()).toBe(0);
  });
});

describe('Redis: a user without permission to run the scripts', () => {
  let redisServer: RedisServer;
  const clients: Redis[] = [];
  beforeAll(async () => {
    redisServer = await RedisServer.start({ persistence: 'none' });
  });
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await redisServer?.stop();
  });
  const connect = (username: string, password: string): Redis => {
    const c = new Redis({ host: redisServer.host, port: redisServer.port, username, password, maxRetriesPerRequest: 0, retryStrategy: () => null, commandTimeout: 2_000 });
    c.on('error', () => undefined);
    clients.push(c);
    return c;
  };

  it('is a ServerRefusedError permission NOPERM, not no-quorum', async () => {
    const root = connect('default', redisServer.password);
    await root.call('ACL', 'SETUSER', 'limited', 'on', '>limited-pw', '~*', '+@all', '-evalsha', '-eval');
    const lock = createRedisLock({ nodes: [connect('limited', 'limited-pw')], requestTimeoutMs: 2_000 });
    const error: unknown = await lock.acquire('r', { ttlMs: 5_000 }).then(
      (r) => r,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ServerRefusedError);
    expect(error).toMatchObject({ code: 'permission', serverCode: 'NOPERM' });
  });
});
