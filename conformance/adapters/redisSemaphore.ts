/**
 * The adapter for `redis-semaphore` (npm, 5.8.0): its `Mutex` on one Redis
 * node, checked against lockcheck's redis-single model, and its
 * `RedlockMutex` on five, checked against the redlock model, on real
 * redis-server processes, judged by the contract the library keeps
 * (lib/Lock.js, lib/mutex/*.js, lib/redlockMutex/*.js):
 * - Mutex acquire is `SET mutex:<key> id PX lockTimeout NX`, one round trip;
 *   RedlockMutex sends it to every node and holds the lock when a quorum
 *   (`Math.round((n + 1) / 2)`) said OK, however long that took: it computes
 *   no validity (no elapsed time, no drift), and on a miss deletes its value
 *   from every node (compare-and-delete). A denied attempt sleeps
 *   `retryInterval` on a real setTimeout, so the adapter makes one attempt
 *   (acquireAttemptsLimit 1) and retries on the client's clock itself;
 * - the client is given no deadline: `isAcquired` stays true until a refresh
 *   fails (`onLockLost`), and refreshes run on a setInterval
 *   (refreshInterval, default 0.8 * lockTimeout). In lockstep runs that
 *   interval is off and the schedule's extend stands for it: it
 *   calls the library's own refresh (`_refresh`: PEXPIRE if the value is
 *   ours; RedlockMutex: on every node, then `SET NX` on the nodes that had
 *   no key when a quorum refreshed, and a delete everywhere when none did):
 *   it re-arms the fixed lockTimeout the lock was made with;
 * - release is a compare-and-delete script (EVALSHA, EVAL on NOSCRIPT), on
 *   every node for RedlockMutex;
 * - no fencing tokens, no client-side timeout, no input checks (an empty
 *   key throws a plain Error).
 * On the adapter kit (redisLibraryBackend): every command of the library
 * goes through the run's faults, and Date.now() (read for acquireTimeout)
 * is the client's wall clock during the client's calls.
 *
 * In a concurrent run (`lockcheck stress`) the library runs as a user runs
 * it: refreshes on (the default interval, real time), onLockLost ending the
 * lease, connections with a 2 s command timeout.
 */
import type { Redis } from 'ioredis';
import redisSemaphoreModule from 'redis-semaphore';
import { designs } from '../../model/design.ts';
import type { MonotonicClock } from '../../impl/clock.ts';
import { LeaseHandle } from '../../impl/lease.ts';
import type { AcquireResult, ExtendResult } from '../../impl/leaseLock.ts';
import type { BackendUnderTest, ConcurrentClient } from '../adapter.ts';
import { concurrentRedis, redisLibraryBackend } from '../kit.ts';
import type { LockCalls, RedisServerChoice } from '../kit.ts';
import { REDIS_SEMAPHORE_CONTRACT, REDIS_SEMAPHORE_REDLOCK_CONTRACT } from './contracts.ts';
import { LibraryLocks } from './libraryLocks.ts';
import { retryOnClock } from './retryOnClock.ts';

type MutexClass = typeof redisSemaphoreModule.Mutex;
type RedlockMutexClass = typeof redisSemaphoreModule.RedlockMutex;
/** The CommonJS module's exports: node hands over the exports object as the default import. */
const { Mutex, RedlockMutex } = redisSemaphoreModule as unknown as { Mutex: MutexClass; RedlockMutex: RedlockMutexClass };

/** Which of the library's mutexes: on one node, or on five with a quorum. */
export type SemaphoreMutexKind = 'mutex' | 'redlock-mutex';

type LockOptions = ConstructorParameters<MutexClass>[2];
type AnyMutex = InstanceType<MutexClass> | InstanceType<RedlockMutexClass>;

function newMutex(kind: SemaphoreMutexKind, nodes: readonly Redis[], resource: string, options: LockOptions): AnyMutex {
  return kind === 'mutex' ? new Mutex(nodes[0]!, resource, options) : new RedlockMutex([...nodes], resource, options);
}

export { REDIS_SEMAPHORE_CONTRACT, REDIS_SEMAPHORE_REDLOCK_CONTRACT } from './contracts.ts';

export const mutexKey = (resource: string): string => `mutex:${resource}`;

/** The library's private refresh, which its setInterval calls: true when the key was still ours and got a fresh lockTimeout. */
interface Refreshable {
  _refresh(): Promise<boolean>;
}

export function redisSemaphoreMutexBackend(choice: RedisServerChoice = {}, options: { readonly name?: string } = {}): BackendUnderTest {
  return semaphoreBackend('mutex', choice, options);
}

/** RedlockMutex over 5 nodes, against the redlock model (its quorum rule is Redlock's; it keeps no validity). */
export function redisSemaphoreRedlockMutexBackend(choice: RedisServerChoice = {}, options: { readonly name?: string } = {}): BackendUnderTest {
  return semaphoreBackend('redlock-mutex', choice, options);
}

function semaphoreBackend(kind: SemaphoreMutexKind, choice: RedisServerChoice, options: { readonly name?: string }): BackendUnderTest {
  const backend = redisLibraryBackend(
    {
      name: options.name ?? `redis-semaphore@5.8.0 ${kind === 'mutex' ? 'Mutex' : 'RedlockMutex'}`,
      design: kind === 'mutex' ? designs.redisSingle() : designs.redlock({ nodes: 5 }),
      contract: kind === 'mutex' ? REDIS_SEMAPHORE_CONTRACT : REDIS_SEMAPHORE_REDLOCK_CONTRACT,
      options: { acquireAttemptsLimit: 1, refreshInterval: 0 },
      lockKey: mutexKey,
      client: ({ nodes, clock }) => semaphoreCalls(kind, nodes, clock),
    },
    choice,
  );
  return { ...backend, concurrent: semaphoreConcurrent(kind) };
}

/** One client's calls through the library (the kit runs them on the client's clocks). */
function semaphoreCalls(kind: SemaphoreMutexKind, nodes: readonly Redis[], clock: MonotonicClock): LockCalls {
  const held = new LibraryLocks<AnyMutex>();
  const attempt = async (resource: string, ttlMs: number): Promise<AcquireResult> => {
    const mutex = newMutex(kind, nodes, resource, { lockTimeout: ttlMs, acquireTimeout: 1, acquireAttemptsLimit: 1, retryInterval: 0, refreshInterval: 0, onLockLost: () => undefined });
    // Mutex's acquire throws when its node cannot be reached (lib/mutex/acquire.js has no catch): the caller holds nothing.
    const got = await mutex.tryAcquire().catch(() => null);
    if (got === null) return { kind: 'denied', reason: 'no-quorum' };
    if (!got) return { kind: 'denied', reason: 'held' };
    // No deadline: the library gives its caller none.
    return held.granted(new LeaseHandle(resource, mutex.identifier, 0n, null, clock), mutex);
  };
  return {
    async acquire(resource, { ttlMs, retries = 0, retryDelayMs = 0 }) {
      return retryOnClock(clock, retries, retryDelayMs, () => attempt(resource, ttlMs));
    },
    async extend(lease, ttlMs): Promise<ExtendResult> {
      const h = held.get(lease);
      if (h === undefined) return { kind: 'not-extended', reason: 'expired' };
      // A refresh that throws (Mutex: a node it cannot reach) rejects its setInterval's callback: the library leaves the lock acquired (Lock.js `_processRefresh` has no catch).
      const refreshed = await (h.lock as unknown as Refreshable)._refresh().catch(() => null);
      if (refreshed === null) return { kind: 'not-extended', reason: 'no-quorum' };
      if (refreshed) {
        // The library tells its caller nothing but success; the runner compares no deadline for it (contract: deadline none).
        return { kind: 'extended', validUntilMs: clock.now() + ttlMs };
      }
      // What its setInterval would do: the lock is lost (onLockLost). The nodes did not extend it: the model's 'no-quorum'.
      held.end(lease, 'expired');
      return { kind: 'not-extended', reason: 'no-quorum' };
    },
    async release(lease) {
      const mutex = held.end(lease, 'released');
      if (mutex === undefined) return;
      await mutex.release().catch(() => undefined);
    },
  };
}

/**
 * The library in a concurrent run, as a user runs it: one attempt per
 * acquire (the workload backs off and tries again), the default refresh
 * interval on real time, and onLockLost ending the lease (the default one
 * throws from a timer, which would kill the process). No deadline: the lease
 * is held until released or lost.
 */
export function semaphoreConcurrent(kind: SemaphoreMutexKind): ConcurrentClient {
  return {
    servers: { kind: 'redis', nodes: kind === 'mutex' ? 1 : 5 },
    lockKey: mutexKey,
    tokens: false,
    async connect(servers, clock) {
      const nodes = await Promise.all(servers.redis.map(concurrentRedis));
      const held = new LibraryLocks<AnyMutex>();
      return {
        async acquire(resource, ttlMs) {
          let handle: LeaseHandle | null = null;
          const mutex = newMutex(kind, nodes, resource, { lockTimeout: ttlMs, acquireTimeout: ttlMs, acquireAttemptsLimit: 1, onLockLost: () => handle?.lose('expired') });
          if (!(await mutex.tryAcquire())) return { kind: 'denied', reason: 'held' };
          handle = new LeaseHandle(resource, mutex.identifier, 0n, null, clock);
          return held.granted(handle, mutex);
        },
        async release(lease) {
          const mutex = held.end(lease, 'released');
          if (mutex === undefined) return;
          await mutex.release();
        },
        async close() {
          for (const mutex of held.locks()) mutex.stopRefresh();
          for (const n of nodes) n.disconnect();
        },
      };
    },
  };
}

export const REDIS_SEMAPHORE_MUTEX_CONCURRENT: ConcurrentClient = semaphoreConcurrent('mutex');
export const REDIS_SEMAPHORE_REDLOCK_MUTEX_CONCURRENT: ConcurrentClient = semaphoreConcurrent('redlock-mutex');

/** `lockcheck run --backend ./conformance/adapters/redisSemaphore.ts [--redis …]`: the Mutex on one node; `lockcheck stress` takes `concurrent`. */
export default (choice: RedisServerChoice = {}): BackendUnderTest => redisSemaphoreMutexBackend(choice);
export const concurrent = REDIS_SEMAPHORE_MUTEX_CONCURRENT;
