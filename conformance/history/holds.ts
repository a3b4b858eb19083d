import type { History, OperationEvent, SignalEvent } from './event.ts';
import { Budget } from './budget.ts';
import { FindingList, sortedUnique } from './findings.ts';
import { groupBy } from './group.ts';
import { ms } from './operations.ts';

/**
 * MUTEX-1 as the clients experienced it (spec/SPEC.md 10.4.1): the intervals
 * in which a client believed it held a valid lease, and the pairs of them
 * that overlap.
 */

export type HoldEnd = 'deadline' | 'release' | 'signal' | 'extend-failed' | 'reacquire' | 'history-end';

/**
 * One interval of belief: a grant (or an extension after a lapse) until the first thing that ends it. A session
 * lock (granted without deadline) stacks (PostgreSQL, spec 7.4): its holder's re-acquires granted without deadline
 * with the same owner and token are levels of this one hold, which lasts until a release was invoked for each.
 */
export interface Hold {
  readonly process: number;
  readonly resource: string;
  readonly owner: string | undefined;
  readonly token: string | undefined;
  /** The acquire's ok, or the extend's ok that began this interval. */
  readonly start: number;
  /** Infinity: never ended within the history (no deadline, no release, no signal). */
  readonly end: number;
  readonly endedBy: HoldEnd;
  /** The acquire's invoke and ok, the extends' oks, and the event that ended it (none for a deadline). */
  readonly events: readonly number[];
  /** The acquire ok this belief descends from. */
  readonly grantIndex: number;
  /** A ttl the acquire asked for although its ok carries no validUntil (a hold without deadline: often a recorder that forgot it). */
  readonly ttlWithoutDeadline?: number;
}

interface Current {
  readonly resource: string;
  readonly owner: string | undefined;
  readonly token: string | undefined;
  readonly start: number;
  deadline: number;
  /** Granted without deadline: a session lock, whose holder's re-acquires stack on it (how it was granted, not its deadline now). */
  readonly session: boolean;
  /** Acquires stacked on it that no release has unstacked yet (1: a lease, or a session lock acquired once). */
  levels: number;
  /** A release of one of several levels is in flight: the level comes back if it fails (it took no effect). */
  unstacking: boolean;
  readonly events: number[];
  readonly grantIndex: number;
  readonly ttlWithoutDeadline?: number;
}

function sameLease(c: Current, e: { readonly owner?: string; readonly token?: string }): boolean {
  return (c.owner === undefined || e.owner === undefined || c.owner === e.owner) && (c.token === undefined || e.token === undefined || c.token === e.token);
}

export function holdIntervals(history: History, budget: Budget = Budget.none): Hold[] {
  const holds: Hold[] = [];
  const current = new Map<string, Current>();
  const invokes = new Map<number, number>();
  /**
   * Per process and resource, a re-acquire in flight while a hold is current: it ends that hold at its invoke unless it
   * fails, or it stacks on it (`stacks`: a session lock asked again without a ttl; an ok without deadline confirms it).
   */
  const reacquiring = new Map<string, { readonly time: number; readonly index: number; readonly stacks: boolean }>();
  /** Per process and resource, the first loss signal of the current hold while a re-acquire was in flight: it ends the hold if that fails. */
  const signalledDuring = new Map<string, { readonly time: number; readonly index: number }>();
  const keyOf = (process: number, resource: string) => `${process}\u0000${resource}`;
  const close = (process: number, c: Current, at: number, by: HoldEnd, index: number | undefined) => {
    const end = Math.min(at, c.deadline);
    const endedBy = c.deadline < at ? 'deadline' : by;
    if (end > c.start) {
      holds.push({
        process,
        resource: c.resource,
        owner: c.owner,
        token: c.token,
        start: c.start,
        end,
        endedBy,
        events: sortedUnique([...c.events, endedBy === 'deadline' ? undefined : index]),
        grantIndex: c.grantIndex,
        ...(c.ttlWithoutDeadline === undefined || Number.isFinite(c.deadline) ? {} : { ttlWithoutDeadline: c.ttlWithoutDeadline }),
      });
    }
    current.delete(keyOf(process, c.resource));
  };
  budget.phase('finding holds', history.length);
  history.forEach((e, i) => {
    budget.tick();
    if (e.type === 'meta' || e.process === 'nemesis') return;
    const process = e.process;
    if (e.type === 'signal') {
      const s = e as SignalEvent;
      const key = keyOf(process, s.resource);
      const c = current.get(key);
      if (c === undefined || !sameLease(c, s)) return;
      // A re-acquire in flight ends the hold at its invoke, before this signal, unless it fails: decided at its completion.
      if (reacquiring.has(key)) signalledDuring.set(key, signalledDuring.get(key) ?? { time: s.time, index: i });
      else close(process, c, s.time, 'signal', i);
      return;
    }
    const op = e as OperationEvent;
    if (op.op === 'write' || op.op === 'read') return;
    if (op.type === 'invoke') invokes.set(process, i);
    const c = current.get(keyOf(process, op.resource));
    const invokeIndex = invokes.get(process)!;
    // A switch rather than ts-pattern: this runs once per event, and ts-pattern's match measured ten times slower here.
    switch (op.op) {
      case 'acquire': {
        const key = keyOf(process, op.resource);
        if (op.type === 'invoke') {
          if (c !== undefined) reacquiring.set(key, { time: op.time, index: i, stacks: c.session && op.ttlMs === undefined });
          return;
        }
        const again = reacquiring.get(key);
        const signalled = signalledDuring.get(key);
        reacquiring.delete(key);
        signalledDuring.delete(key);
        // A session lock's re-acquire stacks on it when granted without deadline to the same lease; one whose outcome is
        // unknown may have, and the level held before it is held either way (counted once: fewer levels end it sooner).
        const stacked = again !== undefined && c !== undefined && again.stacks && (op.type === 'info' || (op.type === 'ok' && op.validUntil === undefined && sameLease(c, op)));
        if (stacked && signalled === undefined) {
          if (op.type === 'ok') {
            c.levels++;
            c.events.push(invokeIndex, i);
          }
          return;
        }
        // A re-acquire ends the hold at its invoke (the client asked anew), unless it failed or stacked: a failed operation
        // took no effect, and the lease it held stays believed until its own end (a loss signal while it was in flight, say).
        if (again !== undefined && op.type !== 'fail' && !stacked && c !== undefined) close(process, c, again.time, 'reacquire', again.index);
        else if (signalled !== undefined && c !== undefined) close(process, c, signalled.time, 'signal', signalled.index);
        if (op.type === 'ok') {
          current.set(keyOf(process, op.resource), {
            resource: op.resource,
            owner: op.owner,
            token: op.token,
            start: op.time,
            deadline: op.validUntil ?? Infinity,
            session: op.validUntil === undefined,
            levels: 1,
            unstacking: false,
            events: [invokeIndex, i],
            grantIndex: i,
            ...(op.validUntil === undefined && op.ttlMs !== undefined ? { ttlWithoutDeadline: op.ttlMs } : {}),
          });
        }
        return;
      }
      case 'extend':
        if (op.type === 'ok') {
          const deadline = op.validUntil ?? Infinity;
          if (c !== undefined && sameLease(c, op) && c.deadline > op.time) {
            c.deadline = deadline;
            c.events.push(i);
          } else {
            // The belief had lapsed (or was never there): it resumes at this ok.
            if (c !== undefined) close(process, c, op.time, 'deadline', undefined);
            const stack = { session: c?.session ?? false, levels: c?.levels ?? 1, unstacking: false };
            current.set(keyOf(process, op.resource), { resource: op.resource, owner: op.owner, token: op.token ?? c?.token, start: op.time, deadline, ...stack, events: [invokeIndex, i], grantIndex: c?.grantIndex ?? i });
          }
        } else if (op.type === 'fail' && c !== undefined && sameLease(c, op)) close(process, c, op.time, 'extend-failed', i);
        // info: the client cannot know whether it extended; it keeps the deadline it had.
        return;
      case 'release':
        if (c === undefined || !sameLease(c, op)) return;
        // The release of the last level ends the hold at its invoke, whatever its outcome (the client gave it up); one of
        // several unstacks a level, given back if it certainly failed (unknown: counted as done, so the hold ends sooner).
        if (op.type === 'invoke' && c.levels <= 1) close(process, c, op.time, 'release', i);
        else if (op.type === 'invoke') {
          c.levels--;
          c.unstacking = true;
        } else if (c.unstacking) {
          c.unstacking = false;
          if (op.type === 'fail') c.levels++;
        }
        return;
      default:
        return unreachable(op);
    }
  });
  for (const [key, c] of current) {
    // A re-acquire still in flight when the history ends may have been granted: it ends the hold at its invoke, unless
    // it would stack on it (then a loss signal while it was in flight ends it).
    const process = Number(key.split('\u0000')[0]);
    const again = reacquiring.get(key);
    const signalled = signalledDuring.get(key);
    if (again !== undefined && !again.stacks) close(process, c, again.time, 'reacquire', again.index);
    else if (signalled !== undefined) close(process, c, signalled.time, 'signal', signalled.index);
    else close(process, c, Infinity, 'history-end', undefined);
  }
  return budget.sort(holds, (a, b) => a.start - b.start || a.grantIndex - b.grantIndex);
}

function unreachable(x: never): never {
  throw new Error(`unexpected lock operation ${JSON.stringify(x)}`);
}

function describeHold(h: Hold): string {
  // A hold without deadline after a ttl was asked is what a recorder that left out validUntil produces: say so.
  const noDeadline = h.ttlWithoutDeadline === undefined ? '' : `; no deadline: its acquire asked for a ttl of ${ms(h.ttlWithoutDeadline)} ms but its ok carries no validUntil, so it lasts until a release or signal`;
  return `process ${h.process} from ${ms(h.start)} to ${ms(h.end)} ms (granted on line ${h.grantIndex + 1}${h.token === undefined ? '' : `, token ${h.token}`}; ended by ${h.endedBy}${noDeadline})`;
}

/** The first index of the ascending `xs` at or after `from` whose value is at least `x`. */
function lowerBound(xs: Float64Array, x: number, from = 0): number {
  let lo = from;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (xs[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Pairs of holds of one resource, by different processes, that share an
 * instant. Counted by binary search and built only while kept, so that many
 * holds at once (thousands of session locks never released: every pair
 * overlaps) cost O(n log n), not a message per pair.
 */
export function overlappingHolds(holds: readonly Hold[], maxFindings: number, budget: Budget = Budget.none): FindingList {
  const list = new FindingList(maxFindings);
  budget.phase('judging overlapping holds', holds.length);
  const byResource = groupBy(holds, (h) => h.resource);
  for (const [resource, unsorted] of byResource) {
    const hs = budget.sort([...unsorted], (a, b) => a.start - b.start || a.grantIndex - b.grantIndex);
    const starts = Float64Array.from(hs, (h) => h.start);
    // Per process, the starts of its holds in this order, and each hold's place among them.
    const byProcess = groupBy(hs, (h) => h.process);
    const processStarts = new Map([...byProcess].map(([p, ph]) => [p, Float64Array.from(ph, (h) => h.start)]));
    const place = new Map<Hold, number>();
    for (const ph of byProcess.values()) ph.forEach((h, k) => place.set(h, k));
    for (let i = 0; i < hs.length; i++) {
      budget.tick();
      const a = hs[i]!;
      // Later holds overlap a exactly when they start before it ends; those of its own process do not count.
      const upper = lowerBound(starts, a.end, i + 1);
      const own = lowerBound(processStarts.get(a.process)!, a.end, place.get(a)! + 1) - place.get(a)! - 1;
      let pairs = upper - i - 1 - own;
      for (let j = i + 1; j < upper && pairs > 0 && list.room; j++) {
        const b = hs[j]!;
        if (b.process === a.process) continue;
        pairs--;
        list.add({
          check: 'overlapping-holds',
          property: 'MUTEX-1',
          message: `two clients believed they held '${resource}' at once: ${describeHold(a)} and ${describeHold(b)}`,
          events: sortedUnique([...a.events, ...b.events]),
          intervals: [a, b].map((h) => ({ process: h.process, resource, start: h.start, end: Number.isFinite(h.end) ? h.end : null })),
        });
      }
      list.count(pairs);
    }
  }
  return list;
}
