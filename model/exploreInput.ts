import type { Command } from './command.ts';
import { checkArray, checkCommandShape, checkInteger, checkKnownKeys, checkObject, isObject, refuse } from './checks.ts';
import { MAX_DRIFT_PPM } from './clock.ts';
import { InvalidInputError, MAX_TIME_MS, MAX_TOKEN } from './errors.ts';
import type { ExploreOptions } from './explore.ts';
import type { World } from './state.ts';
import { checkAlphabetCommand } from './world.ts';
import { checkWorld } from './worldCheck.ts';

/**
 * The checks an exploration's arguments get at the public entry, beyond the
 * ones explore.ts makes (its types and ranges): once per call, never per
 * state, so the exploration's hot path stays as it is.
 */

/** Every key of ExploreOptions. */
export const EXPLORE_OPTION_KEYS: readonly string[] = ['maxDepth', 'maxStates', 'clock', 'budgetMs', 'clientSymmetry', 'nodeSymmetry', 'packed'];

/** The most states an exploration can keep: its parent links index states with 32-bit signed integers. */
export const MAX_EXPLORE_STATES = 2 ** 31 - 1;

/**
 * `options` has only ExploreOptions' keys (a misspelt `maxstates` would
 * leave the search unbounded), and maxStates, if given (or `stateBound`
 * 'required', as a matrix cell's), within what the parent links index.
 */
export function checkExploreOptions(options: unknown, name: string, stateBound: 'optional' | 'required' = 'optional'): void {
  const o = checkObject(options, name, 'an options object { maxDepth, ... }');
  checkKnownKeys(o, name, EXPLORE_OPTION_KEYS);
  if (o.maxStates !== undefined || stateBound === 'required') checkInteger(o.maxStates, `${name}.maxStates`, 1, MAX_EXPLORE_STATES);
}

/**
 * Every command of `alphabet` checked against `initial`'s configuration
 * (checkAlphabetCommand): one no reached state enables would otherwise never
 * be stepped, so never checked, and be explored as nothing.
 */
export function checkAlphabet(initial: World, alphabet: readonly Command[], name: string): void {
  checkArray(alphabet, name, 'an array of commands');
  for (let i = 0; i < alphabet.length; i++) checkAlphabetCommand(initial, alphabet[i]!, `${name}[${i}]`);
}

/**
 * A command the symmetry functions read a node from (nodeSymmetric and the
 * ones that call it): its shape, and a clock-drift's target an object (they
 * look into it with `in`, which throws a TypeError on anything else).
 */
export function checkAddressable(alphabet: readonly Command[], name: string): void {
  checkArray(alphabet, name, 'an array of commands');
  alphabet.forEach((c, i) => {
    checkCommandShape(c, `${name}[${i}]`);
    checkCommandData(c, `${name}[${i}]`);
    if (c.kind === 'clock-drift' && !isObject(c.target)) checkObject(c.target, `${name}[${i}].target`, 'an object { node } or { client }');
  });
}

/** How deep a command's objects go: a pause's inFlight operation is one level below it; a little room beyond. */
const MAX_COMMAND_NESTING = 4;

/**
 * A command is plain data (numbers, strings, booleans, null, and objects of them a few levels deep): the symmetry
 * functions compare commands by their JSON, which threw a TypeError on a bigint, a cycle or a function in a field
 * of the caller's own (refused later by step, but nodeSymmetric and fingerprintOptionsFor read it first), and a
 * RangeError on one nested past the stack. Walked without recursion.
 */
function checkCommandData(command: Command, name: string): void {
  const todo: Array<readonly [unknown, string, number]> = [[command, name, 0]];
  while (todo.length > 0) {
    const [value, path, depth] = todo.pop()!;
    if (typeof value === 'bigint' || typeof value === 'function' || typeof value === 'symbol') refuse(path, 'plain data (a number, string, boolean or object)', value);
    if (typeof value !== 'object' || value === null) continue;
    if (depth >= MAX_COMMAND_NESTING) refuse(path, `at most ${MAX_COMMAND_NESTING} levels of objects below its command (a command is plain data, and a cycle never ends)`, value);
    for (const [key, field] of Object.entries(value)) todo.push([field, `${path}.${key}`, depth + 1]);
  }
}

/** An exploration's world, alphabet and options, checked as explore and startExploration take them. */
export function checkExploreCall(initial: World, alphabet: readonly Command[], options: unknown, call: string): void {
  checkWorld(initial, `${call} initial`);
  checkAddressable(alphabet, `${call} alphabet`);
  // The parent links keep a command's index in 16 bits (explore.ts refuses more, before any command is looked at).
  if (alphabet.length > 0xffff) refuse(`${call} alphabet`, 'at most 65535 commands', alphabet);
  checkExploreOptions(options, `${call} options`);
  checkAlphabet(initial, alphabet, `${call} alphabet`);
  const maxDepth = (options as { maxDepth?: unknown }).maxDepth;
  // explore.ts checks maxDepth's type right after; the headroom needs a number.
  if (typeof maxDepth === 'number' && Number.isInteger(maxDepth) && maxDepth >= 0) {
    checkTokenHeadroom(initial, alphabet, maxDepth, call);
    checkTimeHeadroom(initial, alphabet, maxDepth, call);
  }
}

/**
 * The states an exploration keeps when no maxStates bounds it, a budget or
 * not: a large maxDepth alone would expand until memory runs out, and a
 * budget bounds nothing when the caller's clock stands still (or read NaN,
 * which no deadline is ever past). About a million states fit in a few
 * hundred MB on the matrix's designs; the result says `truncated` when it
 * is reached.
 */
export const DEFAULT_MAX_STATES = 1_000_000;

/**
 * `options` as the search reads it: an object with ExploreOptions' keys only
 * (checkExploreOptions), each read once into a plain object (a getter or
 * proxy answering one value to the checks and another to the search could
 * unbound it), and the caller's clock checked at every reading: one that is
 * not a finite number (NaN, a bigint) is InvalidInputError('invalid-config'),
 * where NaN made every deadline unreachable and a bigint threw a TypeError
 * mid-search. The values are checked after (explore.ts, checkExploreOptions).
 */
export function readExploreOptions(options: unknown, name: string): ExploreOptions {
  const given = checkObject(options, name, 'an options object { maxDepth, ... }');
  checkKnownKeys(given, name, EXPLORE_OPTION_KEYS);
  const read: Record<string, unknown> = {};
  for (const key of EXPLORE_OPTION_KEYS) {
    const value = given[key];
    if (value !== undefined) read[key] = value;
  }
  if (typeof read.clock === 'function') read.clock = finiteReadings(read.clock as () => unknown, `${name}.clock()`);
  return read as unknown as ExploreOptions;
}

/**
 * `f` (a caller's clock, or memory gauge), each of its readings checked: one that is not a finite number is
 * InvalidInputError('invalid-config') naming `name`. NaN is past no bound (a deadline or limit it is compared with
 * never comes), and a bigint threw a TypeError where it was added to a number.
 */
export function finiteReadings(f: () => unknown, name: string): () => number {
  return () => {
    const reading = f();
    if (typeof reading !== 'number' || !Number.isFinite(reading)) refuse(name, 'a finite number', reading);
    return reading;
  };
}

/** `options` (read by readExploreOptions), with maxStates DEFAULT_MAX_STATES when absent. */
export function boundedOptions(options: ExploreOptions): ExploreOptions {
  return options.maxStates !== undefined ? options : { ...options, maxStates: DEFAULT_MAX_STATES };
}

/** The most attempts (first plus retries) one acquire of `alphabet`, a pause's in-flight one, or `initial`'s in flight makes. */
function mostAttempts(initial: World, alphabet: readonly Command[]): number {
  let retries = 0;
  for (const c of alphabet) {
    if (c.kind === 'acquire') retries = Math.max(retries, c.retries ?? 0);
    if (c.kind === 'pause' && c.inFlight?.kind === 'acquire') retries = Math.max(retries, c.inFlight.retries ?? 0);
  }
  for (const c of initial.clients) if (c.inFlight !== null && 'retries' in c.inFlight) retries = Math.max(retries, c.inFlight.retries);
  return retries + 1;
}

/** What a headroom check bounds: an exploration to maxDepth, or a schedule run whole (runSchedule); its refusal says which. */
export type HeadroomScope = 'exploration' | 'schedule';

const SCOPE_WORDS: Record<HeadroomScope, { readonly within: (steps: number) => string; readonly where: string; readonly shorter: string }> = {
  exploration: { within: (steps) => `maxDepth ${steps}`, where: 'mid-search', shorter: 'explore less deep' },
  schedule: { within: (steps) => `its ${steps} commands`, where: 'mid-run, losing the steps run', shorter: 'run a shorter schedule' },
};

/**
 * Refuses up front an exploration whose tokens could pass 2^63-1 within
 * its depth: the step that would mint one throws InvalidInputError
 * ('invalid-token') mid-search, and the levels searched so far would be lost.
 * A step mints at most one token per counter per attempt, plus one
 * (a late grant, etcd's revision on a delete); an operation in flight at the
 * start adds its attempts once. Counted from the highest counter (or
 * tokenBase) in `initial`: a bound, so a search that would mint fewer may
 * be refused too (the message says how low to start).
 */
export function checkTokenHeadroom(initial: World, alphabet: readonly Command[], maxDepth: number, call: string, scope: HeadroomScope = 'exploration'): void {
  let top = initial.config.tokenBase ?? 0n;
  for (const n of initial.nodes) {
    for (const k in n.counters) if (n.counters[k]! > top) top = n.counters[k]!;
    const replica = n.replica?.counters ?? {};
    for (const k in replica) if (replica[k]! > top) top = replica[k]!;
  }
  const perStep = BigInt(mostAttempts(initial, alphabet) + 1);
  const mints = BigInt(maxDepth + initial.clients.length) * perStep;
  if (top + mints <= MAX_TOKEN) return;
  const lowest = MAX_TOKEN - mints;
  throw new InvalidInputError(
    'invalid-token',
    `${call}: tokens could pass 2^63-1 within ${SCOPE_WORDS[scope].within(maxDepth)} (counters start at ${top}, and ${maxDepth} steps may mint up to ${mints} more), where a step would be refused ${SCOPE_WORDS[scope].where}; ${lowest >= 0n ? `start tokenBase and counters at most ${lowest}, or ` : ''}${SCOPE_WORDS[scope].shorter}`,
  );
}

/**
 * The largest magnitude of any number in `value` (a World, a command, a config), walked whole; bigints (tokens) are
 * not times. Without recursion and each object once: a world may carry fields of the caller's own (checkWorld reads
 * only the model's), cyclic or nested deeper than the stack, which threw a RangeError here.
 */
function largestNumber(value: unknown): number {
  let most = 0;
  const seen = new Set<object>();
  const todo: unknown[] = [value];
  while (todo.length > 0) {
    const v = todo.pop();
    if (typeof v === 'number') {
      if (Number.isFinite(v)) most = Math.max(most, Math.abs(v));
    } else if (typeof v === 'object' && v !== null && !seen.has(v)) {
      seen.add(v);
      for (const x of Object.values(v)) todo.push(x);
    }
  }
  return most;
}

/**
 * The sum of every number's magnitude in `value`: what one command can add to any time (its advance, ttl, latency,
 * delay, step...). Without recursion and each object once: runSchedule bounds its schedule before step checks each
 * command's fields, and a cyclic or deep one threw a RangeError here.
 */
function numbersSum(value: unknown): number {
  let sum = 0;
  const seen = new Set<object>();
  const todo: unknown[] = [value];
  while (todo.length > 0) {
    const v = todo.pop();
    if (typeof v === 'number') {
      if (Number.isFinite(v)) sum += Math.abs(v);
    } else if (typeof v === 'object' && v !== null && !seen.has(v)) {
      seen.add(v);
      for (const x of Object.values(v)) todo.push(x);
    }
  }
  return sum;
}

/**
 * Refuses up front an exploration whose times could pass 2^53-1 ms (MAX_TIME_MS) within its depth:
 * a step that would read a clock or set a deadline past it throws InvalidInputError
 * ('invalid-duration') mid-search, and the levels searched so far would be lost. A bound, over-
 * approximated on purpose: the world's largest time (any number in it), plus, per step (and once
 * per client for an operation in flight at the start), every number of the largest command and of
 * the configuration (its timeouts), retries counted, at the fastest clock rate (MAX_DRIFT_PPM).
 * Worlds that start near 0, as every built-in one does, are nowhere near it.
 */
export function checkTimeHeadroom(initial: World, alphabet: readonly Command[], maxDepth: number, call: string, scope: HeadroomScope = 'exploration'): void {
  const top = largestNumber(initial);
  let command = 0;
  for (const c of alphabet) {
    const retries = 'retries' in c && typeof c.retries === 'number' ? c.retries : 0;
    command = Math.max(command, numbersSum(c) * (retries + 1));
  }
  const perStep = (command + numbersSum(initial.config)) * (1 + MAX_DRIFT_PPM / 1_000_000);
  const steps = maxDepth + initial.clients.length + 1;
  const added = steps * perStep;
  if (top + added <= MAX_TIME_MS) return;
  const lowest = Math.floor(MAX_TIME_MS - added);
  throw new InvalidInputError(
    'invalid-duration',
    `${call}: times could pass 2^53-1 ms within ${SCOPE_WORDS[scope].within(maxDepth)} (the world's times reach ${top} ms, and ${maxDepth} steps may add up to ${Math.ceil(added)} ms), where a step would be refused ${SCOPE_WORDS[scope].where}; ${lowest >= 0 ? `start its clocks and times at most ${lowest} ms, or ` : ''}${SCOPE_WORDS[scope].shorter} or with shorter durations`,
  );
}
