import { parentPort } from 'node:worker_threads';
import { exploreCell, MATRIX_ROWS } from '../model/index.ts';
import type { CellTask } from './exploreCells.ts';

// One cell per message; the answer is the cell's result (plain data: structured clone carries its bigints).
parentPort!.on('message', (task: CellTask) => {
  const row = MATRIX_ROWS.find((r) => r.label === task.row)!;
  const result = exploreCell(row, task.store, task.fault, { ...task.options, clock: () => performance.now() });
  parentPort!.postMessage({ index: task.index, result });
});
