/**
 * Where lockcheck's Redis client spends its CPU: 50 concurrent acquire+release
 * loops on one node and on five, under the V8 sampling profiler, then the
 * functions with the most self time. Starts its own redis-server processes
 * and stops them.
 *
 *   npx tsx bench/profileRedis.ts [--seconds N] [--nodes 1|5] [--loops N]   (--loops 1: a sequential caller)
 */
import { Redis } from 'ioredis';
import { RedisServer, stopAllRedisServers } from '../conformance/env/redisServer.ts';
import { createRedisLock } from '../impl/redis/index.ts';
import { log } from './common.ts';
import { profiled, profileTable } from './profile.ts';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : fallback;
  if (!Number.isFinite(v) || v <= 0) throw new Error(`--${name} must be a positive number`);
  return v;
}

async function main(): Promise<void> {
  const seconds = arg('seconds', 3);
  const count = arg('nodes', 5);
  const loops = arg('loops', 50);
  const servers: RedisServer[] = [];
  const clients: Redis[] = [];
  try {
    for (let i = 0; i < count; i++) servers.push(await RedisServer.start({ persistence: 'none' }));
    for (const s of servers) clients.push(new Redis({ ...s.connection }));
    const lock = createRedisLock({ nodes: clients });
    const loop = async (i: number, until: number): Promise<number> => {
      let n = 0;
      while (performance.now() < until) {
        const r = await lock.acquire(`p-${i}`, { ttlMs: 10_000 });
        if (r.kind === 'granted') await lock.release(r.lease);
        n++;
      }
      return n;
    };
    await Promise.all(Array.from({ length: loops }, (_, i) => loop(i, performance.now() + 500)));
    const p = await profiled(async () => {
      const until = performance.now() + seconds * 1000;
      return (await Promise.all(Array.from({ length: loops }, (_, i) => loop(i, until)))).reduce((a, b) => a + b, 0);
    });
    profileTable(`${count} node(s), ${loops} concurrent`, seconds, p);
  } finally {
    for (const c of clients) c.disconnect();
    await stopAllRedisServers();
  }
}

main().catch((e: unknown) => {
  log(String(e));
  process.exitCode = 1;
});
