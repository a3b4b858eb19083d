import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { withPostgres } from './postgresFixture.ts';
import { ConnectionConfigError, ServerRefusedError, TimeoutError, TokenOverflowError } from '../impl/errors.ts';
import { PostgresTransactionLock } from '../impl/postgres/index.ts';
import { LockNotAcquiredError } from '../impl/using.ts';

/**
 * PostgresTransactionLock.withLock's failures are typed as acquire's are
 * (docs/errors.md): it threw the driver's raw errors (DatabaseError 28P01,
 * 42501, 22003; a plain Error 'timeout expired'). And a waitMs at or above
 * statementTimeoutMs waits waitMs (LockNotAcquiredError), where the
 * statement bound cut it short as a TimeoutError.
 */
const db = withPostgres();

async function failure(lock: PostgresTransactionLock, resource: string): Promise<unknown> {
  let ran = false;
  try {
    return await lock
      .withLock(resource, 100, async () => {
        ran = true;
      })
      .then(
        () => new Error('withLock resolved'),
        (e: unknown) => e,
      );
  } finally {
    expect(ran).toBe(false);
    await lock.close();
  }
}

describe('PostgresTransactionLock.withLock: failures typed as acquire\'s', () => {
  it('a wrong password: ConnectionConfigError authentication, the driver\'s error as cause', async () => {
    const e = await failure(new PostgresTransactionLock({ connection: { ...db.server.connection, password: 'wrong-pw-5521' } }), 'r');
    expect(e).toBeInstanceOf(ConnectionConfigError);
    expect(e).toMatchObject({ code: 'authentication' });
    expect(((e as Error).cause as { code?: string }).code).toBe('28P01');
  });

  it('a role that may not create lockcheck\'s tables: ServerRefusedError permission 42501', async () => {
    await db.admin.query('CREATE DATABASE lc_withlock_perm');
    await db.admin.query("CREATE ROLE lc_withlock_limited LOGIN PASSWORD 'limited-pw'");
    const e = await failure(new PostgresTransactionLock({ connection: { ...db.server.connection, database: 'lc_withlock_perm', user: 'lc_withlock_limited', password: 'limited-pw' } }), 'r');
    expect(e).toBeInstanceOf(ServerRefusedError);
    expect(e).toMatchObject({ code: 'permission', serverCode: '42501' });
  });

  it('a token row at 2^63-1: TokenOverflowError, fn not run', async () => {
    const lock = new PostgresTransactionLock({ connection: db.server.connection });
    const warm = await lock.acquire('warm');
    if (warm.kind === 'granted') await lock.release(warm.lease);
    await db.admin.query("INSERT INTO lockcheck_tokens VALUES ('withlock-full', 9223372036854775807) ON CONFLICT (resource) DO UPDATE SET token = excluded.token");
    const e = await failure(lock, 'withlock-full');
    expect(e).toBeInstanceOf(TokenOverflowError);
  });

  it('a server that never answers: TimeoutError, not a plain Error', async () => {
    const sockets = new Set<net.Socket>();
    const silent = net.createServer((s) => {
      sockets.add(s);
      s.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const port = (silent.address() as net.AddressInfo).port;
      const e = await failure(new PostgresTransactionLock({ connection: { host: '127.0.0.1', port, user: 'u', password: 'p', database: 'd' }, statementTimeoutMs: 200 }), 'r');
      expect(e).toBeInstanceOf(TimeoutError);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});

describe('PostgresTransactionLock.withLock: a waitMs at or above statementTimeoutMs', () => {
  it('waits waitMs and throws LockNotAcquiredError (was a TimeoutError at statementTimeoutMs)', async () => {
    const holder = new PostgresTransactionLock({ connection: db.server.connection });
    const lock = new PostgresTransactionLock({ connection: db.server.connection, statementTimeoutMs: 1_000 });
    try {
      const held = await holder.acquire('long-wait');
      expect(held.kind).toBe('granted');
      const started = performance.now();
      const e: unknown = await lock.withLock('long-wait', 2_000, async () => 'ran').then(
        (r) => new Error(`resolved: ${r}`),
        (x: unknown) => x,
      );
      expect(e).toBeInstanceOf(LockNotAcquiredError);
      expect(performance.now() - started).toBeGreaterThanOrEqual(1_980);
    } finally {
      await holder.close();
      await lock.close();
    }
  });

  it('a free lock: fn runs, and its statements have the connection\'s statement_timeout again', async () => {
    const lock = new PostgresTransactionLock({ connection: db.server.connection, statementTimeoutMs: 1_000 });
    try {
      const shown = await lock.withLock('long-wait-free', 2_000, async (tx) => (await tx.query<{ statement_timeout: string }>('SHOW statement_timeout')).rows[0]!.statement_timeout);
      expect(shown).toBe('1s');
    } finally {
      await lock.close();
    }
  });
});

