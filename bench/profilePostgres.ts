/**
 * Where PostgresSessionLock spends its client CPU: 8 concurrent acquire +
 * release loops (one lock object each) under the V8 sampling profiler, then
 * the functions with the most self time. Starts its own PostgreSQL and stops it.
 *
 *   npx tsx bench/profilePostgres.ts [--seconds N]
 */
import { PostgresServer, stopAllPostgresServers } from '../conformance/env/postgresServer.ts';
import { PostgresSessionLock } from '../impl/postgres/sessionLock.ts';
import { log } from './common.ts';
import { profiled, profileTable } from './profile.ts';

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
  const p = await profiled(async () => {
    const until = performance.now() + seconds * 1000;
    return (await Promise.all(locks.map((_, k) => loop(k, until)))).reduce((a, b) => a + b, 0);
  });
  profileTable('PostgresSessionLock, 8 concurrent', seconds, p);
} catch (e) {
  log(String(e));
  process.exitCode = 1;
} finally {
  await Promise.all(locks.map((l) => l.close()));
  await stopAllPostgresServers();
}
