import type { AcquireEvent } from './event.ts';
import { FindingList, sortedUnique } from './findings.ts';
import { groupBy } from './group.ts';
import type { OperationRecord } from './operations.ts';
import { ms } from './operations.ts';

/**
 * FENCE-1 by what the clients saw (spec/SPEC.md 10.4.2): a grant that
 * completed before another was invoked came first in true order, so the
 * later one's token must be greater. That covers every pair whose hold
 * windows do not overlap, and more. Only `ok` acquires with a token count:
 * an `info` acquire may have been granted, but nobody saw its token.
 * Two grants of one process with the same token are not judged (a stacked
 * PostgreSQL re-acquire returns the token the process already holds).
 */
interface Grant {
  readonly op: OperationRecord;
  readonly token: bigint;
}

export function tokenOrder(ops: readonly OperationRecord[], maxFindings: number): { findings: FindingList; grants: number } {
  const list = new FindingList(maxFindings);
  const grantsOf = groupBy(
    ops.flatMap((op): Grant[] => (op.event.op === 'acquire' && op.outcome === 'ok' && op.event.token !== undefined ? [{ op, token: BigInt(op.event.token) }] : [])),
    (g) => (g.op.event as AcquireEvent).resource,
  );
  let grants = 0;
  for (const [resource, gs] of grantsOf) {
    grants += gs.length;
    const byEnd = [...gs].sort((a, b) => a.op.end - b.op.end);
    const byStart = [...gs].sort((a, b) => a.op.start - b.op.start);
    let k = 0;
    // The highest token completed so far, and the highest of any other process than its (for the stacked re-acquire rule).
    let best: Grant | undefined;
    let bestOther: Grant | undefined;
    const flagged = new Set<Grant>();
    for (const later of byStart) {
      while (k < byEnd.length && byEnd[k]!.op.end < later.op.start) {
        const g = byEnd[k++]!;
        if (best === undefined || g.token > best.token) {
          if (best !== undefined && best.op.process !== g.op.process) bestOther = best;
          best = g;
        } else if (g.op.process !== best.op.process && (bestOther === undefined || g.token > bestOther.token)) bestOther = g;
      }
      const earlier = best === undefined || best.token < later.token ? undefined : best.token > later.token || best.op.process !== later.op.process ? best : bestOther !== undefined && bestOther.token >= later.token ? bestOther : undefined;
      if (earlier === undefined) continue;
      flagged.add(later);
      list.add({
        check: 'token-order',
        property: 'FENCE-1',
        message: `'${resource}': process ${later.op.process} was granted token ${later.token} (invoked at ${ms(later.op.start)} ms) after process ${earlier.op.process}'s grant with token ${earlier.token} had completed (at ${ms(earlier.op.end)} ms); tokens must increase`,
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
 * earlier grant, and not already found, is a finding. One process's grants
 * with one token are a stacked re-acquire, as above.
 */
function sharedTokens(resource: string, byStart: readonly Grant[], flagged: ReadonlySet<Grant>, list: FindingList): void {
  const seen = new Map<bigint, Grant[]>();
  for (const later of byStart) {
    const same = seen.get(later.token) ?? [];
    const earlier = same.find((g) => g.op.process !== later.op.process);
    seen.set(later.token, [...same, later]);
    if (earlier === undefined || flagged.has(later)) continue;
    list.add({
      check: 'token-order',
      property: 'FENCE-1',
      message: `'${resource}': process ${later.op.process} was granted token ${later.token} (invoked at ${ms(later.op.start)} ms) and process ${earlier.op.process} the same token (invoked at ${ms(earlier.op.start)} ms): whichever came second got a token not above the other's`,
      events: sortedUnique([earlier.op.invokeIndex, earlier.op.completeIndex, later.op.invokeIndex, later.op.completeIndex]),
    });
  }
}
