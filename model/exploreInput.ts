import type { Command } from './command.ts';
import { checkArray, checkCommandShape, checkInteger, checkKnownKeys, checkObject, isObject, refuse } from './checks.ts';
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
    if (c.kind === 'clock-drift' && !isObject(c.target)) checkObject(c.target, `${name}[${i}].target`, 'an object { node } or { client }');
  });
}

/** An exploration's world, alphabet and options, checked as explore and startExploration take them. */
export function checkExploreCall(initial: World, alphabet: readonly Command[], options: unknown, call: string): void {
  checkWorld(initial, `${call} initial`);
  checkAddressable(alphabet, `${call} alphabet`);
  // The parent links keep a command's index in 16 bits (explore.ts refuses more, before any command is looked at).
  if (alphabet.length > 0xffff) refuse(`${call} alphabet`, 'at most 65535 commands', alphabet);
  checkExploreOptions(options, `${call} options`);
  checkAlphabet(initial, alphabet, `${call} alphabet`);
}
