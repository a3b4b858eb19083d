import { describe, expect, it } from 'vitest';
import type { Exploration, ExploreResult, FaultClass, MatrixRow, StorePolicy } from '../model/index.ts';
import { exploreByLevels, exploreCell, initialWorld, MATRIX_ROWS, startCell, startExploration } from '../model/index.ts';
import { exploreCellsByLevels } from '../cli/exploreCells.ts';

/**
 * `lockcheck explore --budget S` (issue 12, the depth every cell reaches in
 * 5 minutes): explorations expanded a level at a time, keeping frontier and
 * visited states, all cells' level d before any cell's level d+1. The time
 * here is a clock that counts its readings, so every run is deterministic.
 */
const row = (label: string): MatrixRow => MATRIX_ROWS.find((r) => r.label === label)!;
type Cell = readonly [string, StorePolicy, FaultClass];
const CELLS: readonly Cell[] = [
  ['redis-single(none)', 'unfenced', 'client-pause'],
  ['redlock(5 nodes, none)', 'unfenced', 'clock-step'],
  ['etcd-lease', 'strict', 'timing'],
  ['pg-session', 'strict', 'connection-loss'],
];
const shape = (r: ExploreResult): unknown => ({
  states: r.states,
  transitions: r.transitions,
  depth: r.depthCompleted,
  truncated: r.truncated,
  exhausted: r.exhausted,
  found: r.counterexamples.map((x) => [x.property, x.steps.length, x.steps.map((s) => JSON.stringify(s.command))]),
});
/** A clock read `reads` times so far, each reading one ms later: time that the search alone decides. */
const countingClock = (): (() => number) => {
  let reads = 0;
  return () => reads++;
};
const start = ([label, store, fault]: Cell, clock: () => number, maxDepth = 100): Exploration =>
  startCell(row(label), store, fault, { maxDepth, maxStates: 1_000_000, clock });

describe('exploring level by level (lockcheck explore --budget)', () => {
  it('reaches at each depth d the states, transitions and counterexamples of the plain exploration to d', () => {
    for (const cell of CELLS) {
      const depth = cell[0].startsWith('redlock') ? 4 : 5;
      const run = start(cell, () => 0, depth);
      while (run.expandLevel());
      expect(shape(run.result()), cell.join(' / ')).toEqual(shape(exploreCell(row(cell[0]), cell[1], cell[2], { maxDepth: depth, maxStates: 1_000_000 })));
      // The states after every level, as the plain run to that depth counts them.
      for (let d = 1; d < depth; d++) expect(run.statesAt[d], `${cell.join(' / ')} at ${d}`).toBe(exploreCell(row(cell[0]), cell[1], cell[2], { maxDepth: d, maxStates: 1_000_000 }).states);
    }
  });

  it('takes every cell to depth d before any to d+1, and reaches no less with a larger budget', () => {
    const depthsWithin = (budget: number): number[] => {
      const clock = countingClock();
      const runs = CELLS.map((c) => start(c, clock));
      const end = exploreByLevels(runs, { clock, deadlineMs: budget });
      expect(end.kind).toBe('deadline');
      const depths = runs.map((r) => r.depthCompleted);
      cutShort += runs.filter((r) => r.truncated).length;
      // Fair: the open cells are within one level of each other; a cell is only ever behind by the level cut short.
      const open = runs.filter((r) => !r.exhausted).map((r) => r.depthCompleted);
      expect(Math.max(...open) - Math.min(...open)).toBeLessThanOrEqual(1);
      return depths;
    };
    let before = CELLS.map(() => 0);
    // How many runs the deadline stopped within a level (the clock is read every 256 states there too).
    let cutShort = 0;
    for (const budget of [6, 16, 40]) {
      const depths = depthsWithin(budget);
      depths.forEach((d, i) => expect(d, `${CELLS[i]!.join(' / ')} within ${budget}`).toBeGreaterThanOrEqual(before[i]!));
      before = depths;
    }
    // The largest budget must take them somewhere: the test is about depths, not about zeros.
    expect(Math.min(...before)).toBeGreaterThanOrEqual(3);
    expect(cutShort).toBeGreaterThan(0);
  });

  it('says when an exploration is exhausted: its next level found no new state', () => {
    // Time alone: every state is the initial one up to a shift of true time (spec 8.4), so level 1 finds nothing new.
    const initial = initialWorld({ design: row('redis-single(none)').design, store: 'unfenced', clients: 2 });
    const run = startExploration(initial, [{ kind: 'advance', ms: 4 }], { maxDepth: 10 });
    expect(exploreByLevels([run], { clock: () => 0, deadlineMs: 1 }).kind).toBe('done');
    expect([run.exhausted, run.truncated, run.depthCompleted, run.statesAt]).toEqual([true, false, 1, [1, 1]]);
    expect(run.result().exhausted).toBe(true);
    // A level cut short (here by maxStates) is no proof of exhaustion, even where it had found nothing new yet.
    const stopped = startExploration(initial, [{ kind: 'advance', ms: 4 }], { maxDepth: 10, maxStates: 1 });
    expect(stopped.expandLevel()).toBe(false);
    expect([stopped.exhausted, stopped.truncated, stopped.depthCompleted, stopped.result().exhausted]).toEqual([false, true, 0, false]);
    // A cell at its maxDepth with states left to expand is not.
    const cut = start(CELLS[0]!, () => 0, 2);
    expect(exploreByLevels([cut], { clock: () => 0, deadlineMs: 1 }).kind).toBe('done');
    expect([cut.exhausted, cut.over, cut.depthCompleted]).toEqual([false, true, 2]);
  });

  it('starts no level past the memory bound, and stops a level that crosses it', () => {
    const runs = CELLS.map((c) => start(c, () => 0));
    expect(exploreByLevels(runs, { clock: () => 0, deadlineMs: 1, memoryUsed: () => 2, memoryLimitBytes: 1 })).toEqual({ kind: 'memory', usedBytes: 2 });
    expect(runs.every((r) => r.depthCompleted === 0 && !r.truncated)).toBe(true);
    // A bound crossed within a level (the heap is asked every 256 states): that cell stops at its last complete level.
    const big = start(CELLS[1]!, () => 0);
    while (big.frontierSize < 256) big.expandLevel();
    const depth = big.depthCompleted;
    let asked = 0;
    const end = exploreByLevels([big], { clock: () => 0, deadlineMs: 1, memoryUsed: () => (asked++ === 0 ? 0 : 2), memoryLimitBytes: 1 });
    expect(end).toEqual({ kind: 'memory', usedBytes: 2 });
    expect([big.truncated, big.depthCompleted, asked]).toEqual([true, depth, 2]);
  });

  it('gives on two worker threads what it gives on this one when no budget runs out', async () => {
    const cells = CELLS.slice(0, 3).map(([label, store, fault]) => ({ row: row(label), store, fault }));
    const options = { maxDepth: 3, maxStates: 1_000_000, budgetMs: 600_000, memoryLimitBytes: 2 ** 32 };
    const levels: string[] = [];
    const two = await exploreCellsByLevels(cells, options, 2, (e, d) => levels.push(`${e}:${d}`));
    const one = await exploreCellsByLevels(cells, options, 1, () => undefined);
    expect(two.results.map(shape)).toEqual(one.results.map(shape));
    expect(two.ends.map((e) => e.kind)).toEqual(['done', 'done']);
    expect(levels.sort()).toEqual(['0:1', '0:2', '0:3', '1:1', '1:2', '1:3', '2:1', '2:2', '2:3']);
  });
});

describe('the heap bound of a budgeted run reads live memory, not garbage', () => {
  it('a share whose heap passes its bound only with garbage (a large array let go) runs on after a full collection, where it ended with the memory bound', async () => {
    const { exploreShareByLevels } = await import('../cli/exploreCells.ts');
    const { getHeapStatistics } = await import('node:v8');
    const pgSession = MATRIX_ROWS.find((r) => r.design.kind === 'pg-session')!;
    const share = [{ row: pgSession, store: 'strict' as const, fault: 'none' as const }];
    // 80 MB in the large-object space, let go: only a full collection frees it.
    let garbage: number[] | null = new Array<number>(10_000_000).fill(1);
    const withGarbage = getHeapStatistics().used_heap_size;
    expect(garbage.length).toBe(10_000_000);
    garbage = null;
    const run = exploreShareByLevels(share, { maxDepth: 3, maxStates: 10_000 }, () => 0, 1, withGarbage - 40 * 2 ** 20, () => undefined);
    expect(run.end).toEqual({ kind: 'done' });
    expect(run.results[0]!.depthCompleted).toBe(3);
    // Live memory past the bound still ends it.
    expect(exploreShareByLevels(share, { maxDepth: 3, maxStates: 10_000 }, () => 0, 1, 1, () => undefined).end.kind).toBe('memory');
  });
});
