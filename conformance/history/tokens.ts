import type { AcquireEvent } from './event.ts';
import { FindingList, sortedUnique } from './findings.ts';
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
  const byResource = new Map<string, Grant[]>();
  for (const op of ops) {
    const e = op.event as AcquireEvent;
    if (e.op !== 'acquire' || op.outcome !== 'ok' || e.token === undefined) continue;
    byResource.set(e.resource, [...(byResource.get(e.resource) ?? []), { op, token: BigInt(e.token) }]);
  }
  let grants = 0;
  for (const [resource, gs] of byResource) {
    grants += gs.length;
    const byEnd = [...gs].sort((a, b) => a.op.end - b.op.end);
    const byStart = [...gs].sort((a, b) => a.op.start - b.op.start);
    let k = 0;
    let max: Grant | undefined;
    for (const later of byStart) {
      while (k < byEnd.length && byEnd[k]!.op.end < later.op.start) {
        if (max === undefined || byEnd[k]!.token > max.token) max = byEnd[k];
        k++;
      }
      if (max === undefined || later.token > max.token) continue;
      // The highest earlier token is not below: find an earlier grant that really conflicts.
      const earlier = byEnd.slice(0, k).find((g) => g.token >= later.token && !(g.op.process === later.op.process && g.token === later.token));
      if (earlier === undefined) continue;
      list.add({
        check: 'token-order',
        property: 'FENCE-1',
        message: `'${resource}': process ${later.op.process} was granted token ${later.token} (invoked at ${ms(later.op.start)} ms) after process ${earlier.op.process}'s grant with token ${earlier.token} had completed (at ${ms(earlier.op.end)} ms); tokens must increase`,
        events: sortedUnique([earlier.op.invokeIndex, earlier.op.completeIndex, later.op.invokeIndex, later.op.completeIndex]),
      });
    }
  }
  return { findings: list, grants };
}
