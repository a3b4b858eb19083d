import type { ReadEvent, StorePolicy, WriteEvent } from './event.ts';
import { Budget } from './budget.ts';
import { FindingList, sortedUnique } from './findings.ts';
import { compositeKey, groupBy } from './group.ts';
import { acceptedAt, landedWrites, type Landing } from './landed.ts';
import type { OperationRecord } from './operations.ts';
import { ms } from './operations.ts';

/**
 * The guarded register, judged by consequence (spec/SPEC.md 10.4.3):
 * STORE-1 by lost updates of read-modify-writes, FENCE-2 by stale writes a
 * fenced store accepted. Only what the clients saw counts: an `info` write
 * may or may not have landed and counts as accepted only once a read saw
 * its value (landedWrites).
 */

type Write = OperationRecord & { readonly event: WriteEvent };
type Read = OperationRecord & { readonly event: ReadEvent };

const registerOf = (e: { readonly resource: string; readonly key: string }) => compositeKey(e.resource, e.key);
const show = (v: string | null | undefined) => (v === null || v === undefined ? 'nothing' : `'${v.length > 30 ? `${v.slice(0, 30)}…` : v}'`);

export interface StoreCounts {
  readonly writesAccepted: number;
  readonly writesRejected: number;
  readonly writesUnknown: number;
  readonly reads: number;
}

export function storeCounts(ops: readonly OperationRecord[]): StoreCounts {
  const writes = ops.filter((o) => o.event.op === 'write');
  return {
    writesAccepted: writes.filter((w) => w.outcome === 'ok').length,
    writesRejected: writes.filter((w) => w.outcome === 'fail').length,
    writesUnknown: writes.filter((w) => w.outcome === 'info' || w.outcome === 'pending').length,
    reads: ops.filter((o) => o.event.op === 'read' && o.outcome === 'ok').length,
  };
}

/**
 * STORE-1: an accepted read-modify-write whose effect no later state builds on.
 * (a) Two accepted writes that read the same `prev` (when the register held
 * `prev` at most once, counting the value it held before the history, so no
 * ABA can explain it): one of the two is lost.
 * (b) A read returns v; following `prev` back from the write of v gives the
 * writes v builds on; an accepted write that completed before the read was
 * invoked and is not among them is lost. Judged only where every write of the
 * register carries `prev`, and only through values written once.
 */
export function lostUpdates(ops: readonly OperationRecord[], maxFindings: number, budget: Budget = Budget.none): { findings: FindingList; lost: number; judged: boolean } {
  const list = new FindingList(maxFindings);
  budget.phase('judging lost updates', 4 * ops.length);
  const landed = landedWrites(ops, budget);
  const registers = groupBy(
    ops.filter((o) => o.event.op === 'write' || (o.event.op === 'read' && o.outcome === 'ok')),
    (o) => registerOf(o.event as WriteEvent | ReadEvent),
  );
  let lost = 0;
  let judged = false;
  for (const rops of registers.values()) {
    const writes = rops.filter((o): o is Write => o.event.op === 'write');
    const reads = rops.filter((o): o is Read => o.event.op === 'read');
    const rmw = writes.filter((w) => w.event.prev !== undefined);
    if (rmw.length === 0) continue;
    judged = true;
    const writersOf = groupBy(
      writes.filter((w) => w.outcome !== 'fail'),
      (w) => w.event.value,
    );
    const lostHere = rmw.length === writes.length ? missedByReads(writes, reads, writersOf, landed, list, budget) : new Set<Write>();
    // The register held a value before the history began: it is one of the values seen (prev, read) that no write of
    // the history wrote, and when every value seen was written in it, it may be any of them (an ABA through it).
    const unwritten = new Set([...rmw.map((w) => w.event.prev!), ...reads.map((r) => r.event.value ?? null)].filter((v) => v === null || !writersOf.has(v)));
    const mayBeInitial = (v: string) => unwritten.size === 0 || unwritten.has(v);
    // (a) accepted writes that read the same value.
    for (const group of groupBy(rmw.filter((w) => landed.has(w)), (w) => w.event.prev).values()) {
      budget.tick();
      const prev = group[0]!.event.prev!;
      // Two holdings of prev (two writes of it, or one and the value before the history) can explain the two reads: ABA.
      if (group.length < 2 || (prev !== null && (writersOf.get(prev)?.length ?? 0) + (mayBeInitial(prev) ? 1 : 0) > 1)) continue;
      const uncounted = group.length - 1 - group.filter((w) => lostHere.has(w)).length;
      if (uncounted <= 0) continue;
      lost += uncounted;
      const w = group[0]!.event;
      list.add({
        check: 'lost-updates',
        property: 'STORE-1',
        message: `'${w.resource}' key '${w.key}': ${group.length} accepted writes all read ${show(prev)} (processes ${group.map((g) => g.process).join(', ')}): all but one of them are lost updates`,
        events: sortedUnique(group.flatMap((g) => [g.invokeIndex, g.completeIndex, landed.get(g)?.seenBy?.invokeIndex, landed.get(g)?.seenBy?.completeIndex])),
      });
    }
    lost += lostHere.size;
  }
  return { findings: list, lost, judged };
}

/**
 * (b) on one register. The writes form a tree by `prev` (a write is the child
 * of the write of the value it read; the register's initial value is the
 * root), numbered in DFS order so that "w is an ancestor of x" is an interval
 * test. A write w is lost when some read invoked after w completed reads a
 * value whose writer is not in w's subtree: for each w, one look at the
 * smallest and largest DFS number among the reads invoked after it.
 */
function missedByReads(writes: readonly Write[], reads: readonly Read[], writersOf: Map<string, Write[]>, landed: ReadonlyMap<OperationRecord, Landing>, list: FindingList, budget: Budget): Set<Write> {
  const lost = new Set<Write>();
  const unique = (v: string) => {
    const ws = writersOf.get(v);
    return ws?.length === 1 ? ws[0]! : undefined;
  };
  // The initial value: the one prev nobody in the history wrote. Two such values: no single root, nothing judged.
  const initials = new Set(writes.map((w) => w.event.prev!).filter((p) => p === null || !writersOf.has(p)));
  if (initials.size !== 1) return lost;
  const initial = [...initials][0]!;
  const ROOT = 'root' as const;
  const children = groupBy(
    writes.filter((w) => w.outcome !== 'fail' && unique(w.event.value) === w),
    (w): Write | typeof ROOT | undefined => (w.event.prev === initial ? ROOT : unique(w.event.prev!)),
  );
  const tin = new Map<Write | typeof ROOT, number>();
  const tout = new Map<Write | typeof ROOT, number>();
  let clock = 0;
  const stack: [Write | typeof ROOT, boolean][] = [[ROOT, false]];
  while (stack.length > 0) {
    budget.tick();
    const [node, done] = stack.pop()!;
    if (done) {
      tout.set(node, clock++);
      continue;
    }
    if (tin.has(node)) continue; // a cycle of prevs: reachable once only
    tin.set(node, clock++);
    stack.push([node, true]);
    for (const c of children.get(node) ?? []) stack.push([c, false]);
  }
  // Reads whose value has one known place in the tree, by invoke time; suffix min/max of that place.
  const placed = budget.sort(
    reads.flatMap((r) => {
      const v = r.event.value;
      const node = v === initial ? ROOT : v === null || v === undefined ? undefined : unique(v);
      const t = node === undefined ? undefined : tin.get(node);
      return t === undefined ? [] : [{ read: r, t }];
    }),
    (a, b) => a.read.start - b.read.start,
  );
  const minAfter: (typeof placed)[number][] = new Array(placed.length);
  const maxAfter: (typeof placed)[number][] = new Array(placed.length);
  for (let i = placed.length - 1; i >= 0; i--) {
    const p = placed[i]!;
    minAfter[i] = i + 1 < placed.length && minAfter[i + 1]!.t < p.t ? minAfter[i + 1]! : p;
    maxAfter[i] = i + 1 < placed.length && maxAfter[i + 1]!.t > p.t ? maxAfter[i + 1]! : p;
  }
  for (const w of writes) {
    budget.tick();
    const t = tin.get(w);
    const landing = landed.get(w);
    if (landing === undefined || t === undefined) continue;
    // First read invoked after w had taken effect.
    let lo = 0;
    let hi = placed.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (placed[mid]!.read.start > landing.end) hi = mid;
      else lo = mid + 1;
    }
    if (lo === placed.length) continue;
    const witness = minAfter[lo]!.t < t ? minAfter[lo]! : maxAfter[lo]!.t > tout.get(w)! ? maxAfter[lo]! : undefined;
    if (witness === undefined) continue;
    lost.add(w);
    const read = witness.read;
    list.add({
      check: 'lost-updates',
      property: 'STORE-1',
      message: `'${w.event.resource}' key '${w.event.key}': process ${w.process}'s write of ${show(w.event.value)} was accepted (${acceptedAt(landing)}) before process ${read.process} read ${show(read.event.value)} (invoked at ${ms(read.start)} ms), and that value does not build on it: a lost update`,
      events: sortedUnique([w.invokeIndex, w.completeIndex, landing.seenBy?.invokeIndex, landing.seenBy?.completeIndex, read.invokeIndex, read.completeIndex]),
    });
  }
  return lost;
}

/**
 * FENCE-2: a fenced store accepted a write whose token does not pass its
 * policy against a write it had accepted before this one was invoked
 * (monotonic: a lower token; strict: a token not above). The store keeps
 * one highest token per resource (section 6).
 */
export function staleWrites(ops: readonly OperationRecord[], policy: StorePolicy, maxFindings: number, budget: Budget = Budget.none): FindingList {
  const list = new FindingList(maxFindings);
  budget.phase('judging stale writes', 2 * ops.length);
  if (policy !== 'strict' && policy !== 'monotonic') return list;
  const landed = landedWrites(ops, budget);
  const byResource = groupBy(
    ops.flatMap((op) => {
      const landing = landed.get(op);
      return op.event.op === 'write' && landing !== undefined && op.event.token !== undefined ? [{ op: op as Write, token: BigInt(op.event.token), landing }] : [];
    }),
    (w) => w.op.event.resource,
  );
  const fails = (t: bigint, highest: bigint) => (policy === 'strict' ? t <= highest : t < highest);
  for (const [resource, ws] of byResource) {
    const byEnd = budget.sort([...ws], (a, b) => a.landing.end - b.landing.end);
    const byStart = budget.sort([...ws], (a, b) => a.op.start - b.op.start);
    let k = 0;
    let max: (typeof ws)[number] | undefined;
    const flagged = new Set<unknown>();
    for (const w of byStart) {
      budget.tick();
      while (k < byEnd.length && byEnd[k]!.landing.end < w.op.start) {
        if (max === undefined || byEnd[k]!.token > max.token) max = byEnd[k];
        k++;
      }
      if (max === undefined || !fails(w.token, max.token)) continue;
      flagged.add(w);
      list.add({
        check: 'stale-writes',
        property: 'FENCE-2',
        message: `'${resource}': the ${policy} store accepted process ${w.op.process}'s write with token ${w.token} (invoked at ${ms(w.op.start)} ms${unknownOutcome(w.landing)}) after it had accepted process ${max.op.process}'s write with token ${max.token} (${max.landing.seenBy === undefined ? `completed at ${ms(max.landing.end)} ms` : `accepted ${acceptedAt(max.landing)}`}): a stale write accepted`,
        events: sortedUnique([...indices(max), ...indices(w)]),
      });
    }
    if (policy === 'strict') sameTokens(resource, byStart, flagged, list);
  }
  return list;
}

/**
 * Strict: two accepted writes with one token are stale whatever their
 * timing. The store judges writes one at a time, so the one it judged second
 * met the other's token as (at most) its highest and should have been
 * refused; writes in flight together have no real-time order, and the check
 * above does not see them. Each write after the first (by invoke) with a
 * token already accepted, and not already found stale, is a finding.
 */
function sameTokens(resource: string, byStart: readonly Accepted[], flagged: ReadonlySet<unknown>, list: FindingList): void {
  const first = new Map<bigint, Accepted>();
  for (const w of byStart) {
    const earlier = first.get(w.token);
    if (earlier === undefined) {
      first.set(w.token, w);
      continue;
    }
    if (flagged.has(w)) continue;
    list.add({
      check: 'stale-writes',
      property: 'FENCE-2',
      message: `'${resource}': the strict store accepted process ${w.op.process}'s write with token ${w.token} (invoked at ${ms(w.op.start)} ms${unknownOutcome(w.landing)}) and process ${earlier.op.process}'s write with the same token (invoked at ${ms(earlier.op.start)} ms${unknownOutcome(earlier.landing)}): whichever it judged second was stale`,
      events: sortedUnique([...indices(earlier), ...indices(w)]),
    });
  }
}

/** A write a fenced store is known to have accepted, with its token. */
interface Accepted {
  readonly op: Write;
  readonly token: bigint;
  readonly landing: Landing;
}

/** A finding's events for an accepted write: its own, and the read that showed it landed when its outcome is unknown. */
const indices = (a: Accepted) => [a.op.invokeIndex, a.op.completeIndex, a.landing.seenBy?.invokeIndex, a.landing.seenBy?.completeIndex];

const unknownOutcome = (landing: Landing) => (landing.seenBy === undefined ? '' : `; accepted ${acceptedAt(landing)}`);
