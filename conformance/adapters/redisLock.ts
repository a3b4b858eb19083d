/**
 * The adapter for `redis-lock` (npm, 1.0.0, MIT, about 150 k downloads a
 * month): a lock on one Redis node, checked against lockcheck's
 * redis-single model. Written from docs/adapter.md and lockcheck/kit alone
 * (issue 10; docs/adapter.md, "Audit of redis-lock").
 *
 * What the library does (index.js, 60 lines):
 * - it takes a node-redis v4 client only (`"v4" in client`) and sends two
 *   commands: `SET lock.<name> <Date.now() + timeout + 1> PX timeout NX`
 *   and `DEL lock.<name>`;
 * - `lock(name, timeout)` resolves when the SET succeeds; a refusal or any
 *   error tries again after `retryDelay` on setTimeout, without end (no
 *   attempt limit, no acquire timeout);
 * - it resolves to `done()`, which DELs the key when its own `Date.now()` is
 *   still before the value it stored: no owner check, so a holder whose key
 *   expired on the server while its own clock says otherwise deletes the
 *   next holder's key (the audit's main finding, OWN-1);
 * - the caller gets no deadline, no extend, no fencing token; any name and
 *   timeout are taken.
 */
import type { Redis } from 'ioredis';
import redisLock from 'redis-lock';
import type { MonotonicClock } from '../../impl/clock.ts';
import { LeaseHandle } from '../../impl/lease.ts';
import type { Lease } from '../../impl/lease.ts';
import type { AcquireResult } from '../../impl/leaseLock.ts';
import type { BackendUnderTest, ConcurrentClient } from '../adapter.ts';
import { concurrentRedis, redisLibraryBackend } from '../kit.ts';
import type { RedisServerChoice } from '../kit.ts';
import { REDIS_LOCK_CONTRACT } from './contracts.ts';

export const REDIS_LOCK_NAME = 'redis-lock@1.0.0';

/** Where the library keeps the lock on a resource. */
export const redisLockKey = (resource: string): string => `lock.${resource}`;

export { REDIS_LOCK_CONTRACT } from './contracts.ts';

type Denial = 'held' | 'no-quorum';

/** Never settles: how an attempt past the caller's limit is dropped (the library's loop waits on it for good). */
const never = new Promise<never>(() => undefined);

/**
 * The two node-redis v4 commands the library sends, over an ioredis
 * connection (the kit's go through the run's faults), allowing `attempts`
 * SETs: when the last one is refused (held) or fails (no quorum), `stopped`
 * is told so at once and the SET never settles, so the library neither
 * sleeps nor sends again. That is how one acquire bounds the library's
 * endless retry loop to the caller's retries. The value of the SET that
 * took the lock is the lease's owner (the library keeps it in a closure).
 */
function limitedClient(redis: Redis, attempts: number, stopped: (denial: Denial) => void) {
  let sent = 0;
  const client = {
    v4: true as const,
    owner: '',
    async set(key: string, value: number | string, options: { PX: number; NX: true }): Promise<string | null> {
      sent += 1;
      let reply: string | null;
      try {
        reply = await redis.set(key, String(value), 'PX', options.PX, 'NX');
      } catch (error) {
        if (sent < attempts) throw error;
        stopped('no-quorum');
        return never;
      }
      if (reply !== null) client.owner = String(value);
      else if (sent >= attempts) {
        stopped('held');
        return never;
      }
      return reply;
    },
    del: (key: string): Promise<number> => redis.del(key),
  };
  return client;
}

/** One acquire through the library: `retries + 1` SETs at most, `retryDelayMs` apart (its own setTimeout). */
async function acquireThrough(redis: Redis, resource: string, ttlMs: number, retries: number, retryDelayMs: number): Promise<{ denied: Denial } | { owner: string; done: () => Promise<unknown> }> {
  let stop!: (denial: Denial) => void;
  const stopped = new Promise<{ denied: Denial }>((resolve) => (stop = (denied) => resolve({ denied })));
  const client = limitedClient(redis, retries + 1, stop);
  return Promise.race([redisLock(client, retryDelayMs)(resource, ttlMs).then((done) => ({ owner: client.owner, done })), stopped]);
}

/** The lock's calls for one client: leases without deadline or token, released by the library's done(). */
function redisLockCalls(redis: Redis, clock: MonotonicClock) {
  const held = new Map<Lease, { handle: LeaseHandle; done: () => Promise<unknown> }>();
  return {
    async acquire(resource: string, { ttlMs, retries = 0, retryDelayMs = 0 }: { ttlMs: number; retries?: number; retryDelayMs?: number }): Promise<AcquireResult> {
      const got = await acquireThrough(redis, resource, ttlMs, retries, retryDelayMs);
      if ('denied' in got) return { kind: 'denied', reason: got.denied };
      const handle = new LeaseHandle(resource, got.owner, 0n, null, clock);
      held.set(handle, { handle, done: got.done });
      return { kind: 'granted', lease: handle };
    },
    async release(lease: Lease, quiet = true): Promise<void> {
      const h = held.get(lease);
      if (h === undefined) return;
      held.delete(lease);
      h.handle.lose('released');
      // done() DELs the key when the library's own clock says its lock has not run out; a Redis error rejects.
      await (quiet ? h.done().catch(() => undefined) : h.done());
    },
  };
}

/** The audit on the kit's servers: lockcheck's own, the user's (`--redis`), or a running cluster (`choice.cluster`). */
export function redisLockBackend(choice: RedisServerChoice = {}, options: { readonly name?: string } = {}): BackendUnderTest {
  const backend = redisLibraryBackend(
    {
      name: options.name ?? REDIS_LOCK_NAME,
      contract: REDIS_LOCK_CONTRACT,
      options: { retryDelay: 'the acquire\'s retryDelayMs', attempts: 'the acquire\'s retries + 1 (the adapter ends the loop)' },
      lockKey: redisLockKey,
      client: ({ nodes, clock }) => {
        const calls = redisLockCalls(nodes[0]!, clock);
        return { acquire: (resource, o) => calls.acquire(resource, o), release: (lease) => calls.release(lease) };
      },
    },
    choice,
  );
  return { ...backend, concurrent: REDIS_LOCK_CONCURRENT };
}

/**
 * The library in a concurrent run, as its README has it but with one attempt
 * per acquire (the workload backs off): a connection with 2 s command
 * timeouts (concurrentRedis), no deadline (held until released).
 */
export const REDIS_LOCK_CONCURRENT: ConcurrentClient = {
  servers: { kind: 'redis', nodes: 1 },
  lockKey: redisLockKey,
  tokens: false,
  async connect(servers, clock) {
    const redis = await concurrentRedis(servers.redis[0]!);
    const calls = redisLockCalls(redis, clock);
    return {
      async acquire(resource, ttlMs) {
        const r = await calls.acquire(resource, { ttlMs });
        // A Redis error (no quorum of one) leaves the outcome unknown: the SET may have landed.
        if (r.kind === 'denied' && r.reason === 'no-quorum') throw new Error(`${REDIS_LOCK_NAME}: acquire failed on a Redis error`);
        return r;
      },
      release: (lease) => calls.release(lease, false),
      async close() {
        redis.disconnect();
      },
    };
  },
};

/** `lockcheck run --backend ./conformance/adapters/redisLock.ts [--redis …]`; `lockcheck stress` takes `concurrent`. */
export default (choice: RedisServerChoice = {}): BackendUnderTest => redisLockBackend(choice);
export const concurrent = REDIS_LOCK_CONCURRENT;
