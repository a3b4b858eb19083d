/**
 * The adapter for `@microfleet/ioredis-lock` (npm, 6.0.1, MIT): a lock on
 * one Redis node through ioredis, checked against lockcheck's redis-single
 * model on real redis-server processes. Written from docs/adapter.md and
 * lockcheck/kit alone (see docs/adapter.md, "Auditing an npm library with the
 * kit"), as a user auditing a library would.
 *
 * What the library does (src/lock.ts, src/scripts.ts):
 * - `createLock(client, { timeout, retries, delay, jitter })` is a Lock for
 *   one key at a time; `acquire(key)` is `SET key uuid PX timeout NX`, and a
 *   miss retries `retries` times (default 6) after a real
 *   `timers/promises` delay: the adapter sets retries 0 and retries on the
 *   client's clock itself;
 * - the caller is given no deadline: the Lock stays `_locked` until a
 *   release, or an extend that finds the key gone;
 * - `extend(time)` is a Lua script (`pexpireifequal`): PEXPIRE key time if
 *   the value is ours. It sets the time it is given; when the key is no
 *   longer ours it drops the lock (`_locked = false`) and throws
 *   LockExtendError. A Redis error (a timeout) throws the same error class
 *   but keeps the lock;
 * - `release()` is `delifequal` (GET = uuid then DEL) and throws
 *   LockReleaseError when the key had expired;
 * - the scripts are ioredis custom commands (defineCommand: EVALSHA with
 *   ioredis's own EVAL fallback); no fencing tokens; no client-side timeout
 *   (it uses the connection it is given); no input checks (an empty key is
 *   a key).
 *
 * On the adapter kit (redisLibraryBackend): every command the library sends
 * goes through the run's faults (partitions, delays, late replies, a slow or
 * black-holed node, pauses, crashes), on the client's clocks.
 */
import type { Redis } from 'ioredis';
import { createLock, LockAcquisitionError, LockExtendError } from '@microfleet/ioredis-lock';
import type { Lock } from '@microfleet/ioredis-lock';
import type { MonotonicClock } from '../../impl/clock.ts';
import { LeaseHandle } from '../../impl/lease.ts';
import type { AcquireResult, ExtendResult } from '../../impl/leaseLock.ts';
import type { BackendUnderTest, ConcurrentClient } from '../adapter.ts';
import type { LockCalls, RedisServerChoice } from '../kit.ts';
import { concurrentRedis, redisLibraryBackend } from '../kit.ts';
import { IOREDIS_LOCK_CONTRACT } from './contracts.ts';
import { LibraryLocks } from './libraryLocks.ts';
import { retryOnClock } from './retryOnClock.ts';

export const IOREDIS_LOCK_NAME = '@microfleet/ioredis-lock@6.0.1';

/** Where the adapter keeps the lock on a resource (the library locks the key it is given). */
export const ioredisLockKey = (resource: string): string => `ioredis-lock:${resource}`;

/** What the library promises (see above). */
export { IOREDIS_LOCK_CONTRACT } from './contracts.ts';

/** The value the library stores in the key: its Lock's private uuid (the Lock never says it). */
const ownerOf = (lock: Lock): string => (lock as unknown as { readonly _id: string })._id;

/** The audit on the kit's servers: lockcheck's own, the user's (`--redis`), or a running cluster (`choice.cluster`). */
export function ioredisLockBackend(choice: RedisServerChoice = {}, options: { readonly name?: string } = {}): BackendUnderTest {
  const backend = redisLibraryBackend(
    {
      name: options.name ?? `${IOREDIS_LOCK_NAME} redis-single`,
      contract: IOREDIS_LOCK_CONTRACT,
      options: { retries: 0 },
      lockKey: ioredisLockKey,
      client: ({ nodes, clock }) => ioredisLockCalls(nodes[0]!, clock),
    },
    choice,
  );
  return { ...backend, concurrent: IOREDIS_LOCK_CONCURRENT };
}

/** One client's calls through the library (the kit runs them on the client's clocks). */
function ioredisLockCalls(redis: Redis, clock: MonotonicClock): LockCalls {
  const locks = new LibraryLocks<Lock>();
  const attempt = async (resource: string, ttlMs: number): Promise<AcquireResult> => {
    // retries 0: the library's own retries wait on node:timers/promises; the adapter retries on the client's clock.
    const lock = createLock(redis, { timeout: ttlMs, retries: 0 });
    try {
      await lock.acquire(ioredisLockKey(resource));
    } catch (error) {
      // A miss and a Redis error look alike (LockAcquisitionError); an error of the link is a missing quorum of one.
      if (!(error instanceof LockAcquisitionError)) throw error;
      return { kind: 'denied', reason: /Could not acquire lock/.test(error.message) ? 'held' : 'no-quorum' };
    }
    return locks.granted(new LeaseHandle(resource, ownerOf(lock), 0n, null, clock), lock);
  };
  return {
    async acquire(resource, { ttlMs, retries = 0, retryDelayMs = 0 }) {
      return retryOnClock(clock, retries, retryDelayMs, () => attempt(resource, ttlMs));
    },
    async extend(lease, ttlMs): Promise<ExtendResult> {
      const held = locks.get(lease);
      if (held === undefined) return { kind: 'not-extended', reason: 'expired' };
      try {
        await held.lock.extend(ttlMs);
        // No deadline from the library (contract: deadline none): the runner compares none.
        return { kind: 'extended', validUntilMs: clock.now() + ttlMs };
      } catch (error) {
        if (!(error instanceof LockExtendError)) throw error;
        if (/had expired/.test(error.message)) {
          // The key was not ours any more: the node did not extend it (the model's 'no-quorum'), and the library
          // dropped the lock, so its caller no longer holds it (the safe direction while the model still has it valid).
          locks.end(lease, 'expired');
        }
        return { kind: 'not-extended', reason: 'no-quorum' };
      }
    },
    async release(lease) {
      const lock = locks.end(lease, 'released');
      if (lock === undefined) return;
      // Throws LockReleaseError when the key had expired (or on a Redis error): the key is then not ours, or expires by its ttl.
      await lock.release().catch(() => undefined);
    },
  };
}

/**
 * The library in a concurrent run, as its README has it: a Lock per acquire
 * on a connection with a 2 s command timeout (concurrentRedis), no retries
 * of its own (the workload backs off). No deadline: the lease is held until
 * released (the workload never extends).
 */
export const IOREDIS_LOCK_CONCURRENT: ConcurrentClient = {
  servers: { kind: 'redis', nodes: 1 },
  lockKey: ioredisLockKey,
  tokens: false,
  async connect(servers, clock) {
    const redis = await concurrentRedis(servers.redis[0]!);
    const locks = new LibraryLocks<Lock>();
    return {
      async acquire(resource, ttlMs) {
        const lock = createLock(redis, { timeout: ttlMs, retries: 0 });
        try {
          await lock.acquire(ioredisLockKey(resource));
        } catch (error) {
          if (error instanceof LockAcquisitionError && /Could not acquire lock/.test(error.message)) return { kind: 'denied', reason: 'held' };
          throw error;
        }
        return locks.granted(new LeaseHandle(resource, ownerOf(lock), 0n, null, clock), lock);
      },
      async release(lease) {
        const lock = locks.end(lease, 'released');
        if (lock === undefined) return;
        await lock.release();
      },
      async close() {
        redis.disconnect();
      },
    };
  },
};

/** `lockcheck run --backend ./conformance/adapters/ioredisLock.ts [--redis …]`; `lockcheck stress` takes `concurrent`. */
export default (choice: RedisServerChoice = {}): BackendUnderTest => ioredisLockBackend(choice);
export const concurrent = IOREDIS_LOCK_CONCURRENT;
