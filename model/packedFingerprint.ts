import type { Design, FailedExtend, StorePolicy } from './design.ts';
import { driftFactor, expiresByWallClock, leaseTerms, quorum, replication, rulesOf } from './design.ts';
import { counterKey } from './node.ts';
import type { Fingerprint, FingerprintOptions } from './fingerprint.ts';
import { ARRIVAL_FAILED, ARRIVAL_NEVER, FLIGHT_EXTEND, FLIGHT_REPLY, MAX_PERMUTED_CLIENTS, NONE, permutationsOf, SESSION, STALE } from './fingerprint.ts';
import { bigSafe, finishHi, finishLo, name, nameWords, num, orderByHash, start, word, wordsInOrder } from './fingerprintHash.ts';
import type { PackedLayout } from './packed.ts';
import { FAILED, NEVER } from './packedRound.ts';
import {
  C_ATTEMPTS,
  C_MONO_ANCHOR,
  C_MONO_DRIFT,
  C_PAUSED,
  C_PENDING,
  C_PENDING_EPOCH,
  C_PENDING_RESOURCE,
  C_PENDING_TOKEN,
  C_SESSION_LOST,
  CELL_STRIDE,
  clientAt,
  COUNTER_STRIDE,
  countersAt,
  F_DEADLINE,
  F_EXPIRED,
  F_KIND,
  F_NODES,
  F_NOT_HELD,
  F_RESOURCE,
  F_STARTED_MONO,
  F_TTL,
  FLIGHT_NODE_STRIDE,
  G_LAST_ACCEPTED,
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
  leaseAt,
  L_ATTEMPT,
  L_BUFFERED,
  L_COUNT,
  L_EPOCH,
  L_PRESENT,
  L_TOKEN,
  L_VALID_UNTIL,
  N_AVAILABLE,
  N_CUT,
  N_DELAY_KIND,
  N_DELAY_MS,
  N_HAS_REPLICA,
  N_KEYS,
  N_MONO_ANCHOR,
  N_MONO_DRIFT,
  N_UP,
  N_WALL_ANCHOR,
  N_WALL_DRIFT,
  nodeAt,
  replicaAt,
} from './packed.ts';
import { liveBoundMs } from './properties.ts';
import type { World } from './state.ts';

/**
 * fingerprint() over a packed state: the same words in the same order, so
 * the same 64-bit number as fingerprint() of the World it packs (the
 * explorer mixes the two in one set of visited states; the equivalence
 * test checks it). Every abstraction and symmetry of fingerprint.ts (spec
 * 8.4) is computed here from the packed numbers, with no allocation.
 */
export interface PackedContext {
  readonly layout: PackedLayout;
  /** Whether keys expire by a node's wall clock (else its monotonic clock). */
  readonly wallExpiry: boolean;
  readonly toleranceMs: number;
  readonly driftFactor: number;
  readonly clientSymmetry: boolean;
  readonly fixedNodes: number;
  readonly deadKeysGone: boolean;
  readonly exactExpiry: boolean;
  // What the packed operations read of the design and configuration (model/world.ts reads the same through rulesOf).
  readonly design: Design;
  readonly quorum: number;
  /** The client keeps no deadline (leaseTerms: clientDeadline 'none'). */
  readonly noDeadline: boolean;
  /** The client has no request timeout of its own (leaseTerms: clientTimeout 'none'): it reads an extension's late replies. */
  readonly noClientTimeout: boolean;
  /** The client reads every reply of a round before it decides, and of its undo round after a refusal (leaseTerms: decides 'every-reply'). */
  readonly everyReply: boolean;
  /** WorldConfig.requestTimeoutMs, NaN when absent. */
  readonly requestTimeoutMs: number;
  readonly tokenBase: number;
  /** WAIT 1 after every script: replicas are brought up to date after each operation. */
  readonly waitReplication: boolean;
  /** Per resource index: the index of its counter (counterKey) in layout.counters. */
  readonly counterOf: readonly number[];
  readonly policy: StorePolicy;
  /** What a refused extension does (leaseTerms; lockcheck's own client by default). */
  readonly failedExtend: FailedExtend;
  /** A delete moves the token source (etcd's revision). */
  readonly revisionOnDelete: boolean;
  /** Per resource, then per counter: the two words str() mixes for its name (nameWords), computed once. */
  readonly resourceHi: readonly number[];
  readonly resourceLo: readonly number[];
  readonly counterHi: readonly number[];
  readonly counterLo: readonly number[];
}

export function packedContext(layout: PackedLayout, initial: World, options: FingerprintOptions): PackedContext {
  const design = initial.config.design;
  return {
    layout,
    wallExpiry: expiresByWallClock(design),
    toleranceMs: initial.config.expiryToleranceMs ?? 0,
    driftFactor: driftFactor(design),
    clientSymmetry: options.clientSymmetry !== false,
    fixedNodes: options.fixedNodes ?? 1,
    deadKeysGone: options.deadKeysGone === true,
    exactExpiry: options.exactExpiry === true,
    design,
    quorum: quorum(design),
    noDeadline: leaseTerms(design).clientDeadline === 'none',
    noClientTimeout: leaseTerms(design).clientTimeout === 'none',
    everyReply: leaseTerms(design).decides === 'every-reply',
    requestTimeoutMs: initial.config.requestTimeoutMs ?? Number.NaN,
    tokenBase: Number(initial.config.tokenBase ?? 0n),
    waitReplication: replication(design) === 'wait',
    counterOf: layout.resources.map((r) => layout.counters.indexOf(counterKey(design, r))),
    policy: initial.store.policy,
    failedExtend: leaseTerms(design).failedExtend ?? { lease: 'kept', keys: 'kept' },
    revisionOnDelete: rulesOf(design).tokenSource === 'cluster-revision',
    resourceHi: layout.resources.map((r) => nameWords(r)[0]),
    resourceLo: layout.resources.map((r) => nameWords(r)[1]),
    counterHi: layout.counters.map((c) => nameWords(c)[0]),
    counterLo: layout.counters.map((c) => nameWords(c)[1]),
  };
}

/** A clock's reading at true time `now`, the clock's three numbers at `at` (anchor, reading, drift): clock.ts's read(). */
export function readAt(w: Float64Array, at: number, now: number): number {
  const elapsed = now - w[at]!;
  const drift = w[at + 2]!;
  // Without drift, an integer elapsed time (within 32 bits, so elapsed * 10^6 is exact) reads as itself: no division.
  if (drift === 0 && (elapsed | 0) === elapsed) return w[at + 1]! + elapsed;
  return w[at + 1]! + Math.floor((elapsed * (1_000_000 + drift)) / 1_000_000);
}

/** A node's reading of the clock its keys expire by. */
export function expiryAt(ctx: PackedContext, w: Float64Array, node: number, now: number): number {
  return ctx.wallExpiry ? readAt(w, node + N_WALL_ANCHOR, now) : readAt(w, node + N_MONO_ANCHOR, now);
}

let boundTtl = Number.NaN;
let boundFactor = Number.NaN;
let boundTolerance = Number.NaN;
let bound = 0;
function boundOf(ctx: PackedContext, ttl: number): number {
  if (ttl !== boundTtl || ctx.driftFactor !== boundFactor || ctx.toleranceMs !== boundTolerance) {
    bound = liveBoundMs(ttl, ctx.driftFactor, ctx.toleranceMs);
    boundTtl = ttl;
    boundFactor = ctx.driftFactor;
    boundTolerance = ctx.toleranceMs;
  }
  return bound;
}

/** fingerprint.ts's heldBefore. */
function heldBefore(l: PackedLayout, w: Float64Array, r: number, epoch: number, upTo: number): boolean {
  for (let j = 0; j < upTo; j++) {
    const lease = leaseAt(l, j, r);
    if (w[lease + L_PRESENT] === 1 && w[lease + L_EPOCH] === epoch) return true;
    const c = clientAt(l, j);
    if (w[c + C_PENDING] === 1 && w[c + C_PENDING_RESOURCE] === r && w[c + C_PENDING_EPOCH] === epoch) return true;
  }
  return false;
}

/** fingerprint.ts's epochRank. */
function epochRank(l: PackedLayout, w: Float64Array, r: number, epoch: number): number {
  const g = l.ghostBase + r * GHOST_STRIDE;
  const last = w[g + G_PRESENT] === 1 ? w[g + G_LAST_ACCEPTED]! : 0;
  let rank = last < epoch ? 1 : 0;
  for (let i = 0; i < l.clients; i++) {
    const lease = leaseAt(l, i, r);
    const has = w[lease + L_PRESENT] === 1;
    const le = w[lease + L_EPOCH]!;
    const c = clientAt(l, i);
    if (has && le < epoch && le !== last && !heldBefore(l, w, r, le, i)) rank++;
    if (w[c + C_PENDING] === 1 && w[c + C_PENDING_RESOURCE] === r) {
      const pe = w[c + C_PENDING_EPOCH]!;
      if (pe < epoch && pe !== last && (!has || pe !== le) && !heldBefore(l, w, r, pe, i)) rank++;
    }
  }
  return rank;
}

function hashKeys(ctx: PackedContext, w: Float64Array, keys: number, expiry: number, perm: readonly number[]): void {
  const l = ctx.layout;
  const rs = l.resources;
  const now = w[0]!;
  const dead = ctx.exactExpiry ? Number.NEGATIVE_INFINITY : -1 - ctx.toleranceMs;
  let n = 0;
  let live = 0;
  for (let r = 0; r < rs.length; r++) {
    const k = keys + r * KEY_STRIDE;
    if (w[k + K_PRESENT] !== 1) continue;
    n++;
    const e = w[k + K_EXPIRES]!;
    if (!(ctx.deadKeysGone && !Number.isNaN(e) && e - expiry <= dead)) live++;
  }
  word(ctx.deadKeysGone ? live : n);
  for (let r = 0; r < rs.length; r++) {
    const k = keys + r * KEY_STRIDE;
    if (w[k + K_PRESENT] !== 1) continue;
    const e = w[k + K_EXPIRES]!;
    const remaining = Number.isNaN(e) ? SESSION : Math.max(dead, e - expiry);
    if (ctx.deadKeysGone && remaining === dead) continue;
    name(ctx.resourceHi[r]!, ctx.resourceLo[r]!);
    num(remaining);
    const ttl = w[k + K_TTL]!;
    num(Number.isNaN(ttl) ? 0 : Math.min(now - w[k + K_LIVE_SINCE]!, boundOf(ctx, ttl) + 1));
    const owner = w[k + K_CLIENT]!;
    // perm may hold entries past layout.clients (kept from a layout with more clients): an owner outside reads none.
    const placed = owner >= 0 && owner < l.clients ? perm[owner] : undefined;
    if (placed !== undefined) permRead = true;
    word(placed ?? -1);
    // ownerClass: relative to the client's attempts while it has an operation in flight.
    let ownerClass = STALE;
    if (owner >= 0 && owner < l.clients && Number.isInteger(owner)) {
      const c = clientAt(l, owner);
      const lease = leaseAt(l, owner, r);
      if (w[c + l.flightAt + F_KIND] !== 0) ownerClass = w[c + C_ATTEMPTS]! - w[k + K_ATTEMPT]!;
      else if (w[lease + L_PRESENT] === 1 && w[lease + 1] === w[k + K_ATTEMPT]) ownerClass = 0;
    }
    num(ownerClass);
    num(Number.isNaN(ttl) ? NONE : ttl);
    num(w[k + K_COUNT]!);
  }
}

function hashCounters(ctx: PackedContext, w: Float64Array, counters: number): void {
  const cs = ctx.layout.counters;
  let n = 0;
  for (let i = 0; i < cs.length; i++) if (w[counters + i * COUNTER_STRIDE] === 1) n++;
  word(n);
  for (let i = 0; i < cs.length; i++) {
    const o = counters + i * COUNTER_STRIDE;
    if (w[o] !== 1) continue;
    name(ctx.counterHi[i]!, ctx.counterLo[i]!);
    bigSafe(w[o + 1]!);
  }
}

function hashNode(ctx: PackedContext, w: Float64Array, index: number, perm: readonly number[]): void {
  const l = ctx.layout;
  const now = w[0]!;
  const at = nodeAt(l, index);
  const expiry = expiryAt(ctx, w, at, now);
  word(w[at + N_UP]!);
  num(Math.max(0, w[at + N_AVAILABLE]! - now));
  num(readAt(w, at + N_WALL_ANCHOR, now) - now);
  num(w[at + N_WALL_DRIFT]!);
  num(readAt(w, at + N_MONO_ANCHOR, now) - now);
  num(w[at + N_MONO_DRIFT]!);
  hashKeys(ctx, w, at + N_KEYS, expiry, perm);
  hashCounters(ctx, w, countersAt(l, at + N_KEYS));
  if (w[at + N_HAS_REPLICA] === 1) {
    const replica = replicaAt(l, at);
    hashKeys(ctx, w, replica, expiry, perm);
    hashCounters(ctx, w, countersAt(l, replica));
  }
  const delay = w[at + N_DELAY_KIND]!;
  if (delay !== 0) num(delay === 2 ? NONE : w[at + N_DELAY_MS]!);
  const bits = w[at + N_CUT]!;
  if (bits !== 0) permRead = true;
  let cut = 0;
  for (let c = 0; c < l.clients; c++) if ((bits >>> c) & 1) cut |= 1 << perm[c]!;
  word(cut);
}

// The outcomes pause records for an extension refused at its send, as fingerprint.ts hashes them (str of outcomeKey).
const NOT_HELD = nameWords(JSON.stringify({ kind: 'not-extended', reason: 'not-held' }));
const EXPIRED = nameWords(JSON.stringify({ kind: 'not-extended', reason: 'expired' }));

/** fingerprint.ts's hashFlight of the in-flight block at `f` (a client with an operation in flight): words, no string. */
function hashFlight(ctx: PackedContext, w: Float64Array, f: number, now: number, mono: number): void {
  const l = ctx.layout;
  const kind = w[f + F_KIND]!;
  if (kind === F_NOT_HELD || kind === F_EXPIRED) {
    const outcome = kind === F_NOT_HELD ? NOT_HELD : EXPIRED;
    word(FLIGHT_REPLY);
    name(outcome[0], outcome[1]);
    num(w[f + F_DEADLINE]! - now);
    return;
  }
  const r = w[f + F_RESOURCE]!;
  word(FLIGHT_EXTEND);
  name(ctx.resourceHi[r]!, ctx.resourceLo[r]!);
  num(w[f + F_TTL]!);
  num(w[f + F_STARTED_MONO]! - mono);
  num(w[f + F_DEADLINE]! - now);
  word(l.nodes);
  let votes = 0;
  for (let i = 0; i < l.nodes; i++) {
    const o = f + F_NODES + i * FLIGHT_NODE_STRIDE;
    const a = w[o]!;
    if (a === FAILED) word(ARRIVAL_FAILED);
    else if (a === NEVER) word(ARRIVAL_NEVER);
    else {
      word(1);
      num(w[o + 1]! - now);
    }
    if (w[o + 2] === 1) votes |= 1 << i;
  }
  word(votes);
}

function hashClient(ctx: PackedContext, w: Float64Array, i: number): void {
  const l = ctx.layout;
  const now = w[0]!;
  const at = clientAt(l, i);
  const mono = readAt(w, at + C_MONO_ANCHOR, now);
  num(mono - now);
  num(w[at + C_MONO_DRIFT]!);
  word(w[at + C_PAUSED]! | (w[at + C_SESSION_LOST]! << 1));
  if (w[at + C_PENDING] !== 1) word(NONE);
  else {
    const r = w[at + C_PENDING_RESOURCE]!;
    name(ctx.resourceHi[r]!, ctx.resourceLo[r]!);
    bigSafe(w[at + C_PENDING_TOKEN]!);
    num(epochRank(l, w, r, w[at + C_PENDING_EPOCH]!));
  }
  const flight = at + l.flightAt;
  const inFlight = w[flight + F_KIND] !== 0;
  if (!inFlight) word(NONE);
  else hashFlight(ctx, w, flight, now, mono);
  let n = 0;
  for (let r = 0; r < l.resources.length; r++) if (w[leaseAt(l, i, r) + L_PRESENT] === 1) n++;
  word(n);
  for (let r = 0; r < l.resources.length; r++) {
    const o = leaseAt(l, i, r);
    if (w[o + L_PRESENT] !== 1) continue;
    name(ctx.resourceHi[r]!, ctx.resourceLo[r]!);
    num(inFlight ? w[at + C_ATTEMPTS]! - w[o + L_ATTEMPT]! : 0);
    bigSafe(w[o + L_TOKEN]!);
    const valid = w[o + L_VALID_UNTIL]!;
    num(Number.isNaN(valid) ? SESSION : Math.max(-1, valid - mono));
    num(w[o + L_COUNT]!);
    num(w[o + L_BUFFERED]!);
    num(epochRank(l, w, r, w[o + L_EPOCH]!));
  }
}

const nodeHi: number[] = [];
const nodeLo: number[] = [];
const nodeOrder: number[] = [];
/** Per node: whether its hash read the client permutation (a key's owner, a cut-off client), in the last hashUnder. */
const nodeReadsPerm: boolean[] = [];
/** Per node: the first node whose block equals its own (itself if none before it), in the last hashUnder on this state. */
const nodeFirst: number[] = [];
const clientHi: number[] = [];
const clientLo: number[] = [];
/** Set by hashNode when what it hashes depends on the permutation it is given. */
let permRead = false;

/**
 * Whether the blocks of `size` words at `a` and `b` hold the same numbers (NaN equal to NaN): then their nodes hash alike,
 * as a node's hash reads only its own block, `now`, the permutation and the clients (the same state).
 */
export function sameBlock(w: Float64Array, a: number, b: number, size: number): boolean {
  // The keys first: the nodes' headers (clocks, availability) mostly agree, their keys mostly not.
  for (let k = N_KEYS; k < size; k++) {
    const x = w[a + k]!;
    const y = w[b + k]!;
    if (x !== y && (x === x || y === y)) return false;
  }
  for (let k = 0; k < N_KEYS; k++) {
    const x = w[a + k]!;
    const y = w[b + k]!;
    if (x !== y && (x === x || y === y)) return false;
  }
  return true;
}

/**
 * The fingerprint with client `inverse[j]` in place j. With `again`, the nodes whose hashes did not read the permutation in
 * the call just before (on the same state) keep those hashes; a node whose block equals an earlier node's takes its hash.
 */
function hashUnder(ctx: PackedContext, w: Float64Array, perm: readonly number[], inverse: readonly number[], out: Fingerprint, again: boolean): void {
  const l = ctx.layout;
  const fixed = ctx.fixedNodes;
  for (let i = 0; i < l.nodes; i++) {
    if (!again || nodeReadsPerm[i]!) {
      const at = nodeAt(l, i);
      let j = 0;
      // Only the first node of each block seen is compared: a node equal to a later one of its class equals that first one.
      for (; j < i; j++) if (nodeFirst[j] === j && sameBlock(w, nodeAt(l, j), at, l.nodeStride)) break;
      if (j < i) {
        nodeHi[i] = nodeHi[j]!;
        nodeLo[i] = nodeLo[j]!;
        nodeReadsPerm[i] = nodeReadsPerm[j]!;
        nodeFirst[i] = j;
      } else {
        permRead = false;
        start(0x1234567, 0x7654321);
        hashNode(ctx, w, i, perm);
        nodeHi[i] = finishHi();
        nodeLo[i] = finishLo();
        nodeReadsPerm[i] = permRead;
        nodeFirst[i] = i;
      }
    }
    orderByHash(nodeHi, nodeLo, nodeOrder, i, fixed);
  }
  start(0x2545f491, 0x6c8e9cf5);
  wordsInOrder(nodeHi, nodeLo, nodeOrder, l.nodes);
  wordsInOrder(clientHi, clientLo, inverse, l.clients);
  const rs = l.resources;
  let cells = 0;
  for (let r = 0; r < rs.length; r++) if (w[l.cellBase + r * CELL_STRIDE] === 1) cells++;
  word(cells);
  for (let r = 0; r < rs.length; r++) {
    const o = l.cellBase + r * CELL_STRIDE;
    if (w[o] !== 1) continue;
    name(ctx.resourceHi[r]!, ctx.resourceLo[r]!);
    bigSafe(w[o + 1]!);
    bigSafe(w[o + 2]!);
  }
  let ghosts = 0;
  for (let r = 0; r < rs.length; r++) if (w[l.ghostBase + r * GHOST_STRIDE + G_PRESENT] === 1) ghosts++;
  word(ghosts);
  for (let r = 0; r < rs.length; r++) {
    const o = l.ghostBase + r * GHOST_STRIDE;
    if (w[o + G_PRESENT] !== 1) continue;
    name(ctx.resourceHi[r]!, ctx.resourceLo[r]!);
    bigSafe(w[o + G_MAX_TOKEN]!);
    num(epochRank(l, w, r, w[o + G_LAST_ACCEPTED]!));
  }
  out.hi = finishHi();
  out.lo = finishLo();
}

const candidate: Fingerprint = { hi: 0, lo: 0 };

function anyReadsPerm(nodes: number): boolean {
  for (let i = 0; i < nodes; i++) if (nodeReadsPerm[i]!) return true;
  return false;
}

function allAlike(n: number): boolean {
  for (let i = 1; i < n; i++) if (clientHi[i] !== clientHi[0] || clientLo[i] !== clientLo[0]) return false;
  return true;
}
const clientOrder: number[] = [];
const clientPerm: number[] = [];

/** Writes the fingerprint of the packed state `w` to `out`: fingerprint() of the World it packs, computed from the numbers. */
export function packedFingerprint(ctx: PackedContext, w: Float64Array, out: Fingerprint): void {
  const n = ctx.layout.clients;
  for (let i = 0; i < n; i++) {
    start(0x3c6ef372, 0x510e527f);
    hashClient(ctx, w, i);
    clientHi[i] = finishHi();
    clientLo[i] = finishLo();
    clientOrder[i] = i;
  }
  // The orders and permutations are read to layout.clients only (setting an array's length is a runtime call).
  if (!ctx.clientSymmetry || n > MAX_PERMUTED_CLIENTS) {
    hashUnder(ctx, w, clientOrder, clientOrder, out, false);
    return;
  }
  let tie = false;
  for (let i = 1; i < n; i++) {
    const x = clientOrder[i]!;
    let j = i;
    for (; j > 0; j--) {
      const y = clientOrder[j - 1]!;
      const d = clientHi[y]! - clientHi[x]! || clientLo[y]! - clientLo[x]!;
      if (d === 0) tie = true;
      if (d <= 0) break;
      clientOrder[j] = y;
    }
    clientOrder[j] = x;
  }
  if (!tie) {
    for (let j = 0; j < n; j++) clientPerm[clientOrder[j]!] = j;
    hashUnder(ctx, w, clientPerm, clientOrder, out, false);
    return;
  }
  const perms = permutationsOf(n);
  hashUnder(ctx, w, perms[0]![0], perms[0]![1], out, false);
  // Every client hashing alike and no node reading the permutation: every permutation hashes the same words.
  if (!anyReadsPerm(ctx.layout.nodes) && allAlike(n)) return;
  for (let p = 1; p < perms.length; p++) {
    hashUnder(ctx, w, perms[p]![0], perms[p]![1], candidate, true);
    if (candidate.hi < out.hi || (candidate.hi === out.hi && candidate.lo < out.lo)) {
      out.hi = candidate.hi;
      out.lo = candidate.lo;
    }
  }
}
