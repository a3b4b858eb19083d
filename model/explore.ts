import { canonicalKey } from './canonical.ts';
import type { Command } from './command.ts';
import { InvalidInputError } from './errors.ts';
import type { Outcome } from './outcome.ts';
import type { PropertyId, Violation } from './properties.ts';
import { checkProperties } from './properties.ts';
import type { World } from './state.ts';
import { step } from './world.ts';

/**
 * Bounded exhaustive exploration: every schedule of the alphabet's commands up
 * to `maxDepth`, breadth first, with visited states deduplicated by their
 * canonical key. Breadth first makes the first counterexample found for a
 * property a shortest one.
 */
export interface ExploreOptions {
  readonly maxDepth: number;
  /** Stop expanding once this many distinct states were seen (the result says so). */
  readonly maxStates?: number;
  /** A clock for the states-per-second figure only; the search itself never reads time. */
  readonly clock?: () => number;
}

export interface TraceStep {
  readonly command: Command;
  readonly outcome: Outcome;
  readonly violations: readonly Violation[];
}

export interface Counterexample {
  readonly property: PropertyId;
  readonly violation: Violation;
  readonly steps: readonly TraceStep[];
}

export interface ExploreResult {
  /** Deepest level whose every state was expanded. */
  readonly depthCompleted: number;
  /** True when maxStates cut the search short. */
  readonly truncated: boolean;
  readonly states: number;
  readonly transitions: number;
  readonly elapsedMs: number;
  /** Shortest counterexample found per property, in the order found. */
  readonly counterexamples: readonly Counterexample[];
}

interface Visit {
  readonly world: World;
  readonly parent: number;
  readonly command: Command | null;
  readonly outcome: Outcome | null;
  readonly violations: readonly Violation[];
}

export function explore(initial: World, alphabet: readonly Command[], options: ExploreOptions): ExploreResult {
  const clock = options.clock ?? (() => 0);
  const startedMs = clock();
  const maxStates = options.maxStates ?? Number.POSITIVE_INFINITY;
  const visits: Visit[] = [{ world: initial, parent: -1, command: null, outcome: null, violations: [] }];
  const seen = new Set<string>([canonicalKey(initial)]);
  const found = new Map<PropertyId, Counterexample>();
  let frontier = [0];
  let depthCompleted = 0;
  let transitions = 0;
  let truncated = false;

  const traceTo = (index: number): TraceStep[] => {
    const out: TraceStep[] = [];
    for (let i = index; i > 0; i = visits[i]!.parent) {
      const v = visits[i]!;
      out.push({ command: v.command!, outcome: v.outcome!, violations: v.violations });
    }
    return out.reverse();
  };

  for (let depth = 1; depth <= options.maxDepth && frontier.length > 0 && !truncated; depth++) {
    const next: number[] = [];
    for (const index of frontier) {
      const world = visits[index]!.world;
      for (const command of alphabet) {
        let branches;
        try {
          branches = step(world, command);
        } catch (e) {
          if (e instanceof InvalidInputError) continue; // not enabled in this state
          throw e;
        }
        for (const b of branches) {
          transitions++;
          const violations = checkProperties(b.events, b.next);
          const fresh = violations.filter((v) => !found.has(v.property));
          const key = canonicalKey(b.next);
          const isNew = !seen.has(key);
          if (!isNew && fresh.length === 0) continue;
          visits.push({ world: b.next, parent: index, command, outcome: b.outcome, violations });
          const at = visits.length - 1;
          for (const v of fresh) if (!found.has(v.property)) found.set(v.property, { property: v.property, violation: v, steps: traceTo(at) });
          if (isNew) {
            seen.add(key);
            next.push(at);
          }
        }
      }
      if (seen.size >= maxStates) {
        truncated = true;
        break;
      }
    }
    if (!truncated) depthCompleted = depth;
    frontier = next;
  }
  return {
    depthCompleted,
    truncated,
    states: seen.size,
    transitions,
    elapsedMs: clock() - startedMs,
    counterexamples: [...found.values()],
  };
}
