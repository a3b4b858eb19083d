/**
 * The adapter for `redis-semaphore` (npm, 5.8.0): its `Mutex` on one Redis
 * node, checked against lockcheck's redis-single model on real redis-server
 * processes, judged by the contract the library keeps (lib/Lock.js,
 * lib/mutex/*.js):
 * - acquire is `SET key id PX lockTimeout NX` (`mutex:<key>`), one round
 *   trip; a denied attempt sleeps `retryInterval` on a real setTimeout, so
 *   the adapter makes one attempt (acquireAttemptsLimit 1) and retries on the
 *   client's clock itself;
 * - the client is given no deadline: `isAcquired` stays true until a refresh
 *   fails (`onLockLost`), and refreshes run on a real setInterval
 *   (refreshInterval, default 0.8 * lockTimeout). Virtual time cannot drive
 *   that timer, so refreshes are off and the runner's extend calls the
 *   library's own refresh (`_refresh`, PEXPIRE if the value is ours): it
 *   re-arms the fixed lockTimeout the Mutex was made with;
 * - release is a compare-and-delete script (EVALSHA, EVAL on NOSCRIPT);
 * - no fencing tokens, no client-side timeout, no input checks (an empty
 *   key throws a plain Error).
 * Time: the library reads Date.now() for acquireTimeout; it reads the
 * client's wall clock (libraryClock.ts) during the client's calls.
 */
import type { Redis } from 'ioredis';
import redisSemaphoreModule from 'redis-semaphore';
import { designs } from '../../model/design.ts';
import { sleep } from '../../impl/clock.ts';
import { LeaseHandle } from '../../impl/lease.ts';
import type { Lease } from '../../impl/lease.ts';
import type { AcquireResult, ExtendResult } from '../../impl/leaseLock.ts';
import { redisFencedStore } from '../../impl/redis/store.ts';
import type { BackendInstance, BackendUnderTest, LibraryContract, LockClient } from '../adapter.ts';
import type { RedisCluster } from '../env/redisBackend.ts';
import { startRedisRun, toleranceOn } from '../env/redisBackend.ts';
import { linked } from './redlock.ts';
import { onClientClock, onLibraryClockInstance } from '../libraryClock.ts';

type MutexClass = typeof redisSemaphoreModule.Mutex;
/** The CommonJS module's exports: node hands over the exports object as the default import. */
const Mutex: MutexClass = (redisSemaphoreModule as unknown as { Mutex: MutexClass }).Mutex;

/** What redis-semaphore's Mutex promises (see above). */
export const REDIS_SEMAPHORE_CONTRACT: LibraryContract = { deadline: 'none', clientTimeout: false, refreshTtl: 'acquired', tokens: 'none', validatesInput: false };

export const mutexKey = (resource: string): string => `mutex:${resource}`;

/** The library's private refresh, which its setInterval calls: true when the key was still ours and got a fresh lockTimeout. */
interface Refreshable {
  _refresh(): Promise<boolean>;
}

export function redisSemaphoreMutexBackend(cluster: RedisCluster, options: { readonly name?: string } = {}): BackendUnderTest {
  const design = designs.redisSingle();
  if (cluster.persistence === 'aof-always') throw new Error(`redis-semaphore: the cluster's persistence (${cluster.persistence}) does not match redis-single without persistence`);
  return {
    name: options.name ?? 'redis-semaphore@5.8.0 Mutex',
    design,
    capabilities: { store: 'unfenced', ttl: true, sessionBound: false, reentrant: false, tokens: false, ...toleranceOn(cluster) },
    contract: REDIS_SEMAPHORE_CONTRACT,
    options: { acquireAttemptsLimit: 1, refreshInterval: 0 },
    start: ({ clients }) => startInstance(cluster, clients),
  };
}

async function startInstance(cluster: RedisCluster, clients: number): Promise<BackendInstance> {
  const run = await startRedisRun(cluster, designs.redisSingle(), { clients, lockKey: mutexKey });
  return onLibraryClockInstance(run, async () => {
    if (!run.shared) await Promise.all(run.admin.map((r) => r.script('FLUSH')));
    const lockClients: LockClient[] = run.connections.map((conn, client) => {
      const clock = run.clocks[client]!;
      const onWall = <T>(fn: () => T): T => onClientClock(clock, fn);
      const redis: Redis = linked(conn.nodes[0]!, new Set(['set', 'evalsha', 'eval']), run.network, client, 0);
      const held = new Map<Lease, { handle: LeaseHandle; mutex: InstanceType<MutexClass> }>();
      const attempt = (resource: string, ttlMs: number): Promise<AcquireResult> =>
        onWall(async (): Promise<AcquireResult> => {
          const mutex = new Mutex(redis, resource, { lockTimeout: ttlMs, acquireTimeout: 1, acquireAttemptsLimit: 1, retryInterval: 0, refreshInterval: 0, onLockLost: () => undefined });
          if (!(await mutex.tryAcquire())) return { kind: 'denied', reason: 'held' };
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
            if (await (h.mutex as unknown as Refreshable)._refresh()) {
              // The library tells its caller nothing but success; the runner compares no deadline for it (contract: deadline none).
              return { kind: 'extended', validUntilMs: clock.now() + ttlMs };
            }
            // What its setInterval would do: the lock is lost (onLockLost).
            held.delete(lease);
            h.handle.lose('expired');
            return { kind: 'not-extended', reason: 'expired' };
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
