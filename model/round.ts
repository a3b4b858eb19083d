/**
 * One round of requests from a client to the lock-service nodes, in time:
 * when each node's reply reaches the client, and when the client stops
 * waiting. The client stops as soon as the round's outcome is decided (a
 * quorum said yes, or too few are left to make one: the round's `Decision`),
 * when every node that can answer has, or at its request timeout; a reply
 * that comes later counts as no answer (spec 3, "Rounds and the request
 * timeout"). What a late reply did on its node stays done.
 */

/**
 * When a node's reply reaches the client: a true time; 'failed', refused at
 * once (a cut link, a node that is down: nothing to wait for); or 'never', a
 * black hole (the client waits out its timeout).
 */
export type Arrival = number | 'failed' | 'never';

export interface RoundEnd {
  /**
   * True time at which the client judges the round: when it is decided,
   * its last reply, or its deadline. A client paused with the round in flight does nothing until
   * its resume: then the timers that came due fire first (a deadline passed
   * during the pause counts no reply), then it reads what arrived.
   */
  readonly endMs: number;
  /** Per node: whether its reply counts (came before the deadline). */
  readonly counted: readonly boolean[];
}

/** The votes of a round so far, as the client reads them. */
export interface Tally {
  readonly yes: number;
  /** Answered, but not yes. */
  readonly no: number;
  /** Refused at once (a cut link, a node that is down). */
  readonly failed: number;
  /** Not answered yet. */
  readonly pending: number;
}

/** When a round's outcome is known before every reply is in: which nodes' replies are yes, and the rule. */
export interface Decision {
  readonly yes: readonly boolean[];
  readonly decided: (tally: Tally) => boolean;
}

/**
 * The ways a round can end. `deadlineMs` is the request timeout in true
 * time; `earliestMs` the first moment the client reads anything (its
 * resume, if it paused with the round in flight; replies wait for it). A
 * reply at the deadline races the timeout: both ends are allowed. With a
 * `decision`, the round ends at the first moment before the deadline at
 * which the replies read so far decide it; replies arriving at that same
 * moment are read too (the client waits one turn of its clock for them).
 */
export function roundEnds(arrivals: readonly Arrival[], deadlineMs: number, earliestMs: number, decision?: Decision): readonly RoundEnd[] {
  // Loops, not map/filter/Set: this runs for every acquire branch of an exploration.
  const n = arrivals.length;
  const at: Arrival[] = new Array(n);
  let failed = 0;
  for (let i = 0; i < n; i++) {
    const a = arrivals[i]!;
    at[i] = typeof a === 'number' ? Math.max(a, earliestMs) : a;
    if (a === 'failed') failed++;
  }
  if (decision !== undefined) {
    // The moments the client reads replies, in order: its first read, then each distinct arrival (none is before earliestMs).
    for (let t = earliestMs; t < deadlineMs; ) {
      let read = 0;
      let yes = 0;
      let next = Number.POSITIVE_INFINITY;
      for (let i = 0; i < n; i++) {
        const a = at[i]!;
        if (typeof a !== 'number') continue;
        if (a <= t) {
          read++;
          if (decision.yes[i]) yes++;
        } else if (a < next) next = a;
      }
      if (decision.decided({ yes, no: read - yes, failed, pending: n - read - failed })) return [{ endMs: t, counted: at.map((a) => typeof a === 'number' && a <= t) }];
      t = next;
    }
  }
  let last = earliestMs;
  for (const a of at) if (a !== 'failed') last = Math.max(last, a === 'never' ? Number.POSITIVE_INFINITY : a);
  if (last < deadlineMs) return [{ endMs: last, counted: at.map((a) => typeof a === 'number') }];
  const endMs = Math.max(deadlineMs, earliestMs);
  const before = at.map((a) => typeof a === 'number' && a < deadlineMs);
  if (!at.includes(deadlineMs)) return [{ endMs, counted: before }];
  return [
    { endMs, counted: before },
    { endMs, counted: at.map((a, i) => before[i]! || a === deadlineMs) },
  ];
}

/** The same round's arrivals and deadline, relative to `nowMs` (for state keys that ignore a shift of time). */
export function relativeArrivals(arrivals: readonly Arrival[], nowMs: number): string {
  return arrivals.map((a) => (typeof a === 'number' ? String(a - nowMs) : a)).join(',');
}
