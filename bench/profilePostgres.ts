/**
 * Where PostgresSessionLock spends its client CPU: 8 concurrent acquire +
 * release loops (one lock object each) under the V8 sampling profiler, then
 * the functions with the most self time. Starts its own PostgreSQL and stops it.
 *
 *   npx tsx bench/profilePostgres.ts [--seconds N]
 */
import { Session } from 'node:inspector/promises';
import { PostgresServer, stopAllPostgresServers } from '../conformance/env/postgresServer.ts';
import { PostgresSessionLock } from '../impl/postgres/sessionLock.ts';
import { log, out } from './common.ts';

interface ProfileNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly hitCount?: number;
}

const i = process.argv.indexOf('--seconds');
const seconds = i >= 0 ? Number(process.argv[i + 1]) : 3;
if (!Number.isFinite(seconds) || seconds <= 0) throw new Error('--seconds must be a positive number');

const locks: PostgresSessionLock[] = [];
try {
  const server = await PostgresServer.start({ parentDir: '/dev/shm', startTimeoutMs: 60_000 });
  for (let k = 0; k < 8; k++) locks.push(new PostgresSessionLock({ connection: server.connection }));
  const loop = async (k: number, until: number): Promise<number> => {
    let n = 0;
    while (performance.now() < until) {
      const r = await locks[k]!.acquire(`p-${k}`);
      if (r.kind === 'granted') await locks[k]!.release(r.lease);
      n++;
    }
    return n;
  };
  await Promise.all(locks.map((_, k) => loop(k, performance.now() + 1000)));
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  const cpu = process.cpuUsage();
  const until = performance.now() + seconds * 1000;
  const ops = (await Promise.all(locks.map((_, k) => loop(k, until)))).reduce((a, b) => a + b, 0);
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
  out(`### PostgresSessionLock, 8 concurrent: ${ops} pairs in ${seconds} s, client CPU ${((used.user + used.system) / ops).toFixed(1)} µs per pair`);
  out();
  out('| self % | function |');
  out('|---:|---|');
  for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 25)) out(`| ${((100 * v) / total).toFixed(1)} | \`${k}\` |`);
} catch (e) {
  log(String(e));
  process.exitCode = 1;
} finally {
  await Promise.all(locks.map((l) => l.close()));
  await stopAllPostgresServers();
}
