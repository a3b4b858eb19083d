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
 *   fails (`onLockLost`), and refreshes run on a real setInterval
 *   (refreshInterval, default 0.8 * lockTimeout). Virtual time cannot drive
 *   that timer, so refreshes are off in lockstep runs and the runner's extend
 *   calls the library's own refresh (`_refresh`: PEXPIRE if the value is
 *   ours; RedlockMutex: on every node, then `SET NX` on the nodes that had
 *   no key when a quorum refreshed, and a delete everywhere when none did):
 *   it re-arms the fixed lockTimeout the lock was made with;
 * - release is a compare-and-delete script (EVALSHA, EVAL on NOSCRIPT), on
 *   every node for RedlockMutex;
 * - no fencing tokens, no client-side timeout, no input checks (an empty
 *   key throws a plain Error).
 * Time: the library reads Date.now() for acquireTimeout; it reads the
 * client's wall clock (libraryClock.ts) during the client's calls.
 *
 * In a concurrent run (`lockcheck stress`) the library runs as a user runs
 * it: refreshes on (the default interval, real time), onLockLost ending the
 * lease, connections with a 2 s command timeout.
 */
import type { Redis } from 'ioredis';
import redisSemaphoreModule from 'redis-semaphore';
import { designs } from '../../model/design.ts';
import type { Design } from '../../model/design.ts';
import { sleep } from '../../impl/clock.ts';
import { LeaseHandle } from '../../impl/lease.ts';
import type { Lease } from '../../impl/lease.ts';
import type { AcquireResult, ExtendResult } from '../../impl/leaseLock.ts';
import { redisFencedStore } from '../../impl/redis/store.ts';
import type { BackendInstance, BackendUnderTest, ConcurrentClient, LockClient } from '../adapter.ts';
import { concurrentRedis } from '../stress/client.ts';
import type { RedisCluster } from '../env/redisBackend.ts';
import { startRedisRun, toleranceOn } from '../env/redisBackend.ts';
import { linked } from './redlock.ts';
import { REDIS_SEMAPHORE_CONTRACT, REDIS_SEMAPHORE_REDLOCK_CONTRACT } from './contracts.ts';
import { onClientClock, onLibraryClockInstance } from '../libraryClock.ts';

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

export function redisSemaphoreMutexBackend(cluster: RedisCluster, options: { readonly name?: string} = {}): BackendUnderTest {
  return semaphoreBackend('mutex', cluster, options);
}

/** RedlockMutex over 5 nodes, against the redlock model (its quorum rule is Redlock's; it keeps no validity). */
export function redisSemaphoreRedlockMutexBackend(cluster: RedisCluster, options: { readonly name?: string} = {}): BackendUnderTest {
  return semaphoreBackend('redlock-mutex', cluster, options);
}

function semaphoreBackend(kind: SemaphoreMutexKind, cluster: RedisCluster, options: { readonly name?: string}): BackendUnderTest {
  const design = kind === 'mutex' ? designs.redisSingle() : designs.redlock({ nodes: 5 });
  if (cluster.persistence === 'aof-always') throw new Error(`redis-semaphore: the cluster's persistence (${cluster.persistence}) does not match ${design.kind} without persistence`);
  if (kind === 'redlock-mutex' && cluster.nodes.length < 5) throw new Error(`redis-semaphore RedlockMutex runs on 5 nodes; the cluster has ${cluster.nodes.length}`);
  return {
    name: options.name ?? `redis-semaphore@5.8.0 ${kind === 'mutex' ? 'Mutex' : 'RedlockMutex'}`,
    design,
    capabilities: { store: 'unfenced', ttl: true, sessionBound: false, reentrant: false, tokens: false, ...toleranceOn(cluster) },
    contract: kind === 'mutex' ? REDIS_SEMAPHORE_CONTRACT : REDIS_SEMAPHORE_REDLOCK_CONTRACT,
    options: { acquireAttemptsLimit: 1, refreshInterval: 0 },
    start: ({ clients }) => startInstance(kind, cluster, design, clients),
    concurrent: semaphoreConcurrent(kind),
  };
}

async function startInstance(kind: SemaphoreMutexKind, cluster: RedisCluster, design: Design, clients: number): Promise<BackendInstance> {
  const run = await startRedisRun(cluster, design, { clients, lockKey: mutexKey });
  return onLibraryClockInstance(run, async () => {
    if (!run.shared) await Promise.all(run.admin.map((r) => r.script('FLUSH')));
    const lockClients: LockClient[] = run.connections.map((conn, client) => {
      const clock = run.clocks[client]!;
      const onWall = <T>(fn: () => T): T => onClientClock(clock, fn);
      const commands = new Set(['set', 'evalsha', 'eval']);
      const nodes: Redis[] = conn.nodes.slice(0, kind === 'mutex' ? 1 : 5).map((r, node) => linked(r, commands, run.network, client, node));
      const held = new Map<Lease, { handle: LeaseHandle; mutex: AnyMutex }>();
      const attempt = (resource: string, ttlMs: number): Promise<AcquireResult> =>
        onWall(async (): Promise<AcquireResult> => {
          const mutex = newMutex(kind, nodes, resource, { lockTimeout: ttlMs, acquireTimeout: 1, acquireAttemptsLimit: 1, retryInterval: 0, refreshInterval: 0, onLockLost: () => undefined });
          // Mutex's acquire throws when its node cannot be reached (lib/mutex/acquire.js has no catch): the caller holds nothing.
          const got = await mutex.tryAcquire().catch(() => null);
          if (got === null) return { kind: 'denied', reason: 'no-quorum' };
          if (!got) return { kind: 'denied', reason: 'held' };
          // No deadline: the library gives its caller none.
          const handle = new LeaseHandle(resource, mutex.identifier, 0n, null, clock);
          held.set(handle, { handle, mutex });
          return { kind: 'granted', lease: handle };
        });
      const fenced = redisFencedStore(conn.store, 'unfenced');
      return {
        clock,
        store: { write: (r, t, v) => run.network.call(client, 'store', () => fenced.write(r, t, v)), read: (r) => run.network.call(client, 'store', () => fenced.read(r)) },
        async acquire(resource, { ttlMs, retries = 0, retryDelayMs = 0 }) {
          for (let tries = 0; ; tries++) {
            const result = await attempt(resource, ttlMs);
            if (result.kind !== 'denied' || tries >= retries) return result;
            await sleep(clock, retryDelayMs);
          }
        },
        extend: (lease, ttlMs) =>
          onWall(async (): Promise<ExtendResult> => {
            const h = held.get(lease);
            if (h === undefined) return { kind: 'not-extended', reason: 'expired' };
            // A refresh that throws (Mutex: a node it cannot reach) rejects its setInterval's callback: the library leaves the lock acquired (Lock.js `_processRefresh` has no catch).
            const refreshed = await (h.mutex as unknown as Refreshable)._refresh().catch(() => null);
            if (refreshed === null) return { kind: 'not-extended', reason: 'no-quorum' };
            if (refreshed) {
              // The library tells its caller nothing but success; the runner compares no deadline for it (contract: deadline none).
              return { kind: 'extended', validUntilMs: clock.now() + ttlMs };
            }
            // What its setInterval would do: the lock is lost (onLockLost). The nodes did not extend it: the model's 'no-quorum'.
            held.delete(lease);
            h.handle.lose('expired');
            return { kind: 'not-extended', reason: 'no-quorum' };
          }),
        async release(lease) {
          const h = held.get(lease);
          if (h === undefined) return;
          held.delete(lease);
          h.handle.lose('released');
          await onWall(() => h.mutex.release()).catch(() => undefined);
        },
      };
    });
    return lockClients;
  });
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
      const held = new Map<Lease, { handle: LeaseHandle; mutex: AnyMutex }>();
      return {
        async acquire(resource, ttlMs) {
          let handle: LeaseHandle | null = null;
          const mutex = newMutex(kind, nodes, resource, { lockTimeout: ttlMs, acquireTimeout: ttlMs, acquireAttemptsLimit: 1, onLockLost: () => handle?.lose('expired') });
          if (!(await mutex.tryAcquire())) return { kind: 'denied', reason: 'held' };
          handle = new LeaseHandle(resource, mutex.identifier, 0n, null, clock);
          held.set(handle, { handle, mutex });
          return { kind: 'granted', lease: handle };
        },
        async release(lease) {
          const h = held.get(lease);
          if (h === undefined) return;
          held.delete(lease);
          h.handle.lose('released');
          await h.mutex.release();
        },
        async close() {
          for (const h of held.values()) h.mutex.stopRefresh();
          for (const n of nodes) n.disconnect();
        },
      };
    },
  };
}

export const REDIS_SEMAPHORE_MUTEX_CONCURRENT: ConcurrentClient = semaphoreConcurrent('mutex');
export const REDIS_SEMAPHORE_REDLOCK_MUTEX_CONCURRENT: ConcurrentClient = semaphoreConcurrent('redlock-mutex');
