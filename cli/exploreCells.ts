import { Worker } from 'node:worker_threads';
import type { CellResult, FaultClass, MatrixRow, StorePolicy } from '../model/index.ts';
import { exploreCell, explorationKey } from '../model/index.ts';

/** One matrix cell to explore, as a worker receives it. */
export interface CellTask {
  readonly index: number;
  readonly row: string;
  readonly store: StorePolicy;
  readonly fault: FaultClass;
  readonly options: { readonly maxDepth: number; readonly maxStates: number; readonly budgetMs?: number };
}

/**
 * Explores the cells, on `jobs` worker threads when more than one (cells are
 * independent, so each worker takes the next cell when it is done), and
 * reports each result as it arrives. Cells that are one transition system
 * (explorationKey: rows that differ only in what their alphabet never reads)
 * are explored once, and each gets the result under its own label. The
 * results come back in the cells' order.
 */
export async function exploreCells(
  cells: ReadonlyArray<{ readonly row: MatrixRow; readonly store: StorePolicy; readonly fault: FaultClass }>,
  options: CellTask['options'],
  jobs: number,
  onCell: (cell: CellResult) => void,
): Promise<CellResult[]> {
  const results: CellResult[] = new Array(cells.length);
  // Per exploration, the cells that share it; the first is the one explored.
  const groups = new Map<string, number[]>();
  cells.forEach((c, i) => {
    const key = explorationKey(c.row, c.store, c.fault);
    const group = groups.get(key);
    if (group === undefined) groups.set(key, [i]);
    else group.push(i);
  });
  const explored = [...groups.values()];
  const done = (group: readonly number[], result: CellResult): void => {
    for (const i of group) {
      results[i] = { ...result, row: cells[i]!.row.label };
      onCell(results[i]);
    }
  };
  if (jobs <= 1) {
    for (const group of explored) {
      const c = cells[group[0]!]!;
      done(group, exploreCell(c.row, c.store, c.fault, { ...options, clock: () => performance.now() }));
    }
    return results;
  }
  let next = 0;
  const workers = Array.from({ length: Math.min(jobs, explored.length) }, () => new Worker(new URL('./exploreWorker.mjs', import.meta.url)));
  try {
    await Promise.all(
      workers.map(
        (worker) =>
          new Promise<void>((resolve, reject) => {
            const give = (): void => {
              if (next >= explored.length) return resolve();
              const g = next++;
              const c = cells[explored[g]![0]!]!;
              worker.postMessage({ index: g, row: c.row.label, store: c.store, fault: c.fault, options } satisfies CellTask);
            };
            worker.on('message', (m: { index: number; result: CellResult }) => {
              done(explored[m.index]!, m.result);
              give();
            });
            worker.on('error', reject);
            worker.on('exit', (code) => (next < explored.length || code !== 0 ? reject(new Error(`explore worker exited with code ${code}`)) : undefined));
            give();
          }),
      ),
    );
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
  return results;
}
