/**
 * Where lockcheck's Redis client spends its CPU: 50 concurrent acquire+release
 * loops on one node and on five, under the V8 sampling profiler, then the
 * functions with the most self time. Starts its own redis-server processes
 * and stops them.
 *
 *   npx tsx bench/profileRedis.ts [--seconds N] [--nodes 1|5] [--loops N]   (--loops 1: a sequential caller)
 */
import { Session } from 'node:inspector/promises';
import { Redis } from 'ioredis';
import { RedisServer, stopAllRedisServers } from '../conformance/env/redisServer.ts';
import { createRedisLock } from '../impl/redis/index.ts';
import { log, out } from './common.ts';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly hitCount?: number;
}

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
    const session = new Session();
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
    const cpu = process.cpuUsage();
    const until = performance.now() + seconds * 1000;
    const ops = (await Promise.all(Array.from({ length: loops }, (_, i) => loop(i, until)))).reduce((a, b) => a + b, 0);
    const used = process.cpuUsage(cpu);
    const { profile } = await session.post('Profiler.stop');
    session.disconnect();
    const nodes = profile.nodes as ProfileNode[];
    const total = nodes.reduce((a, n) => a + (n.hitCount ?? 0), 0);
    const self = new Map<string, number>();
    for (const n of nodes) {
      const f = n.callFrame;
      const where = f.url === '' ? '(native)' : `${f.url.replace(/^.*\/(node_modules\/|work\/[^/]+\/[^/]+\/)/, '')}:${f.lineNumber + 1}`;
      const key = `${f.functionName || '(anonymous)'} ${where}`;
      self.set(key, (self.get(key) ?? 0) + (n.hitCount ?? 0));
    }
    out(`### ${count} node(s), ${loops} concurrent: ${ops} pairs in ${seconds} s, client CPU ${((used.user + used.system) / ops).toFixed(1)} µs per pair`);
    out('');
    out('| self % | function |');
    out('|---:|---|');
    for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 25)) out(`| ${((100 * v) / total).toFixed(1)} | \`${k}\` |`);
  } finally {
    for (const c of clients) c.disconnect();
    await stopAllRedisServers();
  }
}

main().catch((e: unknown) => {
  log(String(e));
  process.exitCode = 1;
});
