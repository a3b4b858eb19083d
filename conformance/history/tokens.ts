import type { AcquireEvent, History, ReleaseEvent } from './event.ts';
import { Budget } from './budget.ts';
import { FindingList, sortedUnique } from './findings.ts';
import { compositeKey, groupBy } from './group.ts';
import type { OperationRecord } from './operations.ts';
import { ms } from './operations.ts';

/**
 * FENCE-1 by what the clients saw (spec/SPEC.md 10.4.2): a grant that
 * completed before another was invoked came first in true order, so the
 * later one's token must be greater. That covers every pair whose hold
 * windows do not overlap, and more. Only `ok` acquires with a token count:
 * an `info` acquire may have been granted, but nobody saw its token.
 * The one exemption is a stacked re-acquire: a session lock (no deadline)
 * acquired again by the process holding it, with the same owner and token,
 * while it still holds it (no release that succeeded unstacked it all, no
 * loss signal ended it): PostgreSQL stacks it and returns the token already
 * held. A lease with a deadline never stacks, and a grant after the lock was
 * given back is a new grant, whoever makes it.
 */
interface Grant {
  readonly op: OperationRecord;
  readonly token: bigint;
  /** Grants of one stack (a session lock and its stacked re-acquires) share it: the index of the stack's first grant. */
  readonly stack: number;
}

/** A session lock a process holds on a resource, and how many acquires are stacked on it. */
interface Stack {
  readonly id: number;
  readonly owner: string | undefined;
  readonly token: bigint;
  readonly session: boolean;
  depth: number;
}

const compatible = (a: string | undefined, b: string | undefined) => a === undefined || b === undefined || a === b;

/**
 * The stack of each `ok` acquire with a token (by its completion's index), in one pass over the grants, the
 * successful releases and the loss signals in history order.
 */
function stacksOf(ops: readonly OperationRecord[], history: History, budget: Budget): Map<number, number> {
  type Step = { readonly index: number; readonly op?: OperationRecord; readonly signal?: { readonly process: number; readonly resource: string; readonly owner: string; readonly token?: string } };
  const steps: Step[] = [];
  for (const op of ops) {
    budget.tick();
    if (op.outcome !== 'ok' || op.completeIndex === undefined) continue;
    if (op.event.op === 'acquire' || op.event.op === 'release') steps.push({ index: op.completeIndex, op });
  }
  history.forEach((e, index) => {
    budget.tick();
    if (e.type === 'signal') steps.push({ index, signal: e });
  });
  budget.sort(steps, (a, b) => a.index - b.index);
  const current = new Map<string, Stack>();
  const stackOf = new Map<number, number>();
  for (const step of steps) {
    budget.tick();
    if (step.signal !== undefined) {
      const s = step.signal;
      const key = compositeKey(String(s.process), s.resource);
      const c = current.get(key);
      if (c !== undefined && compatible(c.owner, s.owner) && (s.token === undefined || BigInt(s.token) === c.token)) current.delete(key);
      continue;
    }
    const op = step.op!;
    const e = op.event as AcquireEvent | ReleaseEvent;
    const key = compositeKey(String(op.process), e.resource);
    const c = current.get(key);
    if (e.op === 'release') {
      if (c !== undefined && compatible(c.owner, e.owner) && (e.token === undefined || BigInt(e.token) === c.token) && --c.depth <= 0) current.delete(key);
      continue;
    }
    if (e.token === undefined) {
      current.delete(key);
      continue;
    }
    const token = BigInt(e.token);
    const session = e.validUntil === undefined;
    if (session && c !== undefined && c.session && c.token === token && compatible(c.owner, e.owner)) {
      c.depth++;
      stackOf.set(step.index, c.id);
    } else {
      current.set(key, { id: step.index, owner: e.owner, token, session, depth: 1 });
      stackOf.set(step.index, step.index);
    }
  }
  return stackOf;
}

export function tokenOrder(ops: readonly OperationRecord[], maxFindings: number, history: History = [], budget: Budget = Budget.none): { findings: FindingList; grants: number } {
  const list = new FindingList(maxFindings);
  budget.phase('judging token order', 2 * ops.length + history.length);
  const stacks = stacksOf(ops, history, budget);
  const grantsOf = groupBy(
    ops.flatMap((op): Grant[] =>
      op.event.op === 'acquire' && op.outcome === 'ok' && op.event.token !== undefined ? [{ op, token: BigInt(op.event.token), stack: stacks.get(op.completeIndex!) ?? op.completeIndex ?? op.invokeIndex }] : [],
    ),
    (g) => (g.op.event as AcquireEvent).resource,
  );
  let grants = 0;
  for (const [resource, gs] of grantsOf) {
    grants += gs.length;
    const byEnd = budget.sort([...gs], (a, b) => a.op.end - b.op.end);
    const byStart = budget.sort([...gs], (a, b) => a.op.start - b.op.start);
    let k = 0;
    // The highest token completed so far; per token, its first completed grant and the first of another stack than that one's.
    let best: Grant | undefined;
    const withToken = new Map<bigint, { readonly first: Grant; other?: Grant }>();
    const flagged = new Set<Grant>();
    for (const later of byStart) {
      budget.tick();
      while (k < byEnd.length && byEnd[k]!.op.end < later.op.start) {
        const g = byEnd[k++]!;
        if (best === undefined || g.token > best.token) best = g;
        const same = withToken.get(g.token);
        if (same === undefined) withToken.set(g.token, { first: g });
        else if (same.other === undefined && g.stack !== same.first.stack) same.other = g;
      }
      let earlier: Grant | undefined;
      if (best !== undefined && best.token > later.token) earlier = best;
      else if (best !== undefined && best.token === later.token) {
        // Equal tokens: a violation unless every earlier grant with it is of the later one's stack (a stacked re-acquire).
        const same = withToken.get(later.token)!;
        earlier = same.first.stack !== later.stack ? same.first : same.other;
      }
      if (earlier === undefined) continue;
      flagged.add(later);
      list.add({
        check: 'token-order',
        property: 'FENCE-1',
        message: `'${resource}': process ${later.op.process} was granted token ${later.token} (invoked at ${ms(later.op.start)} ms) after process ${earlier.op.process}'s grant with token ${earlier.token} had completed (at ${ms(earlier.op.end)} ms); tokens must increase${earlier.token === later.token && earlier.op.process === later.op.process ? ' (the lease was given back in between, or had a deadline: only a stacked re-acquire of a session lock still held repeats its token)' : ''}`,
        events: sortedUnique([earlier.op.invokeIndex, earlier.op.completeIndex, later.op.invokeIndex, later.op.completeIndex]),
      });
    }
    sharedTokens(resource, byStart, flagged, list);
  }
  return { findings: list, grants };
}

/**
 * Two processes granted one token: whichever came second in true order got a
 * token not above the other's, so it is a violation however the grants
 * overlap (the pass above judges only grants ordered in real time). Each
 * grant after the first (by invoke) to share a token with another process's
 * earlier grant, and not already found, is a finding. (Grants of one process
 * never overlap: the pass above judges them.) Per token, the first grant and
 * the first of another process are kept: linear in the grants.
 */
function sharedTokens(resource: string, byStart: readonly Grant[], flagged: ReadonlySet<Grant>, list: FindingList): void {
  const seen = new Map<bigint, { readonly first: Grant; other?: Grant }>();
  for (const later of byStart) {
    const same = seen.get(later.token);
    if (same === undefined) {
      seen.set(later.token, { first: later });
      continue;
    }
    const earlier = same.first.op.process !== later.op.process ? same.first : same.other;
    if (same.other === undefined && later.op.process !== same.first.op.process) same.other = later;
    if (earlier === undefined || flagged.has(later)) continue;
    list.add({
      check: 'token-order',
      property: 'FENCE-1',
      message: `'${resource}': process ${later.op.process} was granted token ${later.token} (invoked at ${ms(later.op.start)} ms) and process ${earlier.op.process} the same token (invoked at ${ms(earlier.op.start)} ms): whichever came second got a token not above the other's`,
      events: sortedUnique([earlier.op.invokeIndex, earlier.op.completeIndex, later.op.invokeIndex, later.op.completeIndex]),
    });
  }
}
