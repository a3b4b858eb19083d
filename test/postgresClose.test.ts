import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { withPostgres } from './postgresFixture.ts';
import { InvalidInputError, LeaseLostError } from '../impl/errors.ts';
import { openPostgresFencedStore, PostgresSessionLock, PostgresTransactionLock } from '../impl/postgres/index.ts';

/**
 * A lock or store closed while a call is in flight: nothing completes as if
 * it were open. An acquire whose statement was out comes back with its
 * lease's signal fired already (the session ends with the close); one still
 * waiting for the first connection, withLock on a closed lock and a store
 * call waiting for its connection reject with InvalidInputError
 * ('precondition'); and no connection (so no server-side lock) is left
 * behind once close() resolved.
 */
const db = withPostgres();

const LOCKS = {
  session: (connection: pg.ClientConfig) => new PostgresSessionLock({ connection, statementTimeoutMs: 5_000 }),
  transaction: (connection: pg.ClientConfig) => new PostgresTransactionLock({ connection, statementTimeoutMs: 5_000 }),
};

/** Backends of connections named `name`; a backend closed by its client leaves the list as the server finishes it, so this waits (bounded) for none. */
async function backendsLeft(name: string): Promise<number> {
  const count = async (): Promise<number> => (await db.admin.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1', [name])).rows[0]!.n;
  const deadline = Date.now() + 5_000;
  let n = await count();
  while (n > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    n = await count();
  }
  return n;
}

/** Whether another client gets `resource` now (and lets it go). */
async function freeFor(kind: keyof typeof LOCKS, resource: string): Promise<boolean> {
  const other = LOCKS[kind](db.server.connection);
  try {
    const r = await other.acquire(resource);
    return r.kind === 'granted';
  } finally {
    await other.close();
  }
}

describe.each(['session', 'transaction'] as const)('PostgreSQL %s lock closed with a call in flight', (kind) => {
  it('an acquire whose statement is out when close() comes: granted with its signal fired (connection-lost), nothing held', async () => {
    const lock = LOCKS[kind](db.server.connection);
    // A connection open and idle (the transaction lock keeps it for the next acquire), so the acquire's statements go out at once.
    const warm = await lock.acquire('warm');
    if (warm.kind !== 'granted') throw new Error(`warm: ${warm.kind}`);
    await lock.release(warm.lease);
    const pending = lock.acquire('shared-at-close');
    await lock.close();
    const result = await pending;
    if (result.kind !== 'granted') throw new Error(`expected the grant the server sent, got ${result.kind}`);
    expect(result.lease.signal.aborted).toBe(true);
    expect(result.lease.signal.reason).toBeInstanceOf(LeaseLostError);
    expect((result.lease.signal.reason as LeaseLostError).reason).toBe('connection-lost');
    expect(await freeFor(kind, 'shared-at-close')).toBe(true);
  });

  it('an acquire waiting for the first connection when close() comes: rejects with precondition; the connection is ended by the time close() resolves, and the lock is free', async () => {
    const name = `lc_close_connect_${kind}`;
    const lock = LOCKS[kind]({ ...db.server.connection, application_name: name });
    const pending = lock.acquire('first-at-close').then(
      (r) => r,
      (e: unknown) => e,
    );
    await lock.close();
    const outcome = await pending;
    expect(outcome).toBeInstanceOf(InvalidInputError);
    expect(outcome).toMatchObject({ code: 'precondition' });
    expect(await backendsLeft(name)).toBe(0);
    expect(await freeFor(kind, 'first-at-close')).toBe(true);
  });

  it('an acquire with retries closed between its attempts: rejects with precondition, not denied', async () => {
    const holder = LOCKS[kind](db.server.connection);
    const lock = LOCKS[kind](db.server.connection);
    try {
      expect((await holder.acquire('retried-at-close')).kind).toBe('granted');
      // Connected (and idle), so the first attempt goes out at once and is denied; the retry comes after close().
      const warm = await lock.acquire('warm-retries');
      if (warm.kind !== 'granted') throw new Error(`warm: ${warm.kind}`);
      await lock.release(warm.lease);
      const pending = lock.acquire('retried-at-close', { retries: 100, retryDelayMs: 1 }).then(
        (r) => r,
        (e: unknown) => e,
      );
      await lock.close();
      const outcome = await pending;
      expect(outcome, JSON.stringify(outcome)).toBeInstanceOf(InvalidInputError);
      expect(outcome).toMatchObject({ code: 'precondition', message: 'precondition: the lock was closed' });
    } finally {
      await holder.close();
      await lock.close();
    }
  });
});

describe('PostgresTransactionLock.withLock on a closed lock', () => {
  it('rejects with precondition, never runs fn, and opens no connection', async () => {
    const name = 'lc_withlock_closed';
    const lock = new PostgresTransactionLock({ connection: { ...db.server.connection, application_name: name }, statementTimeoutMs: 5_000 });
    await lock.close();
    let ran = false;
    const outcome: unknown = await lock
      .withLock('r', 100, async () => {
        ran = true;
      })
      .then(
        () => 'resolved',
        (e: unknown) => e,
      );
    expect(outcome).toBeInstanceOf(InvalidInputError);
    expect(outcome).toMatchObject({ code: 'precondition' });
    expect(ran).toBe(false);
    expect(lock.backendPids).toEqual([]);
    expect(await backendsLeft(name)).toBe(0);
  });

  it('closed while its connection opens: rejects with precondition, fn not run, the connection ended by the time close() resolves', async () => {
    const name = 'lc_withlock_closing';
    const lock = new PostgresTransactionLock({ connection: { ...db.server.connection, application_name: name }, statementTimeoutMs: 5_000 });
    let ran = false;
    const pending = lock
      .withLock('r', 100, async () => {
        ran = true;
      })
      .then(
        () => 'resolved',
        (e: unknown) => e,
      );
    await lock.close();
    const outcome = await pending;
    expect(outcome).toMatchObject({ code: 'precondition' });
    expect(ran).toBe(false);
    expect(await backendsLeft(name)).toBe(0);
  });
});

describe('PostgresTransactionLock.withLock: the lease fn holds fires as acquire\'s do', () => {
  it('close() while fn runs: the lease\'s signal fires (released) before close() resolves', async () => {
    const lock = new PostgresTransactionLock({ connection: db.server.connection, statementTimeoutMs: 5_000 });
    let aborted: boolean | undefined;
    const outcome: unknown = await lock
      .withLock('closed-under-fn', 100, async (_tx, lease) => {
        await lock.close();
        aborted = lease.signal.aborted;
      })
      .then(
        () => 'resolved',
        (e: unknown) => e,
      );
    expect(aborted).toBe(true);
    // The COMMIT could not be sent on the closed connection: its outcome is said, typed.
    expect(outcome).not.toBe('resolved');
  });

  it('the connection lost while fn runs (its backend terminated): the lease\'s signal fires (connection-lost)', async () => {
    const lock = new PostgresTransactionLock({ connection: db.server.connection, statementTimeoutMs: 5_000 });
    try {
      let reason: unknown;
      await lock
        .withLock('lost-under-fn', 100, async (tx, lease) => {
          const pid = (await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
          const fired = new Promise<void>((resolve) => lease.signal.addEventListener('abort', () => resolve(), { once: true }));
          await db.admin.query('SELECT pg_terminate_backend($1)', [pid]);
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([fired, new Promise((resolve) => (timer = setTimeout(resolve, 5_000)))]);
          clearTimeout(timer);
          reason = lease.signal.reason;
        })
        .catch(() => undefined);
      expect(reason).toBeInstanceOf(LeaseLostError);
      expect((reason as LeaseLostError).reason).toBe('connection-lost');
    } finally {
      await lock.close();
    }
  });
});

describe('openPostgresFencedStore closed with a call in flight', () => {
  // The wire client, and node-postgres (which a password function selects): its abandoned connect failed as "Connection terminated unexpectedly", an UnavailableError.
  it.each([
    ['the wire client', {}],
    ['node-postgres', { password: () => String(db.server.connection.password) }],
  ] as const)('%s: a write waiting for the first connection when close() comes: rejects with precondition, nothing written, the connection ended by the time close() resolves', async (driver, extra) => {
    const name = `lc_store_close_${driver === 'node-postgres' ? 'pg' : 'wire'}`;
    const store = openPostgresFencedStore({ connection: { ...db.server.connection, application_name: name, ...extra }, statementTimeoutMs: 5_000 }, 'strict');
    const pending = store.write('store-at-close', 7n, 'v').then(
      (r) => r,
      (e: unknown) => e,
    );
    await store.close();
    const outcome = await pending;
    expect(outcome).toBeInstanceOf(InvalidInputError);
    expect(outcome).toMatchObject({ code: 'precondition' });
    expect(await backendsLeft(name)).toBe(0);
    await expect(store.read('store-at-close')).rejects.toMatchObject({ code: 'precondition' });
  });
});
