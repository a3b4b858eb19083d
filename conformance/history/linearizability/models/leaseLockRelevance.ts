import { isPending, type Operation } from '../operation.ts';
import type { LeaseLockInput } from './leaseLock.ts';

/**
 * How long an unknown lock operation can matter (`Model.relevance` of
 * `leaseLock()`), from the model's rules alone: no clock assumption, the
 * ttl is not used. Each bound is an exact consequence (spec/SPEC.md,
 * "Linearizability checking", unknown outcomes):
 *
 * - An unknown extend (no deadline seen: `validUntil` Infinity) only ever
 *   lengthens the holder's deadline, which allows nothing more: never needed.
 * - An unknown acquire (owner X) leaves the lock held by X with no deadline.
 *   Only an extend, a release or a session's end by X, or a known acquire by
 *   X without deadline (stacking on it), can depend on that (anything else
 *   that can follow it is legal without it, leaving the same state), so it
 *   matters only until the last of those has returned (or can still matter).
 * - An unknown release by X frees the lock only when X holds it, and that
 *   matters only to the next acquire, which must have returned before X's
 *   deadline: the release matters until the earliest return of an acquire
 *   called after X's grant returned, and until the last acquire returning
 *   before X's latest deadline. It also matters to an unknown acquire by
 *   anyone that, without it, would take X's lease over (and so take effect
 *   after X's deadline): that binds every operation placed after the taker,
 *   so a known one returning before that deadline cannot follow it, and the
 *   release matters until the last known operation returning before X's
 *   latest deadline (one returning before any unknown acquire was called
 *   cannot follow one, and is not counted).
 */
export function leaseLockRelevance(ops: readonly Operation<LeaseLockInput, unknown>[]): (number | undefined)[] {
  const out: (number | undefined)[] = new Array<number | undefined>(ops.length).fill(undefined);
  const byOwner = new Map<string, number[]>();
  ops.forEach((o, i) => {
    const list = byOwner.get(o.input.owner);
    if (list === undefined) byOwner.set(o.input.owner, [i]);
    else list.push(i);
  });
  // Known acquires by call, with the earliest return from each on; and all their returns, sorted.
  const known = ops.filter((o) => !isPending(o) && o.input.f === 'acquire').sort((a, b) => a.call - b.call);
  const calls = known.map((o) => o.call);
  const earliestReturnFrom = new Array<number>(known.length + 1).fill(Infinity);
  for (let k = known.length - 1; k >= 0; k--) earliestReturnFrom[k] = Math.min(earliestReturnFrom[k + 1]!, known[k]!.return!);
  const returns = known.map((o) => o.return!).sort((a, b) => a - b);
  /** The earliest return of a known acquire called after t. */
  const firstReturnCalledAfter = (t: number) => earliestReturnFrom[upperBound(calls, t)]!;
  /** The latest return of a known acquire before t (-Infinity: none). */
  const lastReturnBefore = (t: number) => {
    const k = lowerBound(returns, t);
    return k === 0 ? -Infinity : returns[k - 1]!;
  };

  ops.forEach((o, i) => {
    if (isPending(o) && o.input.f === 'extend' && o.input.validUntil === Infinity) out[i] = -Infinity;
  });
  // The earliest call of an unknown acquire; then the returns of the known operations that such an acquire, taking a lease
  // over, would bind: every one returning after it was called (instants follow the order, whoever's the operation is).
  let firstUnknownAcquire = Infinity;
  for (const o of ops) if (isPending(o) && o.input.f === 'acquire') firstUnknownAcquire = Math.min(firstUnknownAcquire, o.call);
  const boundByTakeover = ops
    .filter((z) => !isPending(z) && z.return! >= firstUnknownAcquire)
    .map((z) => z.return!)
    .sort((a, b) => a - b);
  /** The latest return before t of a known operation an unknown acquire taking a lease over binds (-Infinity: none). */
  const lastBoundBefore = (t: number) => {
    const k = lowerBound(boundByTakeover, t);
    return k === 0 ? -Infinity : boundByTakeover[k - 1]!;
  };
  // What bounds an unknown release depends on its owner only: computed once per owner, not once per release
  // (an owner with many unknown releases made this quadratic, before the search's deadline could apply).
  const releaseBound = new Map<string, number>();
  ops.forEach((o, i) => {
    if (!isPending(o) || o.input.f !== 'release') return;
    let bound = releaseBound.get(o.input.owner);
    if (bound === undefined) {
      let afterGrant = -Infinity;
      let deadline = -Infinity;
      for (const j of byOwner.get(o.input.owner)!) {
        const x = ops[j]!;
        if (x.input.f === 'release' || x.input.f === 'session-ended' || out[j] === -Infinity) continue;
        deadline = Math.max(deadline, x.input.validUntil);
        if (x.input.f === 'acquire') afterGrant = Math.max(afterGrant, isPending(x) ? Infinity : firstReturnCalledAfter(x.return!));
      }
      releaseBound.set(o.input.owner, (bound = Math.max(Math.min(afterGrant, lastReturnBefore(deadline)), lastBoundBefore(deadline))));
    }
    out[i] = bound;
  });
  // An unknown acquire matters until the latest instant by which one of its owner's operations that depend on it is done,
  // if that is not before its call: the owner's latest such instant, once per owner.
  const latestBy = new Map<string, number>();
  ops.forEach((o, i) => {
    if (!isPending(o) || o.input.f !== 'acquire' || o.input.validUntil !== Infinity || o.input.latest !== Infinity) return;
    let latest = latestBy.get(o.input.owner);
    if (latest === undefined) {
      latest = -Infinity;
      for (const j of byOwner.get(o.input.owner)!) {
        const z = ops[j]!;
        // An acquire of X depends on it only by stacking on it (no deadline on either): a pending one needs nothing.
        if ((z.input.f === 'acquire' && (isPending(z) || z.input.validUntil !== Infinity)) || out[j] === -Infinity) continue;
        latest = Math.max(latest, isPending(z) ? (out[j] ?? Infinity) : z.return!);
      }
      latestBy.set(o.input.owner, latest);
    }
    out[i] = latest >= o.call ? latest : -Infinity;
  });
  return out;
}

/** The first index whose value is > t. */
function upperBound(sorted: readonly number[], t: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid]! > t) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** The first index whose value is >= t. */
function lowerBound(sorted: readonly number[], t: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid]! >= t) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}
