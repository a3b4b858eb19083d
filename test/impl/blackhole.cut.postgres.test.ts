import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresServer } from '../../conformance/env/postgresServer.ts';
import { TimeoutError, UnavailableError } from '../../impl/errors.ts';
import { ensureSchema, openPostgresFencedStore, PostgresSessionLock, PostgresTransactionLock } from '../../impl/postgres/index.ts';
import { backToBaseline, cutPoints, CutProxy, resolvesWithin, settles, steadyResources, uncutBytes } from './blackhole.ts';

/**
 * The PostgreSQL clients meeting a server that goes silent at every point of
 * the connection's start-up (SCRAM exchange, parameter statuses, the first
 * statement's reply): a proxy passes the server's first N bytes and then
 * nothing, keeping the connection open. Each acquire and store call settles
 * typed within the statement timeout (10x, loaded machine), and close()
 * leaves no handle.
 */
const TIMEOUT_MS = 300;
const BOUND_MS = 10 * TIMEOUT_MS + 2000;

let server: PostgresServer;
let proxy: CutProxy;
beforeAll(async () => {
  server = await PostgresServer.start({ parentDir: '/dev/shm' });
  const admin = new pg.Client({ ...server.connection, connectionTimeoutMillis: 5_000 });
  await admin.connect();
  await ensureSchema(admin);
  await admin.end();
  proxy = await CutProxy.start({ host: server.connection.host, port: server.connection.port });
}, 120_000);
afterAll(async () => {
  await proxy?.close();
  await server?.stop();
});

const NO_REPLY = [{ kind: 'timed-out' }, { kind: 'denied', reason: 'no-quorum' }];
const typedOutage = (e: unknown): boolean => e instanceof TimeoutError || e instanceof UnavailableError;

type Client = { run(resource: string): Promise<unknown>; close(): Promise<void>; check(outcome: Awaited<ReturnType<typeof settles>>): void };
const clients: Record<string, (connection: pg.ClientConfig) => Client> = {
  'session lock (wire client)': (connection) => {
    const lock = new PostgresSessionLock({ connection, statementTimeoutMs: TIMEOUT_MS });
    return { run: (r) => lock.acquire(r), close: () => lock.close(), check: (o) => expect(o.ok && NO_REPLY.some((r) => JSON.stringify(r) === JSON.stringify(o.value)), JSON.stringify(o.ok ? o.value : String(o.error))).toBe(true) };
  },
  'fenced store (wire client)': (connection) => {
    const store = openPostgresFencedStore({ connection, statementTimeoutMs: TIMEOUT_MS }, 'strict');
    return { run: (r) => store.write(r, 1n, 'v'), close: () => store.close(), check: (o) => expect(!o.ok && typedOutage(o.error), String(o.ok ? JSON.stringify(o.value) : o.error)).toBe(true) };
  },
  'transaction lock (node-postgres)': (connection) => {
    const lock = new PostgresTransactionLock({ connection, statementTimeoutMs: TIMEOUT_MS });
    return { run: (r) => lock.acquire(r), close: () => lock.close(), check: (o) => expect(o.ok && NO_REPLY.some((r) => JSON.stringify(r) === JSON.stringify(o.value)), JSON.stringify(o.ok ? o.value : String(o.error))).toBe(true) };
  },
  'session lock (node-postgres: a password function)': (connection) => {
    const lock = new PostgresSessionLock({ connection: { ...connection, password: async () => server.connection.password }, statementTimeoutMs: TIMEOUT_MS });
    return { run: (r) => lock.acquire(r), close: () => lock.close(), check: (o) => expect(o.ok && NO_REPLY.some((r) => JSON.stringify(r) === JSON.stringify(o.value)), JSON.stringify(o.ok ? o.value : String(o.error))).toBe(true) };
  },
};

describe('PostgreSQL: the server silent from any byte of the start-up on', () => {
  it.each(Object.keys(clients))('%s: every cut settles typed; close leaves no handle', async (name) => {
    const connection = { ...server.connection, host: '127.0.0.1', port: proxy.port };
    const make = clients[name]!;
    // The bytes the server sends for a connect and the first call, measured on a link that passes everything.
    const total = await uncutBytes(proxy, 'uncut', () => make(connection), BOUND_MS);
    proxy.dropAll();
    const baseline = await steadyResources();
    for (const n of cutPoints(total)) {
      proxy.cutAfter = n;
      const c = make(connection);
      const outcome = await settles(`${name}, cut after ${n} of ${total} bytes`, c.run('cut'), BOUND_MS);
      try {
        c.check(outcome);
      } catch (error) {
        throw new Error(`cut after ${n} of ${total} bytes: ${(error as Error).message}`, { cause: error });
      }
      await resolvesWithin(`close, cut after ${n}`, c.close(), BOUND_MS);
      proxy.dropAll();
      await backToBaseline(baseline);
    }
  });
});
