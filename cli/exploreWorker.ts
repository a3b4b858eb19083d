import { parentPort } from 'node:worker_threads';
import { match } from 'ts-pattern';
import { MATRIX_ROWS } from '../model/index.ts';
import type { LevelMessage, WorkerTask } from './exploreCells.ts';
import { epochMs, exploreCellInHeap, exploreShareByLevels } from './exploreCells.ts';
import { stopRead } from './stopSignals.ts';

const rowOf = (label: string) => MATRIX_ROWS.find((r) => r.label === label)!;

// A cell per 'cell' message, answered with its result; a 'levels' message hands this worker its share of a budgeted run
// (exploreCellsByLevels), answered with a message per completed level and one with the results (plain data: structured
// clone carries their bigints).
parentPort!.on('message', (task: WorkerTask) => {
  match(task)
    .with({ kind: 'cell' }, (t) => {
      const result = exploreCellInHeap(rowOf(t.row), t.store, t.fault, t.options, undefined, stopRead(t.stop));
      parentPort!.postMessage({ kind: 'cell', index: t.index, result } satisfies LevelMessage);
    })
    .with({ kind: 'levels' }, (t) => {
      // Every clock here is the one the threads share (epochMs): the runs read the deadline on it too.
      const share = t.cells.map((c) => ({ row: rowOf(c.row), store: c.store, fault: c.fault }));
      // Stopped (Ctrl-C), the clock reads past the deadline: the share ends as at it, the level being expanded dropped.
      const stopped = stopRead(t.stop);
      const clock = (): number => (stopped() ? Math.max(epochMs(), t.deadlineEpochMs + 1) : epochMs());
      const run = exploreShareByLevels(share, t.options, clock, t.deadlineEpochMs, t.memoryLimitBytes, (i, r) =>
        parentPort!.postMessage({ kind: 'level', index: t.cells[i]!.index, depth: r.depthCompleted, over: r.over } satisfies LevelMessage),
      );
      const results = run.results.map((result, i) => ({ index: t.cells[i]!.index, result }));
      parentPort!.postMessage({ kind: 'levels-done', results, end: run.end, peakHeapBytes: run.peakHeapBytes } satisfies LevelMessage);
    })
    .exhaustive();
});
