/**
 * round.ts's roundEnds over numbers, for the packed step: a round's
 * arrivals as a kind per node (ARRIVES at a true time, FAILED at once,
 * NEVER from a black hole) and a time, the replies that count as a bit set
 * of nodes. The same ways, in the same order, as roundEnds; no allocation.
 */
export const ARRIVES = 0;
export const FAILED = 1;
export const NEVER = 2;

/** How a round is decided early: acquire (a quorum of grants, or none possible), yes-or-never (extend, write-back), or a quorum answered (release). */
export const DECIDE_ACQUIRE = 0;
export const DECIDE_YES_OR_NEVER = 1;
export const DECIDE_QUORUM_ANSWERED = 2;

export interface PackedRound {
  /** Arrival kind per node. */
  readonly kind: Int8Array;
  /** Arrival time per node (ARRIVES only). */
  readonly at: Float64Array;
  /** Per node: whether its reply is a yes (the decision's `yes`). */
  readonly yes: Uint8Array;
}

export function packedRound(nodes: number): PackedRound {
  return { kind: new Int8Array(nodes), at: new Float64Array(nodes), yes: new Uint8Array(nodes) };
}

/** The ways the round ends: `ways` of them (1 or 2), each at `endMs[w]` with the counted replies `counted[w]` (bit i: node i). */
export interface RoundWays {
  ways: number;
  readonly endMs: Float64Array;
  readonly counted: Int32Array;
}

export function roundWays(): RoundWays {
  return { ways: 0, endMs: new Float64Array(2), counted: new Int32Array(2) };
}

function decided(rule: number, needed: number, n: number, yes: number, no: number, failed: number, pending: number): boolean {
  switch (rule) {
    case DECIDE_ACQUIRE:
      return yes >= needed || (yes + pending < needed && (yes + no >= needed || failed > n - needed));
    case DECIDE_YES_OR_NEVER:
      return yes >= needed || yes + pending < needed;
    default:
      return pending <= n - needed;
  }
}

/**
 * roundEnds(arrivals, deadlineMs, earliestMs, decision) into `out`, the
 * decision given by `rule` and `needed` (a quorum, or the yes votes still
 * needed; rule < 0: no decision, the round waits for every reply).
 */
export function roundEndsInto(round: PackedRound, n: number, deadlineMs: number, earliestMs: number, rule: number, needed: number, out: RoundWays): void {
  const { kind, at: raw, yes: isYes } = round;
  let failed = 0;
  for (let i = 0; i < n; i++) if (kind[i] === FAILED) failed++;
  if (rule >= 0) {
    for (let t = earliestMs; t < deadlineMs; ) {
      let read = 0;
      let yes = 0;
      let next = Number.POSITIVE_INFINITY;
      let mask = 0;
      for (let i = 0; i < n; i++) {
        if (kind[i] !== ARRIVES) continue;
        // The time a reply is read: never before earliestMs.
        const a = Math.max(raw[i]!, earliestMs);
        if (a <= t) {
          read++;
          mask |= 1 << i;
          if (isYes[i] === 1) yes++;
        } else if (a < next) next = a;
      }
      if (decided(rule, needed, n, yes, read - yes, failed, n - read - failed)) {
        out.ways = 1;
        out.endMs[0] = t;
        out.counted[0] = mask;
        return;
      }
      t = next;
    }
  }
  let last = earliestMs;
  let all = 0;
  let before = 0;
  let atDeadline = 0;
  for (let i = 0; i < n; i++) {
    if (kind[i] === FAILED) continue;
    if (kind[i] === NEVER) {
      last = Number.POSITIVE_INFINITY;
      continue;
    }
    const a = Math.max(raw[i]!, earliestMs);
    last = Math.max(last, a);
    all |= 1 << i;
    if (a < deadlineMs) before |= 1 << i;
    if (a === deadlineMs) atDeadline |= 1 << i;
  }
  if (last < deadlineMs) {
    out.ways = 1;
    out.endMs[0] = last;
    out.counted[0] = all;
    return;
  }
  const endMs = Math.max(deadlineMs, earliestMs);
  out.endMs[0] = endMs;
  out.counted[0] = before;
  if (atDeadline === 0) {
    out.ways = 1;
    return;
  }
  out.ways = 2;
  out.endMs[1] = endMs;
  out.counted[1] = before | atDeadline;
}
