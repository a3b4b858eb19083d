import { read } from './clock.ts';
import { expiryNow } from './node.ts';
import { driftFactor } from './design.ts';
import { liveBoundMs } from './properties.ts';
import type { ClientState, InFlight, NodeKey, NodeState, Owner, World } from './state.ts';
import { NO_GHOST } from './state.ts';
import { inFlightKey, outcomeKey } from './state.ts';
import { entryOf } from './record.ts';
import { big, finishHi, finishLo, num, orderByHash, start, str, word, wordsInOrder } from './fingerprintHash.ts';

/**
 * A 64-bit fingerprint of a state's orbit: equal for two states that no
 * future behaviour can tell apart (the fields of canonicalKey, without
 * building a string, less what no step or property reads: ageClass,
 * ownerClass, epochRank, and dead keys where deadKeysGone; spec 8.4,
 * "Abstractions"), up to these symmetries (spec 8.4):
 * - a shift of true time (times relative to now, expired deadlines collapsed);
 * - a permutation of the lock-service nodes other than the first
 *   `fixedNodes` (default 1: node 0, the node clock and crash alphabets
 *   single out; 0 where the alphabet treats every node alike); each node is
 *   hashed alone, then the hashes of the permuted ones are sorted;
 * - a permutation of the clients (for up to MAX_PERMUTED_CLIENTS clients);
 * - the values written: no guard and no property reads a value, only its
 *   token, so states that differ only in values behave alike (data
 *   independence); only the number of buffered writes is kept.
 * The result is two 32-bit hashes (hi, lo) written to `out`.
 */
export const MAX_PERMUTED_CLIENTS = 3;

export interface Fingerprint {
  hi: number;
  lo: number;
}

/**
 * Writes the keys of record `o` into `into`, sorted, and returns how many:
 * no array is made per call (this runs for every record of every state
 * fingerprinted; records here hold one or two keys).
 */
function keysInto(o: object, into: string[]): number {
  let n = 0;
  for (const k in o) {
    let j = n++;
    for (; j > 0 && into[j - 1]! > k; j--) into[j] = into[j - 1]!;
    into[j] = k;
  }
  return n;
}
// One scratch array per kind of record, so that no use overwrites another's.
const keyNames: string[] = [];
const counterNames: string[] = [];
const leaseNames: string[] = [];
const cellNames: string[] = [];
const ghostNames: string[] = [];

export const SESSION = -0x5e55;
export const STALE = -0x57a1e;
export const NONE = -0x404e;
/** The first word of an in-flight extension, or of a reply a client is still to read (no missed end): hashed as words. */
export const FLIGHT_EXTEND = -0xf1e7;
export const FLIGHT_REPLY = -0xf11e;
/** An arrival that is not a time: the request failed, or its reply never comes. */
export const ARRIVAL_FAILED = -0xfa11;
export const ARRIVAL_NEVER = -0x4e7e;

/**
 * An operation in flight, its times relative to now and the client's clock. The kinds the packed engine holds (an
 * extension, a reply) as words, the same the packed fingerprint mixes with no string built; the others as their
 * inFlightKey.
 */
function hashFlight(f: InFlight, now: number, mono: number): void {
  if (f.kind === 'extend') {
    word(FLIGHT_EXTEND);
    str(f.resource);
    num(f.ttlMs);
    num(f.startedMono - mono);
    num(f.deadlineMs - now);
    word(f.arrivals.length);
    let votes = 0;
    for (let i = 0; i < f.arrivals.length; i++) {
      const a = f.arrivals[i]!;
      if (a === 'failed') word(ARRIVAL_FAILED);
      else if (a === 'never') word(ARRIVAL_NEVER);
      else {
        word(1);
        num(a - now);
      }
      if (f.votes[i] === true) votes |= 1 << i;
    }
    word(votes);
  } else if (f.kind === 'reply' && f.missed === undefined) {
    word(FLIGHT_REPLY);
    str(outcomeKey(f.outcome));
    num(f.doneMs - now);
  } else str(inFlightKey(f, now, mono));
}

/** Partition links "client:node", parsed once per distinct string. */
const links = new Map<string, readonly [number, number]>();
function link(l: string): readonly [number, number] {
  let parsed = links.get(l);
  if (parsed === undefined) {
    const [c, n] = l.split(':');
    parsed = [Number(c), Number(n)];
    links.set(l, parsed);
  }
  return parsed;
}

/**
 * A key's age (true time since its last grant, extension or refresh) as far
 * as LIVE-1 can ever tell: the property reads it only as "age > bound", and
 * ages only grow until the key is set anew, so every age past the bound is
 * one (spec 8.4, "Abstractions"). A session key's age is never read.
 */
export function ageClass(world: World, k: NodeKey): number {
  if (k.ttlMs === null) return 0;
  return Math.min(world.nowMs - k.liveSinceTrueMs, boundOf(world, k.ttlMs) + 1);
}

// The last bound computed and what it was computed from: one ttl and one configuration per exploration.
let boundConfig: World['config'] | null = null;
let boundTtl = 0;
let bound = 0;
function boundOf(world: World, ttlMs: number): number {
  if (world.config !== boundConfig || ttlMs !== boundTtl) {
    bound = liveBoundMs(ttlMs, driftFactor(world.config.design), world.config.expiryToleranceMs ?? 0);
    boundConfig = world.config;
    boundTtl = ttlMs;
  }
  return bound;
}

/**
 * A key's owner attempt as far as any step can tell: the model compares it
 * only for equality with the owner of that client's lease on the resource
 * (release, extend, OWN-1, a closed session's orphans) or of its acquire in
 * flight, and a new attempt is always fresh. So without an acquire in
 * flight, the attempt is "the lease's" or "stale", whatever its number
 * (spec 8.4, "Abstractions"); with one, it is kept relative as before.
 */
export function ownerClass(world: World, owner: Owner, resource: string): number {
  const c = world.clients[owner.client];
  if (c === undefined) return STALE;
  if (c.inFlight !== null) return c.attempts - owner.attempt;
  return entryOf(c.leases, resource)?.owner.attempt === owner.attempt ? 0 : STALE;
}

/**
 * An epoch (a grant's place in the true order of grants of its resource) as
 * its rank among the epochs the state still holds for that resource: the
 * leases', the pending writes' and the last accepted write's. Epochs are
 * only compared (STORE-1: below the last accepted), and a new grant's is
 * above all of them, so any order-preserving renumbering behaves alike
 * (spec 8.4, "Abstractions").
 */
export function epochRank(world: World, resource: string, epoch: number): number {
  const last = (entryOf(world.ghost, resource) ?? NO_GHOST).lastAcceptedEpoch;
  // Distinct values below `epoch`: at most 2 per client and one more, so a scan, no set.
  let rank = last < epoch ? 1 : 0;
  const clients = world.clients;
  for (let i = 0; i < clients.length; i++) {
    const c = clients[i]!;
    const l = entryOf(c.leases, resource);
    const p = c.pendingWrite;
    if (l !== undefined && l.epoch < epoch && l.epoch !== last && !heldBefore(world, resource, l.epoch, i)) rank++;
    if (p !== null && p.resource === resource && p.epoch < epoch && p.epoch !== last && p.epoch !== l?.epoch && !heldBefore(world, resource, p.epoch, i)) rank++;
  }
  return rank;
}

/** Whether a client before `upTo` holds `epoch` for the resource (in a lease or a pending write): each value is counted once. */
function heldBefore(world: World, resource: string, epoch: number, upTo: number): boolean {
  for (let j = 0; j < upTo; j++) {
    const c = world.clients[j]!;
    if (entryOf(c.leases, resource)?.epoch === epoch) return true;
    if (c.pendingWrite !== null && c.pendingWrite.resource === resource && c.pendingWrite.epoch === epoch) return true;
  }
  return false;
}

/** Whether dead keys are hashed as absent (FingerprintOptions.deadKeysGone), for the fingerprint being computed. */
let deadGone = false;
/** Whether expired keys keep their exact expiry (FingerprintOptions.exactExpiry). */
let exactExpiry = false;

function hashKeys(world: World, keys: NodeState['keys'], expiry: number, perm: readonly number[]): void {
  const n = keysInto(keys, keyNames);
  // A node clock stepped back revives an expired key only if it expired less than the step ago: then expiries stay exact.
  const dead = exactExpiry ? Number.NEGATIVE_INFINITY : -1 - (world.config.expiryToleranceMs ?? 0);
  let live = n;
  if (deadGone) for (let i = 0; i < n; i++) if (keys[keyNames[i]!]!.expiresAtMs !== null && keys[keyNames[i]!]!.expiresAtMs! - expiry <= dead) live--;
  word(live);
  for (let i = 0; i < n; i++) {
    const r = keyNames[i]!;
    const k = keys[r]!;
    const remaining = k.expiresAtMs === null ? SESSION : Math.max(dead, k.expiresAtMs - expiry);
    if (deadGone && remaining === dead) continue;
    str(r);
    num(remaining);
    num(ageClass(world, k));
    word(perm[k.owner.client] ?? -1);
    num(ownerClass(world, k.owner, r));
    num(k.ttlMs ?? NONE);
    num(k.count);
  }
}

function hashCounters(counters: NodeState['counters']): void {
  const n = keysInto(counters, counterNames);
  word(n);
  for (let i = 0; i < n; i++) {
    const c = counterNames[i]!;
    str(c);
    big(counters[c]!);
  }
}

function hashNode(world: World, n: NodeState, index: number, perm: readonly number[]): void {
  const now = world.nowMs;
  const design = world.config.design;
  const expiry = expiryNow(design, n, now);
  word(n.up ? 1 : 0);
  num(Math.max(0, n.availableFromTrueMs - now));
  num(read(n.wall, now) - now);
  num(n.wall.driftPpm);
  num(read(n.mono, now) - now);
  num(n.mono.driftPpm);
  hashKeys(world, n.keys, expiry, perm);
  hashCounters(n.counters);
  // A replica's copy (redis-replicated): what a failover would promote. Only designs with a replica have one, so others hash as before.
  if (n.replica !== undefined) {
    hashKeys(world, n.replica.keys, expiry, perm);
    hashCounters(n.replica.counters);
  }
  // A slow or black-holed node (never set by the exploration's alphabets); nodes without one hash as before.
  if (n.delay !== undefined) num(n.delay === 'never' ? NONE : n.delay);
  // The clients cut off from this node, as a bit set of their permuted indices.
  let cut = 0;
  for (const l of world.partitions) {
    const [c, node] = link(l);
    if (node === index) cut |= 1 << (perm[c] ?? 31);
  }
  word(cut);
}

function hashClient(world: World, c: ClientState): void {
  const now = world.nowMs;
  const mono = read(c.mono, now);
  num(mono - now);
  num(c.mono.driftPpm);
  word((c.paused ? 1 : 0) | (c.sessionLost ? 2 : 0));
  const p = c.pendingWrite;
  if (p === null) word(NONE);
  else {
    str(p.resource);
    big(p.token);
    num(epochRank(world, p.resource, p.epoch));
  }
  // Never set by the exploration's alphabets (no operation in flight); hashed whole when it is.
  if (c.inFlight === null) word(NONE);
  else hashFlight(c.inFlight, now, mono);
  const n = keysInto(c.leases, leaseNames);
  word(n);
  for (let i = 0; i < n; i++) {
    const r = leaseNames[i]!;
    const l = c.leases[r]!;
    str(r);
    // The lease's attempt matters only as the keys' owner class says it (ownerClass), unless an acquire is in flight.
    num(c.inFlight === null ? 0 : c.attempts - l.owner.attempt);
    big(l.token);
    num(l.validUntilMs === null ? SESSION : Math.max(-1, l.validUntilMs - mono));
    num(l.count);
    num(l.buffered.length);
    num(epochRank(world, r, l.epoch));
  }
}

const nodeHi: number[] = [];
const nodeLo: number[] = [];
const nodeOrder: number[] = [];
const clientHi: number[] = [];
const clientLo: number[] = [];

function byHash(hi: readonly number[], lo: readonly number[]): (a: number, b: number) => number {
  return (a, b) => hi[a]! - hi[b]! || lo[a]! - lo[b]!;
}
const byClientHash = byHash(clientHi, clientLo);

/** The fingerprint with client `inverse[j]` in place j (perm is inverse's inverse). Client hashes must be in clientHi/clientLo. */
function hashUnder(world: World, perm: readonly number[], inverse: readonly number[], fixedNodes: number, out: Fingerprint): void {
  const nodes = world.nodes;
  for (let i = 0; i < nodes.length; i++) {
    start(0x1234567, 0x7654321);
    hashNode(world, nodes[i]!, i, perm);
    const hi = finishHi();
    const lo = finishLo();
    nodeHi[i] = hi;
    nodeLo[i] = lo;
    // Nodes past the fixed ones are interchangeable.
    orderByHash(nodeHi, nodeLo, nodeOrder, i, fixedNodes);
  }
  start(0x2545f491, 0x6c8e9cf5);
  // Where node 0 is fixed this hashes as before the full node symmetry (the fingerprints, not the verdicts, would change otherwise).
  wordsInOrder(nodeHi, nodeLo, nodeOrder, nodes.length);
  wordsInOrder(clientHi, clientLo, inverse, inverse.length);
  const cells = keysInto(world.store.cells, cellNames);
  word(cells);
  for (let i = 0; i < cells; i++) {
    const r = cellNames[i]!;
    const cell = world.store.cells[r]!;
    str(r);
    big(cell.token);
    big(cell.highest);
  }
  const ghosts = keysInto(world.ghost, ghostNames);
  word(ghosts);
  for (let i = 0; i < ghosts; i++) {
    const r = ghostNames[i]!;
    const g = world.ghost[r]!;
    str(r);
    // grants only numbers the next grant, above every epoch there is (epochRank): not hashed.
    big(g.maxToken);
    num(epochRank(world, r, g.lastAcceptedEpoch));
  }
  out.hi = finishHi();
  out.lo = finishLo();
}

/** Every permutation of 0..n-1, as [perm, inverse] pairs (perm[old] = new). */
function permutations(n: number): Array<readonly [number[], number[]]> {
  const out: Array<readonly [number[], number[]]> = [];
  const go = (prefix: number[], rest: number[]): void => {
    if (rest.length === 0) {
      const inverse = prefix;
      const perm: number[] = [];
      inverse.forEach((old, pos) => (perm[old] = pos));
      out.push([perm, inverse]);
      return;
    }
    rest.forEach((x, i) => go([...prefix, x], [...rest.slice(0, i), ...rest.slice(i + 1)]));
  };
  go([], Array.from({ length: n }, (_v, i) => i));
  return out;
}

const permsByClients = new Map<number, Array<readonly [number[], number[]]>>();

/** Every permutation of n clients as [perm, inverse] pairs, in the order the least fingerprint is searched (made once per n). */
export function permutationsOf(n: number): ReadonlyArray<readonly [number[], number[]]> {
  let perms = permsByClients.get(n);
  if (perms === undefined) {
    perms = permutations(n);
    permsByClients.set(n, perms);
  }
  return perms;
}

export interface FingerprintOptions {
  /** Identify states that differ by a permutation of the clients (default true). */
  readonly clientSymmetry?: boolean;
  /** How many leading nodes keep their place (default 1: node 0, which clock and crash faults single out); the rest are permuted. */
  readonly fixedNodes?: number;
  /**
   * Hash a key no node can see alive any more as no key (default false):
   * sound where no node's expiry clock can go back and a delete does not
   * move a token source (deadKeysStayDead; spec 8.4, "Abstractions").
   */
  readonly deadKeysGone?: boolean;
  /**
   * Keep how long ago each expired key expired (default false: all expired
   * keys alike). Needed where a node's expiry clock can step back: a step
   * back revives a key that expired less than the step ago.
   */
  readonly exactExpiry?: boolean;
}

const candidate: Fingerprint = { hi: 0, lo: 0 };
const clientOrder: number[] = [];
const clientPerm: number[] = [];

/**
 * Writes the fingerprint of `world`'s orbit to `out`. A client's own hash
 * does not depend on how the clients are numbered, so the clients are put in
 * the order of their hashes; only when two clients hash alike (the initial
 * state, say) are all permutations tried and the least fingerprint kept.
 * Either way the result is the same for every member of an orbit.
 */
export function fingerprint(world: World, out: Fingerprint, options: FingerprintOptions = {}): void {
  const n = world.clients.length;
  const fixed = options.fixedNodes ?? 1;
  deadGone = options.deadKeysGone === true;
  exactExpiry = options.exactExpiry === true;
  for (let i = 0; i < n; i++) {
    start(0x3c6ef372, 0x510e527f);
    hashClient(world, world.clients[i]!);
    clientHi[i] = finishHi();
    clientLo[i] = finishLo();
    clientOrder[i] = i;
  }
  clientOrder.length = n;
  if (options.clientSymmetry === false || n > MAX_PERMUTED_CLIENTS) {
    hashUnder(world, clientOrder, clientOrder, fixed, out);
    return;
  }
  // Insertion sort by hash (n <= MAX_PERMUTED_CLIENTS): no comparator closure, no allocation.
  let tie = false;
  for (let i = 1; i < n; i++) {
    const x = clientOrder[i]!;
    let j = i;
    for (; j > 0; j--) {
      const d = byClientHash(clientOrder[j - 1]!, x);
      if (d === 0) tie = true;
      if (d <= 0) break;
      clientOrder[j] = clientOrder[j - 1]!;
    }
    clientOrder[j] = x;
  }
  if (!tie) {
    for (let j = 0; j < n; j++) clientPerm[clientOrder[j]!] = j;
    clientPerm.length = n;
    hashUnder(world, clientPerm, clientOrder, fixed, out);
    return;
  }
  const perms = permutationsOf(n);
  hashUnder(world, perms[0]![0], perms[0]![1], fixed, out);
  for (let p = 1; p < perms.length; p++) {
    hashUnder(world, perms[p]![0], perms[p]![1], fixed, candidate);
    if (candidate.hi < out.hi || (candidate.hi === out.hi && candidate.lo < out.lo)) {
      out.hi = candidate.hi;
      out.lo = candidate.lo;
    }
  }
}
