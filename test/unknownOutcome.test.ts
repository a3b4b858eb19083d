import { inspect } from 'node:util';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { withPostgres } from './postgresFixture.ts';
import { TcpProxy } from '../conformance/env/proxy.ts';
import { TokenOverflowError, UnavailableError } from '../impl/errors.ts';
import type { AcquireResult } from '../impl/leaseLock.ts';
import { PostgresSessionLock, type SessionAcquireOptions } from '../impl/postgres/sessionLock.ts';
import { PostgresTransactionLock } from '../impl/postgres/xactLock.ts';

/**
 * spec "Unknown outcomes": a reply slower than the client's statement timeout
 * must never leave a lock held behind a denial. The lock client reaches a
 * real server through a TCP proxy; once connected, the proxy delays every
 * byte by more than the timeout. The client must say the outcome is unknown
 * (timed-out) and end the session, so that pg_locks is empty again and
 * another client gets the lock.
 */
const TIMEOUT_MS = 300;
const DELAY_MS = 1_500;

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
 * The grant before the fault: bounded by the short statement timeout, it can
 * time out on a loaded machine (connect, schema and statement within 300 ms);
 * a timed-out attempt ends its session, so the next one starts clean (its
 * lock may linger until the server sees the close: a denial is retried, up
 * to 20 times 50 ms apart). Setup only: at most five tries.
 */
async function grantedBeforeTheFault(lock: { acquire(resource: string, options: SessionAcquireOptions): Promise<AcquireResult> }, resource: string): Promise<AcquireResult> {
  const again = { retries: 20, retryDelayMs: 50 };
  let r = await lock.acquire(resource, again);
  for (let tries = 1; r.kind === 'timed-out' && tries < 5; tries++) r = await lock.acquire(resource, again);
  return r;
}

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
        const first = await grantedBeforeTheFault(lock, 'unknown-a');
        expect(first.kind).toBe('granted');
        proxy.setMode({ kind: 'delay', ms: DELAY_MS });
        const slow = await lock.acquire('unknown-b');
        expect(slow).toEqual({ kind: 'timed-out' });
        // The session is gone: the lease it held says so, and the server frees both locks.
        expect(first.kind === 'granted' && first.lease.signal.aborted).toBe(true);
        expect(await locksAfter(DELAY_MS * 4)).toBe(0);
        expect((await other.acquire('unknown-b')).kind).toBe('granted');
      } finally {
        await Promise.all([lock.close(), other.close()]);
      }
    });
  }, 30_000);

  it('session lock: a release answered after the timeout throws and ends the session, so the lock is freed', async () => {
    await viaProxy(async (proxy, connection) => {
      const lock = new PostgresSessionLock({ connection, statementTimeoutMs: TIMEOUT_MS });
      try {
        const r = await grantedBeforeTheFault(lock, 'unknown-c');
        if (r.kind !== 'granted') throw new Error(`not granted: ${r.kind}`);
        proxy.setMode({ kind: 'delay', ms: DELAY_MS });
        await expect(lock.release(r.lease)).rejects.toBeInstanceOf(UnavailableError);
        expect(await locksAfter(DELAY_MS * 4)).toBe(0);
      } finally {
        await lock.close();
      }
    });
  }, 30_000);

  it('transaction lock: an acquire answered after the timeout returns timed-out and leaves no lock held', async () => {
    await viaProxy(async (proxy, connection) => {
      const lock = new PostgresTransactionLock({ connection, statementTimeoutMs: TIMEOUT_MS });
      try {
        const warm = await grantedBeforeTheFault(lock, 'unknown-d');
        if (warm.kind !== 'granted') throw new Error(`not granted: ${warm.kind}`);
        await lock.release(warm.lease);
        proxy.setMode({ kind: 'delay', ms: DELAY_MS });
        expect(await lock.acquire('unknown-e')).toEqual({ kind: 'timed-out' });
        expect(await locksAfter(DELAY_MS * 4)).toBe(0);
      } finally {
        await lock.close();
      }
    });
  }, 30_000);
});
