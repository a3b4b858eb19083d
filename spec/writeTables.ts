import { readFileSync, writeFileSync } from 'node:fs';
import type { Predicted, PredictedCell } from './tables.ts';
import { reexplore, VERDICTS_FILE, withBlocks } from './tables.ts';
import { SEED_CELLS } from '../conformance/seedSchedules.ts';
import { SEED_DEPTH, SEED_MAX_STATES } from '../conformance/writeSeeds.ts';

/**
 * Writes the model-decided tables into the markdown between their markers,
 * from the recorded exploration verdicts. `--explore` first explores every
 * cell again to its recorded depth and records what it finds (minutes; after
 * a model change); `--deepen D M` explores every cell to depth D or until M
 * million states, and records the depth each completed.
 */
const FILES = ['spec/SPEC.md', 'docs/choosing-a-lock.md'];

let predicted = JSON.parse(readFileSync(VERDICTS_FILE, 'utf8')) as Predicted;
const deepen = process.argv.indexOf('--deepen');
if (deepen >= 0) {
  // `--deepen D S`: every cell explored again to depth D, or as deep as S million states take it (a cap in states, so the record is the same on every machine).
  const depth = Number(process.argv[deepen + 1]);
  const maxStates = Number(process.argv[deepen + 2]) * 1e6;
  const cpuS = (): number => (process.cpuUsage().user + process.cpuUsage().system) / 1e6;
  const cells = predicted.cells.map((c, i) => {
    const t0 = cpuS();
    // The seeds' exploration of the same design, store and class to the same depth and cap is this one: taken, not repeated.
    const same = depth === SEED_DEPTH && maxStates === SEED_MAX_STATES ? SEED_CELLS.find((x) => x.design === c.row && x.store === c.store && x.fault === c.fault) : undefined;
    const { cell: again, states } =
      same !== undefined ? { cell: { ...c, depth: same.depth, found: Object.fromEntries(same.found.map((f) => [f.property, f.commands.length])) }, states: same.states } : reexplore({ ...c, depth }, maxStates);
    // Deeper never changes a shorter verdict (breadth first): say so if it did.
    const within = (found: PredictedCell['found']): string =>
      Object.entries(found)
        .filter(([, n]) => n <= Math.min(c.depth, again.depth))
        .map(([p, n]) => `${p}:${n}`)
        .sort((a, b) => (a < b ? -1 : 1))
        .join();
    const changed = within(c.found) !== within(again.found) ? ' VERDICT CHANGED' : '';
    process.stderr.write(`[${i + 1}/${predicted.cells.length}] ${c.row} / ${c.store} / ${c.fault}: depth ${again.depth}, ${states} states, ${(cpuS() - t0).toFixed(2)} cpu-s, ${JSON.stringify(again.found)}${changed}\n`);
    return again;
  });
  predicted = { ...predicted, cells };
  writeFileSync(VERDICTS_FILE, `${JSON.stringify(predicted, null, 1)}\n`);
}
if (process.argv.includes('--explore')) {
  const cells = predicted.cells.map((c, i) => {
    const again = reexplore(c).cell;
    process.stderr.write(`[${i + 1}/${predicted.cells.length}] ${c.row} / ${c.store} / ${c.fault}: ${JSON.stringify(again.found)}\n`);
    return again;
  });
  predicted = { ...predicted, cells };
  writeFileSync(VERDICTS_FILE, `${JSON.stringify(predicted, null, 1)}\n`);
}
const matrixMd = readFileSync('docs/matrix.md', 'utf8');
for (const file of FILES) {
  const before = readFileSync(file, 'utf8');
  const after = withBlocks(before, predicted, matrixMd);
  if (after !== before) writeFileSync(file, after);
  process.stderr.write(`${file}: ${after === before ? 'up to date' : 'rewritten'}\n`);
}
