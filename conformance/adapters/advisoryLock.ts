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
 * The row runs on the PostgreSQL adapter kit (conformance/postgresLibrary.ts),
 * which passes each library call (tryLock, unlock) through the run's faults
 * as one request and gives the library its own connection string per client
 * (through a TCP proxy of its own on a server lockcheck started). So it
 * takes every fault the kit can inject: pauses, delays, late replies, a slow
 * or black-holed server, client clock drift, connection loss
 * (pg_terminate_backend of the client's library sessions), crash-restart of
 * the server and partitions (the proxy black-holes the link; keepalive ends
 * the sessions). The kit catches the library's would-be uncaught exception
 * when the server ends a session, warns, and counts the client as dead.
 * clock-step does not apply (advisory locks never expire).
 */
import { randomUUID } from 'node:crypto';
import advisoryLockModule from 'advisory-lock';
import { LeaseHandle } from '../../impl/lease.ts';
import type { Lease } from '../../impl/lease.ts';
import type { AcquireResult } from '../../impl/leaseLock.ts';
import type { BackendUnderTest, ConcurrentClient } from '../adapter.ts';
import type { PostgresTarget } from '../env/postgresBackend.ts';
import { postgresLibraryBackend } from '../postgresLibrary.ts';
import { checkAcquireInput } from '../input.ts';
import { ADVISORY_LOCK_CONTRACT } from './contracts.ts';
import { retryOnClock } from './retryOnClock.ts';
import { rejectAfter } from '../realTimeLimit.ts';

type AdvisoryLockFactory = typeof advisoryLockModule.default;
/** The CommonJS module's default export: node hands over the exports object, vite-node the function itself. */
export const advisoryLock: AdvisoryLockFactory =
  typeof advisoryLockModule === 'function' ? (advisoryLockModule as unknown as AdvisoryLockFactory) : advisoryLockModule.default;

/** Bound on every real wait: the library's own connections have no timeout at all. */
const CALL_TIMEOUT_MS = 10_000;

/**
 * advisory-lock through the PostgreSQL kit, on `server` (the CLI's) or on a
 * server the kit starts (and the backend's close hook stops).
 */
export function advisoryLockBackend(server?: PostgresTarget, options: { readonly name?: string } = {}): BackendUnderTest {
  const backend = postgresLibraryBackend(
    {
      name: options.name ?? 'advisory-lock@2.0.0 pg-session',
      contract: ADVISORY_LOCK_CONTRACT,
      capabilities: { reentrant: false, tokens: false },
      client: ({ url, clock, call, onClose }) => {
        const unlocks = new Map<Lease, () => Promise<void>>();
        let grants = 0;
        onClose(async () => {
          for (const unlock of unlocks.values()) await unlock().catch(() => undefined);
        });
        const attempt = async (resource: string): Promise<AcquireResult> => {
          let unlock: (() => Promise<void>) | undefined;
          try {
            unlock = await call(() => advisoryLock(url)(resource).tryLock());
          } catch (e) {
            // A cut link or a server that is down fails the call at once (the kit's UnavailableError): nothing was locked.
            if ((e as Error).name === 'UnavailableError') return { kind: 'denied', reason: 'no-quorum' };
            throw e;
          }
          if (unlock === undefined) return { kind: 'denied', reason: 'held' };
          const lease = new LeaseHandle(resource, `c#${++grants}`, 0n, null, clock);
          unlocks.set(lease, unlock);
          return { kind: 'granted', lease };
        };
        return {
          async acquire(resource, { retries = 0, retryDelayMs = 0 }) {
            checkAcquireInput(resource, { retries }, false);
            return retryOnClock(clock, retries, retryDelayMs, () => attempt(resource));
          },
          async release(lease) {
            const unlock = unlocks.get(lease);
            if (unlock === undefined) return;
            unlocks.delete(lease);
            // User code stops holding it when it asks for the release (the reply may be held by a pause).
            (lease as LeaseHandle).lose('released');
            try {
              await call(unlock);
            } catch (e) {
              if ((e as Error).name !== 'UnavailableError') throw e;
              // On a cut link the library's unlock waits as long as the link does (it has no timeout): its query crosses
              // when the link heals. Declared (clientTimeout: false): a run that meets it ends inconclusive.
              await unlock();
            }
          },
        };
      },
    },
    server === undefined ? {} : { target: server },
  );
  return { ...backend, concurrent: ADVISORY_LOCK_CONCURRENT };
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
  return rejectAfter(work, ms, () => new Error(`advisory-lock: ${what} took more than ${ms} ms`));
}
