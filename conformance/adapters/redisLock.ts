import type { Redis } from 'ioredis';
import redisLock from 'redis-lock';
import { redisLibraryBackend } from '../kit.ts';
import type { RedisServerChoice } from '../kit.ts';
import { LeaseHandle } from '../../impl/lease.ts';
import type { Lease } from '../../impl/lease.ts';
import type { AcquireResult } from '../../impl/leaseLock.ts';

/**
 * Audit of redis-lock 1.0.0 (npm, about 150 k downloads a month), written
 * from docs/adapter.md and the kit only (issue 10). What the library is
 * (node_modules/redis-lock/index.js, 60 lines): `lock(name, timeout)` SETs
 * `lock.<name>` to `Date.now() + timeout + 1` with PX timeout NX, and on a
 * refusal or any error tries again after `retryDelay` on setTimeout, without
 * end; it resolves to `done()`, which DELs the key when its own
 * `Date.now()` is still before that value. No owner check on release, no
 * deadline for the caller, no extend, no tokens.
 */

/** The node-redis v4 calls the library makes (`"v4" in client`, set with options, del). */
interface NodeRedisV4 {
  readonly v4: true;
  set(key: string, value: number | string, options: { PX: number; NX: true }): Promise<string | null>;
  del(key: string): Promise<number>;
}

/**
 * The library takes only a node-redis v4 client; the kit gives ioredis
 * connections (whose commands go through the run's faults). This is the
 * library's two commands, as node-redis v4 sends them, over ioredis.
 * `beforeSet` lets one acquire bound the library's endless retry loop.
 */
function nodeRedisV4(node: Redis, beforeSet: () => Promise<void> = async () => undefined): NodeRedisV4 {
  return {
    v4: true,
    async set(key, value, { PX }) {
      await beforeSet();
      return node.set(key, String(value), 'PX', PX, 'NX');
    },
    del: (key) => node.del(key),
  };
}


/** Never settles: how an attempt past the caller's limit is dropped (the library's loop then waits on it forever). */
const never = new Promise<never>(() => undefined);

export default (choice: RedisServerChoice = {}) =>
  redisLibraryBackend(
    {
      name: 'redis-lock@1.0.0',
      // README + index.js: done() is all the caller gets (no deadline), node-redis v4 without command timeouts and
      // a retry loop without end (no client timeout), no extend, no tokens, any lock name and timeout taken.
      contract: { deadline: 'none', clientTimeout: false, tokens: 'none', validatesInput: false },
      options: { retryDelay: 'retryDelayMs of each acquire', attempts: 'retries + 1 (the adapter stops the loop)' },
      lockKey: (resource) => `lock.${resource}`,
      client: ({ nodes, clock }) => {
        const node = nodes[0]!;
        const held = new Map<Lease, { handle: LeaseHandle; done: () => Promise<unknown> }>();
        return {
          async acquire(resource, { ttlMs, retries = 0, retryDelayMs = 0 }): Promise<AcquireResult> {
            // The library retries until it gets the lock. The caller's limit (retries + 1 attempts) is kept
            // by the client it is given: the attempt after the last one never settles, and the acquire is
            // denied for what the last attempt met (a refusal: held; an error: no quorum).
            let attempts = 0;
            let last: 'held' | 'no-quorum' = 'held';
            let value = '';
            let stop!: (a: { denied: 'held' | 'no-quorum' }) => void;
            const stopped = new Promise<{ denied: 'held' | 'no-quorum' }>((resolve) => (stop = resolve));
            const client: NodeRedisV4 = {
              v4: true,
              async set(key, v, options) {
                if (attempts === retries + 1) {
                  stop({ denied: last });
                  return never;
                }
                attempts += 1;
                try {
                  const reply = await nodeRedisV4(node).set(key, v, options);
                  last = 'held';
                  if (reply !== null) value = String(v);
                  return reply;
                } catch (error) {
                  last = 'no-quorum';
                  throw error;
                }
              },
              del: (key) => node.del(key),
            };
            const lock = redisLock(client, retryDelayMs);
            const got = await Promise.race([lock(resource, ttlMs).then((done) => ({ done })), stopped]);
            if ('denied' in got) return { kind: 'denied', reason: got.denied };
            const handle = new LeaseHandle(resource, value, 0n, null, clock); // no deadline, no token
            held.set(handle, { handle, done: got.done });
            return { kind: 'granted', lease: handle };
          },
          async release(lease) {
            const h = held.get(lease);
            if (h === undefined) return;
            held.delete(lease);
            h.handle.lose('released');
            await h.done().catch(() => undefined);
          },
        };
      },
    },
    choice,
  );

export { nodeRedisV4 };
