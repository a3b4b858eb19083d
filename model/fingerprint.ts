import { read } from './clock.ts';
import { expiryNow } from './node.ts';
import type { ClientState, NodeState, World } from './state.ts';
import { inFlightKey } from './state.ts';

/**
 * A 64-bit fingerprint of a state's orbit: equal for two states that no
 * future behaviour can tell apart (the fields of canonicalKey, without
 * building a string), up to these symmetries (spec §8, "Symmetry"):
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

// Two murmur3-style lanes with different constants: together one 64-bit hash.
let h1 = 0;
let h2 = 0;

function word(k: number): void {
  let a = Math.imul(k, 0xcc9e2d51);
  a = (a << 15) | (a >>> 17);
  h1 ^= Math.imul(a, 0x1b873593);
  h1 = (h1 << 13) | (h1 >>> 19);
  h1 = (Math.imul(h1, 5) + 0xe6546b64) | 0;
  let b = Math.imul(k ^ 0x5bd1e995, 0x85ebca6b);
  b = (b << 17) | (b >>> 15);
  h2 ^= Math.imul(b, 0xc2b2ae35);
  h2 = (h2 << 11) | (h2 >>> 21);
  h2 = (Math.imul(h2, 9) + 0x7f4a7c15) | 0;
}

const WIDE = -0x80000000;

/** An integer up to 2^53 in magnitude: one word if it fits 32 bits, else a marker and two words. */
function num(n: number): void {
  if ((n | 0) === n && n !== WIDE) word(n);
  else {
    word(WIDE);
    word(n | 0);
    word(Math.floor(n / 4294967296) | 0);
  }
}

function big(t: bigint | null): void {
  if (t === null) {
    word(-7);
    return;
  }
  const n = Number(t);
  if (Number.isSafeInteger(n)) {
    word(1);
    num(n);
  } else {
    word(2);
    word(Number(BigInt.asIntN(32, t)));
    word(Number(BigInt.asIntN(32, t >> 32n)));
  }
}

function str(s: string): void {
  word(s.length);
  for (let i = 0; i < s.length; i++) word(s.charCodeAt(i));
}

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

function sortedKeys(o: object): string[] {
  const keys = Object.keys(o);
  return keys.length > 1 ? keys.sort() : keys;
}

const SESSION = -0x5e55;
const NONE = -0x404e;

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

function hashKeys(world: World, keys: NodeState['keys'], expiry: number, perm: readonly number[]): void {
  const now = world.nowMs;
  const names = sortedKeys(keys);
  word(names.length);
  for (const r of names) {
    const k = keys[r]!;
    str(r);
    num(k.expiresAtMs === null ? SESSION : Math.max(-1 - (world.config.expiryToleranceMs ?? 0), k.expiresAtMs - expiry));
    num(Math.min(now - k.liveSinceTrueMs, 4 * (k.ttlMs ?? 0) + 4));
    word(perm[k.owner.client] ?? -1);
    num((world.clients[k.owner.client]?.attempts ?? 0) - k.owner.attempt);
    num(k.ttlMs ?? NONE);
    num(k.count);
  }
}

function hashCounters(counters: NodeState['counters']): void {
  const names = sortedKeys(counters);
  word(names.length);
  for (const c of names) {
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
    num(p.epoch);
  }
  // Never set by the exploration's alphabets (no operation in flight); hashed whole when it is.
  if (c.inFlight === null) word(NONE);
  else str(inFlightKey(c.inFlight, now, mono));
  const leases = sortedKeys(c.leases);
  word(leases.length);
  for (const r of leases) {
    const l = c.leases[r]!;
    str(r);
    num(c.attempts - l.owner.attempt);
    big(l.token);
    num(l.validUntilMs === null ? SESSION : Math.max(-1, l.validUntilMs - mono));
    num(l.count);
    num(l.buffered.length);
    num(l.epoch);
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
    h1 = 0x1234567;
    h2 = 0x7654321;
    hashNode(world, nodes[i]!, i, perm);
    const hi = fmix(h1);
    const lo = fmix(h2);
    nodeHi[i] = hi;
    nodeLo[i] = lo;
    // Nodes past the fixed ones are interchangeable: insertion sort of their hashes (n <= 15, no allocation).
    let j = i;
    if (i >= fixedNodes) for (; j > fixedNodes && (nodeHi[nodeOrder[j - 1]!]! > hi || (nodeHi[nodeOrder[j - 1]!] === hi && nodeLo[nodeOrder[j - 1]!]! > lo)); j--) nodeOrder[j] = nodeOrder[j - 1]!;
    nodeOrder[j] = i;
  }
  h1 = 0x2545f491;
  h2 = 0x6c8e9cf5;
  word(nodes.length);
  // Where node 0 is fixed this hashes as before the full node symmetry (the fingerprints, not the verdicts, would change otherwise).
  for (let k = 0; k < nodes.length; k++) {
    word(nodeHi[nodeOrder[k]!]!);
    word(nodeLo[nodeOrder[k]!]!);
  }
  word(inverse.length);
  for (let j = 0; j < inverse.length; j++) {
    word(clientHi[inverse[j]!]!);
    word(clientLo[inverse[j]!]!);
  }
  const cells = sortedKeys(world.store.cells);
  word(cells.length);
  for (const r of cells) {
    const cell = world.store.cells[r]!;
    str(r);
    big(cell.token);
    big(cell.highest);
  }
  const ghosts = sortedKeys(world.ghost);
  word(ghosts.length);
  for (const r of ghosts) {
    const g = world.ghost[r]!;
    str(r);
    num(g.grants);
    big(g.maxToken);
    num(g.lastAcceptedEpoch);
  }
  out.hi = fmix(h1);
  out.lo = fmix(h2);
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

export interface FingerprintOptions {
  /** Identify states that differ by a permutation of the clients (default true). */
  readonly clientSymmetry?: boolean;
  /** How many leading nodes keep their place (default 1: node 0, which clock and crash faults single out); the rest are permuted. */
  readonly fixedNodes?: number;
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
  for (let i = 0; i < n; i++) {
    h1 = 0x3c6ef372;
    h2 = 0x510e527f;
    hashClient(world, world.clients[i]!);
    clientHi[i] = fmix(h1);
    clientLo[i] = fmix(h2);
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
  let perms = permsByClients.get(n);
  if (perms === undefined) {
    perms = permutations(n);
    permsByClients.set(n, perms);
  }
  hashUnder(world, perms[0]![0], perms[0]![1], fixed, out);
  for (let p = 1; p < perms.length; p++) {
    hashUnder(world, perms[p]![0], perms[p]![1], fixed, candidate);
    if (candidate.hi < out.hi || (candidate.hi === out.hi && candidate.lo < out.lo)) {
      out.hi = candidate.hi;
      out.lo = candidate.lo;
    }
  }
}
