/**
 * What the PostgreSQL clients send per operation, as the server counts it:
 * a throwaway cluster with pg_stat_statements, N acquire + release pairs of
 * each lock and N fenced writes, then the statements each run executed, per
 * operation, with the round trips the client waited for (counted on the
 * locks' link, which carries every round trip). Deterministic: counts, not
 * times. Starts its own PostgreSQL and stops it.
 *
 *   npx tsx bench/postgresStatements.ts
 */
import pg from 'pg';
import { PostgresServer, stopAllPostgresServers } from '../conformance/env/postgresServer.ts';
import { ensureSchema } from '../impl/postgres/schema.ts';
import { PostgresSessionLock } from '../impl/postgres/sessionLock.ts';
import { postgresFencedStore } from '../impl/postgres/store.ts';
import { PostgresTransactionLock } from '../impl/postgres/xactLock.ts';
import { log, out } from './common.ts';

const OPS = 1000;

interface Counted {
  readonly label: string;
  /** Round trips the client waited for, per operation. */
  readonly roundTrips: number;
  /** Statements the server executed, per operation, by text. */
  readonly statements: ReadonlyArray<{ readonly calls: number; readonly query: string }>;
}

async function counted(admin: pg.Client, label: string, run: (link: <T>(roundTrip: () => Promise<T>) => Promise<T>) => Promise<void>): Promise<Counted> {
  let trips = 0;
  const link = <T>(roundTrip: () => Promise<T>): Promise<T> => {
    trips++;
    return roundTrip();
  };
  await admin.query('SELECT pg_stat_statements_reset()');
  await run(link);
  const r = await admin.query<{ calls: string; query: string }>(
    "SELECT calls::text, query FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%' AND calls >= $1 ORDER BY calls DESC, query",
    [OPS],
  );
  return { label, roundTrips: trips / OPS, statements: r.rows.map((row) => ({ calls: Number(row.calls) / OPS, query: row.query.replace(/\s+/g, ' ').trim() })) };
}

const server = await PostgresServer.start({ parentDir: '/dev/shm', settings: { shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track': 'all' } });
const admin = new pg.Client({ ...server.connection, connectionTimeoutMillis: 5_000, query_timeout: 5_000 });
try {
  await admin.connect();
  await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  await ensureSchema(admin);
  const results: Counted[] = [];
  results.push(
    await counted(admin, 'PostgresSessionLock acquire + release', async (link) => {
      const lock = new PostgresSessionLock({ connection: server.connection, link });
      try {
        await lock.acquire('warm').then((r) => (r.kind === 'granted' ? lock.release(r.lease) : undefined));
        for (let i = 0; i < OPS; i++) {
          const r = await lock.acquire('s');
          if (r.kind !== 'granted') throw new Error(`session acquire ${r.kind}`);
          await lock.release(r.lease);
        }
      } finally {
        await lock.close();
      }
    }),
  );
  results.push(
    await counted(admin, 'PostgresTransactionLock acquire + release (COMMIT)', async (link) => {
      const lock = new PostgresTransactionLock({ connection: server.connection, link });
      try {
        await lock.acquire('warm').then((r) => (r.kind === 'granted' ? lock.release(r.lease) : undefined));
        for (let i = 0; i < OPS; i++) {
          const r = await lock.acquire('x');
          if (r.kind !== 'granted') throw new Error(`transaction acquire ${r.kind}`);
          await lock.release(r.lease);
        }
      } finally {
        await lock.close();
      }
    }),
  );
  const writer = new pg.Client(server.connection);
  await writer.connect();
  try {
    results.push(
      await counted(admin, "postgresFencedStore(client, 'strict').write", async () => {
        const store = postgresFencedStore(writer, 'strict');
        for (let i = 1; i <= OPS; i++) if ((await store.write('f', BigInt(i), 'v')).kind !== 'accepted') throw new Error('fenced write rejected');
      }),
    );
  } finally {
    await writer.end();
  }
  // The fenced store takes a client, not a link: its round trips are its statements (one each).
  out(`## Statements per operation (pg_stat_statements, ${OPS} operations each, after one warm-up)`);
  out();
  out('| operation | round trips | statements the server ran, per operation |');
  out('|---|---:|---|');
  for (const c of results) {
    const trips = c.label.startsWith('postgresFencedStore') ? 'one per statement' : c.roundTrips.toFixed(2);
    out(`| ${c.label} | ${trips} | ${c.statements.map((s) => `${s.calls.toFixed(2)} × \`${s.query.length > 90 ? `${s.query.slice(0, 90)}…` : s.query}\``).join('<br>')} |`);
  }
} catch (e) {
  process.exitCode = 1;
  log(`failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
} finally {
  await admin.end().catch(() => undefined);
  await stopAllPostgresServers();
}
