import type { Exploration } from './explore.ts';
import { checkArray, checkKnownKeys, checkObject, refuse } from './checks.ts';
import { finiteReadings } from './exploreInput.ts';

/** Why a run of explorations by levels ended. */
export type LevelsEnd =
  /** Every exploration is over: exhausted, or at its maxDepth (or its maxStates). */
  | { readonly kind: 'done' }
  /** The deadline passed: the exploration it hit mid-level is truncated at its last complete level. */
  | { readonly kind: 'deadline' }
  /** The memory bound was reached: the exploration expanding then is truncated at its last complete level, and no other went on. */
  | { readonly kind: 'memory'; readonly usedBytes: number };

/** How a run of explorations by levels is bounded and reported. */
export interface LevelsOptions {
  /** A monotonic clock, ms: the one the runs were started with (their deadline checks within a level read theirs). */
  readonly clock: () => number;
  /** Time on `clock` after which no further level is started (and the one being expanded is cut). */
  readonly deadlineMs: number;
  /** Bytes in use now (the heap); asked before each level of each exploration and every 256 states within one. */
  readonly memoryUsed?: () => number;
  /** No level is started once memoryUsed() passes this. */
  readonly memoryLimitBytes?: number;
  /** Called after each level an exploration completes. */
  readonly onLevel?: (index: number, run: Exploration) => void;
}

/**
 * Expands `runs` breadth first across them: every run's level d before any
 * run's level d+1 (the shallowest open run goes next, ties in `runs`
 * order), until all are over or the deadline passes. So under a time budget
 * every cell reaches the same depth, give or take the one level a run was
 * expanding when the time ran out, and the depth a cell reaches is the
 * deepest its reachable space and the budget allow together (issue 12: the
 * deepest depth reached by every cell within 5 minutes).
 */
export function exploreByLevels(runs: readonly Exploration[], options: LevelsOptions): LevelsEnd {
  checkArray(runs, 'exploreByLevels runs', 'an array of explorations (startExploration, startCell)');
  runs.forEach((r, i) => {
    if (typeof checkObject(r, `exploreByLevels runs[${i}]`, 'an exploration (startExploration, startCell)').expandLevel !== 'function') refuse(`exploreByLevels runs[${i}]`, 'an exploration (startExploration, startCell)', r);
  });
  const o = checkObject(options, 'exploreByLevels options', 'an options object { clock, deadlineMs, ... }');
  checkKnownKeys(o, 'exploreByLevels options', ['clock', 'deadlineMs', 'memoryUsed', 'memoryLimitBytes', 'onLevel']);
  if (typeof o.clock !== 'function') refuse('exploreByLevels options.clock', 'a function returning ms', o.clock);
  if (typeof o.deadlineMs !== 'number' || Number.isNaN(o.deadlineMs)) refuse('exploreByLevels options.deadlineMs', 'a number of ms', o.deadlineMs);
  for (const f of ['memoryUsed', 'onLevel'] as const) if (o[f] !== undefined && typeof o[f] !== 'function') refuse(`exploreByLevels options.${f}`, 'a function or absent', o[f]);
  if (o.memoryLimitBytes !== undefined && (typeof o.memoryLimitBytes !== 'number' || Number.isNaN(o.memoryLimitBytes))) refuse('exploreByLevels options.memoryLimitBytes', 'a number of bytes or absent', o.memoryLimitBytes);
  const limit = options.memoryLimitBytes ?? Number.POSITIVE_INFINITY;
  // Each reading checked: a NaN one is past no deadline or limit, so it bounded nothing.
  const clock = finiteReadings(options.clock, 'exploreByLevels options.clock()');
  const memoryUsed = options.memoryUsed === undefined ? () => 0 : finiteReadings(options.memoryUsed, 'exploreByLevels options.memoryUsed()');
  for (;;) {
    let depth = Number.POSITIVE_INFINITY;
    for (const r of runs) if (!r.over) depth = Math.min(depth, r.depthCompleted);
    if (depth === Number.POSITIVE_INFINITY) return { kind: 'done' };
    for (let i = 0; i < runs.length; i++) {
      const r = runs[i]!;
      if (r.over || r.depthCompleted !== depth) continue;
      if (clock() > options.deadlineMs) return { kind: 'deadline' };
      let used = memoryUsed();
      if (used > limit) return { kind: 'memory', usedBytes: used };
      const full = (): boolean => {
        used = memoryUsed();
        return used > limit;
      };
      if (r.expandLevel(options.deadlineMs, full)) options.onLevel?.(i, r);
      else if (r.truncated && used > limit) return { kind: 'memory', usedBytes: used };
      else if (r.truncated && clock() > options.deadlineMs) return { kind: 'deadline' };
    }
  }
}
