import type { Chooser } from './run.ts';

/**
 * The model's own choosers (firstBranch, preferOutcome's): they pick a
 * branch and leave it as it is, so the world runSchedule goes on from is the
 * one the model made and needs no new check. A caller's chooser holds the
 * branches and could edit one in place: after it, the next world is checked
 * whole again. Not exported from `lockcheck/model`: a caller cannot add to it.
 */
const MADE = new WeakSet<Chooser>();

export function modelChooser(choose: Chooser): Chooser {
  MADE.add(choose);
  return choose;
}

export function isModelChooser(choose: Chooser): boolean {
  return MADE.has(choose);
}
