import { read } from './clock.ts';
import type { Design } from './design.ts';
import { expiresByWallClock, rulesOf } from './design.ts';
import type { NodeKey, NodeState, Owner, World } from './state.ts';
import { sameOwner } from './state.ts';
import { entryOf, putEntry, withEntry } from './record.ts';
import { InvalidInputError, MAX_TOKEN } from './errors.ts';

/**
 * One lock-service node: key liveness by the node's own clock, and the atomic
 * scripts a node runs (set-if-absent with a counter, compare-and-delete,
 * compare-and-extend).
 */

/** The node's reading of the clock its keys expire by. */
export function expiryNow(design: Design, node: NodeState, trueMs: number): number {
  return read(expiresByWallClock(design) ? node.wall : node.mono, trueMs);
}

/**
 * Whether the node sees a key for `resource` as alive. A set of answers:
 * at exactly the expiry instant a real server may go either way (ms
 * rounding, lazy versus active expiry), so the model allows both; so it does
 * within `toleranceMs` of it, for a node on a real clock the runner only
 * follows to within that (WorldConfig.expiryToleranceMs).
 */
export function liveness(design: Design, node: NodeState, resource: string, trueMs: number, toleranceMs = 0): readonly boolean[] {
  const key = entryOf(node.keys, resource);
  if (key === undefined) return [false];
  if (key.expiresAtMs === null) return [true];
  const now = expiryNow(design, node, trueMs);
  if (now < key.expiresAtMs - toleranceMs) return [true];
  if (now <= key.expiresAtMs + toleranceMs) return [true, false];
  return [false];
}

/** liveness() as the world's configuration says the nodes' clocks are followed. */
export function livenessIn(world: World, node: NodeState, resource: string): readonly boolean[] {
  return liveness(world.config.design, node, resource, world.nowMs, world.config.expiryToleranceMs ?? 0);
}

export function isReachable(world: World, client: number, node: number): boolean {
  const n = world.nodes[node];
  return n !== undefined && n.up && world.nowMs >= n.availableFromTrueMs && (world.partitions.length === 0 || !world.partitions.includes(linkName(client, node)));
}

// The partition link "client:node" per pair, made once: reachability is asked for every node of every step.
const linkNames: string[][] = [];
function linkName(client: number, node: number): string {
  const row = (linkNames[client] ??= []);
  return (row[node] ??= `${client}:${node}`);
}

/** Whether a request from the client reaches the node: reachable, and not a black hole. */
export function receives(world: World, client: number, node: number): boolean {
  return isReachable(world, client, node) && world.nodes[node]!.delay !== 'never';
}

/** The counter a grant draws its token from: per resource, or one revision for the whole cluster (etcd). */
export function counterKey(design: Design, resource: string): string {
  return rulesOf(design).tokenSource === 'cluster-revision' ? '#revision' : resource;
}

export function bumpCounter(node: NodeState, key: string, base: bigint): { readonly node: NodeState; readonly value: bigint } {
  const value = nextToken(entryOf(node.counters, key) ?? base, key);
  return { node: { ...node, counters: withEntry(node.counters, key, value) }, value };
}

/**
 * The token a counter at `current` mints next. Past 2^63-1 there is none: every real backend refuses that grant
 * (TokenOverflowError), and the model does not step into a world holding a token outside the range (FENCE-1's tokens
 * are exact signed 64-bit integers), so the step is refused by name.
 */
export function nextToken(current: bigint, key: string): bigint {
  if (current >= MAX_TOKEN) throw new InvalidInputError('invalid-token', `the token counter ${JSON.stringify(key)} is at 2^63-1: a grant would mint a token past the range (real backends refuse it with TokenOverflowError); start the counter lower (tokenBase)`);
  return current + 1n;
}

/** Raises a counter to at least `value` (Redlock's write-back of the quorum's token). */
export function raiseCounter(node: NodeState, key: string, value: bigint): NodeState {
  const current = entryOf(node.counters, key) ?? 0n;
  return current >= value ? node : { ...node, counters: withEntry(node.counters, key, value) };
}

export function setKey(node: NodeState, resource: string, key: NodeKey): NodeState {
  return { ...node, keys: withEntry(node.keys, resource, key) };
}

/** The key gone from the node, nothing else changed: removeKey is the lock service's delete. */
function deleteKey(node: NodeState, resource: string): NodeState {
  // A loop, not an object rest with a computed key (slow in V8): this runs for every release of an exploration.
  const rest: Record<string, NodeKey> = {};
  for (const r in node.keys) if (r !== resource) putEntry(rest, r, node.keys[r]!);
  return { ...node, keys: rest };
}

/**
 * Removes the key as the lock service does (a release, an undo, a lease's
 * expiry or revocation): where the token source is the cluster's revision
 * (etcd), every delete of a key that exists moves it, whatever deleted it,
 * so the next grant's token counts it as real etcd's does. `base`: the
 * world's tokenBase.
 */
export function removeKey(design: Design, node: NodeState, resource: string, base: bigint): NodeState {
  if (entryOf(node.keys, resource) === undefined) return node;
  const gone = deleteKey(node, resource);
  return rulesOf(design).tokenSource === 'cluster-revision' ? bumpCounter(gone, counterKey(design, resource), base).node : gone;
}

/** Compare-and-delete: removeKey of a key `owner` set; any other is left as it is. */
export function removeIfOwner(design: Design, node: NodeState, resource: string, owner: Owner, base: bigint): NodeState {
  const key = entryOf(node.keys, resource);
  return key !== undefined && sameOwner(key.owner, owner) ? removeKey(design, node, resource, base) : node;
}
