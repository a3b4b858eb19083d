import type { PackedBranches } from './packedBranches.ts';
import { FENCE_1 } from './packedBranches.ts';
import type { PackedLayout } from './packed.ts';
import {
  C_ATTEMPTS,
  C_LEASES,
  clientAt,
  COUNTER_STRIDE,
  countersAt,
  G_GRANTS,
  G_MAX_TOKEN,
  G_PRESENT,
  GHOST_STRIDE,
  K_ATTEMPT,
  K_CLIENT,
  K_COUNT,
  K_EXPIRES,
  K_LIVE_SINCE,
  K_PRESENT,
  K_TTL,
  KEY_STRIDE,
  L_ATTEMPT,
  L_BUFFERED,
  L_COUNT,
  L_EPOCH,
  L_PRESENT,
  L_TOKEN,
  L_VALID_UNTIL,
  LEASE_STRIDE,
  N_DELAY_KIND,
  N_DELAY_MS,
  N_HAS_REPLICA,
  N_KEYS,
  N_UP,
  nodeAt,
  replicaAt,
} from './packed.ts';
import type { PackedContext } from './packedFingerprint.ts';
import { expiryAt } from './packedFingerprint.ts';
import { ALIVE, clientMono, clientTrueTimeOf, GONE, inOrder, livenessAt, orbitsInto, reachable, receivesAt, releaseEverywhere, removeKeyAt, undoneAtMs } from './packedNode.ts';
import type { PackedRound, RoundWays } from './packedRound.ts';
import { ARRIVES, DECIDE_ACQUIRE, DECIDE_YES_OR_NEVER, FAILED, NEVER, packedRound, roundEndsInto, roundWays } from './packedRound.ts';
import { driftMarginMs } from './design.ts';

/**
 * model/world.ts's acquireLease (sendAcquire with fanOut over the node
 * orbits, then finishAcquire) on a packed state, for a ttl design, one
 * attempt (no retries): the same branches in the same order, written into
 * `out`. Scratch buffers are reused across calls.
 */

let size = -1;
let counted = new Float64Array(0);
let sent = new Float64Array(0);
let nodes = -1;
let round: PackedRound = packedRound(0);
let writeBack: PackedRound = packedRound(0);
const ways: RoundWays = roundWays();
const writeBackWays: RoundWays = roundWays();
let votes = new Float64Array(0);
let answers = new Int8Array(0);
let choice = new Int32Array(0);
let orbit = new Int32Array(0);

function scratch(l: PackedLayout): void {
  if (l.size !== size) {
    size = l.size;
    counted = new Float64Array(size);
    sent = new Float64Array(size);
  }
  if (l.nodes !== nodes) {
    nodes = l.nodes;
    round = packedRound(nodes);
    writeBack = packedRound(nodes);
    votes = new Float64Array(nodes);
    answers = new Int8Array(nodes);
    choice = new Int32Array(nodes);
    orbit = new Int32Array(nodes);
  }
}

let marginTtl = Number.NaN;
let marginCtx: PackedContext | null = null;
let margin = 0;
/** driftMarginMs of the design for `ttl`, remembered for the last (ctx, ttl) asked: a step asks it with the same ones again and again. */
export function marginOf(ctx: PackedContext, ttl: number): number {
  if (ctx !== marginCtx || ttl !== marginTtl) {
    margin = driftMarginMs(ctx.design, ttl);
    marginCtx = ctx;
    marginTtl = ttl;
  }
  return margin;
}

/** WAIT 1 after the script (replication 'wait'): every up node's replica gets its keys and counters. */
export function waitForReplicas(ctx: PackedContext, b: Float64Array): void {
  if (!ctx.waitReplication) return;
  const l = ctx.layout;
  const span = l.resources.length * KEY_STRIDE + l.counters.length * COUNTER_STRIDE;
  for (let i = 0; i < l.nodes; i++) {
    const at = nodeAt(l, i);
    if (b[at + N_HAS_REPLICA] === 1 && b[at + N_UP] === 1) b.copyWithin(replicaAt(l, at), at + N_KEYS, at + N_KEYS + span);
  }
}

/** The ways the node's answer may go: bit 0 "unchanged" (not reached, or the key alive), bit 1 "set". */
const UNCHANGED_ANSWER = 1;
const SET_ANSWER = 2;

export function packedAcquire(ctx: PackedContext, w: Float64Array, client: number, r: number, ttl: number, latency: number, out: PackedBranches): void {
  const l = ctx.layout;
  scratch(l);
  const n = l.nodes;
  const now = w[0]!;
  const ca = clientAt(l, client);
  const attempt = w[ca + C_ATTEMPTS]! + 1;
  counted.set(w);
  counted[ca + C_ATTEMPTS] = attempt;
  const limit = Number.isNaN(ctx.requestTimeoutMs) ? ttl : ctx.requestTimeoutMs;
  const startedMono = clientMono(l, w, client, now);
  for (let i = 0; i < n; i++) {
    const at = nodeAt(l, i);
    const delay = w[at + N_DELAY_KIND]!;
    round.kind[i] = !reachable(l, w, now, client, i) ? FAILED : delay === 2 ? NEVER : ARRIVES;
    round.at[i] = now + latency + (delay === 1 ? w[at + N_DELAY_MS]! : 0);
  }
  const deadline = clientTrueTimeOf(l, w, client, startedMono + limit, now);
  let combinations = 1;
  for (let i = 0; i < n; i++) {
    if (!receivesAt(l, w, now, client, i)) answers[i] = UNCHANGED_ANSWER;
    else {
      const live = livenessAt(ctx, w, now, i, r);
      answers[i] = (live & ALIVE ? UNCHANGED_ANSWER : 0) | (live & GONE ? SET_ANSWER : 0);
    }
    combinations *= answers[i] === 3 ? 2 : 1;
  }
  const orbits = combinations > 1;
  if (orbits) orbitsInto(ctx, w, orbit);
  const counter = ctx.counterOf[r]!;
  let kept = 0;
  for (let k = 0; k < combinations; k++) {
    // The earliest node varies slowest, as fanOut orders them.
    let rest = k;
    for (let i = n - 1; i >= 0; i--) {
      const m = answers[i] === 3 ? 2 : 1;
      choice[i] = rest % m;
      rest = Math.floor(rest / m);
    }
    if (orbits && !inOrder(orbit, choice, n)) continue;
    sent.set(counted);
    for (let i = 0; i < n; i++) {
      votes[i] = Number.NaN;
      // Answers in liveness order: alive (unchanged) first, then gone (set).
      const sets = answers[i] === SET_ANSWER || (answers[i] === 3 && choice[i] === 1);
      if (!sets) continue;
      const at = nodeAt(l, i);
      const expiry = expiryAt(ctx, w, at, now);
      const expires = expiry + ttl;
      if (expires <= expiry) continue;
      // A key seen gone that is still there expired: its lease's revocation deleted it first (etcd's revision moves).
      removeKeyAt(ctx, sent, i, r);
      const c = countersAt(l, at + N_KEYS) + counter * COUNTER_STRIDE;
      const value = (sent[c] === 1 ? sent[c + 1]! : ctx.tokenBase) + 1;
      sent[c] = 1;
      sent[c + 1] = value;
      const key = at + N_KEYS + r * KEY_STRIDE;
      sent[key + K_PRESENT] = 1;
      sent[key + K_CLIENT] = client;
      sent[key + K_ATTEMPT] = attempt;
      sent[key + K_EXPIRES] = expires;
      sent[key + K_TTL] = ttl;
      sent[key + K_COUNT] = 1;
      sent[key + K_LIVE_SINCE] = now;
      votes[i] = value;
    }
    finish(ctx, kept === 0, client, r, ttl, attempt, startedMono, limit, deadline, now, false, out);
    kept++;
  }
}

/**
 * finishAcquire's give-up branches: the requests untouched (judged in the step that sent them), the keys kept, and the
 * keys undone by the release the client sends as it gives up (at `releaseMs`), when that deletes any (releasedAfterGiveUp).
 */
function pushGaveUp(ctx: PackedContext, untouched: boolean, nowMs: number, out: PackedBranches, client: number, r: number, attempt: number, releaseMs: number): void {
  if (untouched) {
    const b = out.push(counted);
    b[0] = nowMs;
    waitForReplicas(ctx, b);
  }
  const b = out.push(sent);
  b[0] = nowMs;
  waitForReplicas(ctx, b);
  const l = ctx.layout;
  let ours = false;
  for (let i = 0; i < l.nodes && !ours; i++) {
    const key = nodeAt(l, i) + N_KEYS + r * KEY_STRIDE;
    ours = receivesAt(l, sent, releaseMs, client, i) && sent[key + K_PRESENT] === 1 && sent[key + K_CLIENT] === client && sent[key + K_ATTEMPT] === attempt;
  }
  if (!ours) return;
  const u = out.push(sent);
  u[0] = nowMs;
  releaseEverywhere(ctx, u, releaseMs, client, r, attempt);
  waitForReplicas(ctx, u);
}

/** finishAcquire: the round's ways, each given up, granted or denied. */
function finish(
  ctx: PackedContext,
  untouched: boolean,
  client: number,
  r: number,
  ttl: number,
  attempt: number,
  startedMono: number,
  limit: number,
  deadline: number,
  earliest: number,
  patient: boolean,
  out: PackedBranches,
): void {
  const l = ctx.layout;
  const n = l.nodes;
  const q = ctx.quorum;
  let never = false;
  for (let i = 0; i < n; i++) {
    round.yes[i] = Number.isNaN(votes[i]!) ? 0 : 1;
    if (round.kind[i] === NEVER) never = true;
  }
  // A client that reads every reply (ctx.everyReply) decides nothing early (rule -1).
  // world.ts finishAcquire: a client that reads every reply without a request timeout does not stop at the ttl (but for a black hole).
  const unbounded = ctx.everyReply && (ctx.noClientTimeout || ctx.noDeadline) && Number.isNaN(ctx.requestTimeoutMs) && !never;
  roundEndsInto(round, n, unbounded ? Number.POSITIVE_INFINITY : deadline, earliest, ctx.everyReply ? -1 : DECIDE_ACQUIRE, q, ways);
  const count = ways.ways;
  const end0 = ways.endMs[0]!;
  const end1 = ways.endMs[1]!;
  const counted0 = ways.counted[0]!;
  const counted1 = ways.counted[1]!;
  const noTimeout = Number.isNaN(ctx.requestTimeoutMs);
  for (let way = 0; way < count; way++) {
    const endMs = way === 0 ? end0 : end1;
    const got = way === 0 ? counted0 : counted1;
    const elapsed = clientMono(l, sent, client, endMs) - startedMono;
    const gaveUp = !(elapsed < ttl || way > 0);
    if (gaveUp) pushGaveUp(ctx, untouched, endMs, out, client, r, attempt, endMs);
    if (!patient && !unbounded && (elapsed > ttl || (elapsed === ttl && got === 0))) {
      if (ctx.noDeadline && noTimeout && way === 0) {
        // readLateReplies: the client waits for every reply that comes.
        if (!never) finish(ctx, false, client, r, ttl, attempt, startedMono, limit, Number.POSITIVE_INFINITY, earliest, true, out);
      } else if (gaveUp && noTimeout && !never) {
        // readLate: the same give-up, when the late replies come.
        let last = Number.NEGATIVE_INFINITY;
        for (let i = 0; i < n; i++) if (round.kind[i] === ARRIVES) last = Math.max(last, Math.max(round.at[i]!, earliest));
        if (Number.isFinite(last) && last > endMs) pushGaveUp(ctx, untouched, last, out, client, r, attempt, endMs);
      }
      continue;
    }
    let granted = 0;
    let token = Number.NEGATIVE_INFINITY;
    for (let i = 0; i < n; i++) {
      if (((got >>> i) & 1) === 0 || Number.isNaN(votes[i]!)) continue;
      granted++;
      token = Math.max(token, votes[i]!);
    }
    const m = marginOf(ctx, ttl);
    if (granted >= q && (ttl - elapsed - m > 0 || ctx.noDeadline)) {
      let atToken = 0;
      for (let i = 0; i < n; i++) if ((got >>> i) & 1 && votes[i]! >= token) atToken++;
      let behind = 0;
      if (atToken < q) for (let i = 0; i < n; i++) if ((got >>> i) & 1 && votes[i]! < token) behind |= 1 << i;
      let doneMs = endMs;
      if (behind !== 0) {
        for (let i = 0; i < n; i++) {
          const at = nodeAt(l, i);
          const delay = sent[at + N_DELAY_KIND]!;
          writeBack.kind[i] = ((behind >>> i) & 1) === 0 || !reachable(l, sent, endMs, client, i) ? FAILED : delay === 2 ? NEVER : ARRIVES;
          writeBack.at[i] = endMs + (delay === 1 ? sent[at + N_DELAY_MS]! : 0);
          writeBack.yes[i] = (behind >>> i) & 1;
        }
        const dl = clientTrueTimeOf(l, sent, client, clientMono(l, sent, client, endMs) + limit, endMs);
        roundEndsInto(writeBack, n, dl, endMs, DECIDE_YES_OR_NEVER, q - atToken, writeBackWays);
        doneMs = writeBackWays.endMs[0]!;
      }
      const b = out.push(sent);
      b[0] = doneMs;
      for (let i = 0; i < n; i++) {
        if (((behind >>> i) & 1) === 0 || !receivesAt(l, sent, endMs, client, i)) continue;
        const c = countersAt(l, nodeAt(l, i) + N_KEYS) + ctx.counterOf[r]! * COUNTER_STRIDE;
        const current = b[c] === 1 ? b[c + 1]! : 0;
        if (current < token) {
          b[c] = 1;
          b[c + 1] = token;
        }
      }
      // finishAcquire: no validity left once the write-back is done is no grant; the counters stay raised, the keys are undone.
      if (!ctx.noDeadline && doneMs > endMs && ttl - (clientMono(l, sent, client, doneMs) - startedMono) - m <= 0) {
        releaseEverywhere(ctx, b, doneMs, client, r, attempt);
        waitForReplicas(ctx, b);
        continue;
      }
      const g = l.ghostBase + r * GHOST_STRIDE;
      const present = b[g + G_PRESENT] === 1;
      const epoch = (present ? b[g + G_GRANTS]! : 0) + 1;
      const maxBefore = present ? b[g + G_MAX_TOKEN]! : Number.NaN;
      if (!present) b.fill(0, g, g + GHOST_STRIDE);
      b[g + G_PRESENT] = 1;
      b[g + G_GRANTS] = epoch;
      b[g + G_MAX_TOKEN] = Number.isNaN(maxBefore) || token > maxBefore ? token : maxBefore;
      const lease = clientAt(l, client) + C_LEASES + r * LEASE_STRIDE;
      b[lease + L_PRESENT] = 1;
      b[lease + L_ATTEMPT] = attempt;
      b[lease + L_TOKEN] = token;
      b[lease + L_VALID_UNTIL] = ctx.noDeadline ? Number.NaN : startedMono + ttl - m;
      b[lease + L_COUNT] = 1;
      b[lease + L_BUFFERED] = 0;
      b[lease + L_EPOCH] = epoch;
      waitForReplicas(ctx, b);
      if (!Number.isNaN(maxBefore) && token <= maxBefore) out.mark(FENCE_1);
      continue;
    }
    // Denied: the undo, compare-and-delete on every node the client reaches then (waited for by a client that reads every reply).
    const b = out.push(sent);
    b[0] = undoneAtMs(ctx, sent, client, endMs, limit);
    releaseEverywhere(ctx, b, endMs, client, r, attempt);
    waitForReplicas(ctx, b);
  }
}
