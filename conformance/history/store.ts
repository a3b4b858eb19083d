import type { ReadEvent, StorePolicy, WriteEvent } from './event.ts';
import { FindingList, sortedUnique } from './findings.ts';
import type { OperationRecord } from './operations.ts';
import { ms } from './operations.ts';

/**
 * The guarded register, judged by consequence (spec/SPEC.md 10.4.3):
 * STORE-1 by lost updates of read-modify-writes, FENCE-2 by stale writes a
 * fenced store accepted. Only outcomes the clients saw count: an `info`
 * write may or may not have landed and is never counted as accepted.
 */

type Write = OperationRecord & { readonly event: WriteEvent };
type Read = OperationRecord & { readonly event: ReadEvent };

const registerOf = (e: { readonly resource: string; readonly key: string }) => `${e.resource}\u0000${e.key}`;
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
 * (a) Two accepted writes that read the same `prev` (when `prev` was written
 * at most once, so no ABA can explain it): one of the two is lost.
 * (b) A read returns v; following `prev` back from the write of v gives the
 * writes v builds on; an accepted write that completed before the read was
 * invoked and is not among them is lost. Judged only where every write of the
 * register carries `prev` and values are unique (increments, unique ids).
 */
export function lostUpdates(ops: readonly OperationRecord[], maxFindings: number): { findings: FindingList; lost: number; judged: boolean } {
  const list = new FindingList(maxFindings);
  const registers = new Map<string, { writes: Write[]; reads: Read[] }>();
  for (const op of ops) {
    if (op.event.op !== 'write' && op.event.op !== 'read') continue;
    const r = registers.get(registerOf(op.event)) ?? { writes: [], reads: [] };
    registers.set(registerOf(op.event), r);
    if (op.event.op === 'write') r.writes.push(op as Write);
    else if (op.outcome === 'ok') r.reads.push(op as Read);
  }
  let lost = 0;
  let judged = false;
  for (const { writes, reads } of registers.values()) {
    const rmw = writes.filter((w) => w.event.prev !== undefined);
    if (rmw.length === 0) continue;
    judged = true;
    const writersOf = new Map<string, Write[]>();
    for (const w of writes) if (w.outcome !== 'fail') writersOf.set(w.event.value, [...(writersOf.get(w.event.value) ?? []), w]);
    const lostHere = new Set<Write>();
    // (b) reads that miss accepted writes.
    if (rmw.length === writes.length) {
      for (const read of reads) {
        const chain = new Set<Write>();
        let v = read.event.value;
        let complete = true;
        while (v !== null && v !== undefined) {
          const ws = writersOf.get(v);
          if (ws === undefined || ws.length !== 1 || chain.has(ws[0]!)) {
            complete = false;
            break;
          }
          chain.add(ws[0]!);
          v = ws[0]!.event.prev;
        }
        if (!complete) continue;
        for (const w of writes) {
          if (w.outcome !== 'ok' || w.end >= read.start || chain.has(w) || lostHere.has(w)) continue;
          lostHere.add(w);
          list.add({
            check: 'lost-updates',
            property: 'STORE-1',
            message: `'${w.event.resource}' key '${w.event.key}': process ${w.process}'s write of ${show(w.event.value)} was accepted (at ${ms(w.end)} ms) before process ${read.process} read ${show(read.event.value)} (invoked at ${ms(read.start)} ms), and that value does not build on it: a lost update`,
            events: sortedUnique([w.invokeIndex, w.completeIndex, read.invokeIndex, read.completeIndex]),
          });
        }
      }
    }
    // (a) accepted writes that read the same value.
    const byPrev = new Map<string, Write[]>();
    for (const w of rmw) if (w.outcome === 'ok') byPrev.set(String(w.event.prev), [...(byPrev.get(String(w.event.prev)) ?? []), w]);
    for (const group of byPrev.values()) {
      const prev = group[0]!.event.prev;
      if (group.length < 2 || (prev !== null && (writersOf.get(prev!)?.length ?? 0) > 1)) continue;
      const uncounted = group.length - 1 - group.filter((w) => lostHere.has(w)).length;
      lost += Math.max(0, uncounted);
      if (uncounted <= 0) continue;
      const w = group[0]!.event;
      list.add({
        check: 'lost-updates',
        property: 'STORE-1',
        message: `'${w.resource}' key '${w.key}': ${group.length} accepted writes all read ${show(prev)} (processes ${group.map((g) => g.process).join(', ')}): all but one of them are lost updates`,
        events: sortedUnique(group.flatMap((g) => [g.invokeIndex, g.completeIndex])),
      });
    }
    lost += lostHere.size;
  }
  return { findings: list, lost, judged };
}

/**
 * FENCE-2: a fenced store accepted a write whose token does not pass its
 * policy against a write it had accepted before this one was invoked
 * (monotonic: a lower token; strict: a token not above). The store keeps
 * one highest token per resource (section 6).
 */
export function staleWrites(ops: readonly OperationRecord[], policy: StorePolicy, maxFindings: number): FindingList {
  const list = new FindingList(maxFindings);
  if (policy !== 'strict' && policy !== 'monotonic') return list;
  const byResource = new Map<string, { op: Write; token: bigint }[]>();
  for (const op of ops) {
    if (op.event.op !== 'write' || op.outcome !== 'ok' || op.event.token === undefined) continue;
    byResource.set(op.event.resource, [...(byResource.get(op.event.resource) ?? []), { op: op as Write, token: BigInt(op.event.token) }]);
  }
  const fails = (t: bigint, highest: bigint) => (policy === 'strict' ? t <= highest : t < highest);
  for (const [resource, ws] of byResource) {
    const byEnd = [...ws].sort((a, b) => a.op.end - b.op.end);
    const byStart = [...ws].sort((a, b) => a.op.start - b.op.start);
    let k = 0;
    let max: (typeof ws)[number] | undefined;
    for (const w of byStart) {
      while (k < byEnd.length && byEnd[k]!.op.end < w.op.start) {
        if (max === undefined || byEnd[k]!.token > max.token) max = byEnd[k];
        k++;
      }
      if (max === undefined || !fails(w.token, max.token)) continue;
      list.add({
        check: 'stale-writes',
        property: 'FENCE-2',
        message: `'${resource}': the ${policy} store accepted process ${w.op.process}'s write with token ${w.token} (invoked at ${ms(w.op.start)} ms) after it had accepted process ${max.op.process}'s write with token ${max.token} (completed at ${ms(max.op.end)} ms): a stale write accepted`,
        events: sortedUnique([max.op.invokeIndex, max.op.completeIndex, w.op.invokeIndex, w.op.completeIndex]),
      });
    }
  }
  return list;
}
