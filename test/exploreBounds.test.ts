import { describe, expect, it } from 'vitest';
import { explore as rawExplore } from '../model/explore.ts';
import { boundedOptions } from '../model/exploreInput.ts';
import { brokenProperties, clockAt, DEFAULT_MAX_STATES, derivedProperties, designs, explore, exploreByLevels, exploreCell, fingerprintOptionsFor, initialWorld, InvalidInputError, MATRIX_ROWS, nodeSymmetric, runSchedule, startCell, startExploration } from '../model/index.ts';
import type { Command, World } from '../model/index.ts';

const cycle: Command[] = [
  { kind: 'acquire', client: 0, resource: 'r', ttlMs: 100 },
  { kind: 'release', client: 0, resource: 'r' },
];
/** What `call` threw (undefined if it returned). */
function refusal(call: () => unknown): unknown {
  try {
    call();
  } catch (e) {
    return e;
  }
  return undefined;
}

const world = (tokenBase: bigint) => initialWorld({ design: designs.redlock({ nodes: 1 }), store: 'strict', clients: 1, tokenBase });

describe('an exploration is always bounded', () => {
  it('keeps at most DEFAULT_MAX_STATES states when no maxStates bounds it, a budget or not (a huge maxDepth alone ran until memory ran out)', () => {
    const clock = (): number => 0;
    expect(boundedOptions({ maxDepth: 2 ** 31 - 1 })).toEqual({ maxDepth: 2 ** 31 - 1, maxStates: DEFAULT_MAX_STATES });
    // A budget without a clock measures nothing (the default clock stands still); an infinite one bounds nothing.
    expect(boundedOptions({ maxDepth: 9, budgetMs: 1000 }).maxStates).toBe(DEFAULT_MAX_STATES);
    expect(boundedOptions({ maxDepth: 9, budgetMs: Number.POSITIVE_INFINITY, clock }).maxStates).toBe(DEFAULT_MAX_STATES);
    // Nor does a finite budget on a caller's clock that stands still: the search it left unbounded ran until the heap was gone.
    expect(boundedOptions({ maxDepth: 9, budgetMs: 1000, clock }).maxStates).toBe(DEFAULT_MAX_STATES);
    // Bounded already: as given.
    expect(boundedOptions({ maxDepth: 9, maxStates: 5 }).maxStates).toBe(5);
    // A small space is still explored whole under the default (time alone: every state is the first up to a shift of time).
    const r = explore(world(0n), [{ kind: 'advance', ms: 4 }], { maxDepth: 2 ** 31 - 1 });
    expect([r.exhausted, r.truncated, r.depthCompleted]).toEqual([true, false, 1]);
  });

  it('refuses up front an exploration whose tokens could pass 2^63-1 within its depth; before, a step threw mid-search and the levels searched were lost', () => {
    const top = 2n ** 63n - 1n;
    // The raw search does throw mid-search here: what the entry's refusal saves the caller from.
    expect(() => rawExplore(world(top - 3n), cycle, { maxDepth: 12 })).toThrow(/token counter .* is at 2\^63-1/);
    for (const call of [() => explore(world(top - 3n), cycle, { maxDepth: 12 }), () => startExploration(world(top - 3n), cycle, { maxDepth: 12 })]) {
      const refused = refusal(call);
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

  it('refuses up front an exploration whose times could pass 2^53-1 ms within its depth; before, a clock read threw mid-search', () => {
    const M = Number.MAX_SAFE_INTEGER;
    // Every clock and the true time at `at`: a world that has run for a long time.
    const late = (at: number): World => {
      const w = world(0n);
      return { ...w, nowMs: at, nodes: w.nodes.map((n) => ({ ...n, wall: clockAt(at, at), mono: clockAt(at, at) })), clients: w.clients.map((c) => ({ ...c, mono: clockAt(at, at) })) };
    };
    const steps: Command[] = [{ kind: 'advance', ms: 40 }, ...cycle];
    // The raw search throws mid-search here: what the entry's refusal saves the caller from.
    expect(() => rawExplore(late(M - 300), steps, { maxDepth: 12 })).toThrow(/only after true time 9007199254740991/);
    for (const call of [() => explore(late(M - 300), steps, { maxDepth: 12 }), () => startExploration(late(M - 300), steps, { maxDepth: 12 })]) {
      const refused = refusal(call);
      expect(refused).toBeInstanceOf(InvalidInputError);
      expect((refused as InvalidInputError).code).toBe('invalid-duration');
      expect((refused as InvalidInputError).message).toMatch(/times could pass 2\^53-1 ms within maxDepth 12 \(the world's times reach 9007199254740691 ms.*start its clocks and times at most (\d+) ms/);
    }
    // From where the message says, the same search runs to its depth.
    const lowest = Number(/at most (\d+) ms/.exec((refusal(() => explore(late(M - 300), steps, { maxDepth: 12 })) as Error).message)![1]);
    expect(explore(late(lowest), steps, { maxDepth: 12 }).depthCompleted).toBe(12);
    // A world that starts near 0 is nowhere near the bound, even with the longest ttl.
    expect(explore(world(0n), [{ kind: 'acquire', client: 0, resource: 'r', ttlMs: 2 ** 31 - 1 }, cycle[1]!], { maxDepth: 8 }).depthCompleted).toBe(8);
  });
});

describe('a schedule run whole is bounded the same way', () => {
  it('runSchedule refuses up front a schedule whose tokens or times could pass their exact range; before, the step that got there threw and the steps run were lost', () => {
    const M = Number.MAX_SAFE_INTEGER;
    const late = (at: number): World => {
      const w = world(0n);
      return { ...w, nowMs: at, nodes: w.nodes.map((n) => ({ ...n, wall: clockAt(at, at), mono: clockAt(at, at) })), clients: w.clients.map((c) => ({ ...c, mono: clockAt(at, at) })) };
    };
    const steps: Command[] = [...cycle, { kind: 'advance', ms: 400 }, ...cycle];
    const timeRefusal = refusal(() => runSchedule(late(M - 300), steps));
    expect(timeRefusal).toBeInstanceOf(InvalidInputError);
    expect((timeRefusal as InvalidInputError).code).toBe('invalid-duration');
    expect((timeRefusal as InvalidInputError).message).toMatch(/^invalid-duration: runSchedule: times could pass 2\^53-1 ms within its 5 commands .*mid-run, losing the steps run; start its clocks and times at most (\d+) ms, or run a shorter schedule/);
    const lowest = Number(/at most (\d+) ms/.exec((timeRefusal as Error).message)![1]);
    expect(runSchedule(late(lowest), steps).steps).toHaveLength(5);
    const top = 2n ** 63n - 1n;
    const tokenRefusal = refusal(() => runSchedule(world(top - 2n), [...cycle, ...cycle, ...cycle]));
    expect(tokenRefusal).toBeInstanceOf(InvalidInputError);
    expect((tokenRefusal as InvalidInputError).code).toBe('invalid-token');
    expect((tokenRefusal as InvalidInputError).message).toMatch(/^invalid-token: runSchedule: tokens could pass 2\^63-1 within its 6 commands .*run a shorter schedule$/);
    // Well inside both ranges: run as before.
    expect(runSchedule(world(0n), steps).violations).toEqual([]);
  });
});

describe("a caller's clock, options and world cannot unbound an exploration or throw from inside it", () => {
  const cycleWorld = world(0n);

  it('a clock reading that is no finite number is an InvalidInputError naming the clock (NaN is past no deadline: a budget on it bounded nothing; a bigint threw a TypeError)', () => {
    const readings: unknown[] = [Number.NaN, 'soon', 5n, undefined, Number.POSITIVE_INFINITY];
    for (const reading of readings) {
      const clock = (() => reading) as () => number;
      for (const [name, call] of [
        ['explore', () => explore(cycleWorld, cycle, { maxDepth: 50, clock, budgetMs: 10 })],
        ['startExploration', () => startExploration(cycleWorld, cycle, { maxDepth: 50, clock, budgetMs: 10 })],
        ['exploreCell', () => exploreCell(MATRIX_ROWS[0]!, 'unfenced', 'none', { maxDepth: 3, maxStates: 100, clock })],
        ['startCell', () => startCell(MATRIX_ROWS[0]!, 'unfenced', 'none', { maxDepth: 3, maxStates: 100, clock })],
        ['exploreByLevels', () => exploreByLevels([startExploration(cycleWorld, cycle, { maxDepth: 3 })], { clock, deadlineMs: 10 })],
      ] as const) {
        const refused = refusal(call);
        expect(refused, `${name} on a clock reading ${String(reading)}`).toBeInstanceOf(InvalidInputError);
        expect((refused as Error).message).toMatch(/clock\(\) must be a finite number, got/);
      }
    }
    const gauge = refusal(() => exploreByLevels([startExploration(cycleWorld, cycle, { maxDepth: 3 })], { clock: () => 0, deadlineMs: 10, memoryUsed: () => Number.NaN, memoryLimitBytes: 1 }));
    expect(gauge).toBeInstanceOf(InvalidInputError);
    expect((gauge as Error).message).toMatch(/exploreByLevels options\.memoryUsed\(\) must be a finite number, got NaN/);
  });

  it('asks the deadline at every level: a search of narrow levels (under 256 states each) never asked it and ran to maxDepth, reported complete', () => {
    // A clock that moves 1 ms a reading: deterministic, and a 5 ms budget ends within a few levels.
    let now = 0;
    const r = explore(cycleWorld, cycle, { maxDepth: 3000, clock: () => now++, budgetMs: 5 });
    expect(r.truncated).toBe(true);
    expect(r.depthCompleted).toBeLessThan(10);
    // No deadline: the same search to its depth.
    expect(explore(cycleWorld, cycle, { maxDepth: 40 })).toMatchObject({ truncated: false, depthCompleted: 40 });
  });

  it('reads each option once: a getter answering one value to the checks and another to the search cannot change the bound', () => {
    let reads = 0;
    const options = {
      maxDepth: 40,
      get maxStates(): number | undefined {
        reads++;
        return reads === 1 ? 5 : undefined;
      },
    };
    const r = explore(cycleWorld, cycle, options);
    expect(reads).toBe(1);
    expect(r.truncated).toBe(true);
    expect(r.states).toBeLessThan(10);
  });

  it("walks a world's fields of the caller's own without recursion: a cyclic or very deep one threw a RangeError (stack overflow) from the headroom check", () => {
    const cyclic = { ...cycleWorld } as World & { self?: unknown };
    cyclic.self = cyclic;
    let deep: unknown = {};
    for (let i = 0; i < 50_000; i++) deep = { d: deep };
    const deepWorld = { ...cycleWorld, deep } as World;
    for (const w of [cyclic, deepWorld]) {
      expect(runSchedule(w, cycle).steps).toHaveLength(2);
      expect(explore(w, cycle, { maxDepth: 3 }).depthCompleted).toBe(3);
      expect(startExploration(w, cycle, { maxDepth: 3 }).depthCompleted).toBe(0);
    }
  });

  it("refuses a matrix row whose label is no string, and a found set with an ID that is none (each was passed on, or ignored, silently)", () => {
    for (const label of [5, null, { name: 'x' }]) {
      const refused = refusal(() => exploreCell({ ...MATRIX_ROWS[0]!, label } as never, 'unfenced', 'none', { maxDepth: 1, maxStates: 10 }));
      expect(refused).toBeInstanceOf(InvalidInputError);
      expect((refused as Error).message).toMatch(/exploreCell row\.label must be a string, got/);
    }
    const unknown = refusal(() => derivedProperties(new Set(['mutex-1']) as never, 'unfenced'));
    expect(unknown).toBeInstanceOf(InvalidInputError);
    expect((unknown as Error).message).toMatch(/derivedProperties found must be one of 'MUTEX-1'.*got "mutex-1"/);
  });

  it('a command with a cyclic, very deep, bigint or function field is an InvalidInputError naming it (nodeSymmetric and fingerprintOptionsFor threw a TypeError from JSON; runSchedule a RangeError)', () => {
    const cyclic = { kind: 'crash', node: 0 } as Command & { self?: unknown };
    cyclic.self = cyclic;
    let deep: unknown = 1;
    for (let i = 0; i < 50_000; i++) deep = { d: deep };
    const junk: Array<readonly [Command, RegExp]> = [
      [cyclic, /alphabet\[0\]\.self\.self\.self\.self must be at most 4 levels of objects below its command/],
      [{ kind: 'crash', node: 0, deep } as Command, /alphabet\[0\]\.deep\.d\.d\.d must be at most 4 levels/],
      [{ kind: 'crash', node: 0, x: 5n } as Command, /alphabet\[0\]\.x must be plain data .*got 5n/],
      [{ kind: 'crash', node: 0, f: () => 0 } as Command, /alphabet\[0\]\.f must be plain data/],
    ];
    for (const [command, message] of junk) {
      for (const call of [() => nodeSymmetric([command], 1), () => fingerprintOptionsFor(cycleWorld, [command])]) {
        const refused = refusal(call);
        expect(refused).toBeInstanceOf(InvalidInputError);
        expect((refused as Error).message).toMatch(message);
      }
      // runSchedule bounds a schedule's times before step reads its fields: that walk ends too, and step names the field.
      expect(refusal(() => runSchedule(cycleWorld, [command]))).toBeInstanceOf(InvalidInputError);
    }
    // A pause with an operation in flight is as deep as a command goes: plain data.
    expect(nodeSymmetric([{ kind: 'pause', client: 0, inFlight: { kind: 'acquire', client: 0, resource: 'r', ttlMs: 10 } }], 1)).toBe(true);
  });

  it('brokenProperties refuses a violation whose property is none (it was listed as broken)', () => {
    const refused = refusal(() => brokenProperties({ world: cycleWorld, steps: [], violations: [{ property: 5 }] } as never));
    expect(refused).toBeInstanceOf(InvalidInputError);
    expect((refused as Error).message).toMatch(/brokenProperties result\.violations\[0\]\.property must be one of 'MUTEX-1'.*got 5/);
  });

  it('a step with more than 256 branches (nine nodes a clock step apart each, an acquire whose replies come late) is explored and linked, packed or not, alike (it was an InvalidInputError: the links kept a branch in a byte)', () => {
    const spread = Array.from({ length: 9 }, (_, node): Command => ({ kind: 'clock-step', node, deltaMs: node + 1 }));
    const apart = runSchedule(initialWorld({ design: designs.redlock({ nodes: 9 }), store: 'unfenced', clients: 2 }), spread).world;
    const late: Command = { kind: 'acquire', client: 0, resource: 'r', ttlMs: 10, latencyMs: 10 };
    // Cut within level 3: its states are linked through level 2's wide steps, the part that refused.
    const got = [true, false].map((packed) => explore(apart, [late], { maxDepth: 3, maxStates: 4000, packed }));
    for (const r of got) expect(r.depthCompleted).toBe(2);
    expect(got[0]!.states).toBe(got[1]!.states);
    expect(got[0]!.transitions).toBe(got[1]!.transitions);
  });

  it("an Exploration's expandLevel refuses a deadline that is no number (NaN, a string: past no time, so ignored) and a full that is no function (a TypeError 256 states in)", () => {
    const wide = initialWorld({ design: designs.redisSingle(), store: 'unfenced', clients: 2 });
    const alphabet: Command[] = [cycle[0]!, { kind: 'advance', ms: 4 }, { kind: 'acquire', client: 1, resource: 'r', ttlMs: 100 }];
    for (const [deadline, full, message] of [
      [Number.NaN, undefined, /expandLevel deadlineMs must be a number of ms .*got NaN/],
      ['soon', undefined, /expandLevel deadlineMs must be a number of ms .*got "soon"/],
      [5n, undefined, /expandLevel deadlineMs must be a number .*got 5n/],
      [undefined, 5, /expandLevel full must be a function .*got 5/],
    ] as const) {
      const run = startExploration(wide, alphabet, { maxDepth: 4 });
      const refused = refusal(() => run.expandLevel(deadline as never, full as never));
      expect(refused).toBeInstanceOf(InvalidInputError);
      expect((refused as Error).message).toMatch(message);
      // Nothing was expanded: the run goes on with good arguments.
      expect(run.depthCompleted).toBe(0);
      while (run.expandLevel());
      expect(run.depthCompleted).toBe(4);
    }
  });
});
