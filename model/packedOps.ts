import { dropsLease, keepsDeadline } from './failedExtend.ts';
import type { PackedLayout } from './packed.ts';
import {
  C_LEASES,
  C_PAUSED,
  C_PENDING,
  C_PENDING_EPOCH,
  C_PENDING_RESOURCE,
  C_PENDING_TOKEN,
  C_SESSION_LOST,
  CELL_STRIDE,
  clientAt,
  F_DEADLINE,
  F_EXPIRED,
  F_EXTEND,
  F_KIND,
  F_NODES,
  F_NOT_HELD,
  F_RESOURCE,
  F_STARTED_MONO,
  F_TTL,
  FLIGHT_NODE_STRIDE,
  G_LAST_ACCEPTED,
  G_PRESENT,
  GHOST_STRIDE,
  K_ATTEMPT,
  K_CLIENT,
  K_EXPIRES,
  K_LIVE_SINCE,
  K_PRESENT,
  K_TTL,
  KEY_STRIDE,
  L_ATTEMPT,
  L_EPOCH,
  L_PRESENT,
  L_TOKEN,
  L_VALID_UNTIL,
  LEASE_STRIDE,
  leaseAt,
  N_DELAY_KIND,
  N_DELAY_MS,
  N_KEYS,
  nodeAt,
} from './packed.ts';
import { marginOf, waitForReplicas } from './packedAcquire.ts';
import type { PackedBranches } from './packedBranches.ts';
import { STORE_1, UNCHANGED } from './packedBranches.ts';
import type { PackedContext } from './packedFingerprint.ts';
import { expiryAt } from './packedFingerprint.ts';
import { ALIVE, clientMono, clientTrueTimeOf, GONE, inOrder, livenessAt, orbitsInto, reachable, receivesAt, releaseEverywhere, undoneAtMs } from './packedNode.ts';
import type { PackedRound } from './packedRound.ts';
import { ARRIVES, DECIDE_QUORUM_ANSWERED, DECIDE_YES_OR_NEVER, FAILED, NEVER, packedRound, roundEndsInto, roundWays } from './packedRound.ts';

/**
 * model/world.ts's release, extend and write for the ttl designs that are
 * not session-bound, on a packed state: the same branches in the same
 * order. A step the reference answers with the very state it was given
 * returns UNCHANGED (the explorer skips it), except where WAIT's
 * replication makes every operation's state a new one.
 */

let nodes = -1;
let round: PackedRound = packedRound(0);
const ways = roundWays();
let votes = new Uint8Array(0);
let answers = new Int8Array(0);
let choice = new Int32Array(0);
let orbit = new Int32Array(0);
let size = -1;
let sent = new Float64Array(0);

function scratch(l: PackedLayout): void {
  if (l.nodes !== nodes) {
    nodes = l.nodes;
    round = packedRound(nodes);
    votes = new Uint8Array(nodes);
    answers = new Int8Array(nodes);
    choice = new Int32Array(nodes);
    orbit = new Int32Array(nodes);
  }
  if (l.size !== size) {
    size = l.size;
    sent = new Float64Array(size);
  }
}

/** holdsValid: a lease, valid by the client's clock now. */
function holdsValidAt(l: PackedLayout, w: Float64Array, client: number, r: number): boolean {
  const lease = leaseAt(l, client, r);
  if (w[lease + L_PRESENT] !== 1) return false;
  const until = w[lease + L_VALID_UNTIL]!;
  return Number.isNaN(until) || clientMono(l, w, client, w[0]!) < until;
}

/** read: the store's cell, the state as it was. */
export function packedRead(ctx: PackedContext, w: Float64Array, out: PackedBranches): number {
  return unchanged(ctx, w, out);
}

/** A step that changes nothing: UNCHANGED, or under WAIT the same state with its replicas brought up to date. */
function unchanged(ctx: PackedContext, w: Float64Array, out: PackedBranches): number {
  if (!ctx.waitReplication) return UNCHANGED;
  waitForReplicas(ctx, out.push(w));
  return out.count;
}

/** A round sent now to every node (roundOf): arrivals `latency` late plus each node's delay, and the deadline. */
function roundOf(ctx: PackedContext, w: Float64Array, client: number, latency: number, limit: number): number {
  const l = ctx.layout;
  const now = w[0]!;
  for (let i = 0; i < l.nodes; i++) {
    const at = nodeAt(l, i);
    const delay = w[at + N_DELAY_KIND]!;
    round.kind[i] = !reachable(l, w, now, client, i) ? FAILED : delay === 2 ? NEVER : ARRIVES;
    round.at[i] = now + latency + (delay === 1 ? w[at + N_DELAY_MS]! : 0);
  }
  return clientTrueTimeOf(l, w, client, clientMono(l, w, client, now) + limit, now);
}

export function packedRelease(ctx: PackedContext, w: Float64Array, client: number, r: number, latency: number, out: PackedBranches): number {
  const l = ctx.layout;
  scratch(l);
  const lease = leaseAt(l, client, r);
  if (w[lease + L_PRESENT] !== 1) return unchanged(ctx, w, out);
  const limit = Number.isNaN(ctx.requestTimeoutMs) ? 1000 : ctx.requestTimeoutMs;
  const deadline = roundOf(ctx, w, client, latency, limit);
  for (let i = 0; i < l.nodes; i++) round.yes[i] = 0;
  roundEndsInto(round, l.nodes, deadline, w[0]!, ctx.everyReply ? -1 : DECIDE_QUORUM_ANSWERED, ctx.quorum, ways);
  const b = out.push(w);
  // Key-changed events: only the owner's keys are deleted, so none breaks OWN-1.
  releaseEverywhere(ctx, b, w[0]!, client, r, w[lease + L_ATTEMPT]!);
  b[0] = ways.endMs[0]!;
  b.fill(0, lease, lease + LEASE_STRIDE);
  waitForReplicas(ctx, b);
  return out.count;
}

export function packedWrite(ctx: PackedContext, w: Float64Array, client: number, r: number, latency: number, delayed: boolean, out: PackedBranches): number {
  const l = ctx.layout;
  const lease = leaseAt(l, client, r);
  if (!holdsValidAt(l, w, client, r)) return unchanged(ctx, w, out);
  const token = w[lease + L_TOKEN]!;
  const epoch = w[lease + L_EPOCH]!;
  const b = out.push(w);
  if (delayed) {
    const c = clientAt(l, client);
    b[c + C_PENDING] = 1;
    b[c + C_PENDING_RESOURCE] = r;
    b[c + C_PENDING_TOKEN] = token;
    b[c + C_PENDING_EPOCH] = epoch;
    waitForReplicas(ctx, b);
    return out.count;
  }
  deliverAt(ctx, b, r, token, epoch, out);
  b[0] = w[0]! + latency;
  waitForReplicas(ctx, b);
  return out.count;
}

/** deliverWrite into the last branch `b`: the store judges the token by its policy; the ghost's entry is set either way. */
function deliverAt(ctx: PackedContext, b: Float64Array, r: number, token: number, epoch: number, out: PackedBranches): void {
  const l = ctx.layout;
  const cell = l.cellBase + r * CELL_STRIDE;
  const highest = b[cell] === 1 ? b[cell + 2]! : Number.NaN;
  const passes =
    ctx.policy === 'unfenced' || ctx.policy === 'transactional' || Number.isNaN(highest) || (ctx.policy === 'strict' ? token > highest : token >= highest);
  const g = l.ghostBase + r * GHOST_STRIDE;
  const before = b[g + G_PRESENT] === 1 ? b[g + G_LAST_ACCEPTED]! : 0;
  if (b[g + G_PRESENT] !== 1) b.fill(0, g, g + GHOST_STRIDE);
  b[g + G_PRESENT] = 1;
  if (passes) {
    b[cell] = 1;
    b[cell + 1] = token;
    b[cell + 2] = Number.isNaN(highest) || token > highest ? token : highest;
    b[g + G_LAST_ACCEPTED] = Math.max(before, epoch);
    if (epoch < before) out.mark(STORE_1);
  }
}

/** The client's write held at `c` (a delayed write, or one checked before a pause) lands now, unchecked, and is no longer held. */
function deliverHeld(ctx: PackedContext, b: Float64Array, c: number, out: PackedBranches): void {
  const r = b[c + C_PENDING_RESOURCE]!;
  const token = b[c + C_PENDING_TOKEN]!;
  const epoch = b[c + C_PENDING_EPOCH]!;
  b.fill(0, c + C_PENDING, c + C_LEASES);
  deliverAt(ctx, b, r, token, epoch, out);
}

/** world.ts's deliver: the delayed write lands (a fault: no WAIT after it). */
export function packedDeliver(ctx: PackedContext, w: Float64Array, client: number, out: PackedBranches): number {
  deliverHeld(ctx, out.push(w), clientAt(ctx.layout, client), out);
  return out.count;
}

/** world.ts's pause holding a write (resource index `r`, or -1 for none): checked now (a valid lease), it is held until the resume; else none is. */
export function packedPauseWrite(ctx: PackedContext, w: Float64Array, client: number, r: number, out: PackedBranches): number {
  const l = ctx.layout;
  const c = clientAt(l, client);
  const b = out.push(w);
  b[c + C_PAUSED] = 1;
  if (r >= 0 && holdsValidAt(l, w, client, r)) {
    const lease = leaseAt(l, client, r);
    b[c + C_PENDING] = 1;
    b[c + C_PENDING_RESOURCE] = r;
    b[c + C_PENDING_TOKEN] = w[lease + L_TOKEN]!;
    b[c + C_PENDING_EPOCH] = w[lease + L_EPOCH]!;
  } else b.fill(0, c + C_PENDING, c + C_LEASES);
  return out.count;
}

const SET = 2;

/**
 * failedExtend from `base`: the lease kept or dropped, the keys kept or
 * deleted, as the design's terms say; WAIT's replication only after an
 * operation (`replicate`), not at a resume (a fault).
 */
function refused(ctx: PackedContext, base: Float64Array, endMs: number, client: number, r: number, attempt: number, lease: number, denied: boolean, limit: number, replicate: boolean, out: PackedBranches): void {
  const b = out.push(base);
  b[0] = endMs;
  if (ctx.failedExtend.keys === 'deleted') {
    releaseEverywhere(ctx, b, endMs, client, r, attempt);
    b[0] = undoneAtMs(ctx, base, client, endMs, limit);
  }
  if (dropsLease(ctx.failedExtend, denied)) b.fill(0, lease, lease + LEASE_STRIDE);
  if (replicate) waitForReplicas(ctx, b);
}

/** `base` as it stands when the replies are read at `endMs` (WAIT's replication after an operation). */
function readAt(ctx: PackedContext, base: Float64Array, endMs: number, replicate: boolean, out: PackedBranches): void {
  const b = out.push(base);
  b[0] = endMs;
  if (replicate) waitForReplicas(ctx, b);
}

/** Zeroes the in-flight block at `f`: nothing in flight. */
function clearFlight(l: PackedLayout, b: Float64Array, f: number): void {
  b.fill(0, f, f + F_NODES + l.nodes * FLIGHT_NODE_STRIDE);
}

/** The extension's replies read from `base` (the state they were sent from, or the resumed one), from true time `earliest` on: world.ts's finishExtend. */
function finishExtend(
  ctx: PackedContext,
  base: Float64Array,
  client: number,
  r: number,
  ttl: number,
  startedMono: number,
  deadline: number,
  earliest: number,
  replicate: boolean,
  out: PackedBranches,
): void {
  const l = ctx.layout;
  const n = l.nodes;
  const lease = leaseAt(l, client, r);
  for (let i = 0; i < n; i++) round.yes[i] = votes[i]!;
  // world.ts finishExtend: a client with no deadline and no request timeout waits for every reply that comes.
  let waits = (ctx.noDeadline || ctx.noClientTimeout) && Number.isNaN(ctx.requestTimeoutMs);
  for (let i = 0; i < n && waits; i++) if (round.kind[i] === NEVER) waits = false;
  roundEndsInto(round, n, waits ? Number.POSITIVE_INFINITY : deadline, earliest, ctx.everyReply ? -1 : DECIDE_YES_OR_NEVER, ctx.quorum, ways);
  // world.ts failedExtend's undo round: bounded as the extension was (timeoutMs of its ttl).
  const limit = Number.isNaN(ctx.requestTimeoutMs) ? ttl : ctx.requestTimeoutMs;
  const count = ways.ways;
  const end0 = ways.endMs[0]!;
  const end1 = ways.endMs[1]!;
  const got0 = ways.counted[0]!;
  const got1 = ways.counted[1]!;
  const held = base[lease + L_PRESENT] === 1;
  const attempt = base[lease + L_ATTEMPT]!;
  const oldUntil = base[lease + L_VALID_UNTIL]!;
  const validUntil = startedMono + ttl - marginOf(ctx, ttl);
  for (let way = 0; way < count; way++) {
    const endMs = way === 0 ? end0 : end1;
    const got = way === 0 ? got0 : got1;
    if (!held) {
      // The lease went while the replies were out (a resume after it was dropped): refused, nothing else changes.
      readAt(ctx, base, endMs, replicate, out);
      continue;
    }
    let yes = 0;
    let no = 0;
    for (let i = 0; i < n; i++) {
      if (((got >>> i) & 1) === 0) continue;
      if (votes[i] === 1) yes++;
      else no++;
    }
    // world.ts finishExtend: denied when the nodes that answered no leave too few for a quorum.
    const denied = no > n - ctx.quorum;
    if (Number.isNaN(oldUntil)) {
      if (ctx.noDeadline && yes >= ctx.quorum) readAt(ctx, base, endMs, replicate, out);
      else refused(ctx, base, endMs, client, r, attempt, lease, denied, limit, replicate, out);
      continue;
    }
    const mono = clientMono(l, base, client, endMs);
    if (yes < ctx.quorum || mono >= validUntil || mono > oldUntil) {
      refused(ctx, base, endMs, client, r, attempt, lease, denied, limit, replicate, out);
      continue;
    }
    const b = out.push(base);
    b[0] = endMs;
    b[lease + L_VALID_UNTIL] = validUntil;
    if (replicate) waitForReplicas(ctx, b);
    if (mono === oldUntil) refused(ctx, base, endMs, client, r, attempt, lease, denied, limit, replicate, out);
  }
}

/** A pause: the client stops with `kind` in flight (its block at `flight` zeroed by the caller's copy or here). */
function paused(l: PackedLayout, b: Float64Array, client: number, kind: number): number {
  const c = clientAt(l, client);
  b[c + C_PAUSED] = 1;
  const f = c + l.flightAt;
  clearFlight(l, b, f);
  b[f + F_KIND] = kind;
  return f;
}

/**
 * An extension (world.ts's extend), or with `pausing` its client's pause
 * right after sending it (inject's pause with an extend in flight): each
 * combination of answers is then a paused state holding the round.
 */
export function packedExtend(ctx: PackedContext, w: Float64Array, client: number, r: number, ttl: number, latency: number, pausing: boolean, out: PackedBranches): number {
  const l = ctx.layout;
  scratch(l);
  const n = l.nodes;
  const now = w[0]!;
  const lease = leaseAt(l, client, r);
  if (w[lease + L_PRESENT] !== 1) {
    if (!pausing) return unchanged(ctx, w, out);
    const b = out.push(w);
    b[paused(l, b, client, F_NOT_HELD) + F_DEADLINE] = now;
    return out.count;
  }
  if (!holdsValidAt(l, w, client, r)) {
    // Refused before sending: the lease is over, and dropped.
    const b = out.push(w);
    b.fill(0, lease, lease + LEASE_STRIDE);
    if (pausing) b[paused(l, b, client, F_EXPIRED) + F_DEADLINE] = now;
    else waitForReplicas(ctx, b);
    return out.count;
  }
  const attempt = w[lease + L_ATTEMPT]!;
  const limit = Number.isNaN(ctx.requestTimeoutMs) ? ttl : ctx.requestTimeoutMs;
  const startedMono = clientMono(l, w, client, now);
  const deadline = roundOf(ctx, w, client, latency, limit);
  let combinations = 1;
  for (let i = 0; i < n; i++) {
    if (!receivesAt(l, w, now, client, i)) answers[i] = 1;
    else {
      const live = livenessAt(ctx, w, now, i, r);
      answers[i] = (live & ALIVE ? 1 : 0) | (live & GONE ? SET : 0);
    }
    if (answers[i] === 3) combinations *= 2;
  }
  const orbits = combinations > 1;
  if (orbits) orbitsInto(ctx, w, orbit);
  const m = marginOf(ctx, ttl);
  const validUntil = startedMono + ttl - m;
  // world.ts sendExtend: a shorter ttl lowers the lease's deadline at the send (not for terms that keep it: keepsDeadline).
  const oldUntil = keepsDeadline(ctx.failedExtend) ? w[lease + L_VALID_UNTIL]! : Math.min(w[lease + L_VALID_UNTIL]!, validUntil);
  for (let k = 0; k < combinations; k++) {
    let rest = k;
    for (let i = n - 1; i >= 0; i--) {
      const span = answers[i] === 3 ? 2 : 1;
      choice[i] = rest % span;
      rest = Math.floor(rest / span);
    }
    if (orbits && !inOrder(orbit, choice, n)) continue;
    sent.set(w);
    if (!Number.isNaN(oldUntil)) sent[lease + L_VALID_UNTIL] = oldUntil;
    for (let i = 0; i < n; i++) {
      votes[i] = 0;
      // Liveness's answers in order: alive first (1), then gone (2); only a node that sees the key alive re-arms it.
      const alive = answers[i] === 1 ? receivesAt(l, w, now, client, i) : answers[i] === 3 && choice[i] === 0;
      if (!alive) continue;
      const at = nodeAt(l, i);
      const key = at + N_KEYS + r * KEY_STRIDE;
      if (w[key + K_PRESENT] !== 1 || w[key + K_CLIENT] !== client || w[key + K_ATTEMPT] !== attempt) continue;
      sent[key + K_TTL] = ttl;
      sent[key + K_EXPIRES] = expiryAt(ctx, w, at, now) + ttl;
      sent[key + K_LIVE_SINCE] = now;
      votes[i] = 1;
    }
    if (pausing) {
      // The replies wait for the resume (packedResume): the round is held as the client's in-flight block.
      const b = out.push(sent);
      const f = paused(l, b, client, F_EXTEND);
      b[f + F_RESOURCE] = r;
      b[f + F_TTL] = ttl;
      b[f + F_STARTED_MONO] = startedMono;
      b[f + F_DEADLINE] = deadline;
      for (let i = 0; i < n; i++) {
        const o = f + F_NODES + i * FLIGHT_NODE_STRIDE;
        b[o] = round.kind[i]!;
        b[o + 1] = round.kind[i] === ARRIVES ? round.at[i]! : 0;
        b[o + 2] = votes[i]!;
      }
      continue;
    }
    finishExtend(ctx, sent, client, r, ttl, startedMono, deadline, now, true, out);
  }
  return out.count;
}

/** A packed resume returns this where it does not compute the state (a lost session): the explorer takes the reference step. */
export const FALLBACK = -2;

/**
 * world.ts's resume for a client whose session is intact: a write held
 * across the pause lands; else nothing in flight, an extension refused at
 * its send (read now), or an extension's round (its replies read from now
 * on: finishExtend, with no WAIT after it, as a resume is a fault).
 */
export function packedResume(ctx: PackedContext, w: Float64Array, client: number, out: PackedBranches): number {
  const l = ctx.layout;
  scratch(l);
  const c = clientAt(l, client);
  if (w[c + C_SESSION_LOST] === 1) return FALLBACK;
  const f = c + l.flightAt;
  const kind = w[f + F_KIND]!;
  const now = w[0]!;
  if (w[c + C_PENDING] === 1) {
    // A write checked before the pause goes out first, unchecked (a pause holds a write or an operation, never both).
    if (kind !== 0) return FALLBACK;
    const b = out.push(w);
    b[c + C_PAUSED] = 0;
    deliverHeld(ctx, b, c, out);
    return out.count;
  }
  if (kind !== F_EXTEND) {
    const b = out.push(w);
    b[c + C_PAUSED] = 0;
    clearFlight(l, b, f);
    // A reply settled at the send is read now (its doneMs is past).
    if (kind !== 0) b[0] = Math.max(now, w[f + F_DEADLINE]!);
    return out.count;
  }
  for (let i = 0; i < l.nodes; i++) {
    const o = f + F_NODES + i * FLIGHT_NODE_STRIDE;
    round.kind[i] = w[o]!;
    round.at[i] = w[o + 1]!;
    votes[i] = w[o + 2]!;
  }
  sent.set(w);
  sent[c + C_PAUSED] = 0;
  clearFlight(l, sent, f);
  finishExtend(ctx, sent, client, w[f + F_RESOURCE]!, w[f + F_TTL]!, w[f + F_STARTED_MONO]!, w[f + F_DEADLINE]!, now, false, out);
  return out.count;
}
