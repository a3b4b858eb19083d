import { Worker } from 'node:worker_threads';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { match } from 'ts-pattern';
import type { CellResult, Exploration, FaultClass, LevelsEnd, MatrixRow, StorePolicy } from '../model/index.ts';
import { exploreByLevels, explorationKey, startCell } from '../model/index.ts';
import { exploreWorkerScript } from './exploreWorkerScript.ts';
import type { StopFlag } from './stopSignals.ts';

/** One matrix cell to explore, as a worker receives it. */
export interface CellTask {
  readonly kind: 'cell';
  readonly index: number;
  readonly row: string;
  readonly store: StorePolicy;
  readonly fault: FaultClass;
  readonly options: { readonly maxDepth: number; readonly maxStates: number; readonly budgetMs?: number };
  /** Set (non-zero) by the main thread to stop: the cell ends at its last complete level (StopFlag). */
  readonly stop?: SharedArrayBuffer;
}

/** A worker's share of a budgeted run (exploreCellsByLevels): its cells, each kept in the worker from level to level. */
export interface LevelsTask {
  readonly kind: 'levels';
  readonly cells: ReadonlyArray<{ readonly index: number; readonly row: string; readonly store: StorePolicy; readonly fault: FaultClass }>;
  readonly options: { readonly maxDepth: number; readonly maxStates: number };
  /** When the budget is up, on the clock every thread shares (epochMs): a worker's deadline does not move with its start-up. */
  readonly deadlineEpochMs: number;
  readonly memoryLimitBytes: number;
  /** Set (non-zero) by the main thread to stop: the share ends as at its deadline (StopFlag). */
  readonly stop?: SharedArrayBuffer;
}

export type WorkerTask = CellTask | LevelsTask;

/** What a worker answers. */
export type LevelMessage =
  | { readonly kind: 'cell'; readonly index: number; readonly result: CellResult }
  | { readonly kind: 'level'; readonly index: number; readonly depth: number; readonly over: boolean }
  | { readonly kind: 'levels-done'; readonly results: ReadonlyArray<{ readonly index: number; readonly result: CellResult }>; readonly end: LevelsEnd; readonly peakHeapBytes: number };

/**
 * Explores the cells, on `jobs` worker threads when more than one (cells are
 * independent, so each worker takes the next cell when it is done), and
 * reports each result as it arrives. Cells that are one transition system
 * (explorationKey: rows that differ only in what their alphabet never reads)
 * are explored once, and each gets the result under its own label. The
 * results come back in the cells' order. With `stop`, the cells go to
 * workers even at one job (the main thread stays free to set the flag):
 * once it is set, the cells being explored end at their last complete level
 * (truncated) and no other starts; those never started are left out (holes
 * in the array: the caller that set the flag reads onCell's).
 */
export async function exploreCells(
  cells: ReadonlyArray<{ readonly row: MatrixRow; readonly store: StorePolicy; readonly fault: FaultClass }>,
  options: CellTask['options'],
  jobs: number,
  onCell: (cell: CellResult) => void,
  stop?: StopFlag,
): Promise<CellResult[]> {
  const results: CellResult[] = new Array(cells.length);
  const explored = explorationGroups(cells);
  const done = (group: readonly number[], result: CellResult): void => {
    for (const i of group) {
      results[i] = { ...result, row: cells[i]!.row.label };
      onCell(results[i]);
    }
  };
  if (jobs <= 1 && stop === undefined) {
    for (const group of explored) {
      const c = cells[group[0]!]!;
      done(group, exploreCellInHeap(c.row, c.store, c.fault, options));
    }
    return results;
  }
  let next = 0;
  const script = await exploreWorkerScript();
  const workers = Array.from({ length: Math.max(1, Math.min(jobs, explored.length)) }, () => new Worker(script));
  try {
    await Promise.all(
      workers.map(
        (worker) =>
          new Promise<void>((resolve, reject) => {
            const give = (): void => {
              if (next >= explored.length || stop?.isSet === true) return resolve();
              const g = next++;
              const c = cells[explored[g]![0]!]!;
              worker.postMessage({ kind: 'cell', index: g, row: c.row.label, store: c.store, fault: c.fault, options, ...(stop !== undefined ? { stop: stop.buffer } : {}) } satisfies CellTask);
            };
            worker.on('message', (m: LevelMessage) => {
              if (m.kind !== 'cell') return reject(new Error(`explore worker answered '${m.kind}' to a cell`));
              done(explored[m.index]!, m.result);
              give();
            });
            worker.on('error', reject);
            worker.on('exit', (code) => ((next < explored.length && stop?.isSet !== true) || code !== 0 ? reject(new Error(`explore worker exited with code ${code}`)) : undefined));
            give();
          }),
      ),
    );
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
  return results;
}

/** The share of its thread's heap limit (V8's heap_size_limit, the young generation included) a cell may fill before it is cut: the rest is room for the level being built past the bound (asked every 256 states) and for garbage. */
export const CELL_HEAP_SHARE = 0.5;

/**
 * One cell explored as exploreCell does, on this thread's monotonic clock, and
 * cut (truncated, at its last complete level) once the thread's heap passes
 * CELL_HEAP_SHARE of its limit, asked every 256 states: a deep cell's
 * frontier of whole states filled the heap, and V8 ended the process (exit
 * 134, every cell explored lost) with a native stack on stderr.
 */
export function exploreCellInHeap(
  row: MatrixRow,
  store: StorePolicy,
  fault: FaultClass,
  options: CellTask['options'],
  heapLimitBytes = getHeapStatistics().heap_size_limit * CELL_HEAP_SHARE,
  stopped: () => boolean = () => false,
): CellResult {
  const clock = (): number => performance.now();
  const run = startCell(row, store, fault, { maxDepth: options.maxDepth, maxStates: options.maxStates, clock });
  const deadline = clock() + (options.budgetMs ?? Number.POSITIVE_INFINITY);
  // Past the bound, asked again after a full collection: the heap counts garbage too (a cell explored before this
  // one), and a bound read on it cut the cells after a large one within a few levels.
  const over = (): boolean => getHeapStatistics().used_heap_size > heapLimitBytes;
  // A stop (Ctrl-C) is read with the heap, every 256 states: the cell ends at its last complete level.
  const full = (): boolean => stopped() || (over() && (collectGarbage(), over()));
  while (run.expandLevel(deadline, full));
  return { ...run.result(), row: row.label, store, faultClass: fault };
}

let gc: (() => void) | null = null;

/**
 * A full garbage collection, now. V8 offers it only to a process started with --expose-gc; the flag set at run time
 * exposes it to contexts made after, so one is made for it (once a thread).
 */
function collectGarbage(): void {
  if (gc === null) {
    setFlagsFromString('--expose-gc');
    gc = runInNewContext('gc') as () => void;
  }
  gc();
}

/** Milliseconds on a clock all threads share: each thread's monotonic clock from its own origin, which is in epoch ms. */
export function epochMs(): number {
  return performance.timeOrigin + performance.now();
}

/** How a budgeted run ended, and what it held. */
export interface LevelsRun {
  /** The cells' results in the cells' order: depthCompleted is the deepest level the cell completed within the budget. */
  readonly results: CellResult[];
  /** Per thread (the main one, or each worker): why its share ended. */
  readonly ends: readonly LevelsEnd[];
  /** The most heap any one thread held at a level's start, bytes (each thread has a heap of its own). */
  readonly peakHeapBytes: number;
  /** The process's resident size when the last thread was done, its explorations still held, bytes. */
  readonly residentBytes: number;
}

/**
 * Explores the cells level by level within a whole-run budget
 * (exploreByLevels): each keeps its frontier and visited states from level
 * to level, every cell completes depth d before any starts d+1, until the
 * budget is up or every cell is over (exhausted: its reachable space all
 * explored; or at options.maxDepth). With `jobs` > 1 the explorations are
 * dealt round robin to the workers, each keeping that order among its own
 * (a state cannot move between threads): a worker whose share is lighter
 * may be a level ahead of the other. A thread starts no level once its heap
 * holds memoryLimitBytes / jobs. `onLevel` hears of every level completed.
 * With `stop`, the shares go to workers even at one job; once it is set,
 * every share ends as at its deadline (the level being expanded dropped).
 */
export async function exploreCellsByLevels(
  cells: ReadonlyArray<{ readonly row: MatrixRow; readonly store: StorePolicy; readonly fault: FaultClass }>,
  options: { readonly maxDepth: number; readonly maxStates: number; readonly budgetMs: number; readonly memoryLimitBytes: number },
  jobs: number,
  onLevel: (cell: number, depth: number, over: boolean) => void,
  stop?: StopFlag,
): Promise<LevelsRun> {
  const started = performance.now();
  const explored = explorationGroups(cells);
  const results: CellResult[] = new Array(cells.length);
  const done = (g: number, result: CellResult): void => {
    for (const i of explored[g]!) results[i] = { ...result, row: cells[i]!.row.label };
  };
  const level = { maxDepth: options.maxDepth, maxStates: options.maxStates };
  if (jobs <= 1 && stop === undefined) {
    const share = explored.map((group) => cells[group[0]!]!);
    const run = exploreShareByLevels(share, level, () => performance.now(), started + options.budgetMs, options.memoryLimitBytes, (g, r) => onLevel(g, r.depthCompleted, r.over));
    run.results.forEach((result, g) => done(g, result));
    return { results, ends: [run.end], peakHeapBytes: run.peakHeapBytes, residentBytes: process.memoryUsage().rss };
  }
  const threads = Math.max(1, Math.min(jobs, explored.length));
  const shares = Array.from({ length: threads }, (_, w) => explored.flatMap((_g, g) => (g % threads === w ? [g] : [])));
  const script = await exploreWorkerScript();
  const workers = shares.map(() => new Worker(script));
  const ends: LevelsEnd[] = [];
  let peakHeap = 0;
  let resident = 0;
  try {
    await Promise.all(
      workers.map(
        (worker, w) =>
          new Promise<void>((resolve, reject) => {
            worker.on('message', (m: LevelMessage) =>
              match(m)
                .with({ kind: 'level' }, (l) => onLevel(l.index, l.depth, l.over))
                .with({ kind: 'levels-done' }, (d) => {
                  for (const r of d.results) done(r.index, r.result);
                  ends.push(d.end);
                  peakHeap = Math.max(peakHeap, d.peakHeapBytes);
                  // Read before any worker ends: the other's explorations are still in memory, or were freed as it finished.
                  resident = Math.max(resident, process.memoryUsage().rss);
                  resolve();
                })
                .with({ kind: 'cell' }, () => reject(new Error('explore worker answered a cell to a share of levels')))
                .exhaustive(),
            );
            worker.on('error', reject);
            worker.on('exit', (code) => reject(new Error(`explore worker exited with code ${code}`)));
            const share = shares[w]!.map((g) => {
              const c = cells[explored[g]![0]!]!;
              return { index: g, row: c.row.label, store: c.store, fault: c.fault };
            });
            worker.postMessage({
              kind: 'levels',
              cells: share,
              options: level,
              deadlineEpochMs: performance.timeOrigin + started + options.budgetMs,
              memoryLimitBytes: options.memoryLimitBytes / workers.length,
              ...(stop !== undefined ? { stop: stop.buffer } : {}),
            } satisfies LevelsTask);
          }),
      ),
    );
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
  return { results, ends, peakHeapBytes: peakHeap, residentBytes: resident };
}

/** The cells grouped by exploration (explorationKey: rows that differ only in what their alphabet never reads are one transition system); the first of each group is the one explored. */
function explorationGroups(cells: ReadonlyArray<{ readonly row: MatrixRow; readonly store: StorePolicy; readonly fault: FaultClass }>): number[][] {
  const groups = new Map<string, number[]>();
  cells.forEach((c, i) => {
    const key = explorationKey(c.row, c.store, c.fault);
    const group = groups.get(key);
    if (group === undefined) groups.set(key, [i]);
    else group.push(i);
  });
  return [...groups.values()];
}

/**
 * One thread's share of a budgeted run (the main thread's, or a worker's):
 * its explorations expanded level by level until `deadlineMs` on `clock`
 * (exploreByLevels), no level started once this thread's heap passes
 * `memoryLimitBytes`. Returns each cell's result, why the share ended, and
 * the most heap the thread held when asked.
 */
export function exploreShareByLevels(
  share: ReadonlyArray<{ readonly row: MatrixRow; readonly store: StorePolicy; readonly fault: FaultClass }>,
  options: { readonly maxDepth: number; readonly maxStates: number },
  clock: () => number,
  deadlineMs: number,
  memoryLimitBytes: number,
  onLevel: (index: number, run: Exploration) => void,
): { readonly results: CellResult[]; readonly end: LevelsEnd; readonly peakHeapBytes: number } {
  const runs: Exploration[] = share.map((c) => startCell(c.row, c.store, c.fault, { ...options, clock }));
  let peakHeapBytes = 0;
  const end = exploreByLevels(runs, {
    clock,
    deadlineMs,
    memoryLimitBytes,
    memoryUsed: () => {
      let used = getHeapStatistics().used_heap_size;
      // Past the bound, read again after a full collection: the heap counts garbage too, which ended a run early.
      if (used > memoryLimitBytes) {
        collectGarbage();
        used = getHeapStatistics().used_heap_size;
      }
      peakHeapBytes = Math.max(peakHeapBytes, used);
      return used;
    },
    onLevel,
  });
  const results = runs.map((r, i) => ({ ...r.result(), row: share[i]!.row.label, store: share[i]!.store, faultClass: share[i]!.fault }));
  return { results, end, peakHeapBytes };
}
