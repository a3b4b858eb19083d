/**
 * Time to first finding with and without the model's seed schedules
 * (issue 12, item 6), on real servers lockcheck starts, one command:
 *   npx tsx bench/seeds.ts [runs] [backend x class ...]
 * For each cell, the same seeded check (seed 20161010) runs twice: random
 * schedules only, then the model's counterexamples first
 * (`modelSeeds: true`); per property the model predicts, the run at which it
 * first showed and the ms since the check started. Numbers in bench/explore.md.
 */
import { checkConformance } from '../conformance/check.ts';
import { SEED_CELLS } from '../conformance/seedSchedules.ts';
import { BUILT_INS, MEASURED_FAULT_CLASSES, Servers } from '../cli/backends.ts';
import { describeDesign } from '../model/design.ts';
import type { PropertyId } from '../model/properties.ts';

const runs = Number(process.argv[2] ?? 30);
const DEFAULT_CELLS = [
  'redis-single/unfenced x client-pause',
  'redis-single/unfenced x clock-step',
  'redis-single/unfenced x crash-restart',
  'redlock/unfenced x clock-step',
  'redlock/unfenced x crash-restart',
  'pg-session/unfenced x crash-restart',
];
const wanted = process.argv.length > 3 ? process.argv.slice(3) : DEFAULT_CELLS;

const servers = new Servers();
try {
  console.log(`| cell | predicted (model) | first run / ms, random only | first run / ms, model seeds first (seeds) |`);
  console.log('|---|---|---|---|');
  for (const name of wanted) {
    const [rowName, colId] = name.split(' x ');
    const row = BUILT_INS.find((b) => b.name === rowName);
    const col = MEASURED_FAULT_CLASSES.find((c) => c.id === colId);
    if (row === undefined || col === undefined) throw new Error(`no cell '${name}'`);
    const predicted = new Set<PropertyId>(
      SEED_CELLS.filter((c) => c.design === describeDesign(row.design) && c.store === row.store && col.model.includes(c.fault)).flatMap((c) => c.found.map((f) => f.property)),
    );
    const backend = await servers.backend(row);
    const firstSeen = async (modelSeeds: boolean): Promise<string> => {
      const first = new Map<PropertyId, string>();
      const t0 = performance.now();
      await checkConformance(backend, {
        runs,
        seed: 20161010,
        faults: col.faults,
        modelSeeds,
        onRun: (run, report) => {
          for (const f of report.findings) for (const v of f.violations) if (!first.has(v.property)) first.set(v.property, `${run} / ${Math.round(performance.now() - t0)}`);
        },
      });
      return [...predicted].map((p) => `${p}: ${first.get(p) ?? `not in ${runs}`}`).join(', ');
    };
    const before = await firstSeen(false);
    const after = await firstSeen(true);
    console.log(`| ${name} | ${[...predicted].join(', ') || '-'} | ${before} | ${after} |`);
  }
} finally {
  await servers.stop();
}
