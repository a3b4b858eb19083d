/**
 * How fast the conformance suite catches each broken backend: over several
 * seeds, the median number of runs and time to the first failure, and the
 * median length of the shrunk schedule. Run: npx tsx bench/detection.ts [seeds] [runs]
 */
import { checkConformance } from '../conformance/check.ts';
import { BROKEN } from '../test/fixtures/broken.ts';
import { median } from './common.ts';

const seeds = Number(process.argv[2] ?? 7);
const runs = Number(process.argv[3] ?? 1000);

console.log(`| broken backend | caught | property named (want) | median runs to detection | median ms to detection | median shrunk steps |`);
console.log(`|---|---|---|---|---|---|`);
for (const b of BROKEN) {
  const found: { run: number; ms: number; len: number; props: string }[] = [];
  for (let seed = 1; seed <= seeds; seed++) {
    const r = await checkConformance(b.backend, { runs, seed, faults: b.faults, resources: b.resources ?? 1 });
    if (r.failure) found.push({ run: r.failure.failedAtRun, ms: r.failure.msToDetection, len: r.failure.shrunkLength, props: r.failure.properties.join(',') });
  }
  const props = [...new Set(found.map((f) => f.props))].join(' / ');
  console.log(
    `| ${b.id} | ${found.length}/${seeds} | ${props} (${b.property}) | ${median(found.map((f) => f.run))} | ${median(found.map((f) => f.ms)).toFixed(0)} | ${median(found.map((f) => f.len))} |`,
  );
}
