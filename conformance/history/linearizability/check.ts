import type { Model } from './model.ts';
import type { Operation } from './operation.ts';
import { partitionHistory } from './partition.ts';
import { PartitionSearch } from './search.ts';

export interface CheckOptions {
  /** Give up after this long with verdict `unknown` (default: no limit). */
  readonly timeoutMs?: number;
  /** Milliseconds, monotonic (default `performance.now`). */
  readonly clock?: () => number;
  /**
   * Give up with verdict `unknown` (reason `memory`) before the memo tables
   * of the partitions searched together would hold more than this many
   * bytes (an estimate: see ConfigurationCache.bytesAfter). Default 1 GiB.
   * The search is exponential in the worst case; without this bound a long
   * time budget ends in an out-of-memory crash instead of a verdict.
   */
  readonly maxMemoryBytes?: number;
  /**
   * Called before each step of the search that cannot stop in the middle (a partition's setup: the model's
   * `relevance`, the entry list's sort), the first included: it may throw to stop the search there, the error passed
   * on (checkHistory's budget: past its deadline no step begins, however the deadline below lets the first slice run).
   */
  readonly beforeStep?: () => void;
}

export const DEFAULT_MAX_MEMORY_BYTES = 2 ** 30;

/** Operations are referred to by their index in the checked history. */
export type LinearizabilityResult = Linearizable | NotLinearizable | Undecided;

export interface Linearizable {
  readonly verdict: 'linearizable';
  /** Per partition, an order of its operations the model accepts (operations with an unknown outcome left out of it did not happen). */
  readonly linearizations: readonly (readonly number[])[];
  readonly stats: SearchStats;
}

export interface NotLinearizable {
  readonly verdict: 'not-linearizable';
  /** The partition (model key) that has no linearization; `undefined` for an unpartitioned model. */
  readonly key: string | undefined;
  /** The longest sequence of operations the search could linearize in that partition. */
  readonly longestPrefix: readonly number[];
  /** The operation that could not be placed after that prefix (it returned before anything could take its place). */
  readonly blocked: number | undefined;
  readonly stats: SearchStats;
}

/** The deadline passed (`timeout`), or the memory bound would have (`memory`), before the search decided: never a guess. */
export interface Undecided {
  readonly verdict: 'unknown';
  readonly reason: 'timeout' | 'memory';
  readonly stats: SearchStats;
}

export interface SearchStats {
  readonly partitions: number;
  /** Search loop iterations over all partitions. */
  readonly steps: number;
  /** Distinct (linearized set, state) configurations memoised. */
  readonly configurations: number;
  readonly elapsedMs: number;
}

export class InvalidOperationError extends Error {
  override readonly name = 'InvalidOperationError';
  constructor(
    readonly index: number,
    reason: string,
  ) {
    super(`operation ${index}: ${reason}`);
  }
}

/** Iterations between two looks at the clock. */
const SLICE = 1 << 14;
/** Iterations each partition gets in the first round; doubled every round, so a failing partition is found early. */
const FIRST_BUDGET = 1 << 12;

/**
 * LIN-1: Wing–Gong–Lowe linearizability check of a history against a model, with
 * per-key partitioning when the model has `partitionKey` and a deadline that
 * turns into `unknown`. Pure: no I/O, no global state.
 */
export function checkLinearizability<S, I, O>(
  model: Model<S, I, O>,
  operations: readonly Operation<I, O>[],
  options: CheckOptions = {},
): LinearizabilityResult {
  validate(operations);
  const clock = options.clock ?? (() => performance.now());
  const start = clock();
  const deadline = options.timeoutMs === undefined ? Infinity : start + options.timeoutMs;
  const maxBytes = options.maxMemoryBytes ?? DEFAULT_MAX_MEMORY_BYTES;
  const parts = partitionHistory(model, operations);
  // Each partition's search is set up (its relevance and entry list: sorts) just before its first slice: one whose
  // turn comes after the deadline is never set up.
  const searches: (PartitionSearch<S, I, O> | undefined)[] = parts.map(() => undefined);
  const stats = (): SearchStats => ({
    partitions: parts.length,
    steps: searches.reduce((s, x) => s + (x?.steps ?? 0), 0),
    configurations: searches.reduce((s, x) => s + (x?.explored ?? 0), 0),
    elapsedMs: clock() - start,
  });
  let open = parts.map((_, i) => i);
  // The first slice runs whatever the budget (timeoutMs 0 included), its setup too; every later one, of any partition,
  // and every later setup step, only before the deadline: a partition whose turn comes after it is not begun.
  let first = true;
  const expired = () => !first && clock() >= deadline;
  const setUp = (i: number): PartitionSearch<S, I, O> | undefined => {
    const ops = parts[i]!.operations;
    if (expired()) return undefined;
    options.beforeStep?.();
    const relevance = model.relevance?.(ops);
    if (expired()) return undefined;
    options.beforeStep?.();
    return (searches[i] = new PartitionSearch(model, ops, relevance));
  };
  for (let budget = FIRST_BUDGET; open.length > 0; budget *= 2) {
    const stillOpen: number[] = [];
    for (const i of open) {
      const search = searches[i] ?? setUp(i);
      if (search === undefined) return { verdict: 'unknown', reason: 'timeout', stats: stats() };
      let left = budget;
      while (left > 0 && search.status === 'running') {
        if (expired()) return { verdict: 'unknown', reason: 'timeout', stats: stats() };
        first = false;
        const slice = Math.min(left, SLICE);
        // Every partition's table stays alive until the end: the bound is on their sum.
        let bytes = 0;
        for (const s of searches) if (s !== undefined) bytes += s === search ? s.memoryAfter(slice) : s.memoryAfter(0);
        if (bytes > maxBytes) return { verdict: 'unknown', reason: 'memory', stats: stats() };
        search.run(slice);
        left -= slice;
      }
      if (search.status === 'not-linearizable') {
        const part = parts[i]!;
        return {
          verdict: 'not-linearizable',
          key: part.key,
          longestPrefix: [...search.longest].map((k) => part.indices[k]!),
          blocked: search.blocked < 0 ? undefined : part.indices[search.blocked],
          stats: stats(),
        };
      }
      if (search.status === 'running') stillOpen.push(i);
    }
    open = stillOpen;
  }
  return {
    verdict: 'linearizable',
    linearizations: searches.map((s, i) => [...s!.longest].map((k) => parts[i]!.indices[k]!)),
    stats: stats(),
  };
}

function validate(operations: readonly Operation<unknown, unknown>[]): void {
  // Array.from: every index, holes included (forEach skips them, and a hole failed later as a TypeError).
  Array.from(operations).forEach((op, i) => {
    if (typeof op !== 'object' || op === null) throw new InvalidOperationError(i, `must be an operation object, got ${op === null ? 'null' : typeof op}`);
    if (typeof op.call !== 'number' || !Number.isFinite(op.call)) throw new InvalidOperationError(i, `call time must be a finite number, got ${String(op.call)}`);
    const ret = op.return;
    if (ret === undefined || ret === Infinity) return;
    if (typeof ret !== 'number' || Number.isNaN(ret)) throw new InvalidOperationError(i, `return time must be a number or Infinity, got ${String(ret)}`);
    if (ret < op.call) throw new InvalidOperationError(i, `returns (${ret}) before it is called (${op.call})`);
  });
}
