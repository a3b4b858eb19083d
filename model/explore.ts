import type { Command } from './command.ts';
import type { Design } from './design.ts';
import { expiresByWallClock, rulesOf, validateDesign } from './design.ts';
import { checkCommands, checkInteger, checkObject, checkOptions, refuse } from './checks.ts';
import { checkWorld } from './worldCheck.ts';
import type { Fingerprint, FingerprintOptions } from './fingerprint.ts';
import { fingerprint } from './fingerprint.ts';
import { FingerprintSet } from './fingerprintSet.ts';
import type { Outcome } from './outcome.ts';
import type { PropertyId, Violation } from './properties.ts';
import { checkEvents, checkProperties } from './properties.ts';
import type { World } from './state.ts';
import type { Branch } from './world.ts';
import { enabled, step, stepOrbits } from './world.ts';
import { encode, layoutFor } from './packed.ts';
import { packedContext, packedFingerprint } from './packedFingerprint.ts';
import { FALLBACK, packedStep, packs, UNCHANGED } from './packedStep.ts';
import { EVENT_BITS, PackedBranches } from './packedBranches.ts';
import { packedStateBreaks, STATE_BITS } from './packedProperties.ts';
import { Links } from './exploreLinks.ts';

/**
 * Bounded exhaustive exploration: every schedule of the alphabet's commands up
 * to `maxDepth`, breadth first, with visited states stored as 64-bit
 * fingerprints of their orbit under the model's symmetries (fingerprint.ts).
 * Breadth first makes the first counterexample found for a property a
 * shortest one. Only the frontier keeps whole states; every visited state
 * below the last level keeps its parent, the command and the branch that
 * reached it (7 bytes; 10 once a step had more than 256 branches), and a counterexample is rebuilt by replaying those
 * from the initial state (one ending on the last level from its parent).
 */
export interface ExploreOptions {
  /** Longest schedule explored, in commands. */
  readonly maxDepth: number;
  /** Stop expanding once this many distinct states were seen (the result says so). */
  readonly maxStates?: number;
  /** A clock for the states-per-second figure and the time budget only; the search itself never reads time. */
  readonly clock?: () => number;
  /** Stop once this many ms of `clock` have passed (the result says which level was the last complete). */
  readonly budgetMs?: number;
  /** Identify states that differ by a permutation of the clients (default true). */
  readonly clientSymmetry?: boolean;
  /**
   * Identify states that differ by a permutation of every node when the
   * alphabet addresses all nodes alike (default true); nodes 1..n-1 are
   * always permuted, node 0 too only then (nodeSymmetric).
   */
  readonly nodeSymmetry?: boolean;
  /**
   * Step and fingerprint with the packed engine where the design and the
   * command pack (default true; packed.ts): the same states, transitions and
   * counterexamples, less CPU. False: the reference step alone (for
   * comparing the two).
   */
  readonly packed?: boolean;
}

/** Where the node a command addresses is, if any. */
function addressedNode(c: Command): number | undefined {
  if ('node' in c) return c.node;
  if (c.kind === 'clock-drift' && 'node' in c.target) return c.target.node;
  return undefined;
}

/**
 * Whether renaming the nodes maps the alphabet onto itself: every command
 * that addresses a node is there for every node. Then node 0 is no more
 * special than the others (spec 8.4) and may be permuted with them.
 */
export function nodeSymmetric(alphabet: readonly Command[], nodes: number): boolean {
  checkCommands(alphabet, 'nodeSymmetric alphabet');
  checkInteger(nodes, 'nodeSymmetric nodes', 1, 15);
  const keys = new Set(alphabet.map((c) => JSON.stringify(c)));
  return alphabet.every((c) => {
    const n = addressedNode(c);
    if (n === undefined) return true;
    for (let m = 0; m < nodes; m++) {
      const moved = c.kind === 'clock-drift' ? { ...c, target: { node: m } } : { ...c, node: m };
      if (!keys.has(JSON.stringify(moved))) return false;
    }
    return true;
  });
}

/**
 * Whether a key dead on its node (past its expiry by more than the
 * tolerance) behaves as no key for the rest of every schedule: no command
 * steps a node's clock back (so it stays dead: clocks only run forward,
 * at most 90 % slow), and deleting it moves no token source (etcd's
 * revision does move). Then an acquire overwrites it as it would fill an
 * empty slot, an extend gets no vote from it, its owner's release deletes
 * it with no effect a property reads (OWN-1 holds for the owner), and
 * LIVE-1 ignores it (spec 8.4, "Abstractions").
 */
export function deadKeysStayDead(design: Design, alphabet: readonly Command[]): boolean {
  validateDesign(design);
  checkCommands(alphabet, 'deadKeysStayDead alphabet');
  return rulesOf(design).tokenSource !== 'cluster-revision' && !expiryClockStepsBack(design, alphabet);
}

/** Whether a command steps back the clock a node expires its keys by (a wall clock step on Redis; etcd expires by a monotonic clock). */
export function expiryClockStepsBack(design: Design, alphabet: readonly Command[]): boolean {
  validateDesign(design);
  checkCommands(alphabet, 'expiryClockStepsBack alphabet');
  return expiresByWallClock(design) && alphabet.some((c) => c.kind === 'clock-step' && c.deltaMs < 0);
}

/** The symmetries and abstractions the exploration of `alphabet` from `initial` fingerprints its states under. */
export function fingerprintOptionsFor(initial: World, alphabet: readonly Command[], options: Pick<ExploreOptions, 'clientSymmetry' | 'nodeSymmetry'> = {}): FingerprintOptions {
  checkWorld(initial, 'fingerprintOptionsFor initial');
  checkCommands(alphabet, 'fingerprintOptionsFor alphabet');
  checkOptions(options, 'fingerprintOptionsFor options');
  checkFlags(options, 'fingerprintOptionsFor options', ['clientSymmetry', 'nodeSymmetry']);
  return {
    clientSymmetry: options.clientSymmetry,
    fixedNodes: options.nodeSymmetry !== false && nodeSymmetric(alphabet, initial.nodes.length) ? 0 : 1,
    deadKeysGone: deadKeysStayDead(initial.config.design, alphabet),
    exactExpiry: expiryClockStepsBack(initial.config.design, alphabet),
  };
}

/** One step of a run or a counterexample: the command, the branch's outcome, and the properties broken after it. */
export interface TraceStep {
  readonly command: Command;
  readonly outcome: Outcome;
  readonly violations: readonly Violation[];
}

/** A shortest schedule from the initial world that breaks `property` (breadth first finds it first). */
export interface Counterexample {
  readonly property: PropertyId;
  /** The violation at the last step. */
  readonly violation: Violation;
  /** The schedule, from the initial world, as replayed. */
  readonly steps: readonly TraceStep[];
  /**
   * Each step's branch, as an index into stepOrbits(world, command, fixedNodes) of the exploration (its
   * fingerprint options' fixedNodes): with the commands, what replays the schedule exactly (replayCounterexample).
   */
  readonly branches: readonly number[];
}

/** What an exploration covered and found: one counterexample per property it saw broken. */
export interface ExploreResult {
  /** Deepest level whose every state was expanded. */
  readonly depthCompleted: number;
  /** True when maxStates or budgetMs cut the search short. */
  readonly truncated: boolean;
  /** Distinct states (orbits) seen. */
  readonly states: number;
  /** Successor states generated: each branch of each enabled command from each expanded state. */
  readonly transitions: number;
  /** Time the exploration took, in ms on `ExploreOptions.clock` (0 without one). */
  readonly elapsedMs: number;
  /** Shortest counterexample found per property, in the order found. */
  readonly counterexamples: readonly Counterexample[];
  /**
   * The chance that two distinct states shared a fingerprint, so one was
   * wrongly skipped, estimated as TLC does (optimistic): states *
   * (transitions - states) / 2^64.
   */
  readonly collisionProbability: number;
  /** Bytes kept per visited state: the fingerprint table and the parent links. */
  readonly bytesPerState: number;
  /** Most states held whole at once (one BFS level). */
  readonly peakFrontier: number;
  /** The last level expanded found no new state: the whole reachable space was explored. */
  readonly exhausted: boolean;
}

const NONE: readonly Violation[] = [];

/**
 * An exploration expanded one level at a time, keeping its frontier and
 * visited states between levels: `explore` runs one to its depth, and a
 * run under a whole-run time budget (exploreLevels.ts) takes every cell's
 * level d before any cell's level d+1.
 */
export interface Exploration {
  /**
   * Expands the next level unless the search is over (exhausted, truncated
   * or at maxDepth); stops (truncated) at maxStates, once `clock` passes
   * `deadlineMs` (asked at the level's start and every 256 states), or once
   * `full()` says so (asked every 256 states). Returns whether the level
   * completed.
   */
  expandLevel(deadlineMs?: number, full?: () => boolean): boolean;
  /** Deepest level whose every state was expanded. */
  readonly depthCompleted: number;
  /** The frontier is empty: every reachable state was expanded. */
  readonly exhausted: boolean;
  /** maxStates or a deadline cut a level short: the search is over. */
  readonly truncated: boolean;
  /** Nothing left to expand: exhausted, truncated, or at maxDepth. */
  readonly over: boolean;
  /** States held whole in the frontier now (the level to expand next). */
  readonly frontierSize: number;
  /** Distinct states seen after each completed level: statesAt[d] for d <= depthCompleted (statesAt[0] is 1). */
  readonly statesAt: readonly number[];
  /** What the search has covered and found so far. */
  result(): ExploreResult;
}

/** The optional booleans of an options object: absent or a boolean. */
function checkFlags(options: object, name: string, flags: readonly string[]): void {
  for (const flag of flags) {
    const value = (options as Record<string, unknown>)[flag];
    if (value !== undefined && typeof value !== 'boolean') refuse(`${name}.${flag}`, 'a boolean or absent', value);
  }
}

/** An exploration's arguments, checked before anything is read or stepped. */
function checkExploration(initial: World, alphabet: readonly Command[], options: ExploreOptions, call: string): void {
  checkWorld(initial, `${call} initial`);
  checkCommands(alphabet, `${call} alphabet`);
  // The parent links keep a command's index in 16 bits.
  if (alphabet.length > 0xffff) refuse(`${call} alphabet`, 'at most 65535 commands', alphabet);
  const o = checkObject(options, `${call} options`, 'an options object { maxDepth, ... }');
  checkInteger(o.maxDepth, `${call} options.maxDepth`, 0, 2 ** 31 - 1);
  if (o.maxStates !== undefined) checkInteger(o.maxStates, `${call} options.maxStates`, 1, Number.MAX_SAFE_INTEGER);
  if (o.clock !== undefined && typeof o.clock !== 'function') refuse(`${call} options.clock`, 'a function returning ms, or absent', o.clock);
  if (o.budgetMs !== undefined && (typeof o.budgetMs !== 'number' || !(o.budgetMs >= 0))) refuse(`${call} options.budgetMs`, 'a number of ms >= 0, or absent', o.budgetMs);
  checkFlags(o, `${call} options`, ['clientSymmetry', 'nodeSymmetry', 'packed']);
}

/**
 * Explores every schedule of `alphabet` from `initial` up to
 * `options.maxDepth`, within maxStates and budgetMs, and returns what it
 * covered with a shortest counterexample per property broken. Throws
 * InvalidInputError naming a bad argument.
 */
export function explore(initial: World, alphabet: readonly Command[], options: ExploreOptions): ExploreResult {
  checkExploration(initial, alphabet, options, 'explore');
  const clock = options.clock ?? (() => 0);
  const run = startExploration(initial, alphabet, options);
  const deadline = clock() + (options.budgetMs ?? Number.POSITIVE_INFINITY);
  while (run.expandLevel(deadline));
  return run.result();
}

/** The same search as explore, level by level under the caller's control (Exploration.expandLevel). Throws InvalidInputError naming a bad argument. */
export function startExploration(initial: World, alphabet: readonly Command[], options: ExploreOptions): Exploration {
  checkExploration(initial, alphabet, options, 'startExploration');
  const clock = options.clock ?? (() => 0);
  const startedMs = clock();
  const maxStates = options.maxStates ?? Number.POSITIVE_INFINITY;
  const fpOptions = fingerprintOptionsFor(initial, alphabet, options);
  // The nodes the fingerprint permutes are the ones the step branches over by orbit (stepOrbits).
  const fixedNodes = fpOptions.fixedNodes ?? 1;
  const fp: Fingerprint = { hi: 0, lo: 0 };
  const seen = new FingerprintSet();
  const links = new Links();
  const found = new Map<PropertyId, Counterexample>();
  /** Whether `bits` (a packed check's, one bit per property of `table`) name a property not found yet. */
  const newlyBroken = (bits: number, table: ReadonlyArray<readonly [PropertyId, number]>): boolean =>
    bits !== 0 && table.some(([p, bit]) => (bits & bit) !== 0 && !found.has(p));
  fingerprint(initial, fp, fpOptions);
  seen.add(fp.hi, fp.lo);
  links.push(-1, 0, 0);
  const checked = new Uint8Array(alphabet.length);
  // The packed engine (packed.ts): where the design packs, the faults packedStep computes are stepped and fingerprinted
  // packed, and only a fresh state's World is taken from the reference step (the same branch, by index).
  const layout = options.packed === false ? null : layoutFor(initial, alphabet);
  const packedCtx = layout === null ? null : packedContext(layout, initial, fpOptions);
  const packedCommand = alphabet.map((c) => layout !== null && packs(initial, c));
  const current = new Float64Array(layout?.size ?? 0);
  const successors = new PackedBranches(layout?.size ?? 0);
  let frontier: World[] = [initial];
  // The states of the level last expanded (the frontier holds them, except after the last level: spec 8.4).
  let frontierCount = 1;
  let frontierIds: number[] = [0];
  let peakFrontier = 1;
  let depthCompleted = 0;
  let transitions = 0;
  let truncated = false;
  const statesAt: number[] = [1];

  /** The counterexample for `v`: the steps from the initial state to state `id`, then one more (command c, branch b), replayed. */
  const traceTo = (v: Violation, id: number, c: number, b: number): Counterexample => {
    const path: Array<readonly [number, number]> = [[c, b]];
    for (let i = id; i > 0; i = links.parent[i]!) path.push([links.command[i]!, links.branch[i]!]);
    path.reverse();
    let world = initial;
    const steps = path.map(([ci, bi]) => {
      const command = alphabet[ci]!;
      const branch = stepOrbits(world, command, fixedNodes)[bi]!;
      world = branch.next;
      return { command, outcome: branch.outcome, violations: checkProperties(branch.events, branch.next) };
    });
    return { property: v.property, violation: v, steps, branches: path.map(([, bi]) => bi) };
  };

  const expandLevel = (deadlineMs = Number.POSITIVE_INFINITY, full?: () => boolean): boolean => {
    // A caller's arguments (the Exploration is public): NaN or a string as the deadline was past no time, and a full
    // that is no function threw a TypeError 256 states into the level.
    if (typeof deadlineMs !== 'number' || Number.isNaN(deadlineMs)) refuse('expandLevel deadlineMs', 'a number of ms on the exploration clock, or absent', deadlineMs);
    if (full !== undefined && typeof full !== 'function') refuse('expandLevel full', 'a function returning whether memory is full, or absent', full);
    if (truncated || frontierCount === 0 || depthCompleted >= options.maxDepth) return false;
    // The deadline is asked at each level's start too: within a level only every 256 states, so a search of narrow
    // levels (fewer states each) never asked it and ran to maxDepth, reported as complete, however long that took.
    if (clock() > deadlineMs) {
      truncated = true;
      return false;
    }
    const depth = depthCompleted + 1;
    // The last level is never expanded: its fresh states are counted and checked, and kept neither whole nor linked
    // (a counterexample ending in one is rebuilt from its parent, traceTo).
    const last = depth >= options.maxDepth;
    const next: World[] = [];
    const nextIds: number[] = [];
    let fresh = 0;
    for (let f = 0; f < frontier.length; f++) {
      const world = frontier[f]!;
      const id = frontierIds[f]!;
      const packed = packedCtx !== null && encode(packedCtx.layout, world, current);
      for (let c = 0; c < alphabet.length; c++) {
        const command = alphabet[c]!;
        if (!enabled(world, command)) continue;
        // Input is checked the first time a command is stepped (step throws on bad input); it depends only on the configuration.
        if (checked[c] === 0) {
          step(world, command);
          checked[c] = 1;
        }
        const n = packed && packedCommand[c] && packedCtx !== null ? packedStep(packedCtx, current, command, successors) : FALLBACK;
        if (n !== FALLBACK && packedCtx !== null) {
          if (n === UNCHANGED) {
            transitions++;
            continue;
          }
          // The reference step's branches, made only if one of them is fresh: its World goes to the frontier.
          let reference: readonly Branch[] | null = null;
          for (let b = 0; b < n; b++) {
            transitions++;
            packedFingerprint(packedCtx, successors.state(b), fp);
            if (!seen.add(fp.hi, fp.lo)) {
              // A state seen before broke the same state properties: only the step's events are new, and their checks are
              // the reference's, asked for only where the packed step says an event breaks a property not found yet.
              const bits = successors.events(b);
              if (!newlyBroken(bits, EVENT_BITS)) continue;
              reference ??= stepOrbits(world, command, fixedNodes);
              for (const v of checkEvents(reference[b]!.events)) {
                if (!found.has(v.property)) found.set(v.property, traceTo(v, id, c, b));
              }
              continue;
            }
            fresh++;
            // On the last level the state's World is wanted only where it may break a property not found yet.
            if (last) {
              const bits = successors.events(b);
              const stateBits = packedStateBreaks(packedCtx, successors.state(b));
              if (!newlyBroken(bits, EVENT_BITS) && !newlyBroken(stateBits, STATE_BITS)) continue;
            }
            reference ??= stepOrbits(world, command, fixedNodes);
            const branch = reference[b]!;
            for (const v of checkProperties(branch.events, branch.next)) {
              if (!found.has(v.property)) found.set(v.property, traceTo(v, id, c, b));
            }
            if (last) continue;
            next.push(branch.next);
            nextIds.push(links.push(id, c, b));
          }
          continue;
        }
        const branches = stepOrbits(world, command, fixedNodes);
        for (let b = 0; b < branches.length; b++) {
          const branch = branches[b]!;
          transitions++;
          // A step that changed nothing (a read, a release of nothing): its state is the one being expanded, already checked.
          if (branch.next === world && branch.events.length === 0) continue;
          fingerprint(branch.next, fp, fpOptions);
          const isFresh = seen.add(fp.hi, fp.lo);
          // A state seen before broke the same state properties (MUTEX-1, LIVE-1) when first reached: states with one fingerprint
          // break the same ones (spec 8.4), so only the step's events are new.
          const violations = isFresh ? checkProperties(branch.events, branch.next) : branch.events.length === 0 ? NONE : checkEvents(branch.events);
          for (const v of violations) {
            if (!found.has(v.property)) found.set(v.property, traceTo(v, id, c, b));
          }
          if (!isFresh) continue;
          fresh++;
          if (last) continue;
          next.push(branch.next);
          nextIds.push(links.push(id, c, b));
        }
      }
      // The clock is read every 256 states only: reading it is not free.
      if (seen.size >= maxStates || ((f & 0xff) === 0xff && (clock() > deadlineMs || full?.() === true))) {
        truncated = true;
        break;
      }
    }
    if (!truncated) {
      depthCompleted = depth;
      statesAt.push(seen.size);
    }
    frontier = next;
    frontierCount = fresh;
    frontierIds = nextIds;
    peakFrontier = Math.max(peakFrontier, next.length);
    return !truncated;
  };
  return {
    expandLevel,
    get depthCompleted() {
      return depthCompleted;
    },
    get exhausted() {
      return frontierCount === 0 && !truncated;
    },
    get truncated() {
      return truncated;
    },
    get over() {
      return truncated || frontierCount === 0 || depthCompleted >= options.maxDepth;
    },
    get frontierSize() {
      return frontier.length;
    },
    statesAt,
    result: () => ({
      depthCompleted,
      truncated,
      states: seen.size,
      transitions,
      elapsedMs: clock() - startedMs,
      counterexamples: [...found.values()],
      collisionProbability: (seen.size * Math.max(0, transitions - seen.size)) / 2 ** 64,
      bytesPerState: (seen.bytes + links.bytes) / seen.size,
      peakFrontier,
      exhausted: frontierCount === 0 && !truncated,
    }),
  };
}
