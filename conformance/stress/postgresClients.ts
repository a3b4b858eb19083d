import pg from 'pg';
import type { Lease } from '../../impl/lease.ts';
import type { FencedStore } from '../../impl/fencedStore.ts';
import { PostgresSessionLock } from '../../impl/postgres/sessionLock.ts';
import { PostgresTransactionLock } from '../../impl/postgres/xactLock.ts';
import { postgresFencedStore } from '../../impl/postgres/store.ts';
import type { ClientBackend, FencePolicy } from './protocol.ts';
import type { StressClient } from './client.ts';
import { COMMAND_TIMEOUT_MS } from './client.ts';
import { sharedClock } from './sharedClock.ts';

/** The stress clients on PostgreSQL (client.ts loads this module only for them). */

/** A store connection outside the lock's session, opened again after it is lost (a terminated backend, a crash). */
export function storeOutside(url: string, policy: FencePolicy): { store: FencedStore; close(): Promise<void> } {
  let client: Promise<pg.Client> | null = null;
  const connection = (): Promise<pg.Client> =>
    (client ??= (async () => {
      const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: COMMAND_TIMEOUT_MS, query_timeout: COMMAND_TIMEOUT_MS, statement_timeout: COMMAND_TIMEOUT_MS });
      const forget = (): void => {
        client = null;
      };
      c.on('error', forget);
      c.on('end', forget);
      await c.connect().catch((e: unknown) => {
        forget();
        throw e;
      });
      return c;
    })());
  const store = postgresFencedStore({ query: (async (...args: unknown[]) => (await connection()).query(...(args as [string]))) as pg.Client['query'] }, policy);
  return {
    store,
    close: async () => {
      const c = await client?.catch(() => null);
      await c?.end().catch(() => undefined);
    },
  };
}

export async function pgSessionClient(b: Extract<ClientBackend, { kind: 'pg-session' }>): Promise<StressClient> {
  const lock = new PostgresSessionLock({ connection: { connectionString: b.url }, clock: sharedClock, statementTimeoutMs: COMMAND_TIMEOUT_MS });
  const outside = storeOutside(b.url, b.storePolicy);
  return {
    acquire: (resource) => lock.acquire(resource),
    read: async (lease) => (await outside.store.read(lease.resource)).value,
    write: async (lease, value) => (await outside.store.write(lease.resource, lease.token, value)).kind,
    release: async (lease) => {
      await lock.release(lease);
      return true;
    },
    pids: () => (lock.backendPid === null ? [] : [lock.backendPid]),
    close: async () => {
      await lock.close();
      await outside.close();
    },
  };
}

export async function pgXactClient(b: Extract<ClientBackend, { kind: 'pg-xact' }>): Promise<StressClient> {
  const lock = new PostgresTransactionLock({ connection: { connectionString: b.url }, clock: sharedClock, statementTimeoutMs: COMMAND_TIMEOUT_MS });
  // Reads and writes run in the lease's own transaction.
  const inside = (lease: Lease): FencedStore => postgresFencedStore(lock.queryable(lease), 'transactional');
  return {
    acquire: (resource) => lock.acquire(resource),
    read: async (lease) => (await inside(lease).read(lease.resource)).value,
    write: async (lease, value) => (await inside(lease).write(lease.resource, lease.token, value)).kind,
    // Resolves: committed, unless the transaction was already gone (the lease lost before); throws when COMMIT's fate is unknown.
    release: async (lease) => {
      const lostBefore = lease.signal.aborted;
      await lock.release(lease);
      return !lostBefore;
    },
    pids: () => lock.backendPids,
    close: () => lock.close(),
  };
}
