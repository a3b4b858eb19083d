import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { settleWithin } from '../conformance/env/processes.ts';
import { PostgresServer, type PostgresServerOptions } from '../conformance/env/postgresServer.ts';

/** A PostgreSQL server a test file starts, and a superuser client on it: both valid from beforeAll on. */
export interface PostgresFixture {
  readonly server: PostgresServer;
  readonly admin: pg.Client;
}

/** Bound on the admin client's end: a client whose server is gone or wedged must not hold up the server's stop. */
const ADMIN_END_MS = 5_000;

/**
 * Starts a PostgreSQL server (in /dev/shm unless `options` say otherwise),
 * connects an admin client and runs `setup` on it. Clean-up on failure is
 * here only: a start, connect or setup that fails stops what was started
 * before the error goes on. `stop` ends the client (bounded, never failing)
 * and then stops the server.
 */
export async function startPostgres(options: PostgresServerOptions = {}, setup: (admin: pg.Client) => Promise<void> = async () => undefined): Promise<PostgresFixture & { stop(): Promise<void> }> {
  let server: PostgresServer | undefined;
  let admin: pg.Client | undefined;
  const stop = async (): Promise<void> => {
    // settleWithin never rejects: the server's stop is reached whatever the client did.
    if (admin !== undefined) await settleWithin(admin.end(), ADMIN_END_MS);
    await server?.stop();
  };
  try {
    server = await PostgresServer.start({ parentDir: '/dev/shm', ...options });
    admin = new pg.Client({ ...server.connection, connectionTimeoutMillis: 5_000, query_timeout: 5_000 });
    await admin.connect();
    await setup(admin);
    return { server, admin, stop };
  } catch (e) {
    await stop().catch(() => undefined);
    throw e;
  }
}

/**
 * startPostgres in beforeAll (with `options` read then, so they may name
 * what an earlier beforeAll made), its stop in afterAll. Call it at the top
 * of a file or describe; the fixture's fields are valid inside its tests.
 */
export function withPostgres(options: () => PostgresServerOptions = () => ({}), setup?: (admin: pg.Client) => Promise<void>): PostgresFixture {
  let started: Awaited<ReturnType<typeof startPostgres>> | undefined;
  // Longer than the server's own start bound (PostgresServer's 90 s: initdb took over 30 s at load 15-20): a hook that
  // timed out first failed the whole file while the start went on, its server made after afterAll had looked for it.
  beforeAll(async () => {
    started = await startPostgres(options(), setup);
  }, 120_000);
  afterAll(async () => {
    const s = started;
    started = undefined;
    await s?.stop();
  });
  const get = (): PostgresFixture => {
    if (started === undefined) throw new Error('withPostgres: no server outside the tests of the file or describe that called it (its beforeAll did not run, or failed)');
    return started;
  };
  return {
    get server() {
      return get().server;
    },
    get admin() {
      return get().admin;
    },
  };
}
