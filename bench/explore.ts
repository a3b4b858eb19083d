/**
 * The exploration's speed and reach, one command:
 *   npx tsx bench/explore.ts [--depth N] [--design KIND] [--fault CLASS] [--no-client-symmetry] [--budget-s S]
 * Prints per cell the distinct states, transitions, depth completed and the
 * CPU time, then the totals: distinct states per CPU second (the machine is
 * shared, so CPU time, not wall time, is the figure to compare), bytes per
 * stored state and the fingerprint collision estimate.
 */
import { parseArgs } from 'node:util';
import { cpuUsage } from 'node:process';
import { exploreCell, FAULT_CLASSES, MATRIX_ROWS } from '../model/index.ts';

const { values } = parseArgs({
  options: {
    depth: { type: 'string', default: '6' },
    design: { type: 'string' },
    fault: { type: 'string' },
    'no-client-symmetry': { type: 'boolean', default: false },
    'budget-s': { type: 'string' },
    'max-states': { type: 'string', default: '50000000' },
  },
});
const depth = Number(values.depth);
const cpuMs = (): number => {
  const u = cpuUsage();
  return (u.user + u.system) / 1000;
};
let states = 0;
let transitions = 0;
let bytes = 0;
let collision = 0;
const startCpu = cpuMs();
const startWall = performance.now();
for (const row of MATRIX_ROWS.filter((r) => values.design === undefined || r.design.kind === values.design)) {
  for (const store of row.stores) {
    for (const fault of FAULT_CLASSES.filter((f) => values.fault === undefined || f === values.fault)) {
      const t0 = cpuMs();
      const c = exploreCell(row, store, fault, {
        maxDepth: depth,
        maxStates: Number(values['max-states']),
        clock: cpuMs,
        budgetMs: values['budget-s'] === undefined ? undefined : Number(values['budget-s']) * 1000,
        clientSymmetry: !values['no-client-symmetry'],
      });
      states += c.states;
      transitions += c.transitions;
      bytes += c.bytesPerState * c.states;
      collision += c.collisionProbability;
      const found = c.counterexamples.map((x) => `${x.property}(${x.steps.length})`).join(' ') || '-';
      console.log(
        `${row.label} / ${store} / ${fault}: ${c.states} states, ${c.transitions} transitions, depth ${c.depthCompleted}${c.truncated ? ' (cut)' : ''}, ${((cpuMs() - t0) / 1000).toFixed(2)} cpu-s, ${c.bytesPerState.toFixed(1)} B/state, peak frontier ${c.peakFrontier}, found ${found}`,
      );
    }
  }
}
const cpuS = (cpuMs() - startCpu) / 1000;
const wallS = (performance.now() - startWall) / 1000;
console.log(
  `TOTAL depth ${depth}: ${states} states, ${transitions} transitions, ${cpuS.toFixed(1)} cpu-s (${wallS.toFixed(1)} wall-s): ${Math.round(states / cpuS)} states/cpu-s, ${Math.round(transitions / cpuS)} transitions/cpu-s, ${(bytes / states).toFixed(1)} B/state stored, collision probability ${collision.toExponential(2)}`,
);
