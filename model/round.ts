/**
 * One round of requests from a client to the lock-service nodes, in time:
 * when each node's reply reaches the client, and when the client stops
 * waiting. The client waits for every node that can answer, but no longer
 * than its request timeout; a reply that comes later counts as no answer.
 */

/**
 * When a node's reply reaches the client: a true time; 'failed', refused at
 * once (a cut link, a node that is down: nothing to wait for); or 'never', a
 * black hole (the client waits out its timeout).
 */
export type Arrival = number | 'failed' | 'never';

export interface RoundEnd {
  /**
   * True time at which the client judges the round: its last reply, or its
   * deadline. A client paused with the round in flight does nothing until
   * its resume: then the timers that came due fire first (a deadline passed
   * during the pause counts no reply), then it reads what arrived.
   */
  readonly endMs: number;
  /** Per node: whether its reply counts (came before the deadline). */
  readonly counted: readonly boolean[];
}

/**
 * The ways a round can end. `deadlineMs` is the request timeout in true
 * time; `earliestMs` the first moment the client reads anything (its
 * resume, if it paused with the round in flight; replies wait for it). A
 * reply at the deadline races the timeout: both ends are allowed.
 */
export function roundEnds(arrivals: readonly Arrival[], deadlineMs: number, earliestMs: number): readonly RoundEnd[] {
  const at = arrivals.map((a) => (typeof a === 'number' ? Math.max(a, earliestMs) : a));
  let last = earliestMs;
  for (const a of at) if (a !== 'failed') last = Math.max(last, a === 'never' ? Number.POSITIVE_INFINITY : a);
  if (last < deadlineMs) return [{ endMs: last, counted: at.map((a) => typeof a === 'number') }];
  const endMs = Math.max(deadlineMs, earliestMs);
  const before = at.map((a) => typeof a === 'number' && a < deadlineMs);
  if (!at.some((a) => a === deadlineMs)) return [{ endMs, counted: before }];
  return [
    { endMs, counted: before },
    { endMs, counted: at.map((a, i) => before[i]! || a === deadlineMs) },
  ];
}

/** The same round's arrivals and deadline, relative to `nowMs` (for state keys that ignore a shift of time). */
export function relativeArrivals(arrivals: readonly Arrival[], nowMs: number): string {
  return arrivals.map((a) => (typeof a === 'number' ? String(a - nowMs) : a)).join(',');
}
