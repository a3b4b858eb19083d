import type { Command } from './command.ts';
import type { TraceStep } from './explore.ts';
import type { Outcome } from './outcome.ts';
import type { Violation } from './properties.ts';
import { checkProperties } from './properties.ts';
import type { World } from './state.ts';
import type { Branch } from './world.ts';
import { step, stepMade } from './world.ts';
import { isModelChooser, modelChooser } from './madeChoosers.ts';
import { checkCommands, checkFunction, checkOneOf, refuse } from './checks.ts';
import { checkWorld } from './worldCheck.ts';
import { checkTimeHeadroom, checkTokenHeadroom } from './exploreInput.ts';

/**
 * Picks one branch where the model allows several. Schedules run with the
 * first branch unless the caller prefers another (for instance the outcome a
 * real backend reported).
 */
export type Chooser = (branches: readonly Branch[], command: Command) => Branch;

export const firstBranch: Chooser = modelChooser((branches) => branches[0]!);

/** Every outcome kind (model/outcome.ts): a kind none has would prefer nothing, and the first branch would be taken silently. */
const OUTCOME_KINDS: readonly Outcome['kind'][] = ['granted', 'denied', 'extended', 'not-extended', 'released', 'not-held', 'accepted', 'rejected', 'value', 'ok', 'timed-out'];

/** Prefers the branch with the given outcome kind, else the first. Throws InvalidInputError for a kind no outcome has. */
export function preferOutcome(kind: Outcome['kind']): Chooser {
  checkOneOf(kind, 'preferOutcome kind', OUTCOME_KINDS);
  return modelChooser((branches) => branches.find((b) => b.outcome.kind === kind) ?? branches[0]!);
}

/** runSchedule's result. */
export interface RunResult {
  /** The world after the last step. */
  readonly world: World;
  /** Each command as stepped, with the chosen branch's outcome and its violations. */
  readonly steps: readonly TraceStep[];
  /** Every violation of the run, in step order. */
  readonly violations: readonly Violation[];
}

/** Runs a whole schedule, checking every property after every step. */
export function runSchedule(initial: World, commands: readonly Command[], choose: Chooser = firstBranch): RunResult {
  checkWorld(initial, 'runSchedule initial');
  checkCommands(commands, 'runSchedule commands');
  checkFunction(choose, 'runSchedule choose', 'a chooser (branches, command) => branch');
  // A token or time past its exact range would be refused at the step that reaches it, and the run so far lost.
  checkTokenHeadroom(initial, commands, commands.length, 'runSchedule', 'schedule');
  checkTimeHeadroom(initial, commands, commands.length, 'runSchedule', 'schedule');
  let world = initial;
  const steps: TraceStep[] = [];
  const made = isModelChooser(choose);
  for (const [i, command] of commands.entries()) {
    // The initial world was checked above; after a caller's chooser, the world it picked is checked again.
    const branches = i === 0 || made ? stepMade(world, command) : step(world, command);
    const branch = choose(branches, command);
    // A chooser picks one of the model's branches; anything else would be read as a branch.
    if (!branches.includes(branch)) refuse('runSchedule choose', "a chooser returning one of the step's branches", branch, 'precondition');
    const violations = checkProperties(branch.events, branch.next);
    steps.push({ command, outcome: branch.outcome, violations });
    world = branch.next;
  }
  return { world, steps, violations: steps.flatMap((s) => s.violations) };
}
