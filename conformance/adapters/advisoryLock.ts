/**
 * The adapter for `advisory-lock` (npm, 2.0.0): PostgreSQL session advisory
 * locks, checked against lockcheck's pg-session model on a real server.
 *
 * What the library does (build/index.js):
 * - `advisoryLock(connectionString)(name)` is a mutex on the key
 *   `strToKey(name)`: the first two little-endian int32s of sha256(name),
 *   taken with the two-key form `pg_try_advisory_lock(int4, int4)`.
 * - Every `lock()` / `tryLock()` opens a new `pg.Client` from the connection
 *   string (no way to pass a client, a pool or a timeout), and the unlock
 *   function it returns runs `pg_advisory_unlock` and ends that client.
 * - So it is not reentrant: a holder's second tryLock() runs in another
 *   session and is refused by its own lock (a second lock() would wait for
 *   ever). The pg-session model stacks a holder's acquire, as PostgreSQL does
 *   within one session; the adapter declares `reentrant: false` and reports
 *   what the library does.
 * - Its clients have no 'error' listener: when the server ends a session
 *   (pg_terminate_backend, a crash, keepalive after a partition), pg emits
 *   'error' with no listener and the process dies of an uncaught exception
 *   (shown by advisoryLockConnectionLoss.ts, run in a child process).
 *
 * Links. The library's queries cannot be routed one by one, but each library
 * call (tryLock, unlock) goes through `network.call(client, 0, ...)` as one
 * request: virtual time waits for its real I/O, a delay fault delays its
 * reply, and a pause holds its reply (the call has taken effect on the
 * server, as the model's in-flight operation has). That is the model's
 * grain: one operation, one round trip.
 *
 * Faults offered: advance, pause, delay, clock-drift. Not offered, because
 * each ends a session the library holds, and the library then kills the
 * process instead of reporting anything: kill-connection, crash-restart and
 * partition (the model ends the session of a partitioned client). clock-step
 * does not apply (advisory locks never expire).
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import advisoryLockModule from 'advisory-lock';
import type { Clock } from '../../model/clock.ts';
import { clockAt, setDrift } from '../../model/clock.ts';
import { designs } from '../../model/design.ts';
import { sleep } from '../../impl/clock.ts';
import { LeaseHandle } from '../../impl/lease.ts';
import type { Lease } from '../../impl/lease.ts';
import type { AcquireResult } from '../../impl/leaseLock.ts';
import { ensureSchema } from '../../impl/postgres/schema.ts';
import { postgresFencedStore } from '../../impl/postgres/store.ts';
import type { BackendInstance, BackendUnderTest, ConcurrentClient, Environment, LockClient } from '../adapter.ts';
import type { PostgresTarget } from '../env/postgresBackend.ts';
import { underOwnNames } from '../env/postgresBackend.ts';
import { SimNetwork } from '../sim/network.ts';
import { VirtualTime } from '../sim/time.ts';
import { checkAcquireInput } from '../input.ts';

type AdvisoryLockFactory = typeof advisoryLockModule.default;
/** The CommonJS module's default export: node hands over the exports object, vite-node the function itself. */
export const advisoryLock: AdvisoryLockFactory =
  typeof advisoryLockModule === 'function' ? (advisoryLockModule as unknown as AdvisoryLockFactory) : advisoryLockModule.default;

/** Bound on every real wait: the library's own connections have no timeout at all. */
const CALL_TIMEOUT_MS = 10_000;

/** Sessions of the library's clients are told apart by their application_name. */
export const APPLICATION_NAME = 'lockcheck-advisory-lock';

export function advisoryLockUrl(server: Pick<PostgresTarget, 'url'>, run: string, client: number): string {
  const url = new URL(server.url);
  url.searchParams.set('application_name', `${APPLICATION_NAME}-${run}-c${client}`);
  return url.href;
}

export function advisoryLockBackend(server: PostgresTarget, options: { readonly name?: string } = {}): BackendUnderTest {
  return {
    name: options.name ?? 'advisory-lock@2.0.0 pg-session',
    design: designs.pgSession(),
    capabilities: { store: 'unfenced', ttl: false, sessionBound: true, reentrant: false, tokens: false },
    // No deadline (a session lock), no tokens, and no timeout: its pg.Client is opened from a bare connection string.
    contract: { deadline: 'none', clientTimeout: false, tokens: 'none', validatesInput: false },
    start: ({ clients }) => underOwnNames(server, () => startInstance(server, clients)),
    concurrent: ADVISORY_LOCK_CONCURRENT,
  };
}

/** Bound on each library call in a concurrent run (its unknown outcome is recorded as such). */
const CONCURRENT_CALL_TIMEOUT_MS = 2_000;

/**
 * The library in a concurrent run, as a user runs it: `advisoryLock(url)(name)`
 * per resource and `tryLock()`, each call bounded here (the library has no
 * timeout of its own). Its sessions still have no 'error' listener: a
 * session the server ends (terminate-backend, a crash) kills the client
 * process, and the run reports that client's death.
 */
export const ADVISORY_LOCK_CONCURRENT: ConcurrentClient = {
  servers: { kind: 'postgres' },
  tokens: false,
  async connect(servers, clock) {
    const url = servers.pg;
    if (url === null) throw new Error('advisory-lock needs a PostgreSQL database');
    const factory = advisoryLock(url);
    const mutexes = new Map<string, ReturnType<typeof factory>>();
    const unlocks = new Map<Lease, () => Promise<void>>();
    return {
      async acquire(resource) {
        let mutex = mutexes.get(resource);
        if (mutex === undefined) mutexes.set(resource, (mutex = factory(resource)));
        const unlock = await bounded(mutex.tryLock(), 'tryLock', CONCURRENT_CALL_TIMEOUT_MS);
        if (unlock === undefined) return { kind: 'denied', reason: 'held' };
        const lease = new LeaseHandle(resource, randomUUID(), 0n, null, clock);
        unlocks.set(lease, unlock);
        return { kind: 'granted', lease };
      },
      async release(lease) {
        const unlock = unlocks.get(lease);
        if (unlock === undefined) return;
        unlocks.delete(lease);
        (lease as LeaseHandle).lose('released');
        await bounded(unlock(), 'unlock', CONCURRENT_CALL_TIMEOUT_MS);
      },
      async close() {
        await Promise.all([...unlocks.values()].map((unlock) => bounded(unlock(), 'unlock at close', CONCURRENT_CALL_TIMEOUT_MS).catch(() => undefined)));
        unlocks.clear();
      },
    };
  },
};

/** Rejects when `work` takes longer than `ms` of real time. */
function bounded<T>(work: Promise<T>, what: string, ms = CALL_TIMEOUT_MS): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`advisory-lock: ${what} took more than ${ms} ms`)), ms);
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
  });
}

/**
 * The library's sessions that still hold an advisory lock: of any run on a
 * server lockcheck started (an earlier run's unlocks may still be under way),
 * of none but this run's own on the user's server (where every run has names
 * of its own, so concurrent runs never wait for each other).
 */
async function heldByLibrary(admin: pg.Client, server: PostgresTarget, run: string): Promise<number> {
  const r = await admin.query(
    `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.locktype = 'advisory' AND l.granted AND starts_with(a.application_name, $1)`,
    [server.process !== undefined ? `${APPLICATION_NAME}-` : `${APPLICATION_NAME}-${run}-`],
  );
  return (r.rows[0] as { n: number }).n;
}

async function startInstance(server: PostgresTarget, clients: number): Promise<BackendInstance> {
  const run = randomUUID().slice(0, 8);
  const connection: pg.ClientConfig = { connectionString: server.url };
  const open = async (): Promise<pg.Client> => {
    const c = new pg.Client({ ...connection, connectionTimeoutMillis: CALL_TIMEOUT_MS, query_timeout: CALL_TIMEOUT_MS });
    c.on('error', () => undefined);
    await c.connect();
    return c;
  };
  const admin = await open();
  const storeConnections: pg.Client[] = [];
  const unlocks = new Map<Lease, () => Promise<void>>();
  const close = async (): Promise<void> => {
    // Release what is still held (directly: a paused client's link may be holding replies), so no session outlives the run.
    await Promise.all([...unlocks.values()].map((unlock) => bounded(unlock(), 'unlock at close').catch(() => undefined)));
    unlocks.clear();
    await Promise.all([admin, ...storeConnections].map((c) => c.end().catch(() => undefined)));
  };
  try {
    // Reset: empty store, and no session of the library left holding a lock (an unlock ends its client
    // without waiting; the lock itself goes with pg_advisory_unlock, before that).
    await ensureSchema(admin);
    if (server.process !== undefined) await admin.query('TRUNCATE lockcheck_store');
    const deadline = Date.now() + CALL_TIMEOUT_MS;
    while ((await heldByLibrary(admin, server, run)) > 0) {
      if (Date.now() > deadline) throw new Error('advisory-lock: sessions of an earlier run still hold advisory locks');
      await new Promise((r) => setTimeout(r, 20));
    }
    for (let i = 0; i < clients; i++) storeConnections.push(await open());
    const time: VirtualTime = new VirtualTime({ settle: () => network.settled() });
    const network: SimNetwork = new SimNetwork(time, () => ({ reachable: () => true }));
    const clientClocks: Clock[] = Array.from({ length: clients }, () => clockAt());
    let grants = 0;
    const lockClients: LockClient[] = clientClocks.map((_c, client) => {
      const clock = time.clockOf(() => clientClocks[client]!);
      const mutexes = new Map<string, ReturnType<ReturnType<typeof advisoryLock>>>();
      const mutexFor = (resource: string) => {
        let m = mutexes.get(resource);
        if (m === undefined) mutexes.set(resource, (m = advisoryLock(advisoryLockUrl(server, run, client))(resource)));
        return m;
      };
      const attempt = async (resource: string): Promise<AcquireResult> => {
        // No fault offered here makes the server unreachable: an error is a real one and fails the run.
        const unlock = await network.call(client, 0, () => bounded(mutexFor(resource).tryLock(), 'tryLock'));
        if (unlock === undefined) return { kind: 'denied', reason: 'held' };
        const lease = new LeaseHandle(resource, `${APPLICATION_NAME}-c${client}#${++grants}`, 0n, null, clock);
        unlocks.set(lease, unlock);
        return { kind: 'granted', lease };
      };
      const fenced = postgresFencedStore({ query: ((...args: Parameters<pg.Client['query']>) => storeConnections[client]!.query(...args)) as pg.Client['query'] }, 'unfenced');
      return {
        clock,
        store: { write: (r, t, v) => network.call(client, 'store', () => fenced.write(r, t, v)), read: (r) => network.call(client, 'store', () => fenced.read(r)) },
        async acquire(resource, { retries = 0, retryDelayMs = 0 }) {
          checkAcquireInput(resource, { retries }, false);
          for (let tries = 0; ; tries++) {
            const result = await attempt(resource);
            if (result.kind !== 'denied' || tries >= retries) return result;
            await sleep(clock, retryDelayMs);
          }
        },
        async release(lease) {
          const unlock = unlocks.get(lease);
          if (unlock === undefined) return;
          unlocks.delete(lease);
          (lease as LeaseHandle).lose('released');
          await network.call(client, 0, () => bounded(unlock(), 'unlock')).catch(() => undefined);
        },
      };
    });
    const env: Environment = {
      nowMs: () => time.nowMs(),
      advanceTo: (t) => time.advanceTo(t),
      runUntil: (work, limitMs) => time.runUntil(work, limitMs),
      // Delays, pauses and client clock drift. No clock step (advisory locks never expire: no server clock matters);
      // no partition, crash or connection loss: each ends a session the library holds, which kills its process (above).
      faults: {
        clockDrift: async (target, driftPpm) => {
          if ('client' in target) clientClocks[target.client] = setDrift(clientClocks[target.client]!, time.nowMs(), driftPpm);
        },
        pause: network.faults().pause,
        delay: network.faults().delay,
      },
    };
    return { clients: lockClients, env, close };
  } catch (e) {
    await close();
    throw e;
  }
}
