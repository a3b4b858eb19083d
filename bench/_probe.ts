import { Redis } from 'ioredis';
import { RedisServer, stopAllRedisServers } from '../conformance/env/redisServer.ts';
import { createRedisLock } from '../impl/redis/index.ts';
const s = await RedisServer.start({ persistence: 'none' });
const r = new Redis({ host: s.host, port: s.port });
try {
  const lock = createRedisLock({ nodes: [r] });
  const t = performance.now(); let n = 0;
  await Promise.all(Array.from({ length: 50 }, async (_, i) => { while (performance.now() - t < 4000) { const a = await lock.acquire('x' + i, { ttlMs: 10000 }); if (a.kind !== 'granted') throw new Error(a.kind); await lock.release(a.lease); n++; } }));
  console.log('lockcheck', Math.round(n / ((performance.now() - t) / 1000)));
} finally { r.disconnect(); await stopAllRedisServers(); }
