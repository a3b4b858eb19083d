import type { ReadEvent, WriteEvent } from './event.ts';
import { Budget } from './budget.ts';
import { compositeKey, groupBy } from './group.ts';
import type { OperationRecord } from './operations.ts';
import { ms } from './operations.ts';

type Write = OperationRecord & { readonly event: WriteEvent };
type Read = OperationRecord & { readonly event: ReadEvent };

/** When a write is known to have taken effect, and what says so. */
export interface Landing {
  /** The instant by which it had taken effect: its `ok`'s time, or the return of the first read that saw it. */
  readonly end: number;
  /** The `ok` read that returned its value first, when that was before the write's own `ok` or it has none; undefined: its `ok`. */
  readonly seenBy: Read | undefined;
  /** Its own `ok`'s time (undefined: its outcome is unknown). */
  readonly okAt: number | undefined;
}

/**
 * The writes known to have taken effect (spec/SPEC.md 10.4.3): every `ok` write, and a write whose
 * outcome is unknown (`info`, or never completed) that an `ok` read returning after its invoke saw,
 * when it is the one write of its register that may have landed with that value and that value
 * cannot be what the register held before the history (some value seen, a read or a `prev`, that
 * no write wrote is that one). The finding then rests on the read, not on the unknown outcome: a
 * stale write whose reply was lost, the one a paused or cut-off holder is likeliest to send, is
 * still judged once a client read it. Such a read shows an `ok` write too had taken effect by its
 * return when that came before the write's own `ok` (a slow reply): a stale write invoked between
 * the two was accepted after it (session h39: it was judged from the `ok` only, and missed).
 */
export function landedWrites(ops: readonly OperationRecord[], budget: Budget = Budget.none): Map<OperationRecord, Landing> {
  const landed = new Map<OperationRecord, Landing>();
  const registers = groupBy(
    ops.filter((o) => o.event.op === 'write' || (o.event.op === 'read' && o.outcome === 'ok')),
    (o) => compositeKey(o.event.resource, (o.event as WriteEvent | ReadEvent).key),
  );
  for (const rops of registers.values()) {
    const all = rops.filter((o): o is Write => o.event.op === 'write');
    const writes = all.filter((w) => w.outcome !== 'fail');
    const reads = rops.filter((o): o is Read => o.event.op === 'read');
    for (const w of writes) if (w.outcome === 'ok') landed.set(w, { end: w.end, seenBy: undefined, okAt: w.end });
    const writersOf = groupBy(writes, (w) => w.event.value);
    // A rejected write's prev is a value its writer read too.
    const seen = [...all.flatMap((w) => (w.event.prev === undefined ? [] : [w.event.prev])), ...reads.map((r) => r.event.value ?? null)];
    // Every value seen was written in the history: any of them may also be the one it held before.
    if (!seen.some((v) => v === null || !writersOf.has(v))) continue;
    for (const r of reads) {
      budget.tick();
      const value = r.event.value;
      const writers = value === null || value === undefined ? undefined : writersOf.get(value);
      const w = writers?.length === 1 ? writers[0]! : undefined;
      if (w === undefined || r.end < w.start) continue;
      const known = landed.get(w);
      if (known === undefined || r.end < known.end) landed.set(w, { end: r.end, seenBy: r, okAt: w.outcome === 'ok' ? w.end : undefined });
    }
  }
  return landed;
}

/** How a message says a write was accepted: at its `ok`, or by the return of the read that saw it. */
export function acceptedAt(landing: Landing): string {
  const r = landing.seenBy;
  if (r === undefined) return `at ${ms(landing.end)} ms`;
  const own = landing.okAt === undefined ? 'its own outcome is unknown, but ' : '';
  const before = landing.okAt === undefined ? '' : `, before its own ok at ${ms(landing.okAt)} ms`;
  return `by ${ms(landing.end)} ms: ${own}process ${r.process}'s read returned its value then${before}`;
}
