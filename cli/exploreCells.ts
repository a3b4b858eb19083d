import { Worker } from 'node:worker_threads';
import type { CellResult, FaultClass, MatrixRow, StorePolicy } from '../model/index.ts';
import { exploreCell } from '../model/index.ts';

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
 * reports each result as it arrives. The results come back in the cells' order.
 */
export async function exploreCells(
  cells: ReadonlyArray<{ readonly row: MatrixRow; readonly store: StorePolicy; readonly fault: FaultClass }>,
  options: CellTask['options'],
  jobs: number,
  onCell: (cell: CellResult) => void,
): Promise<CellResult[]> {
  const results: CellResult[] = new Array(cells.length);
  if (jobs <= 1) {
    cells.forEach((c, i) => {
      results[i] = exploreCell(c.row, c.store, c.fault, { ...options, clock: () => performance.now() });
      onCell(results[i]!);
    });
    return results;
  }
  let next = 0;
  const workers = Array.from({ length: Math.min(jobs, cells.length) }, () => new Worker(new URL('./exploreWorker.mjs', import.meta.url)));
  try {
    await Promise.all(
      workers.map(
        (worker) =>
          new Promise<void>((resolve, reject) => {
            const give = (): void => {
              if (next >= cells.length) return resolve();
              const i = next++;
              const c = cells[i]!;
              worker.postMessage({ index: i, row: c.row.label, store: c.store, fault: c.fault, options } satisfies CellTask);
            };
            worker.on('message', (m: { index: number; result: CellResult }) => {
              results[m.index] = m.result;
              onCell(m.result);
              give();
            });
            worker.on('error', reject);
            worker.on('exit', (code) => (next < cells.length || code !== 0 ? reject(new Error(`explore worker exited with code ${code}`)) : undefined));
            give();
          }),
      ),
    );
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
  return results;
}
