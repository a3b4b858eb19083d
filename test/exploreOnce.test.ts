import { describe, expect, it } from 'vitest';
import type { CellResult, FaultClass, MatrixRow, StorePolicy } from '../model/index.ts';
import { exploreCell, explorationKey, FAULT_CLASSES, MATRIX_ROWS } from '../model/index.ts';
import { exploreCells } from '../cli/exploreCells.ts';

/**
 * Cells explored once (spec 8.4): rows that differ only in what their fault
 * class's alphabet never reads (persistence and the restart delay, read only
 * at a restart) share one exploration. Checked here by exploring every member
 * of every such group to a small depth: each must have the same states,
 * transitions and counterexamples (commands, outcomes, violations) as the
 * first; and where a restart is scheduled the rows must stay apart.
 */
type Cell = { readonly row: MatrixRow; readonly store: StorePolicy; readonly fault: FaultClass };

const DEPTH = 3;
const row = (label: string): MatrixRow => MATRIX_ROWS.find((r) => r.label === label)!;
const explored = (c: Cell): Omit<CellResult, 'row' | 'elapsedMs'> => {
  const { row: _label, elapsedMs: _ms, ...rest } = exploreCell(c.row, c.store, c.fault, { maxDepth: DEPTH, maxStates: 1_000_000 });
  return rest;
};

const groups = new Map<string, Cell[]>();
for (const r of MATRIX_ROWS) {
  for (const store of r.stores) {
    for (const fault of FAULT_CLASSES) {
      const key = explorationKey(r, store, fault);
      groups.set(key, [...(groups.get(key) ?? []), { row: r, store, fault }]);
    }
  }
}
const shared = [...groups.values()].filter((g) => g.length > 1);

describe('cells explored once', () => {
  it('groups the Redis rows that differ only in persistence or restart delay, under every class without a restart', () => {
    // redis-single: 2 rows; Redlock: 3 rows; each under 8 classes x 2 stores.
    expect(shared.map((g) => g.length).sort((a, b) => a - b)).toEqual([...Array<number>(16).fill(2), ...Array<number>(16).fill(3)]);
    expect(shared.some((g) => g[0]!.fault === 'crash-restart')).toBe(false);
  });

  it.each(shared.map((g) => [`${g[0]!.row.label} / ${g[0]!.store} / ${g[0]!.fault}`, g] as const))('%s: every row of the group explores alike', (_name, g) => {
    const first = explored(g[0]!);
    for (const c of g.slice(1)) expect(explored(c)).toEqual(first);
  });

  it('keeps rows apart where a restart reads what they differ in', () => {
    const none = { row: row('redlock(5 nodes, none)'), store: 'unfenced' as const, fault: 'crash-restart' as const };
    const aof = { ...none, row: row('redlock(5 nodes, aof-always)') };
    expect(explorationKey(none.row, none.store, none.fault)).not.toBe(explorationKey(aof.row, aof.store, aof.fault));
    // Without persistence a restart loses the counter (DUR-1 in 3 steps); with it, not.
    expect(explored(none).counterexamples.map((x) => x.property)).toContain('DUR-1');
    expect(explored(aof).counterexamples.map((x) => x.property)).not.toContain('DUR-1');
  });

  it('lockcheck explore gives each cell of a group the result under its own label, on one thread and on two', async () => {
    const cells: Cell[] = ['redis-single(none)', 'redis-single(aof-always)'].flatMap((label) => (['client-pause', 'crash-restart'] as const).map((fault) => ({ row: row(label), store: 'unfenced' as const, fault })));
    for (const jobs of [1, 2]) {
      const seen: string[] = [];
      const got = await exploreCells(cells, { maxDepth: DEPTH, maxStates: 100_000 }, jobs, (c) => seen.push(`${c.row}/${c.faultClass}`));
      expect(got.map((c) => `${c.row}/${c.faultClass}`)).toEqual(cells.map((c) => `${c.row.label}/${c.fault}`));
      expect([...seen].sort()).toEqual(cells.map((c) => `${c.row.label}/${c.fault}`).sort());
      expect(got[2]!.counterexamples).toEqual(got[0]!.counterexamples);
      expect(got[1]!.counterexamples).not.toEqual(got[3]!.counterexamples);
    }
  });
});
