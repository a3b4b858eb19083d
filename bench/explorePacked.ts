/**
 * The packed engine against the reference step, in one process, each
 * exploration of the matrix run both ways in turn (the order swapped every
 * round), CPU time per side (the machine is shared: CPU, not wall time):
 *   npx tsx bench/explorePacked.ts [--depth N] [--rounds R] [--design KIND]
 * Prints per exploration the CPU ms of each side (best of the rounds) and
 * the ratio, then the totals; and checks that both sides found the same
 * states, transitions and counterexamples.
 */
import { parseArgs } from 'node:util';
import { cpuUsage } from 'node:process';
import type { CellResult } from '../model/index.ts';
import { exploreCell, explorationKey, FAULT_CLASSES, MATRIX_ROWS } from '../model/index.ts';

const { values } = parseArgs({
  options: { depth: { type: 'string', default: '7' }, rounds: { type: 'string', default: '2' }, design: { type: 'string' } },
});
const depth = Number(values.depth);
const rounds = Number(values.rounds);
const cpuMs = (): number => {
  const u = cpuUsage();
  return (u.user + u.system) / 1000;
};
const shape = (c: CellResult): string => JSON.stringify([c.states, c.transitions, c.depthCompleted, c.counterexamples.map((x) => [x.property, x.steps.length, x.violation.message])]);
let packedTotal = 0;
let referenceTotal = 0;
let differ = 0;
let states = 0;
const seen = new Set<string>();
for (const row of MATRIX_ROWS.filter((r) => values.design === undefined || r.design.kind === values.design)) {
  for (const store of row.stores) {
    for (const fault of FAULT_CLASSES) {
      const key = explorationKey(row, store, fault);
      if (seen.has(key)) continue;
      seen.add(key);
      let bestPacked = Number.POSITIVE_INFINITY;
      let bestReference = Number.POSITIVE_INFINITY;
      let packedShape = '';
      let referenceShape = '';
      for (let round = 0; round < rounds; round++) {
        for (const packed of round % 2 === 0 ? [true, false] : [false, true]) {
          const t0 = cpuMs();
          const c = exploreCell(row, store, fault, { maxDepth: depth, maxStates: 50_000_000, packed });
          const ms = cpuMs() - t0;
          if (packed) {
            bestPacked = Math.min(bestPacked, ms);
            packedShape = shape(c);
            if (round === 0) states += c.states;
          } else {
            bestReference = Math.min(bestReference, ms);
            referenceShape = shape(c);
          }
        }
      }
      if (packedShape !== referenceShape) differ++;
      packedTotal += bestPacked;
      referenceTotal += bestReference;
      console.log(
        `${row.label} / ${store} / ${fault}: packed ${bestPacked.toFixed(0)} ms, reference ${bestReference.toFixed(0)} ms, ${(bestReference / bestPacked).toFixed(2)}x${packedShape === referenceShape ? '' : ' RESULTS DIFFER'}`,
      );
    }
  }
}
console.log(
  `TOTAL depth ${depth}, ${seen.size} explorations, ${states} states: packed ${(packedTotal / 1000).toFixed(1)} cpu-s (${Math.round(states / (packedTotal / 1000))} states/cpu-s), reference ${(referenceTotal / 1000).toFixed(1)} cpu-s (${Math.round(states / (referenceTotal / 1000))} states/cpu-s), ${(referenceTotal / packedTotal).toFixed(2)}x; ${differ === 0 ? 'every result the same both ways' : `${differ} results differ`}`,
);
process.exitCode = differ === 0 ? 0 : 1;
