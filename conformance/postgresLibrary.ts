import pg from 'pg';
import type { MonotonicClock } from '../impl/clock.ts';
import { ensureSchema } from '../impl/postgres/schema.ts';
import { postgresFencedStore } from '../impl/postgres/store.ts';
import type { Clock } from '../model/clock.ts';
import { clockAt, setDrift } from '../model/clock.ts';
import { designs } from '../model/design.ts';
import type { BackendInstance, BackendUnderTest, Capabilities, Environment, LibraryContract, LockClient } from './adapter.ts';
import type { PostgresTarget } from './env/postgresBackend.ts';
import { targetOf, underOwnNames } from './env/postgresBackend.ts';
import { PostgresServer } from './env/postgresServer.ts';
import { connectPostgres } from './env/userPostgres.ts';
import { clockWarnings, installLibraryClock, libraryClockNotes, offClientClock, onClientClock } from './libraryClock.ts';
import type { LockCalls } from './redisLibrary.ts';
import { SimNetwork } from './sim/network.ts';
import { VirtualTime } from './sim/time.ts';

/**
 * The adapter kit for a lock library over PostgreSQL (session advisory
 * locks, judged by the pg-session model): the server (lockcheck's own,
 * started on the first run and stopped by the backend's close hook; or the
 * user's, from `--pg`, where each run works under resource names of its own
 * and deletes its rows), a connection string per client (its own
 * application_name), the store, pauses, delays and client clock drift, a
 * close hook per run, and the library's Date.now() and timers on the
 * client's clock. A library opens its own connections, so the kit cannot
 * see its round trips: the adapter passes each call it makes to the server
 * through `parts.call`, which is where a pause holds the reply and a delay
 * slows it. Faults that end the library's sessions (connection loss, a
 * server crash) are not offered: a library must first be shown to survive
 * them (conformance/adapters/advisoryLock.ts shows one that does not).
 */
export interface PostgresLibraryAdapter {
  readonly name: string;
  readonly contract?: LibraryContract;
  readonly options?: Readonly<Record<string, string | number | boolean | null>>;
  /** Beyond the kit's: store 'unfenced', no ttl, session-bound, not reentrant (a session per call), tokens as the contract says. */
  readonly capabilities?: Partial<Pick<Capabilities, 'reentrant' | 'tokens'>>;
  client(parts: PostgresClientParts): LockCalls | Promise<LockCalls>;
}

export interface PostgresClientParts {
  readonly client: number;
  /** The connection string this client's library connects with (its own application_name; the run's, on the user's server). */
  readonly url: string;
  readonly clock: MonotonicClock;
  /** One call of the library to the server, through the run's faults (pause, delay). Bounded in real time. */
  call<T>(work: () => Promise<T>): Promise<T>;
  onClock<T>(fn: () => T): T;
  onClose(fn: () => Promise<void> | void): void;
}

export interface PostgresServerChoice {
  readonly pg?: string;
}

/** Bound on every real wait: a library's connections may have no timeout at all. */
const CALL_TIMEOUT_MS = 10_000;

export function postgresLibraryBackend(adapter: PostgresLibraryAdapter, choice: PostgresServerChoice = {}): BackendUnderTest {
  let own: Promise<PostgresServer> | null = null;
  let target: Promise<PostgresTarget> | null = null;
  const server = (): Promise<PostgresTarget> =>
    (target ??= choice.pg !== undefined ? connectPostgres(choice.pg) : (own = PostgresServer.start({ parentDir: '/dev/shm' })).then(targetOf));
  return {
    name: adapter.name,
    design: designs.pgSession(),
    capabilities: { store: 'unfenced', ttl: false, sessionBound: true, reentrant: false, tokens: adapter.contract?.tokens !== 'none', ...adapter.capabilities },
    ...(adapter.contract !== undefined ? { contract: adapter.contract } : {}),
    ...(adapter.options !== undefined ? { options: adapter.options } : {}),
    start: async ({ clients }) => {
      const t = await server();
      return underOwnNames(t, (run) => startInstance(adapter, t, run.applicationName, clients));
    },
    close: async () => {
      const started = own;
      own = null;
      target = null;
      await (await started?.catch(() => null))?.stop();
    },
  };
}

/** Rejects when `work` takes longer than CALL_TIMEOUT_MS of real time (a real timer, outside the client's clock). */
function bounded<T>(work: Promise<T>): Promise<T> {
  return offClientClock(
    () =>
      new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`a library call took more than ${CALL_TIMEOUT_MS} ms`)), CALL_TIMEOUT_MS);
        work.then(
          (v) => {
            clearTimeout(timer);
            resolve(v);
          },
          (e: unknown) => {
            clearTimeout(timer);
            reject(e);
          },
        );
      }),
  );
}

/** Waits (bounded) until no session whose application_name starts with `prefix` holds an advisory lock. */
async function noLockHeld(admin: pg.Client, prefix: string): Promise<void> {
  for (const deadline = Date.now() + CALL_TIMEOUT_MS; ; ) {
    const r = await admin.query(`SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.locktype = 'advisory' AND l.granted AND starts_with(a.application_name, $1)`, [prefix]);
    if ((r.rows[0] as { n: number }).n === 0) return;
    if (Date.now() > deadline) throw new Error(`the library's sessions still hold advisory locks ${CALL_TIMEOUT_MS} ms after the run's close hooks (release them in parts.onClose)`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function startInstance(adapter: PostgresLibraryAdapter, server: PostgresTarget, applicationName: string, clients: number): Promise<BackendInstance> {
  const open = async (): Promise<pg.Client> => {
    const c = new pg.Client({ connectionString: server.url, connectionTimeoutMillis: CALL_TIMEOUT_MS, query_timeout: CALL_TIMEOUT_MS, application_name: applicationName });
    c.on('error', () => undefined);
    await c.connect();
    return c;
  };
  const connections: pg.Client[] = [];
  const closeHooks: Array<() => Promise<void> | void> = [];
  const restoreClocks = installLibraryClock();
  const notes = libraryClockNotes();
  const close = async (): Promise<void> => {
    try {
      for (const hook of closeHooks.splice(0).reverse()) await hook();
      // No lock of this run's library sessions may reach into the next run (the adapter's close hook releases them).
      if (connections[0] !== undefined) await noLockHeld(connections[0], `${applicationName}-c`);
    } finally {
      restoreClocks();
      await Promise.all(connections.map((c) => c.end().catch(() => undefined)));
    }
  };
  try {
    const admin = await open();
    connections.push(admin);
    await ensureSchema(admin);
    if (server.process !== undefined) await admin.query('TRUNCATE lockcheck_store');
    const time: VirtualTime = new VirtualTime({ settle: () => network.settled() });
    const network: SimNetwork = new SimNetwork(time, () => ({ reachable: () => true }));
    const clocks: Clock[] = Array.from({ length: clients }, () => clockAt());
    const lockClients: LockClient[] = [];
    for (let client = 0; client < clients; client++) {
      const clock = time.clockOf(() => clocks[client]!);
      const onClock = <T>(fn: () => T): T => onClientClock(clock, fn, notes);
      const url = new URL(server.url);
      url.searchParams.set('application_name', `${applicationName}-c${client}`);
      const calls = await onClock(() =>
        adapter.client({ client, url: url.href, clock, call: (work) => network.call(client, 0, () => bounded(work())), onClock, onClose: (fn) => closeHooks.push(fn) }),
      );
      const storeConnection = await open();
      connections.push(storeConnection);
      const fenced = postgresFencedStore({ query: ((...args: Parameters<pg.Client['query']>) => storeConnection.query(...args)) as pg.Client['query'] }, 'unfenced');
      lockClients.push({
        acquire: (resource, options) => onClock(() => calls.acquire(resource, options)),
        ...(calls.extend !== undefined ? { extend: (lease, ttlMs) => onClock(() => calls.extend!(lease, ttlMs)) } : {}),
        release: (lease) => onClock(() => calls.release(lease)),
        store: { write: (r, t, v) => network.call(client, 'store', () => fenced.write(r, t, v)), read: (r) => network.call(client, 'store', () => fenced.read(r)) },
        clock,
      });
    }
    const { pause, delay } = network.faults();
    const env: Environment = {
      nowMs: () => time.nowMs(),
      advanceTo: (t) => time.advanceTo(t),
      runUntil: (work, limitMs) => time.runUntil(work, limitMs),
      faults: {
        pause,
        delay,
        clockDrift: async (target, driftPpm) => {
          if ('client' in target) clocks[target.client] = setDrift(clocks[target.client]!, time.nowMs(), driftPpm);
        },
      },
    };
    return { clients: lockClients, env, warnings: () => clockWarnings(notes), close };
  } catch (e) {
    await close();
    throw e;
  }
}
