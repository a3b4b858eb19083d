import { describe, expect, it } from 'vitest';
import { explore as rawExplore } from '../model/explore.ts';
import { boundedOptions } from '../model/exploreInput.ts';
import { DEFAULT_MAX_STATES, designs, explore, initialWorld, InvalidInputError, startExploration } from '../model/index.ts';
import type { Command } from '../model/index.ts';

const cycle: Command[] = [
  { kind: 'acquire', client: 0, resource: 'r', ttlMs: 100 },
  { kind: 'release', client: 0, resource: 'r' },
];
const world = (tokenBase: bigint) => initialWorld({ design: designs.redlock({ nodes: 1 }), store: 'strict', clients: 1, tokenBase });

describe('an exploration is always bounded', () => {
  it('keeps at most DEFAULT_MAX_STATES states when neither maxStates nor a budgetMs with a clock bounds it (a huge maxDepth alone ran until memory ran out)', () => {
    const clock = (): number => 0;
    expect(boundedOptions({ maxDepth: 2 ** 31 - 1 })).toEqual({ maxDepth: 2 ** 31 - 1, maxStates: DEFAULT_MAX_STATES });
    // A budget without a clock measures nothing (the default clock stands still); an infinite one bounds nothing.
    expect(boundedOptions({ maxDepth: 9, budgetMs: 1000 }).maxStates).toBe(DEFAULT_MAX_STATES);
    expect(boundedOptions({ maxDepth: 9, budgetMs: Number.POSITIVE_INFINITY, clock }).maxStates).toBe(DEFAULT_MAX_STATES);
    // Bounded already: as given.
    expect(boundedOptions({ maxDepth: 9, maxStates: 5 }).maxStates).toBe(5);
    expect(boundedOptions({ maxDepth: 9, budgetMs: 1000, clock }).maxStates).toBeUndefined();
    // A small space is still explored whole under the default (time alone: every state is the first up to a shift of time).
    const r = explore(world(0n), [{ kind: 'advance', ms: 4 }], { maxDepth: 2 ** 31 - 1 });
    expect([r.exhausted, r.truncated, r.depthCompleted]).toEqual([true, false, 1]);
  });

  it('refuses up front an exploration whose tokens could pass 2^63-1 within its depth; before, a step threw mid-search and the levels searched were lost', () => {
    const top = 2n ** 63n - 1n;
    // The raw search does throw mid-search here: what the entry's refusal saves the caller from.
    expect(() => rawExplore(world(top - 3n), cycle, { maxDepth: 12 })).toThrow(/token counter .* is at 2\^63-1/);
    for (const call of [() => explore(world(top - 3n), cycle, { maxDepth: 12 }), () => startExploration(world(top - 3n), cycle, { maxDepth: 12 })]) {
      let refused: unknown;
      try {
        call();
      } catch (e) {
        refused = e;
      }
      expect(refused).toBeInstanceOf(InvalidInputError);
      expect((refused as InvalidInputError).code).toBe('invalid-token');
      expect((refused as InvalidInputError).message).toMatch(/tokens could pass 2\^63-1 within maxDepth 12 \(counters start at 9223372036854775804, and 12 steps may mint up to 26 more\).*start tokenBase and counters at most 9223372036854775781/);
    }
    // With the headroom the message names, the same search runs to its depth.
    const r = explore(world(top - 26n), cycle, { maxDepth: 12 });
    expect(r.depthCompleted).toBe(12);
    // A retrying acquire mints more per step: the headroom grows with its retries.
    expect(() => explore(world(top - 26n), [{ ...cycle[0]!, retries: 3, retryDelayMs: 1 } as Command, cycle[1]!], { maxDepth: 12 })).toThrow(/may mint up to 65 more/);
  });
});
