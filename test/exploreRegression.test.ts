import { describe, expect, it } from 'vitest';
import type { FaultClass, PropertyId, StorePolicy } from '../model/index.ts';
import { exploreCell, MATRIX_ROWS } from '../model/index.ts';
import recorded from './fixtures/explore-verdicts.json' with { type: 'json' };

/**
 * The exploration's verdicts must not change as the checker gets faster:
 * test/fixtures/explore-verdicts.json holds every cell's verdict at depth 6
 * (4 where the state cap cut it) as the first checker found them. A cell
 * must break exactly the recorded properties, each with its recorded
 * shortest length, and nothing else within the recorded depth.
 */
interface RecordedCell {
  readonly row: string;
  readonly store: StorePolicy;
  readonly fault: FaultClass;
  readonly depth: number;
  readonly found: Partial<Record<PropertyId, number>>;
}

const cells = recorded.cells as readonly RecordedCell[];
/**
 * The cells checked here, to stay within the suite's time: every fault class
 * but delay (the largest) of four rows, and the failover cells of redis-replicated. `npx tsx bench/explore.ts --verdicts`
 * checks all of them (152); test/explore.test.ts the known counterexamples' exact lengths.
 */
const CHECKED = cells.filter(
  (c) => (['redis-single(none)', 'pg-session', 'pg-xact', 'etcd-lease'].includes(c.row) && c.fault !== 'delay') || (c.row.startsWith('redis-replicated') && c.fault === 'crash-restart'),
);

describe('exploration verdicts at depth <= 6 are those recorded', () => {
  it.each(CHECKED.map((c) => [`${c.row} / ${c.store} / ${c.fault}`, c] as const))('%s', (_name, c) => {
    const row = MATRIX_ROWS.find((r) => r.label === c.row)!;
    const result = exploreCell(row, c.store, c.fault, { maxDepth: c.depth, maxStates: 10_000_000 });
    expect(result.truncated).toBe(false);
    expect(result.depthCompleted).toBe(c.depth);
    const got = Object.fromEntries(result.counterexamples.map((x) => [x.property, x.steps.length]));
    expect(got).toEqual(c.found);
  });
});
