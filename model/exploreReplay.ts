import type { Command } from './command.ts';
import { checkArray, checkInteger, checkObject, checkOneOf } from './checks.ts';
import { InvalidInputError } from './errors.ts';
import { fingerprintOptionsFor, type TraceStep } from './explore.ts';
import { alphabetFor, DEFAULT_ALPHABET, FAULT_CLASSES, type FaultClass } from './faultClass.ts';
import type { MatrixRow } from './matrix.ts';
import { checkProperties } from './properties.ts';
import { STORE_POLICIES, validateDesign, type StorePolicy } from './design.ts';
import { initialWorld } from './state.ts';
import { enabled, stepOrbits } from './world.ts';

/** One step of a cell's schedule as an exploration links it: the command's index in the cell's alphabet (alphabetFor), and its branch. */
export type CellStep = readonly [command: number, branch: number];

/**
 * A matrix cell's schedule replayed exactly as its exploration stepped it
 * (exploreCell with the default symmetries): from the cell's initial world,
 * each step's command taken from the cell's alphabet by index and its branch
 * from stepOrbits by index, so the outcomes and violations are the ones the
 * exploration reported (a counterexample's `branches`; its commands' indices
 * by cellPath). Throws InvalidInputError naming the first step the cell cannot
 * take (an index past its alphabet or branches, a command not enabled there):
 * a path from another model version, or not from this cell.
 */
export function replayCell(row: MatrixRow, store: StorePolicy, fault: FaultClass, path: readonly CellStep[]): TraceStep[] {
  validateDesign(checkObject(row, 'replayCell row', 'a matrix row { label, design, stores }').design as MatrixRow['design']);
  checkOneOf(store, 'replayCell store', STORE_POLICIES);
  checkOneOf(fault, 'replayCell faultClass', FAULT_CLASSES);
  checkArray(path, 'replayCell path');
  const alphabet = alphabetFor(row.design, fault);
  const initial = initialWorld({ design: row.design, store, clients: DEFAULT_ALPHABET.clients });
  const fixedNodes = fingerprintOptionsFor(initial, alphabet).fixedNodes ?? 1;
  let world = initial;
  return path.map((entry, i) => {
    const [c, b] = checkArray(entry, `replayCell path[${i}]`, 'a [command, branch] pair');
    checkInteger(c, `replayCell path[${i}] command`, 0, alphabet.length - 1);
    const command = alphabet[c]!;
    if (!enabled(world, command)) throw new InvalidInputError('invalid-config', `replayCell path[${i}]: ${JSON.stringify(command)} is not enabled after the steps before it`);
    const branches = stepOrbits(world, command, fixedNodes);
    checkInteger(b, `replayCell path[${i}] branch`, 0, branches.length - 1);
    const branch = branches[b]!;
    world = branch.next;
    return { command, outcome: branch.outcome, violations: checkProperties(branch.events, branch.next) };
  });
}

/** A counterexample's schedule of `row`/`fault` as replayCell takes it: each command's index in the cell's alphabet, with its branch. */
export function cellPath(row: MatrixRow, fault: FaultClass, commands: readonly Command[], branches: readonly number[]): CellStep[] {
  validateDesign(checkObject(row, 'cellPath row', 'a matrix row { label, design, stores }').design as MatrixRow['design']);
  checkOneOf(fault, 'cellPath faultClass', FAULT_CLASSES);
  checkArray(commands, 'cellPath commands');
  checkArray(branches, 'cellPath branches');
  if (branches.length !== commands.length) throw new InvalidInputError('invalid-config', `cellPath branches has ${branches.length} entries for ${commands.length} commands: one branch a command`);
  const alphabet = alphabetFor(row.design, fault).map((c) => JSON.stringify(c));
  return commands.map((command, i) => {
    const c = alphabet.indexOf(shownCommand(command));
    if (c < 0) throw new InvalidInputError('invalid-config', `cellPath commands[${i}] ${shownCommand(command)} is not in the cell's alphabet`);
    return [c, checkInteger(branches[i], `cellPath branches[${i}]`, 0, Number.MAX_SAFE_INTEGER)] as const;
  });
}

/** A command as JSON, or a placeholder for one JSON cannot write (a bigint, a cycle): no such command is in an alphabet. */
function shownCommand(command: unknown): string {
  try {
    return JSON.stringify(command) ?? String(command);
  } catch {
    return '(a value JSON cannot write)';
  }
}
