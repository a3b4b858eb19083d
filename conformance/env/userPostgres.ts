import pg from 'pg';
import { ensureSchema } from '../../impl/postgres/schema.ts';
import { EnvironmentError } from './faketime.ts';
import type { PostgresTarget } from './postgresBackend.ts';
import { redactUrl } from './redact.ts';
import { timedOut } from './userRedis.ts';
import { parsePostgresUrl } from './serverUrls.ts';

export { parsePostgresUrl } from './serverUrls.ts';

/**
 * The user's own PostgreSQL database as a PostgresTarget (`lockcheck --pg`):
 * checked before any run (reachable, new enough, lockcheck's tables there or
 * creatable), then used without ending anyone else's session or touching
 * anyone else's rows; see realPostgresBackend.
 */

/** pg_terminate_backend(pid, timeout), which a kill-connection waits on, came with 14. */
const MIN_SERVER_VERSION = 140000;
const CHECK_TIMEOUT_MS = 5_000;

export interface PostgresServerInfo {
  /** The URL without its password, for messages. */
  readonly shown: string;
  /** The server's version string (server_version). */
  readonly version: string;
}

/**
 * Checks the user's database at `raw` (reachable within 5 s, PostgreSQL 14
 * or newer, lockcheck's tables there or created) and returns it as a
 * PostgresTarget with what was found. Rejects with ServerUrlError for a bad
 * URL and EnvironmentError saying what failed (no password shown).
 */
export async function connectPostgres(raw: string): Promise<PostgresTarget & { readonly server: PostgresServerInfo }> {
  const url = parsePostgresUrl(raw);
  const shown = redactUrl(url);
  const client = new pg.Client({ connectionString: url.href, connectionTimeoutMillis: CHECK_TIMEOUT_MS, query_timeout: CHECK_TIMEOUT_MS });
  client.on('error', () => undefined);
  try {
    try {
      await client.connect();
    } catch (e) {
      throw new EnvironmentError(`cannot reach the PostgreSQL database ${shown}: ${(e as Error).message}${timedOut(e)}`);
    }
    const r = await client.query<{ num: string; version: string }>("SELECT current_setting('server_version_num') AS num, current_setting('server_version') AS version");
    const { num, version } = r.rows[0]!;
    if (Number(num) < MIN_SERVER_VERSION) throw new EnvironmentError(`${shown} runs PostgreSQL ${version}; lockcheck needs 14 or newer (pg_terminate_backend with a timeout)`);
    try {
      await ensureSchema(client);
    } catch (e) {
      throw new EnvironmentError(`lockcheck cannot create its tables (lockcheck_tokens, lockcheck_store) in ${shown}: ${(e as Error).message}`, 'GRANT CREATE ON SCHEMA public TO <the user>, or create the tables from impl/postgres/schema.ts');
    }
    return { url: url.href, server: { shown, version } };
  } catch (e) {
    if (e instanceof EnvironmentError) throw e;
    throw new EnvironmentError(`the PostgreSQL database ${shown} did not answer lockcheck's checks: ${(e as Error).message}${timedOut(e)}`);
  } finally {
    await client.end().catch(() => undefined);
  }
}
