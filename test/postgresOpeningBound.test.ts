import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { MonotonicClock } from '../impl/clock.ts';
import { PostgresSessionLock } from '../impl/postgres/sessionLock.ts';
import { openPostgresFencedStore } from '../impl/postgres/store.ts';
import { PostgresTransactionLock } from '../impl/postgres/xactLock.ts';
import { ManualClock } from './impl/servers.ts';
import { withPostgres } from './postgresFixture.ts';

/**
 * A connection's opening (connect, SCRAM, the schema on a fresh backend) is
 * bounded by `connectionTimeoutMillis` when the configuration sets one, not
 * cut at `statementTimeoutMs`: a connect costs far more than a statement, and
 * at load 25 a PostgresTransactionLock with a 300 ms statement timeout timed
 * out 84 attempts in a row on a healthy server, each one a new connect given
 * up at 300 ms (a timed-out attempt drops its connection, so the next one
 * connects again), whatever connectionTimeoutMillis said.
 *
 * Deterministic: the lock's clock jumps past the statement timeout just after
 * its first timer is armed, while the connect is out (a connect needs I/O, so
 * no microtask finishes it first). Cut at the statement timeout, the opening
 * times out; bounded by connectionTimeoutMillis, it opens, and the statement
 * after it, armed after the jump, is answered within its own bound.
 */
const STATEMENT_MS = 1_000;
const CONNECT_MS = 60_000;

const db = withPostgres();

/** A ManualClock that jumps STATEMENT_MS + 1 once, in the microtask after its first timer is armed. */
function jumpingClock(): MonotonicClock {
  const clock = new ManualClock();
  let jumped = false;
  return {
    now: () => clock.now(),
    schedule(atMs, fn) {
      const cancel = clock.schedule(atMs, fn);
      if (!jumped) {
        jumped = true;
        queueMicrotask(() => clock.advance(STATEMENT_MS + 1));
      }
      return cancel;
    },
  };
}

const connection = (driver: 'wire' | 'node-postgres'): pg.ClientConfig => ({
  ...db.server.connection,
  connectionTimeoutMillis: CONNECT_MS,
  // A password function selects node-postgres for the session lock and the store (the transaction lock is on it always).
  ...(driver === 'node-postgres' ? { password: () => String(db.server.connection.password) } : {}),
});

describe('opening a connection is bounded by connectionTimeoutMillis, not the statement timeout', () => {
  for (const driver of ['wire', 'node-postgres'] as const) {
    it(`session lock (${driver})`, async () => {
      const lock = new PostgresSessionLock({ connection: connection(driver), statementTimeoutMs: STATEMENT_MS, clock: jumpingClock() });
      try {
        const r = await lock.acquire(`opening-session-${driver}`);
        expect(r.kind).toBe('granted');
        if (r.kind === 'granted') await lock.release(r.lease);
      } finally {
        await lock.close();
      }
    });

    it(`fenced store (${driver})`, async () => {
      const store = openPostgresFencedStore({ connection: connection(driver), statementTimeoutMs: STATEMENT_MS, clock: jumpingClock() }, 'strict');
      try {
        expect((await store.write(`opening-store-${driver}`, 1n, 'v')).kind).toBe('accepted');
      } finally {
        await store.close();
      }
    });
  }

  it('transaction lock', async () => {
    const lock = new PostgresTransactionLock({ connection: connection('wire'), statementTimeoutMs: STATEMENT_MS, clock: jumpingClock() });
    try {
      const r = await lock.acquire('opening-xact');
      expect(r.kind).toBe('granted');
      if (r.kind === 'granted') await lock.release(r.lease);
    } finally {
      await lock.close();
    }
  });

  it('without connectionTimeoutMillis the opening keeps the statement timeout as its bound (nothing unbounded)', async () => {
    const { connectionTimeoutMillis: _, ...plain } = connection('wire');
    const lock = new PostgresTransactionLock({ connection: plain, statementTimeoutMs: STATEMENT_MS, clock: jumpingClock() });
    try {
      expect(await lock.acquire('opening-plain')).toEqual({ kind: 'timed-out' });
    } finally {
      await lock.close();
    }
  });
});
