import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { PostgresServer } from '../../conformance/env/postgresServer.ts';
import { TimeoutError, UnavailableError } from '../../impl/errors.ts';
import { ensureSchema, openPostgresFencedStore, PostgresSessionLock, PostgresTransactionLock, postgresFencedStore } from '../../impl/postgres/index.ts';
import { LockNotAcquiredError } from '../../impl/using.ts';
import { InvalidInputError } from '../../model/errors.ts';
import { acceptedBeforeTheFault, backToBaseline, grantedBeforeTheFault, rejectsWithin, resolvesWithin, settles, steadyResources, until, waiterInLine } from './blackhole.ts';

/**
 * The PostgreSQL lock clients and fenced store under a black hole: the
 * postmaster and every backend paused with SIGSTOP (connects complete in the
 * kernel's backlog, nothing answers), and the server killed with calls in
 * flight. Every call settles within its statement timeout (a generous 10x
 * bound: a loaded machine), typed as docs/errors.md and docs/postgres.md say,
 * and close() then leaves no handle.
 */
const TIMEOUT_MS = 300;
const BOUND_MS = 10 * TIMEOUT_MS + 2000;

let server: PostgresServer;
beforeAll(async () => {
  server = await PostgresServer.start({ parentDir: '/dev/shm' });
  const admin = new pg.Client({ ...server.connection, connectionTimeoutMillis: 5_000 });
  await admin.connect();
  await ensureSchema(admin);
  await admin.end();
}, 120_000);
afterAll(async () => {
  if (server?.paused) server.resume();
  await server?.stop();
});

/** Client backends on the server now (this query's own excluded). */
async function backends(): Promise<number> {
  const admin = new pg.Client({ ...server.connection, connectionTimeoutMillis: 5_000, query_timeout: 5_000 });
  await admin.connect();
  try {
    return (await admin.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")).rows[0]!.n;
  } finally {
    await admin.end();
  }
}

async function whilePaused(fn: () => Promise<void>): Promise<void> {
  try {
    server.pause();
    await fn();
  } finally {
    if (server.paused) server.resume();
  }
}

// Every test leaves the server as many client backends as it found: a connect or session a client gave up on while the
// server was silent is gone once it answers (the backend it forked finds its socket closed).
let backendsBefore = 0;
beforeEach(async () => {
  backendsBefore = await backends();
});
afterEach(async () => {
  let now = -1;
  await until(`client backends back to ${backendsBefore}`, async () => (now = await backends()) === backendsBefore).catch((e: unknown) => {
    throw new Error(`${now} client backends left, ${backendsBefore} before`, { cause: e });
  });
});

/** An outcome the docs allow for a call with no reply: timed-out, or denied no-quorum. */
const NO_REPLY = [{ kind: 'timed-out' }, { kind: 'denied', reason: 'no-quorum' }];
const typedOutage = (e: unknown): boolean => e instanceof TimeoutError || e instanceof UnavailableError;

describe('PostgreSQL paused (SIGSTOP)', () => {
  it('session lock: acquire on a live connection, release, a fresh connect, close settle typed; no handle left', async () => {
    const baseline = await steadyResources();
    const lock = new PostgresSessionLock({ connection: server.connection, statementTimeoutMs: TIMEOUT_MS });
    const held = await grantedBeforeTheFault('acquire', 's-held', (r) => lock.acquire(r));
    await whilePaused(async () => {
      expect(NO_REPLY).toContainEqual(await resolvesWithin('acquire', lock.acquire('s-r'), BOUND_MS));
      const fresh = new PostgresSessionLock({ connection: server.connection, statementTimeoutMs: TIMEOUT_MS });
      expect(NO_REPLY).toContainEqual(await resolvesWithin('acquire (connect)', fresh.acquire('s-f'), BOUND_MS));
      await resolvesWithin('close (fresh)', fresh.close(), BOUND_MS);
      const release = await settles('release', lock.release(held.lease), BOUND_MS);
      if (!release.ok) expect(typedOutage(release.error), String(release.error)).toBe(true);
      await resolvesWithin('close', lock.close(), BOUND_MS);
    });
    await backToBaseline(baseline);
  });

  it('session lock: close() with the server silent, a lease held, settles', async () => {
    const baseline = await steadyResources();
    const lock = new PostgresSessionLock({ connection: server.connection, statementTimeoutMs: TIMEOUT_MS });
    await grantedBeforeTheFault('acquire', 's-close', (r) => lock.acquire(r));
    await whilePaused(async () => {
      await resolvesWithin('close', lock.close(), BOUND_MS);
    });
    await backToBaseline(baseline);
  });

  it('transaction lock: acquire, commit, rollback, withLock, a fresh connect, close settle typed; no handle left', async () => {
    const baseline = await steadyResources();
    const lock = new PostgresTransactionLock({ connection: server.connection, statementTimeoutMs: TIMEOUT_MS });
    const a = await grantedBeforeTheFault('acquire', 'x-a', (r) => lock.acquire(r));
    const b = await grantedBeforeTheFault('acquire', 'x-b', (r) => lock.acquire(r));
    const inTx = postgresFencedStore(lock.queryable(a.lease), 'strict');
    await whilePaused(async () => {
      expect(NO_REPLY).toContainEqual(await resolvesWithin('acquire', lock.acquire('x-r'), BOUND_MS));
      const inTxError = await rejectsWithin('store write in the transaction', inTx.write('x-c', 1n, 'v'), BOUND_MS);
      // On the caller's client a failure comes as it came (docs/postgres.md, "The fenced store"): here node-postgres's
      // own read timeout, which the transaction lock sets on its connections.
      expect(inTxError).toBeInstanceOf(Error);
      expect((inTxError as Error).message).toBe('Query read timeout');
      const commit = await settles('release (COMMIT)', lock.release(a.lease), BOUND_MS);
      if (!commit.ok) expect(typedOutage(commit.error), String(commit.error)).toBe(true);
      const rollback = await settles('rollback', lock.rollback(b.lease), BOUND_MS);
      if (!rollback.ok) expect(typedOutage(rollback.error), String(rollback.error)).toBe(true);
      const w = await rejectsWithin('withLock', lock.withLock('x-w', 100, async () => 'ran'), BOUND_MS);
      expect(typedOutage(w), String(w)).toBe(true);
      const fresh = new PostgresTransactionLock({ connection: server.connection, statementTimeoutMs: TIMEOUT_MS });
      expect(NO_REPLY).toContainEqual(await resolvesWithin('acquire (connect)', fresh.acquire('x-f'), BOUND_MS));
      await resolvesWithin('close (fresh)', fresh.close(), BOUND_MS);
      await resolvesWithin('close', lock.close(), BOUND_MS);
    });
    await backToBaseline(baseline);
  });

  it('transaction lock: withLock waiting for a held lock when the server pauses settles typed within its wait and the timeout', async () => {
    const baseline = await steadyResources();
    const holder = new PostgresSessionLock({ connection: server.connection, statementTimeoutMs: TIMEOUT_MS });
    const lock = new PostgresTransactionLock({ connection: server.connection, statementTimeoutMs: TIMEOUT_MS });
    const { resource } = await grantedBeforeTheFault('holder acquire', 'x-wait', (r) => holder.acquire(r));
    const WAIT_MS = 2000;
    const wait = () => rejectsWithin('withLock', lock.withLock(resource, WAIT_MS, async () => 'ran'), 10 * WAIT_MS + BOUND_MS);
    const admin = new pg.Client({ ...server.connection, connectionTimeoutMillis: 5_000, query_timeout: 5_000 });
    await admin.connect();
    let waiting: Promise<unknown>;
    try {
      // The wait's connect and its lock statement are setup on the live server too (waiterInLine).
      ({ waiting } = await waiterInLine('withLock waits for the lock', wait(), async () => (await admin.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")).rows[0]!.n === 1, wait));
    } finally {
      await admin.end();
    }
    await whilePaused(async () => {
      const e = await waiting;
      expect(typedOutage(e) || e instanceof LockNotAcquiredError, String(e)).toBe(true);
      await resolvesWithin('close', lock.close(), BOUND_MS);
      await resolvesWithin('holder close', holder.close(), BOUND_MS);
    });
    await backToBaseline(baseline);
  });

  it('transaction lock: close() with the server silent, a transaction open, settles', async () => {
    const baseline = await steadyResources();
    const lock = new PostgresTransactionLock({ connection: server.connection, statementTimeoutMs: TIMEOUT_MS });
    await grantedBeforeTheFault('acquire', 'x-close', (r) => lock.acquire(r));
    await whilePaused(async () => {
      await resolvesWithin('close', lock.close(), BOUND_MS);
    });
    await backToBaseline(baseline);
  });

  it('fenced store: write, read on a live connection and on a fresh one, close settle typed; no handle left', async () => {
    const baseline = await steadyResources();
    const store = openPostgresFencedStore({ connection: server.connection, statementTimeoutMs: TIMEOUT_MS }, 'strict');
    const key = await acceptedBeforeTheFault('store write', 'p-c', (k) => store.write(k, 1n, 'v'));
    await whilePaused(async () => {
      expect(await rejectsWithin('write', store.write(key, 2n, 'w'), BOUND_MS)).toBeInstanceOf(TimeoutError);
      const r = await rejectsWithin('read', store.read(key), BOUND_MS);
      expect(typedOutage(r), String(r)).toBe(true);
      const fresh = openPostgresFencedStore({ connection: server.connection, statementTimeoutMs: TIMEOUT_MS }, 'strict');
      expect(await rejectsWithin('write (connect)', fresh.write(key, 3n, 'x'), BOUND_MS)).toBeInstanceOf(TimeoutError);
      await resolvesWithin('close (fresh)', fresh.close(), BOUND_MS);
      await resolvesWithin('close', store.close(), BOUND_MS);
    });
    await backToBaseline(baseline);
  });

  it('calls on node-postgres (a configuration the wire client does not take) settle the same', async () => {
    const baseline = await steadyResources();
    // A password function: the session lock and the store run on node-postgres then (docs/postgres.md, "Driver").
    const connection = { ...server.connection, password: async () => server.connection.password };
    const lock = new PostgresSessionLock({ connection, statementTimeoutMs: TIMEOUT_MS });
    const store = openPostgresFencedStore({ connection, statementTimeoutMs: TIMEOUT_MS }, 'strict');
    const held = await grantedBeforeTheFault('acquire', 'n-held', (r) => lock.acquire(r));
    const key = await acceptedBeforeTheFault('store write', 'n-c', (k) => store.write(k, 1n, 'v'));
    await whilePaused(async () => {
      expect(NO_REPLY).toContainEqual(await resolvesWithin('acquire', lock.acquire('n-r'), BOUND_MS));
      expect(await rejectsWithin('write', store.write(key, 2n, 'w'), BOUND_MS)).toBeInstanceOf(TimeoutError);
      const fresh = new PostgresSessionLock({ connection, statementTimeoutMs: TIMEOUT_MS });
      expect(NO_REPLY).toContainEqual(await resolvesWithin('acquire (connect)', fresh.acquire('n-f'), BOUND_MS));
      await resolvesWithin('close (fresh)', fresh.close(), BOUND_MS);
      const release = await settles('release', lock.release(held.lease), BOUND_MS);
      if (!release.ok) expect(typedOutage(release.error), String(release.error)).toBe(true);
      await resolvesWithin('close', lock.close(), BOUND_MS);
      await resolvesWithin('store close', store.close(), BOUND_MS);
    });
    await backToBaseline(baseline);
  });
});

describe('PostgreSQL paused: close() with calls in flight', () => {
  it('each client closed while its calls wait on the silent server: the calls and the close settle; no handle left', async () => {
    const baseline = await steadyResources();
    const session = new PostgresSessionLock({ connection: server.connection, statementTimeoutMs: TIMEOUT_MS });
    const xact = new PostgresTransactionLock({ connection: server.connection, statementTimeoutMs: TIMEOUT_MS });
    const store = openPostgresFencedStore({ connection: server.connection, statementTimeoutMs: TIMEOUT_MS }, 'strict');
    await grantedBeforeTheFault('session acquire', 'cl-held', (r) => session.acquire(r));
    await grantedBeforeTheFault('transaction acquire', 'cl-tx', (r) => xact.acquire(r));
    const key = await acceptedBeforeTheFault('store write', 'cl-c', (k) => store.write(k, 1n, 'v'));
    const fresh = new PostgresSessionLock({ connection: server.connection, statementTimeoutMs: TIMEOUT_MS });
    const freshStore = openPostgresFencedStore({ connection: server.connection, statementTimeoutMs: TIMEOUT_MS }, 'strict');
    await whilePaused(async () => {
      const calls = [
        settles('session acquire', session.acquire('cl-s'), BOUND_MS),
        settles('transaction acquire', xact.acquire('cl-x'), BOUND_MS),
        settles('store write', store.write(key, 2n, 'w'), BOUND_MS),
        settles('fresh acquire (connecting)', fresh.acquire('cl-f'), BOUND_MS),
        settles('fresh store write (connecting)', freshStore.write(key, 3n, 'x'), BOUND_MS),
      ];
      await Promise.all([session.close(), xact.close(), store.close(), fresh.close(), freshStore.close()].map((p, i) => resolvesWithin(`close ${i}`, p, BOUND_MS)));
      for (const c of await Promise.all(calls)) {
        if (!c.ok) expect(typedOutage(c.error) || c.error instanceof InvalidInputError, String(c.error)).toBe(true);
      }
    });
    await backToBaseline(baseline);
  });
});

describe('PostgreSQL killed with calls in flight', () => {
  it('every call in flight settles typed; the next ones too; close leaves no handle', async () => {
    const baseline = await steadyResources();
    const session = new PostgresSessionLock({ connection: server.connection, statementTimeoutMs: TIMEOUT_MS });
    const xact = new PostgresTransactionLock({ connection: server.connection, statementTimeoutMs: TIMEOUT_MS });
    const store = openPostgresFencedStore({ connection: server.connection, statementTimeoutMs: TIMEOUT_MS }, 'strict');
    const held = await grantedBeforeTheFault('session acquire', 'k-held', (r) => session.acquire(r));
    const tx = await grantedBeforeTheFault('transaction acquire', 'k-tx', (r) => xact.acquire(r));
    const key = await acceptedBeforeTheFault('store write', 'k-c', (k) => store.write(k, 1n, 'v'));
    try {
      server.pause();
      const calls = {
        sessionAcquire: resolvesWithin('session acquire', session.acquire('k-s'), BOUND_MS),
        xactAcquire: resolvesWithin('transaction acquire', xact.acquire('k-x'), BOUND_MS),
        write: rejectsWithin('store write', store.write(key, 2n, 'w'), BOUND_MS),
        commit: settles('commit', xact.release(tx.lease), BOUND_MS),
      };
      await server.crash();
      expect(NO_REPLY).toContainEqual(await calls.sessionAcquire);
      expect(NO_REPLY).toContainEqual(await calls.xactAcquire);
      expect(typedOutage(await calls.write)).toBe(true);
      const commit = await calls.commit;
      if (!commit.ok) expect(typedOutage(commit.error), String(commit.error)).toBe(true);
      // The server down: the next calls (each a fresh connect, refused) settle too.
      expect(NO_REPLY).toContainEqual(await resolvesWithin('session acquire (down)', session.acquire('k-s2'), BOUND_MS));
      expect(NO_REPLY).toContainEqual(await resolvesWithin('transaction acquire (down)', xact.acquire('k-x2'), BOUND_MS));
      const down = await rejectsWithin('store write (down)', store.write(key, 3n, 'x'), BOUND_MS);
      expect(typedOutage(down) || down instanceof InvalidInputError, String(down)).toBe(true);
      const release = await settles('release (down)', session.release(held.lease), BOUND_MS);
      if (!release.ok) expect(typedOutage(release.error), String(release.error)).toBe(true);
      await resolvesWithin('session close', session.close(), BOUND_MS);
      await resolvesWithin('transaction close', xact.close(), BOUND_MS);
      await resolvesWithin('store close', store.close(), BOUND_MS);
    } finally {
      await server.restart();
    }
    await backToBaseline(baseline);
  });
});
