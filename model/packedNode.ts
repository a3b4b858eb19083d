import type { PackedLayout } from './packed.ts';
import { C_MONO_ANCHOR, clientAt, COUNTER_STRIDE, countersAt, F_EXTEND, F_KIND, K_ATTEMPT, K_CLIENT, K_EXPIRES, K_PRESENT, KEY_STRIDE, N_AVAILABLE, N_CUT, N_DELAY_KIND, N_DELAY_MS, N_KEYS, N_UP, nodeAt } from './packed.ts';
import type { PackedContext } from './packedFingerprint.ts';
import { expiryAt, readAt } from './packedFingerprint.ts';
import { ARRIVES, FAILED, NEVER, packedRound, roundEndsInto, roundWays } from './packedRound.ts';

/** node.ts's and clock.ts's questions, asked of a packed state (node `i`, client `c`, resource index `r`). */

/** isReachable: the node is up, past its restart delay, and the link not cut. */
export function reachable(l: PackedLayout, w: Float64Array, now: number, c: number, i: number): boolean {
  const at = nodeAt(l, i);
  return w[at + N_UP] === 1 && now >= w[at + N_AVAILABLE]! && ((w[at + N_CUT]! >>> c) & 1) === 0;
}

/** receives: reachable, and not a black hole. */
export function receivesAt(l: PackedLayout, w: Float64Array, now: number, c: number, i: number): boolean {
  return reachable(l, w, now, c, i) && w[nodeAt(l, i) + N_DELAY_KIND] !== 2;
}

/** liveness() as a bit set: 1 alive, 2 gone, 3 either (at the expiry instant, within the tolerance). */
export const ALIVE = 1;
export const GONE = 2;
export function livenessAt(ctx: PackedContext, w: Float64Array, now: number, i: number, r: number): number {
  const at = nodeAt(ctx.layout, i);
  const k = at + N_KEYS + r * KEY_STRIDE;
  if (w[k + K_PRESENT] !== 1) return GONE;
  const e = w[k + K_EXPIRES]!;
  if (Number.isNaN(e)) return ALIVE;
  const t = expiryAt(ctx, w, at, now);
  if (t < e - ctx.toleranceMs) return ALIVE;
  if (t <= e + ctx.toleranceMs) return ALIVE | GONE;
  return GONE;
}

/** clock.ts's trueTimeOf for client `c`'s monotonic clock. */
export function clientTrueTimeOf(l: PackedLayout, w: Float64Array, c: number, readingMs: number, fromMs: number): number {
  const at = clientAt(l, c) + C_MONO_ANCHOR;
  if (readAt(w, at, fromMs) >= readingMs) return fromMs;
  let t = w[at]! + Math.ceil(((readingMs - w[at + 1]!) * 1_000_000) / (1_000_000 + w[at + 2]!));
  t = Math.max(t - 1, fromMs);
  while (readAt(w, at, t) < readingMs) t++;
  return t;
}

/** Client `c`'s monotonic clock at true time `t`. */
export function clientMono(l: PackedLayout, w: Float64Array, c: number, t: number): number {
  return readAt(w, clientAt(l, c) + C_MONO_ANCHOR, t);
}

/** Whether nodes i and j are equal in every field, their cut links included (world.ts's sameNode and cutFrom). */
function sameBlock(l: PackedLayout, w: Float64Array, i: number, j: number): boolean {
  const a = nodeAt(l, i);
  const b = nodeAt(l, j);
  for (let k = 0; k < l.nodeStride; k++) {
    const x = w[a + k]!;
    const y = w[b + k]!;
    if (x !== y && !(Number.isNaN(x) && Number.isNaN(y))) return false;
  }
  return true;
}

/**
 * world.ts's orbitsOf: per node, the first interchangeable node (from
 * ctx.fixedNodes on) equal to it, its links included; itself if none, and
 * for every node while a client has a round in flight.
 */
export function orbitsInto(ctx: PackedContext, w: Float64Array, orbit: Int32Array): void {
  const l = ctx.layout;
  for (let i = 0; i < l.nodes; i++) orbit[i] = i;
  // A round in flight names its nodes (its arrivals and votes): no renaming leaves the state as it is.
  for (let c = 0; c < l.clients; c++) if (w[clientAt(l, c) + l.flightAt + F_KIND] === F_EXTEND) return;
  for (let i = ctx.fixedNodes + 1; i < l.nodes; i++) {
    for (let j = ctx.fixedNodes; j < i; j++) {
      if (orbit[j] === j && sameBlock(l, w, i, j)) {
        orbit[i] = j;
        break;
      }
    }
  }
}

/** fanOut's filter: along each orbit the answers' indices never go down (the first of each set of renamings). */
export function inOrder(orbit: Int32Array, choice: Int32Array, n: number): boolean {
  for (let i = 0; i < n; i++) {
    const o = orbit[i]!;
    if (o === i) continue;
    let prev = i - 1;
    while (orbit[prev] !== o) prev--;
    if (choice[i]! < choice[prev]!) return false;
  }
  return true;
}

// Scratch for undoneAtMs: a design has at most 15 nodes.
const undoRound = packedRound(16);
const undoWays = roundWays();

/**
 * world.ts's undoneAtMs: when the client answers after a refusal whose keys
 * it undoes at `now` from `w`: at once, or for a client that reads every
 * reply (ctx.everyReply), once every node of that round has answered, or at
 * its deadline `limit` ms on the client's clock.
 */
export function undoneAtMs(ctx: PackedContext, w: Float64Array, client: number, now: number, limit: number): number {
  if (!ctx.everyReply) return now;
  const l = ctx.layout;
  const round = undoRound;
  let never = false;
  for (let i = 0; i < l.nodes; i++) {
    const at = nodeAt(l, i);
    const delay = w[at + N_DELAY_KIND]!;
    round.kind[i] = !reachable(l, w, now, client, i) ? FAILED : delay === 2 ? NEVER : ARRIVES;
    round.at[i] = now + (delay === 1 ? w[at + N_DELAY_MS]! : 0);
    if (round.kind[i] === NEVER) never = true;
  }
  // Without a request timeout it waits for every reply that comes (from a black hole none: then up to the bound).
  const unbounded = (ctx.noClientTimeout || ctx.noDeadline) && Number.isNaN(ctx.requestTimeoutMs) && !never;
  const deadline = unbounded ? Number.POSITIVE_INFINITY : clientTrueTimeOf(l, w, client, clientMono(l, w, client, now) + limit, now);
  roundEndsInto(round, l.nodes, deadline, now, -1, 0, undoWays);
  return undoWays.endMs[0]!;
}

/** Compare-and-delete of the client's key on every node it reaches at `now` (releaseEverywhere; removeKeyAt: etcd's revision moves). */
export function releaseEverywhere(ctx: PackedContext, b: Float64Array, now: number, client: number, r: number, attempt: number): void {
  const l = ctx.layout;
  for (let i = 0; i < l.nodes; i++) {
    if (!receivesAt(l, b, now, client, i)) continue;
    const key = nodeAt(l, i) + N_KEYS + r * KEY_STRIDE;
    if (b[key + K_PRESENT] === 1 && b[key + K_CLIENT] === client && b[key + K_ATTEMPT] === attempt) removeKeyAt(ctx, b, i, r);
  }
}

/** node.ts's removeKey: node `i`'s key of resource `r` gone; where a delete moves the token source (etcd's revision), it moves. */
export function removeKeyAt(ctx: PackedContext, b: Float64Array, i: number, r: number): void {
  const l = ctx.layout;
  const at = nodeAt(l, i);
  const key = at + N_KEYS + r * KEY_STRIDE;
  if (b[key + K_PRESENT] !== 1) return;
  b.fill(0, key, key + KEY_STRIDE);
  if (!ctx.revisionOnDelete) return;
  const c = countersAt(l, at + N_KEYS) + ctx.counterOf[r]! * COUNTER_STRIDE;
  b[c + 1] = (b[c] === 1 ? b[c + 1]! : ctx.tokenBase) + 1;
  b[c] = 1;
}
