/**
 * The exploration's speed and reach, one command:
 *   npx tsx bench/explore.ts [--depth N] [--design KIND] [--row LABEL] [--store POLICY] [--fault CLASS] [--no-client-symmetry] [--no-node-symmetry] [--reference] [--budget-s S] [--verdicts]
 * With --reference, the reference step alone (no packed engine), to compare.
 * With --verdicts, each cell is explored to the depth recorded in
 * test/fixtures/explore-verdicts.json and its verdict compared with the
 * recorded one (the exit code says whether all agree).
 * Prints per cell the distinct states, transitions, depth completed and the
 * CPU time, then the totals: distinct states per CPU second (the machine is
 * shared, so CPU time, not wall time, is the figure to compare), bytes per
 * stored state and the fingerprint collision estimate.
 */
import { parseArgs } from 'node:util';
import { cpuUsage } from 'node:process';
import { readFileSync } from 'node:fs';
import type { CellResult } from '../model/index.ts';
import { exploreCell, explorationKey, FAULT_CLASSES, MATRIX_ROWS } from '../model/index.ts';

const { values } = parseArgs({
  options: {
    depth: { type: 'string', default: '6' },
    design: { type: 'string' },
    row: { type: 'string' },
    store: { type: 'string' },
    fault: { type: 'string' },
    'no-client-symmetry': { type: 'boolean', default: false },
    'no-node-symmetry': { type: 'boolean', default: false },
    reference: { type: 'boolean', default: false },
    'budget-s': { type: 'string' },
    'max-states': { type: 'string', default: '50000000' },
    verdicts: { type: 'boolean', default: false },
  },
});
const depth = Number(values.depth);
interface Recorded {
  row: string;
  store: string;
  fault: string;
  depth: number;
  found: Record<string, number>;
}
const recorded: Recorded[] = values.verdicts ? (JSON.parse(readFileSync(new URL('../test/fixtures/explore-verdicts.json', import.meta.url), 'utf8')) as { cells: Recorded[] }).cells : [];
let disagreements = 0;
/** Entries in the order of their keys (property IDs). */
const byKey = ([a]: [string, unknown], [b]: [string, unknown]): number => (a < b ? -1 : a > b ? 1 : 0);
const cpuMs = (): number => {
  const u = cpuUsage();
  return (u.user + u.system) / 1000;
};
let states = 0;
let transitions = 0;
let bytes = 0;
let collision = 0;
// Cells that are one transition system (explorationKey) are explored once, as `lockcheck explore` does.
const explored = new Map<string, CellResult>();
let cells = 0;
// States of the explorations run (a cell explored once with another adds its states to `states` only).
let exploredStates = 0;
const startCpu = cpuMs();
const startWall = performance.now();
for (const row of MATRIX_ROWS.filter((r) => (values.design === undefined || r.design.kind === values.design) && (values.row === undefined || r.label === values.row))) {
  for (const store of row.stores.filter((s) => values.store === undefined || s === values.store)) {
    for (const fault of FAULT_CLASSES.filter((f) => values.fault === undefined || f === values.fault)) {
      const t0 = cpuMs();
      const want = recorded.find((r) => r.row === row.label && r.store === store && r.fault === fault);
      const key = `${explorationKey(row, store, fault)}|${want?.depth ?? depth}`;
      const same = explored.get(key);
      cells++;
      const c = same ?? exploreCell(row, store, fault, {
        maxDepth: want?.depth ?? depth,
        maxStates: Number(values['max-states']),
        clock: cpuMs,
        budgetMs: values['budget-s'] === undefined ? undefined : Number(values['budget-s']) * 1000,
        clientSymmetry: !values['no-client-symmetry'],
        nodeSymmetry: !values['no-node-symmetry'],
        packed: !values.reference,
      });
      explored.set(key, c);
      if (same === undefined) exploredStates += c.states;
      states += c.states;
      transitions += c.transitions;
      bytes += c.bytesPerState * c.states;
      collision += c.collisionProbability;
      const found = c.counterexamples.map((x) => `${x.property}(${x.steps.length})`).join(' ') || '-';
      if (values.verdicts) {
        const got = JSON.stringify(Object.fromEntries(c.counterexamples.map((x): [string, number] => [x.property, x.steps.length]).sort(byKey)));
        const expected = JSON.stringify(Object.fromEntries(Object.entries(want?.found ?? {}).sort(byKey)));
        if (want === undefined || got !== expected || c.depthCompleted !== want.depth) {
          disagreements++;
          console.log(`VERDICT CHANGED: ${row.label} / ${store} / ${fault}: recorded ${expected} to depth ${want?.depth}, got ${got} to depth ${c.depthCompleted}`);
        }
      }
      console.log(
        `${row.label} / ${store} / ${fault}: ${c.states} states, ${c.transitions} transitions, depth ${c.depthCompleted}${c.truncated ? ' (cut)' : ''}, ${((cpuMs() - t0) / 1000).toFixed(2)} cpu-s, ${c.bytesPerState.toFixed(1)} B/state, peak frontier ${c.peakFrontier}, found ${found}${same === undefined ? '' : ` (explored once with ${same.row})`}`,
      );
    }
  }
}
const cpuS = (cpuMs() - startCpu) / 1000;
const wallS = (performance.now() - startWall) / 1000;
console.log(
  `TOTAL depth ${depth}: ${cells} cells (${explored.size} explorations), ${states} states (${exploredStates} explored), ${transitions} transitions, ${cpuS.toFixed(1)} cpu-s (${wallS.toFixed(1)} wall-s): ${Math.round(states / cpuS)} states/cpu-s (${Math.round(exploredStates / cpuS)} explored), ${Math.round(transitions / cpuS)} transitions/cpu-s, ${(bytes / states).toFixed(1)} B/state stored, collision probability ${collision.toExponential(2)}`,
);
if (values.verdicts) {
  console.log(disagreements === 0 ? 'every verdict agrees with the recorded one' : `${disagreements} verdict(s) changed`);
  process.exitCode = disagreements === 0 ? 0 : 1;
}
