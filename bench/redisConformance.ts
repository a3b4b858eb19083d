/**
 * The large conformance run on real Redis servers: every Redis backend against
 * its model over many generated schedules with faults. Run:
 *   npx tsx bench/redisConformance.ts [runs=2000] [seed=1]
 * Prints one line per backend as it finishes, then a table.
 */
import { checkConformance } from '../conformance/check.ts';
import type { RedisCluster } from '../conformance/env/redisBackend.ts';
import { realRedisBackend, startRedisCluster } from '../conformance/env/redisBackend.ts';
import { describeDesign, designs } from '../model/design.ts';
import type { Design, StorePolicy } from '../model/design.ts';

const runs = Number(process.argv[2] ?? 2000);
const seed = Number(process.argv[3] ?? 1);
const rows: string[] = [];
const clusters: Record<'none' | 'aof-always', RedisCluster> = {
  none: await startRedisCluster({ nodes: 5, persistence: 'none' }),
  'aof-always': await startRedisCluster({ nodes: 5, persistence: 'aof-always' }),
};
try {
  const cases: ReadonlyArray<readonly [Design, StorePolicy]> = [
    [designs.redisSingle(), 'strict'],
    [designs.redisSingle({ persistence: 'aof-always' }), 'strict'],
    [designs.redlock({ nodes: 5 }), 'strict'],
    [designs.redlock({ nodes: 5, persistence: 'aof-always' }), 'monotonic'],
    [designs.redlock({ nodes: 5, restartDelayMs: 61 }), 'unfenced'],
  ];
  for (const [design, store] of cases) {
    const persistence = design.kind === 'redis-single' || design.kind === 'redlock' ? design.persistence : 'none';
    const backend = realRedisBackend(clusters[persistence], design, store);
    const result = await checkConformance(backend, {
      runs,
      seed,
      resources: 2,
      onRun: (run) => {
        if (run % 100 === 0) process.stderr.write(`${backend.name}: ${run}/${runs}\n`);
      },
    });
    const findings = Object.entries(result.findings).flatMap(([p, n]) => (n !== null && n > 0 ? [`${p} ${n}`] : [])).join(', ') || 'none';
    const line = `| ${describeDesign(design)} | ${store} | ${result.runs} | ${result.failure ? `FAILED: ${result.failure.properties.join(',')}` : 'none'} | ${findings} | ${result.stoppedEarly} | ${(result.elapsedMs / 1000).toFixed(0)} s |`;
    process.stderr.write(`${line}\n`);
    if (result.failure) process.stderr.write(`${result.failure.message}\n`);
    rows.push(line);
  }
} finally {
  await Promise.all([clusters.none.stop(), clusters['aof-always'].stop()]);
}
console.log(`Real redis-server processes, clocks under libfaketime, seed ${seed}, ${runs} schedules per backend, 2 clients, 2 resources, every fault.\n`);
console.log('| design | store | schedules | conformance failures | runs with findings (property violations of the design) | stopped early | time |');
console.log('|---|---|---|---|---|---|---|');
for (const r of rows) console.log(r);
