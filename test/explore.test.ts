import { describe, expect, it } from 'vitest';
import type { FaultClass, PropertyId, StorePolicy } from '../model/index.ts';
import { canonicalKey, describeCommand, designs, exploreCell, initialWorld, MATRIX_ROWS, step } from '../model/index.ts';

const row = (label: string) => MATRIX_ROWS.find((r) => r.label === label)!;
const cell = (label: string, store: StorePolicy, fault: FaultClass, maxDepth: number) =>
  exploreCell(row(label), store, fault, { maxDepth, maxStates: 200_000 });
const lengths = (c: ReturnType<typeof cell>): Partial<Record<PropertyId, number>> =>
  Object.fromEntries(c.counterexamples.map((x) => [x.property, x.steps.length]));

describe('bounded exhaustive exploration', () => {
  it("finds Kleppmann's clock-jump counterexample for Redlock: one node's clock, a partition, five steps", () => {
    const c = cell('redlock(5 nodes, none)', 'unfenced', 'clock-step', 5);
    const mutex = c.counterexamples.find((x) => x.property === 'MUTEX-1')!;
    expect(mutex.steps.map((s) => describeCommand(s.command))).toEqual([
      'link client 0 <-> node 1 cut',
      'link client 0 <-> node 2 cut',
      "client 0 acquire 'r' ttl 10ms",
      'node 0 wall clock jumps +10ms',
      "client 1 acquire 'r' ttl 10ms",
    ]);
  });

  it("finds Kleppmann's crash-restart counterexample for Redlock without persistence in six steps", () => {
    const c = cell('redlock(5 nodes, none)', 'unfenced', 'crash-restart', 6);
    expect(lengths(c)).toMatchObject({ 'MUTEX-1': 6, 'DUR-1': 3 });
  });

  it('finds the stale write of a paused holder of an unfenced single-node lease in six steps', () => {
    expect(lengths(cell('redis-single(none)', 'unfenced', 'client-pause', 6))).toEqual({ 'STORE-1': 6 });
  });

  it('with a strict fenced store, the same fault classes never break the store', () => {
    for (const [label, fault] of [
      ['redlock(5 nodes, none)', 'clock-step'],
      ['redlock(5 nodes, aof-always)', 'crash-restart'],
      ['redis-single(none)', 'client-pause'],
    ] as const) {
      const c = cell(label, 'strict', fault, 6);
      expect(c.truncated).toBe(false);
      expect(c.counterexamples.map((x) => x.property)).not.toContain('STORE-1');
      expect(c.counterexamples.map((x) => x.property)).not.toContain('FENCE-2');
    }
  });

  it('reports "no violation up to depth k" for safe cells, and says how far it got', () => {
    const c = cell('redlock(5 nodes, aof-always)', 'strict', 'crash-restart', 6);
    expect(c.counterexamples).toEqual([]);
    expect(c.depthCompleted).toBe(6);
    expect(c.states).toBeGreaterThan(1000);
    const small = exploreCell(row('pg-xact'), 'transactional', 'client-pause', { maxDepth: 8, maxStates: 50 });
    expect(small.truncated).toBe(true);
    expect(small.depthCompleted).toBeLessThan(8);
  });

  it('identifies states that differ only by a shift of true time', () => {
    const w = initialWorld({ design: designs.redisSingle(), store: 'strict', clients: 2 });
    const a = step(w, { kind: 'acquire', client: 0, resource: 'r', ttlMs: 10 })[0]!.next;
    const later = step(w, { kind: 'advance', ms: 50 })[0]!.next;
    const b = step(later, { kind: 'acquire', client: 0, resource: 'r', ttlMs: 10 })[0]!.next;
    expect(canonicalKey(b)).toBe(canonicalKey(a));
    expect(canonicalKey(step(a, { kind: 'advance', ms: 1 })[0]!.next)).not.toBe(canonicalKey(a));
  });
});

describe('exploring cells on worker threads', () => {
  it('gives the same results as exploring them in this thread, in the cells order', async () => {
    const { exploreCells } = await import('../cli/exploreCells.ts');
    const cells = (['client-pause', 'connection-loss', 'none'] as const).map((fault) => ({ row: row('pg-session'), store: 'strict' as const, fault }));
    const options = { maxDepth: 5, maxStates: 100_000 };
    const strip = (r: readonly { states: number; depthCompleted: number; faultClass: string; counterexamples: readonly unknown[] }[]) =>
      r.map((c) => ({ states: c.states, depth: c.depthCompleted, fault: c.faultClass, counterexamples: c.counterexamples }));
    const seen: string[] = [];
    const inWorkers = await exploreCells(cells, options, 2, (c) => seen.push(c.faultClass));
    expect(strip(inWorkers)).toEqual(strip(await exploreCells(cells, options, 1, () => undefined)));
    expect([...seen].sort()).toEqual(['client-pause', 'connection-loss', 'none']);
  });
});

describe('a cell of lockcheck explore within the heap', () => {
  it('is cut at its last complete level once the heap passes its bound, where a deep cell filled the heap and V8 ended the run (exit 134, every cell lost)', async () => {
    const { exploreCellInHeap } = await import('../cli/exploreCells.ts');
    const cell = [row('redis-single(none)'), 'unfenced', 'timing'] as const;
    const options = { maxDepth: 5, maxStates: 1_000_000 };
    const whole = exploreCellInHeap(...cell, options);
    expect([whole.truncated, whole.depthCompleted]).toEqual([false, 5]);
    // A bound any heap passes, after a full collection too: the first level asked (every 256 states) is cut, the levels before it stand.
    const cut = exploreCellInHeap(...cell, options, 1);
    expect(cut.truncated).toBe(true);
    expect(cut.depthCompleted).toBeLessThan(5);
    expect(cut.states).toBeLessThan(whole.states);
    expect(cut.row).toBe(whole.row);
  });
});
