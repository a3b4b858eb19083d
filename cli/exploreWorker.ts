import { parentPort } from 'node:worker_threads';
import { getHeapStatistics } from 'node:v8';
import { match } from 'ts-pattern';
import type { CellResult, Exploration } from '../model/index.ts';
import { exploreByLevels, exploreCell, MATRIX_ROWS, startCell } from '../model/index.ts';
import type { LevelMessage, WorkerTask } from './exploreCells.ts';
import { epochMs } from './exploreCells.ts';

const rowOf = (label: string) => MATRIX_ROWS.find((r) => r.label === label)!;
const clock = (): number => performance.now();

// A cell per 'cell' message, answered with its result; a 'levels' message hands this worker its share of a budgeted run
// (exploreCellsByLevels), answered with a message per completed level and one with the results (plain data: structured
// clone carries their bigints).
parentPort!.on('message', (task: WorkerTask) => {
  match(task)
    .with({ kind: 'cell' }, (t) => {
      const result = exploreCell(rowOf(t.row), t.store, t.fault, { ...t.options, clock });
      parentPort!.postMessage({ kind: 'cell', index: t.index, result } satisfies LevelMessage);
    })
    .with({ kind: 'levels' }, (t) => {
      // Every clock here is the one the threads share (epochMs): the runs read the deadline on it too.
      const runs: Exploration[] = t.cells.map((c) => startCell(rowOf(c.row), c.store, c.fault, { ...t.options, clock: epochMs }));
      let peakHeap = 0;
      const end = exploreByLevels(runs, {
        clock: epochMs,
        deadlineMs: t.deadlineEpochMs,
        memoryLimitBytes: t.memoryLimitBytes,
        memoryUsed: () => {
          const used = getHeapStatistics().used_heap_size;
          peakHeap = Math.max(peakHeap, used);
          return used;
        },
        onLevel: (i, r) => parentPort!.postMessage({ kind: 'level', index: t.cells[i]!.index, depth: r.depthCompleted, over: r.over } satisfies LevelMessage),
      });
      const results: Array<{ index: number; result: CellResult }> = runs.map((r, i) => {
        const c = t.cells[i]!;
        return { index: c.index, result: { ...r.result(), row: c.row, store: c.store, faultClass: c.fault } };
      });
      parentPort!.postMessage({ kind: 'levels-done', results, end, peakHeapBytes: peakHeap } satisfies LevelMessage);
    })
    .exhaustive();
});
