/**
 * The walkthrough of docs/adapter.md ("Auditing an npm library with the
 * kit"): redis-semaphore's Mutex (npm, 5.8.0) audited with nothing but
 * lockcheck's public kit. Unlike conformance/adapters/redisSemaphore.ts it
 * lets the library run its own retry loop: its sleeps are setTimeout calls,
 * which the kit runs on the client's virtual clock.
 *
 *   npx lockcheck run --backend docs/examples/redisSemaphoreAudit.ts
 *   npx lockcheck run --backend docs/examples/redisSemaphoreAudit.ts --redis redis://my-staging:6379
 */
import type { Redis } from 'ioredis';
import redisSemaphore from 'redis-semaphore';
// The package's own entries, as in your project (in lockcheck's repository they resolve to its sources: tsconfig.json paths, vitest.config.ts, cli/lockcheck.mjs).
import { LeaseHandle } from 'lockcheck/lock';
import type { Lease } from 'lockcheck/lock';
import type { BackendUnderTest } from 'lockcheck/adapter';
import type { RedisServerChoice } from 'lockcheck/kit';
import { redisLibraryBackend } from 'lockcheck/kit';

/** The CommonJS module's exports: node hands them over as the default import. */
const { Mutex } = redisSemaphore as unknown as { Mutex: typeof redisSemaphore.Mutex };
type Mutex = InstanceType<typeof Mutex>;

/** The library's refresh (PEXPIRE if the key is still ours), which its own setInterval would call. */
const refresh = (mutex: Mutex): Promise<boolean> => (mutex as unknown as { _refresh(): Promise<boolean> })._refresh();

/** The module's default export: lockcheck run hands it the servers the user gave (--redis), if any. */
export default function redisSemaphoreAudit(choice: RedisServerChoice = {}): BackendUnderTest {
  return redisLibraryBackend(
    {
      name: 'redis-semaphore@5.8.0 Mutex (kit walkthrough)',
      // What the library promises (read from its README and lib/): the client gets no deadline, calls have no
      // client-side timeout, a refresh re-arms the lockTimeout the Mutex was made with, no fencing tokens, no input checks.
      contract: { deadline: 'none', clientTimeout: false, refreshTtl: 'acquired', tokens: 'none', validatesInput: false, failedExtend: { lease: 'dropped', keys: 'kept' } },
      // Where it keeps a lock: lets the runner check on the node that only the holder's calls change its key (OWN-1).
      lockKey: (resource) => `mutex:${resource}`,
      client: ({ nodes, clock }) => {
        const redis: Redis = nodes[0]!;
        const held = new Map<Lease, { handle: LeaseHandle; mutex: Mutex }>();
        return {
          async acquire(resource, { ttlMs, retries = 0, retryDelayMs = 0 }) {
            // The library's own retry loop; its sleeps (setTimeout) and its acquireTimeout (Date.now()) run on this client's clock.
            // refreshInterval 0: the runner's extend calls stand for its refresh timer (the model has no background refresh).
            const mutex = new Mutex(redis, resource, { lockTimeout: ttlMs, acquireAttemptsLimit: retries + 1, retryInterval: retryDelayMs, acquireTimeout: 2 ** 30, refreshInterval: 0 });
            // A node it cannot reach makes the library throw: a denial for want of the node, not because the lock is held.
            const acquired = await mutex.tryAcquire().then((ok) => (ok ? 'yes' : 'held'), () => 'unreachable' as const);
            if (acquired !== 'yes') return { kind: 'denied', reason: acquired === 'held' ? 'held' : 'no-quorum' };
            // No deadline: the library gives its caller none (contract: deadline 'none').
            const handle = new LeaseHandle(resource, mutex.identifier, 0n, null, clock);
            held.set(handle, { handle, mutex });
            return { kind: 'granted', lease: handle };
          },
          async extend(lease, ttlMs) {
            const h = held.get(lease);
            if (h === undefined) return { kind: 'not-extended', reason: 'expired' };
            if (await refresh(h.mutex).catch(() => false)) return { kind: 'extended', validUntilMs: clock.now() + ttlMs };
            // What the library does when a refresh fails: the lock is lost (onLockLost).
            held.delete(lease);
            h.handle.lose('expired');
            return { kind: 'not-extended', reason: 'expired' };
          },
          async release(lease) {
            const h = held.get(lease);
            if (h === undefined) return;
            held.delete(lease);
            h.handle.lose('released');
            await h.mutex.release().catch(() => undefined);
          },
        };
      },
    },
    choice,
  );
}
