import type { Command } from './command.ts';
import { isSessionBound } from './design.ts';
import type { InFlight, NodeKey, NodeState, World } from './state.ts';
import { ARRIVES, FAILED, NEVER } from './packedRound.ts';

/**
 * A world as the explorer's packed engine holds it: one Float64Array of
 * small numbers (every field the fingerprint or a packed step reads), laid
 * out by a PackedLayout fixed per exploration. Absolute times, as in the
 * World, so a packed step and the reference step give the same numbers;
 * the fingerprint makes them relative to now. Null is NaN. Fields the
 * fingerprint never reads (written values, the store's values) are left
 * out: a packed state is hashed, never turned back into a World (the
 * explorer takes the World of a fresh state from the reference step).
 *
 * Only some worlds pack (packable): a design whose locks are not
 * session-bound, no client with an operation in flight other than an
 * extension (its round, or its refusal at the send), every token a safe
 * integer, every resource and counter one the layout names.
 */
export interface PackedLayout {
  readonly nodes: number;
  readonly clients: number;
  /** Resource names, sorted as the fingerprint sorts record keys. */
  readonly resources: readonly string[];
  /** Counter keys (resources, or etcd's '#revision'), sorted. */
  readonly counters: readonly string[];
  readonly nodeStride: number;
  readonly clientStride: number;
  /** Where a client's in-flight block starts in its block (after its leases). */
  readonly flightAt: number;
  readonly nodeBase: number;
  readonly clientBase: number;
  readonly cellBase: number;
  readonly ghostBase: number;
  readonly size: number;
}

// Offsets in a node's block.
export const N_UP = 0;
export const N_AVAILABLE = 1;
export const N_WALL_ANCHOR = 2;
export const N_WALL_READING = 3;
export const N_WALL_DRIFT = 4;
export const N_MONO_ANCHOR = 5;
export const N_MONO_READING = 6;
export const N_MONO_DRIFT = 7;
/** 0: no delay, 1: N_DELAY_MS late, 2: a black hole. */
export const N_DELAY_KIND = 8;
export const N_DELAY_MS = 9;
/** Bit c: client c is cut off from this node. */
export const N_CUT = 10;
export const N_HAS_REPLICA = 11;
export const N_KEYS = 12;

// Offsets in a key's block (one per resource, in a node's keys or its replica's).
export const K_PRESENT = 0;
export const K_CLIENT = 1;
export const K_ATTEMPT = 2;
export const K_EXPIRES = 3;
export const K_TTL = 4;
export const K_COUNT = 5;
export const K_LIVE_SINCE = 6;
export const KEY_STRIDE = 7;

// A counter: present, value.
export const COUNTER_STRIDE = 2;

// Offsets in a client's block.
export const C_MONO_ANCHOR = 0;
export const C_MONO_READING = 1;
export const C_MONO_DRIFT = 2;
export const C_PAUSED = 3;
export const C_SESSION_LOST = 4;
export const C_ATTEMPTS = 5;
export const C_PENDING = 6;
export const C_PENDING_RESOURCE = 7;
export const C_PENDING_TOKEN = 8;
export const C_PENDING_EPOCH = 9;
export const C_LEASES = 10;

// Offsets in a lease's block (one per resource).
export const L_PRESENT = 0;
export const L_ATTEMPT = 1;
export const L_TOKEN = 2;
export const L_VALID_UNTIL = 3;
export const L_COUNT = 4;
export const L_BUFFERED = 5;
export const L_EPOCH = 6;
export const LEASE_STRIDE = 7;

// Offsets in a client's in-flight block (an operation sent before its pause; model/state.ts InFlight).
/** 0: none; F_EXTEND: an extension's round; F_NOT_HELD, F_EXPIRED: an extension refused before sending (a 'reply'). */
export const F_KIND = 0;
export const F_RESOURCE = 1;
export const F_TTL = 2;
export const F_STARTED_MONO = 3;
/** The round's deadline (true ms); a reply's doneMs. */
export const F_DEADLINE = 4;
/** Per node i, at F_NODES + i * FLIGHT_NODE_STRIDE: its arrival's kind (packedRound's ARRIVES, FAILED, NEVER), time, and vote. */
export const F_NODES = 5;
export const FLIGHT_NODE_STRIDE = 3;
export const F_EXTEND = 1;
export const F_NOT_HELD = 2;
export const F_EXPIRED = 3;

// A store cell: present, token, highest. A ghost: present, grants, maxToken, lastAcceptedEpoch.
export const CELL_STRIDE = 3;
export const G_PRESENT = 0;
export const G_GRANTS = 1;
export const G_MAX_TOKEN = 2;
export const G_LAST_ACCEPTED = 3;
export const GHOST_STRIDE = 4;

/** The layout for an exploration of `alphabet` from `initial`, or null where its design does not pack (session-bound locks). */
export function layoutFor(initial: World, alphabet: readonly Command[]): PackedLayout | null {
  if (isSessionBound(initial.config.design)) return null;
  // Tokens are held as doubles: counters must stay well inside 2^53.
  if ((initial.config.tokenBase ?? 0n) > 2n ** 52n) return null;
  const names = new Set<string>();
  for (const c of alphabet) {
    if ('resource' in c) names.add(c.resource);
    if (c.kind === 'pause' && c.pendingWrite !== undefined) names.add(c.pendingWrite.resource);
    if (c.kind === 'pause' && c.inFlight !== undefined) names.add(c.inFlight.resource);
  }
  const resources = [...names].sort();
  const counters = [...new Set([...resources, '#revision'])].sort();
  const keysSize = resources.length * KEY_STRIDE + counters.length * COUNTER_STRIDE;
  const nodeStride = N_KEYS + 2 * keysSize;
  const flightAt = C_LEASES + resources.length * LEASE_STRIDE;
  const clientStride = flightAt + F_NODES + initial.nodes.length * FLIGHT_NODE_STRIDE;
  const nodeBase = 1;
  const clientBase = nodeBase + initial.nodes.length * nodeStride;
  const cellBase = clientBase + initial.clients.length * clientStride;
  const ghostBase = cellBase + resources.length * CELL_STRIDE;
  return {
    nodes: initial.nodes.length,
    clients: initial.clients.length,
    resources,
    counters,
    nodeStride,
    clientStride,
    flightAt,
    nodeBase,
    clientBase,
    cellBase,
    ghostBase,
    size: ghostBase + resources.length * GHOST_STRIDE,
  };
}

/** Where node `i`'s block starts. */
export function nodeAt(layout: PackedLayout, i: number): number {
  return layout.nodeBase + i * layout.nodeStride;
}

/** Where the counters of a keys block (a node's, at `keys`) start. */
export function countersAt(layout: PackedLayout, keys: number): number {
  return keys + layout.resources.length * KEY_STRIDE;
}

/** Where a node's replica's keys block starts. */
export function replicaAt(layout: PackedLayout, node: number): number {
  return node + N_KEYS + layout.resources.length * KEY_STRIDE + layout.counters.length * COUNTER_STRIDE;
}

export function clientAt(layout: PackedLayout, c: number): number {
  return layout.clientBase + c * layout.clientStride;
}

/** Where client `client`'s lease of resource `r` starts. */
export function leaseAt(layout: PackedLayout, client: number, r: number): number {
  return clientAt(layout, client) + C_LEASES + r * LEASE_STRIDE;
}

const linkCache = new Map<string, readonly [number, number]>();
function parseLink(l: string): readonly [number, number] {
  let parsed = linkCache.get(l);
  if (parsed === undefined) {
    const at = l.indexOf(':');
    parsed = [Number(l.slice(0, at)), Number(l.slice(at + 1))];
    linkCache.set(l, parsed);
  }
  return parsed;
}

function safe(t: bigint | null): number {
  if (t === null) return Number.NaN;
  const n = Number(t);
  return Number.isSafeInteger(n) ? n : Number.POSITIVE_INFINITY;
}

function orNaN(n: number | null): number {
  return n === null ? Number.NaN : n;
}

/** Writes a node's keys and counters at `at`; false if one is not in the layout or a counter is not a safe integer. */
function encodeKeys(layout: PackedLayout, keys: Readonly<Record<string, NodeKey>>, counters: Readonly<Record<string, bigint>>, out: Float64Array, at: number): boolean {
  const rs = layout.resources;
  let seen = 0;
  for (let r = 0; r < rs.length; r++) {
    const o = at + r * KEY_STRIDE;
    const k = Object.hasOwn(keys, rs[r]!) ? keys[rs[r]!] : undefined;
    if (k === undefined) {
      out.fill(0, o, o + KEY_STRIDE);
      continue;
    }
    seen++;
    out[o + K_PRESENT] = 1;
    out[o + K_CLIENT] = k.owner.client;
    out[o + K_ATTEMPT] = k.owner.attempt;
    out[o + K_EXPIRES] = orNaN(k.expiresAtMs);
    out[o + K_TTL] = orNaN(k.ttlMs);
    out[o + K_COUNT] = k.count;
    out[o + K_LIVE_SINCE] = k.liveSinceTrueMs;
  }
  for (const _k in keys) seen--;
  if (seen !== 0) return false;
  const cs = layout.counters;
  const ca = countersAt(layout, at);
  let counted = 0;
  for (let i = 0; i < cs.length; i++) {
    const v = Object.hasOwn(counters, cs[i]!) ? counters[cs[i]!] : undefined;
    const o = ca + i * COUNTER_STRIDE;
    if (v === undefined) {
      out[o] = 0;
      out[o + 1] = 0;
      continue;
    }
    counted++;
    const n = safe(v);
    if (n === Number.POSITIVE_INFINITY) return false;
    out[o] = 1;
    out[o + 1] = n;
  }
  for (const _c in counters) counted--;
  return counted === 0;
}

function encodeNode(layout: PackedLayout, n: NodeState, out: Float64Array, at: number): boolean {
  out[at + N_UP] = n.up ? 1 : 0;
  out[at + N_AVAILABLE] = n.availableFromTrueMs;
  out[at + N_WALL_ANCHOR] = n.wall.anchorTrueMs;
  out[at + N_WALL_READING] = n.wall.readingMs;
  out[at + N_WALL_DRIFT] = n.wall.driftPpm;
  out[at + N_MONO_ANCHOR] = n.mono.anchorTrueMs;
  out[at + N_MONO_READING] = n.mono.readingMs;
  out[at + N_MONO_DRIFT] = n.mono.driftPpm;
  out[at + N_DELAY_KIND] = n.delay === undefined ? 0 : n.delay === 'never' ? 2 : 1;
  out[at + N_DELAY_MS] = typeof n.delay === 'number' ? n.delay : 0;
  out[at + N_CUT] = 0;
  out[at + N_HAS_REPLICA] = n.replica === undefined ? 0 : 1;
  if (!encodeKeys(layout, n.keys, n.counters, out, at + N_KEYS)) return false;
  const replica = replicaAt(layout, at);
  if (n.replica === undefined) out.fill(0, replica, at + layout.nodeStride);
  else if (!encodeKeys(layout, n.replica.keys, n.replica.counters, out, replica)) return false;
  return true;
}

/** Writes a client's operation in flight at `at`: none, an extension's round, or an extension refused at its send; false for any other. */
function encodeFlight(layout: PackedLayout, f: InFlight | null, out: Float64Array, at: number): boolean {
  out.fill(0, at, at + F_NODES + layout.nodes * FLIGHT_NODE_STRIDE);
  if (f === null) return true;
  if (f.kind === 'reply') {
    const o = f.outcome;
    if (f.missed !== undefined || o.kind !== 'not-extended' || (o.reason !== 'not-held' && o.reason !== 'expired')) return false;
    // The exact outcome object pause makes (its JSON is hashed): no other field.
    if (Object.keys(o).length !== 2) return false;
    out[at + F_KIND] = o.reason === 'not-held' ? F_NOT_HELD : F_EXPIRED;
    out[at + F_DEADLINE] = f.doneMs;
    return true;
  }
  if (f.kind !== 'extend') return false;
  const r = layout.resources.indexOf(f.resource);
  if (r < 0 || f.arrivals.length !== layout.nodes || f.votes.length !== layout.nodes) return false;
  out[at + F_KIND] = F_EXTEND;
  out[at + F_RESOURCE] = r;
  out[at + F_TTL] = f.ttlMs;
  out[at + F_STARTED_MONO] = f.startedMono;
  out[at + F_DEADLINE] = f.deadlineMs;
  for (let i = 0; i < layout.nodes; i++) {
    const o = at + F_NODES + i * FLIGHT_NODE_STRIDE;
    const a = f.arrivals[i]!;
    out[o] = a === 'failed' ? FAILED : a === 'never' ? NEVER : ARRIVES;
    out[o + 1] = typeof a === 'number' ? a : 0;
    out[o + 2] = f.votes[i] ? 1 : 0;
  }
  return true;
}

/**
 * Packs `world` into `out` (layout.size numbers); false where it does not
 * pack (then `out` holds nothing meaningful and the reference step is used).
 */
export function encode(layout: PackedLayout, world: World, out: Float64Array): boolean {
  if (world.nodes.length !== layout.nodes || world.clients.length !== layout.clients) return false;
  out[0] = world.nowMs;
  for (let i = 0; i < layout.nodes; i++) if (!encodeNode(layout, world.nodes[i]!, out, nodeAt(layout, i))) return false;
  for (const l of world.partitions) {
    const [c, n] = parseLink(l);
    if (!(c >= 0 && c < layout.clients && c < 31 && n >= 0 && n < layout.nodes)) return false;
    out[nodeAt(layout, n) + N_CUT] = (out[nodeAt(layout, n) + N_CUT]! | (1 << c)) >>> 0;
  }
  const rs = layout.resources;
  for (let i = 0; i < layout.clients; i++) {
    const c = world.clients[i]!;
    const at = clientAt(layout, i);
    if (!encodeFlight(layout, c.inFlight, out, at + layout.flightAt)) return false;
    out[at + C_MONO_ANCHOR] = c.mono.anchorTrueMs;
    out[at + C_MONO_READING] = c.mono.readingMs;
    out[at + C_MONO_DRIFT] = c.mono.driftPpm;
    out[at + C_PAUSED] = c.paused ? 1 : 0;
    out[at + C_SESSION_LOST] = c.sessionLost ? 1 : 0;
    out[at + C_ATTEMPTS] = c.attempts;
    const p = c.pendingWrite;
    if (p === null) out.fill(0, at + C_PENDING, at + C_LEASES);
    else {
      const r = rs.indexOf(p.resource);
      const token = safe(p.token);
      if (r < 0 || token === Number.POSITIVE_INFINITY) return false;
      out[at + C_PENDING] = 1;
      out[at + C_PENDING_RESOURCE] = r;
      out[at + C_PENDING_TOKEN] = token;
      out[at + C_PENDING_EPOCH] = p.epoch;
    }
    let seen = 0;
    for (let r = 0; r < rs.length; r++) {
      const o = at + C_LEASES + r * LEASE_STRIDE;
      const l = Object.hasOwn(c.leases, rs[r]!) ? c.leases[rs[r]!] : undefined;
      if (l === undefined) {
        out.fill(0, o, o + LEASE_STRIDE);
        continue;
      }
      seen++;
      const token = safe(l.token);
      if (token === Number.POSITIVE_INFINITY) return false;
      out[o + L_PRESENT] = 1;
      out[o + L_ATTEMPT] = l.owner.attempt;
      out[o + L_TOKEN] = token;
      out[o + L_VALID_UNTIL] = orNaN(l.validUntilMs);
      out[o + L_COUNT] = l.count;
      out[o + L_BUFFERED] = l.buffered.length;
      out[o + L_EPOCH] = l.epoch;
    }
    for (const _r in c.leases) seen--;
    if (seen !== 0) return false;
  }
  let cells = 0;
  let ghosts = 0;
  for (let r = 0; r < rs.length; r++) {
    const cell = Object.hasOwn(world.store.cells, rs[r]!) ? world.store.cells[rs[r]!] : undefined;
    const o = layout.cellBase + r * CELL_STRIDE;
    if (cell === undefined) out.fill(0, o, o + CELL_STRIDE);
    else {
      cells++;
      const token = safe(cell.token);
      const highest = safe(cell.highest);
      if (token === Number.POSITIVE_INFINITY || highest === Number.POSITIVE_INFINITY) return false;
      out[o] = 1;
      out[o + 1] = token;
      out[o + 2] = highest;
    }
    const g = Object.hasOwn(world.ghost, rs[r]!) ? world.ghost[rs[r]!] : undefined;
    const go = layout.ghostBase + r * GHOST_STRIDE;
    if (g === undefined) out.fill(0, go, go + GHOST_STRIDE);
    else {
      ghosts++;
      const max = safe(g.maxToken);
      if (max === Number.POSITIVE_INFINITY) return false;
      out[go + G_PRESENT] = 1;
      out[go + G_GRANTS] = g.grants;
      out[go + G_MAX_TOKEN] = max;
      out[go + G_LAST_ACCEPTED] = g.lastAcceptedEpoch;
    }
  }
  for (const _r in world.store.cells) cells--;
  for (const _r in world.ghost) ghosts--;
  return cells === 0 && ghosts === 0;
}
