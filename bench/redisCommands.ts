/**
 * What one sequential acquire + release pair costs on five Redis nodes,
 * lockcheck against redlock 5.0.0-beta.2, counted rather than timed: the
 * commands the servers ran (INFO commandstats, the scripts' inner calls
 * included), the script calls the client sent (its round trips: one per
 * node per round), the timers and immediates the client scheduled (the
 * event-loop turns beyond the replies) and the promises it made (its own
 * and its libraries', counted by an async hook). Deterministic on a healthy machine;
 * starts its own redis-server processes and stops them.
 *
 *   npx tsx bench/redisCommands.ts
 */
import { createHook } from 'node:async_hooks';
import { Redis } from 'ioredis';
import { RedisServer, stopAllRedisServers } from '../conformance/env/redisServer.ts';
import { createRedisLock } from '../impl/redis/index.ts';
import Redlock from './redlockTyped.ts';
import { log, out } from './common.ts';

const NODES = 5;
const PAIRS = 2000;

const servers: RedisServer[] = [];
const clients: Redis[] = [];
const scheduled = { timers: 0, immediates: 0, promises: 0 };
/** Counts the promises made while enabled (the client's own and its libraries'). */
const promises = createHook({ init: (_id, type) => void (type === 'PROMISE' && scheduled.promises++) });
const { setTimeout: realSetTimeout, setImmediate: realSetImmediate } = globalThis;

/** Counts the client's timers and immediates (the lock's clock schedules through these). */
function countScheduling(): void {
  globalThis.setTimeout = ((...args: Parameters<typeof realSetTimeout>) => (scheduled.timers++, realSetTimeout(...args))) as typeof realSetTimeout;
  globalThis.setImmediate = ((...args: Parameters<typeof realSetImmediate>) => (scheduled.immediates++, realSetImmediate(...args))) as typeof realSetImmediate;
}

/** Calls per command over all servers since the last CONFIG RESETSTAT. */
async function commandStats(): Promise<Map<string, number>> {
  const calls = new Map<string, number>();
  for (const c of clients) {
    for (const m of (await c.info('commandstats')).matchAll(/cmdstat_(\w+):calls=(\d+)/g)) {
      if (m[1] === 'info' || m[1] === 'config') continue;
      calls.set(m[1]!, (calls.get(m[1]!) ?? 0) + Number(m[2]));
    }
  }
  return calls;
}

try {
  for (let i = 0; i < NODES; i++) servers.push(await RedisServer.start({ persistence: 'none' }));
  for (const s of servers) {
    const redis = new Redis({ ...s.connection, lazyConnect: true });
    await redis.connect();
    clients.push(redis);
  }
  const lock = createRedisLock({ nodes: clients });
  const redlock = new Redlock(clients, { retryCount: 0 });
  redlock.on('error', () => undefined);
  const pairs: ReadonlyArray<readonly [string, (i: number) => Promise<void>]> = [
    [
      'lockcheck `createRedisLock`',
      async (i) => {
        const r = await lock.acquire(`c${i % 7}`, { ttlMs: 10_000 });
        if (r.kind !== 'granted') throw new Error(`lockcheck: ${r.kind}`);
        await lock.release(r.lease);
      },
    ],
    [
      'redlock 5.0.0-beta.2',
      async (i) => {
        const held = await redlock.acquire([`rl${i % 7}`], 10_000);
        await held.release();
      },
    ],
  ];
  countScheduling();
  out(`## One sequential acquire + release on ${NODES} nodes, per pair (${PAIRS} pairs)`);
  out();
  out('| client | script calls sent (round trips x nodes) | commands the servers ran | timers | immediates | promises |');
  out('|---|---:|---|---:|---:|---:|');
  for (const [name, pair] of pairs) {
    for (let i = 0; i < 100; i++) await pair(i);
    await lock.settled();
    for (const c of clients) await c.config('RESETSTAT');
    scheduled.timers = 0;
    scheduled.immediates = 0;
    scheduled.promises = 0;
    promises.enable();
    for (let i = 0; i < PAIRS; i++) await pair(i);
    promises.disable();
    const { timers, immediates } = scheduled;
    // The late replies of the last rounds, so that every command is counted.
    await lock.settled();
    const calls = await commandStats();
    const scripts = (calls.get('evalsha') ?? 0) + (calls.get('eval') ?? 0);
    const inner = [...calls].filter(([k]) => k !== 'evalsha' && k !== 'eval').map(([k, v]) => `${(v / PAIRS).toFixed(2)} ${k.toUpperCase()}`);
    out(`| ${name} | ${(scripts / PAIRS).toFixed(2)} | ${inner.join(', ')} | ${(timers / PAIRS).toFixed(2)} | ${(immediates / PAIRS).toFixed(2)} | ${(scheduled.promises / PAIRS).toFixed(1)} |`);
  }
} catch (error) {
  process.exitCode = 1;
  log(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
} finally {
  globalThis.setTimeout = realSetTimeout;
  globalThis.setImmediate = realSetImmediate;
  for (const c of clients) c.disconnect();
  await stopAllRedisServers();
}
