/**
 * An operation of a concurrent history, as the linearizability checker sees
 * it: one call and at most one return of one process. Times are on one clock
 * shared by every process (any unit; only their order matters). Intervals
 * are closed: an operation returning at t is concurrent with one called at t.
 */
export interface Operation<I, O> {
  /** Who called it; only reports use it. */
  readonly process: number | string;
  readonly call: number;
  /**
   * When the response arrived. Absent or `Infinity`: the outcome is unknown
   * (Jepsen's `info`): the operation may take effect at any instant after its
   * call, or never.
   */
  readonly return?: number;
  readonly input: I;
  /** What the caller observed; absent when it saw none (unknown outcome, timed-out read). */
  readonly output?: O;
}

/** Whether the operation's outcome is unknown: it may be linearized anywhere after its call, or left out. */
export const isPending = (op: Operation<unknown, unknown>): boolean => op.return === undefined || op.return === Infinity;
