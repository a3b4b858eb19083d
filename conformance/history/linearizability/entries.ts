import { isPending, type Operation } from './operation.ts';

/**
 * Wing & Gong's entry list of one partition: a call entry per operation and a
 * return entry per operation whose outcome is known, in time order, as a
 * doubly linked list over typed arrays (no objects in the search's hot loop).
 * An operation with an unknown outcome is optional: nothing forces it to be
 * linearized, so the search may leave it out. It has no return entry, or,
 * when the model bounds how long it can matter (`Model.relevance`), an
 * optional one at that instant: reaching it, the search drops the operation.
 * One that can never matter has no entries at all.
 */
export interface EntryList {
  /** Number of entries; the head sentinel is entry `size`. */
  readonly size: number;
  readonly head: number;
  readonly next: Int32Array;
  readonly prev: Int32Array;
  /** The operation (index into the partition's operations) of each entry. */
  readonly op: Int32Array;
  /** For a call entry, its return entry (-1: pending); for a return entry, -2. */
  readonly match: Int32Array;
  /** Per operation: 1 when its outcome is unknown (it may be left out). */
  readonly optional: Uint8Array;
  /** Per operation: its call entry (-1: none, it can never matter). */
  readonly callOf: Int32Array;
  /** Operations that must be linearized (the known outcomes). */
  readonly mandatory: number;
}

export const NIL = -1;
export const RETURN = -2;

/** @param relevance per operation, `Model.relevance`'s bound (undefined: none). */
export function buildEntries(ops: readonly Operation<unknown, unknown>[], relevance: readonly (number | undefined)[] = []): EntryList {
  const times: number[] = [];
  const kinds: number[] = []; // 0 call, 1 return: calls first at equal times (closed intervals)
  const owners: number[] = [];
  const optional = new Uint8Array(ops.length);
  let mandatory = 0;
  for (let i = 0; i < ops.length; i++) {
    const o = ops[i]!;
    const pending = isPending(o);
    const until = pending ? relevance[i] : undefined;
    optional[i] = pending ? 1 : 0;
    if (until !== undefined && !(until >= o.call)) continue; // it can never matter
    times.push(o.call);
    kinds.push(0);
    owners.push(i);
    if (!pending || (until !== undefined && until !== Infinity)) {
      if (!pending) mandatory++;
      times.push(pending ? until! : o.return!);
      kinds.push(1);
      owners.push(i);
    }
  }
  const order = times.map((_, i) => i);
  order.sort((a, b) => times[a]! - times[b]! || kinds[a]! - kinds[b]! || owners[a]! - owners[b]!);
  const size = order.length;
  const head = size;
  const next = new Int32Array(size + 1);
  const prev = new Int32Array(size + 1);
  const op = new Int32Array(size + 1).fill(-1);
  const match = new Int32Array(size + 1).fill(RETURN);
  const returnOf = new Int32Array(ops.length).fill(NIL);
  const callOf = new Int32Array(ops.length).fill(NIL);
  for (let pos = 0; pos < size; pos++) {
    const raw = order[pos]!;
    op[pos] = owners[raw]!;
    if (kinds[raw] === 1) returnOf[owners[raw]!] = pos;
    else callOf[owners[raw]!] = pos;
  }
  for (let pos = 0; pos < size; pos++) if (kinds[order[pos]!] === 0) match[pos] = returnOf[op[pos]!]!;
  // head -> 0 -> 1 -> ... -> size-1 -> NIL
  next[head] = size > 0 ? 0 : NIL;
  prev[head] = NIL;
  for (let pos = 0; pos < size; pos++) {
    next[pos] = pos + 1 < size ? pos + 1 : NIL;
    prev[pos] = pos === 0 ? head : pos - 1;
  }
  return { size, head, next, prev, op, match, optional, callOf, mandatory };
}
