import { inspect } from 'node:util';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { withPostgres } from './postgresFixture.ts';
import { TcpProxy } from '../conformance/env/proxy.ts';
import { TokenOverflowError, UnavailableError } from '../impl/errors.ts';
import type { AcquireResult } from '../impl/leaseLock.ts';
import { PostgresSessionLock, type SessionAcquireOptions } from '../impl/postgres/sessionLock.ts';
import { PostgresTransactionLock } from '../impl/postgres/xactLock.ts';
import { grantedBeforeTheFault, SETUP_BOUND_MS } from './impl/blackhole.ts';

/**
 * spec "Unknown outcomes": a reply slower than the client's statement timeout
 * must never leave a lock held behind a denial. The lock client reaches a
 * real server through a TCP proxy; once connected, the proxy delays every
 * byte by more than the timeout. The client must say the outcome is unknown
 * (timed-out) and end the session, so that pg_locks is empty again and
 * another client gets the lock.
 */
/**
 * The lock's bound, and the delay each way: a reply comes 2 x DELAY_MS after
 * its request at the earliest (the proxy's timers and the client's run in this
 * process, in order), so the bound always passes first, however loaded the
 * machine. The bound is no shorter: it also bounds the grant before the fault
 * on a healthy server, which a loaded machine took past 300 ms every time for
 * 30 s (each attempt given up on left the next one waiting on the server).
 */
const TIMEOUT_MS = 1_000;
const DELAY_MS = 2_000;

const db = withPostgres();

async function advisoryLocks(): Promise<number> {
  const r = await db.admin.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND pid <> pg_backend_pid()");
  return r.rows[0]!.n;
}

/** Polls until pg_locks holds no advisory lock, up to `ms`; returns the last count. */
async function locksAfter(ms: number): Promise<number> {
  const deadline = Date.now() + ms;
  for (;;) {
    const n = await advisoryLocks();
    if (n === 0 || Date.now() >= deadline) return n;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/**
 * The grant before the fault, on the lock under test. Its statement timeout
 * (connect, schema and statement within TIMEOUT_MS) can still be outlasted by
 * a loaded machine against a healthy server: blackhole.ts's
 * grantedBeforeTheFault tries again, on a fresh name, for up to
 * SETUP_BOUND_MS (five tries in a row timed out at 300 ms, load 25). Setup
 * only: what is judged comes after the fault.
 */
const grantBeforeTheFault = (lock: { acquire(resource: string, options: SessionAcquireOptions): Promise<AcquireResult> }, resource: string) =>
  grantedBeforeTheFault(`the grant of '${resource}' before the fault`, resource, (name) => lock.acquire(name, { retries: 20, retryDelayMs: 50 }));

async function viaProxy<T>(fn: (proxy: TcpProxy, connection: pg.ClientConfig) => Promise<T>): Promise<T> {
  const proxy = await TcpProxy.start({ host: db.server.host, port: db.server.port });
  try {
    return await fn(proxy, { ...db.server.connection, host: proxy.host, port: proxy.port });
  } finally {
    await proxy.close();
  }
}

describe('typed errors on a real PostgreSQL server', () => {
  it('a wrong password is a ConnectionConfigError, not no-quorum', async () => {
    const lock = new PostgresSessionLock({ connection: { ...db.server.connection, password: 'wrong-pw-904413' } });
    try {
      const e = await lock.acquire('r').then(() => null, (error: unknown) => error);
      expect(e).toMatchObject({ name: 'ConnectionConfigError', code: 'authentication' });
      // Printed whole, causes and properties included, the error holds neither password.
      expect(inspect(e, { depth: 20, showHidden: true })).not.toMatch(new RegExp(`wrong-pw-904413|${db.server.connection.password}`));
    } finally {
      await lock.close();
    }
  });

  it('a token sequence at 2^63-1 is a TokenOverflowError, and the lock is not left held', async () => {
    const lock = new PostgresSessionLock({ connection: db.server.connection });
    try {
      const warm = await lock.acquire('warm-up');
      if (warm.kind === 'granted') await lock.release(warm.lease);
      await db.admin.query("INSERT INTO lockcheck_tokens VALUES ('full', 9223372036854775807) ON CONFLICT (resource) DO UPDATE SET token = excluded.token");
      await expect(lock.acquire('full')).rejects.toBeInstanceOf(TokenOverflowError);
      expect(await locksAfter(5_000)).toBe(0);
    } finally {
      await lock.close();
    }
  });
});

describe('unknown outcomes fail safe on a real server', () => {
  it('session lock: an acquire answered after the timeout returns timed-out, ends the session, and leaves no lock held', async () => {
    await viaProxy(async (proxy, connection) => {
      const lock = new PostgresSessionLock({ connection, statementTimeoutMs: TIMEOUT_MS });
      const other = new PostgresSessionLock({ connection: db.server.connection });
      try {
        const { lease: first } = await grantBeforeTheFault(lock, 'unknown-a');
        proxy.setMode({ kind: 'delay', ms: DELAY_MS });
        const slow = await lock.acquire('unknown-b');
        expect(slow).toEqual({ kind: 'timed-out' });
        // The session is gone: the lease it held says so, and the server frees both locks.
        expect(first.signal.aborted).toBe(true);
        expect(await locksAfter(DELAY_MS * 4)).toBe(0);
        expect((await other.acquire('unknown-b')).kind).toBe('granted');
      } finally {
        await Promise.all([lock.close(), other.close()]);
      }
    });
  }, SETUP_BOUND_MS + 30_000);

  it('session lock: a release answered after the timeout throws and ends the session, so the lock is freed', async () => {
    await viaProxy(async (proxy, connection) => {
      const lock = new PostgresSessionLock({ connection, statementTimeoutMs: TIMEOUT_MS });
      try {
        const { lease } = await grantBeforeTheFault(lock, 'unknown-c');
        proxy.setMode({ kind: 'delay', ms: DELAY_MS });
        await expect(lock.release(lease)).rejects.toBeInstanceOf(UnavailableError);
        expect(await locksAfter(DELAY_MS * 4)).toBe(0);
      } finally {
        await lock.close();
      }
    });
  }, SETUP_BOUND_MS + 30_000);

  it('transaction lock: an acquire answered after the timeout returns timed-out and leaves no lock held', async () => {
    await viaProxy(async (proxy, connection) => {
      const lock = new PostgresTransactionLock({ connection, statementTimeoutMs: TIMEOUT_MS });
      try {
        const { lease: warm } = await grantBeforeTheFault(lock, 'unknown-d');
        await lock.release(warm);
        proxy.setMode({ kind: 'delay', ms: DELAY_MS });
        expect(await lock.acquire('unknown-e')).toEqual({ kind: 'timed-out' });
        expect(await locksAfter(DELAY_MS * 4)).toBe(0);
      } finally {
        await lock.close();
      }
    });
  }, SETUP_BOUND_MS + 30_000);
});
