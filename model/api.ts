/**
 * The checked faces of the model's small functions that the model itself
 * calls on every step (design rules, clock reads, property checks): the
 * `lockcheck/model` entry exports these in place of the originals, so a
 * caller's wrong-typed argument is an InvalidInputError naming it, while the
 * exploration keeps calling the unchecked originals on values it checked
 * once (initialWorld, step), with no per-step cost.
 */
import * as clock from './clock.ts';
import type { Clock } from './clock.ts';
import { checkArray, checkCommandShape, checkInteger, checkKnownKeys, checkNumber, checkObject, checkTime, isObject, refuse } from './checks.ts';
import { checkInFlightAlone, checkStoreAlone, checkWorld } from './worldCheck.ts';
import * as command from './command.ts';
import type { Command, Operation } from './command.ts';
import * as design from './design.ts';
import type { Design, StorePolicy } from './design.ts';
import { checkDuration, checkResource, checkToken, checkTtl, checkValue, InvalidInputError, shown } from './errors.ts';
import type { WorldEvent } from './event.ts';
import * as properties from './properties.ts';
import type { Violation } from './properties.ts';
import { modelChooser } from './madeChoosers.ts';
import * as run from './run.ts';
import type { Chooser } from './run.ts';
import * as state from './state.ts';
import type { GhostResource, InFlight, Owner, World } from './state.ts';
import * as store from './store.ts';
import type { StoreCell, StoreState } from './store.ts';
import * as world from './world.ts';
import * as exploration from './explore.ts';
import type { Exploration, ExploreOptions, ExploreResult } from './explore.ts';
import type { FingerprintOptions } from './fingerprint.ts';
import { boundedOptions, checkAddressable, checkExploreCall, readExploreOptions } from './exploreInput.ts';

/**
 * A design helper that first checks its design (validateDesign: an object of a
 * known kind, every field of its type): each below throws
 * InvalidInputError('invalid-config') naming what is wrong with `d`.
 */
const ofDesign =
  <A extends unknown[], R>(f: (d: Design, ...rest: A) => R) =>
  (d: Design, ...rest: A): R =>
    f(design.validateDesign(d), ...rest);

/** The rules of `d`'s kind (DesignRules): everything the model does differently per design. */
export const rulesOf = ofDesign(design.rulesOf);
/** The lease terms of `d` (none for session locks and redis-replicated: lockcheck's own client). */
export const leaseTerms = ofDesign(design.leaseTerms);
/** Number of lock-service nodes `d` runs on (a consensus cluster is one logical node). */
export const nodeCount = ofDesign(design.nodeCount);
/** Whether leases carry a ttl (and so `extend` applies); PostgreSQL locks live with their session instead. */
export const hasTtl = ofDesign(design.hasTtl);
/** Whether a lock lives with the client's connection (connection loss drops it on the server). */
export const isSessionBound = ofDesign(design.isSessionBound);
/** Whether an acquire by the current holder stacks (PostgreSQL advisory locks do). */
export const isReentrant = ofDesign(design.isReentrant);
/** Whether node state (keys, counters) survives a crash-restart. */
export const persists = ofDesign(design.persists);
/** Whether the node's key expiry follows its wall clock (Redis) or a step-immune monotonic clock (etcd). */
export const expiresByWallClock = ofDesign(design.expiresByWallClock);
/** True time, in ms, a restarted node refuses to take part. */
export const restartDelayMs = ofDesign(design.restartDelayMs);
/** What a restart's lease refresh adds beyond each ttl, in ms (etcd's new leader: the election timeout). */
export const refreshExtendMs = ofDesign(design.refreshExtendMs);
/** The proportional part of the drift allowance, a fraction of the ttl (0 for session locks). */
export const driftFactor = ofDesign(design.driftFactor);
/** The client's statement timeout in ms on session-bound designs (null on ttl designs: their ttl bounds the wait). */
export const replyTimeoutMs = ofDesign(design.replyTimeoutMs);
/** The fixed part of the drift allowance, in ms (0 for session locks). */
export const clockMarginMs = ofDesign(design.clockMarginMs);
/** What a statement's failure or late reply ends: the client's whole session, only the attempt's own connection, or nothing (ttl designs). */
export const lateReplyEnds = ofDesign(design.lateReplyEnds);
/** Whether the design's node has a replica, and whether its scripts wait for it (WAIT 1). */
export const replication = ofDesign(design.replication);
/** Votes needed for a grant: a majority of the nodes. */
export const quorum = ofDesign(design.quorum);

/** The drift allowance of a lease of `ttlMs` (0 on session designs). */
export function driftMarginMs(d: Design, ttlMs: number): number {
  design.validateDesign(d);
  checkDuration(ttlMs, 'driftMarginMs ttlMs');
  return design.driftMarginMs(d, ttlMs);
}

/** Whether `policy` is a store `d` can be run with (transactional only with pg-xact). */
export function storeFits(d: Design, policy: StorePolicy): boolean {
  design.validateDesign(d);
  checkStorePolicy(policy, 'storeFits policy');
  return design.storeFits(d, policy);
}

/** `policy` if it is one of STORE_POLICIES; else throws InvalidInputError('invalid-config') naming `name`. */
export function checkStorePolicy(policy: unknown, name: string): StorePolicy {
  if (typeof policy !== 'string' || !(design.STORE_POLICIES as readonly string[]).includes(policy)) refuse(name, `one of ${design.STORE_POLICIES.map((p) => `'${p}'`).join(', ')}`, policy);
  return policy as StorePolicy;
}

function checkClock(c: unknown, name: string): void {
  const o = checkObject(c, name, 'a clock { anchorTrueMs, readingMs, driftPpm }');
  checkTime(o.anchorTrueMs, `${name}.anchorTrueMs`);
  checkTime(o.readingMs, `${name}.readingMs`);
  // A rate of 0 or less would never reach a reading (trueTimeOf would not end).
  checkInteger(o.driftPpm, `${name}.driftPpm`, clock.MIN_DRIFT_PPM, clock.MAX_DRIFT_PPM);
}

/** The reading at true time `trueMs`. */
export function read(c: Clock, trueMs: number): number {
  checkClock(c, 'read clock');
  checkTime(trueMs, 'read trueMs');
  return clock.read(c, trueMs);
}

/** The first true time at or after `fromMs` at which `c` reads at least `readingMs`. */
export function trueTimeOf(c: Clock, readingMs: number, fromMs: number): number {
  checkClock(c, 'trueTimeOf clock');
  checkTime(readingMs, 'trueTimeOf readingMs');
  checkTime(fromMs, 'trueTimeOf fromMs');
  return clock.trueTimeOf(c, readingMs, fromMs);
}

/** Changes the rate from now on; the reading stays continuous. */
export function setDrift(c: Clock, trueMs: number, driftPpm: number): Clock {
  checkClock(c, 'setDrift clock');
  checkTime(trueMs, 'setDrift trueMs');
  checkInteger(driftPpm, 'setDrift driftPpm', clock.MIN_DRIFT_PPM, clock.MAX_DRIFT_PPM);
  return clock.setDrift(c, trueMs, driftPpm);
}

/** Whether `c` is a client operation (acquire, extend, release, write, read) rather than time or a fault. */
export function isOperation(c: Command): c is Operation {
  checkCommandShape(c, 'isOperation command');
  return command.isOperation(c);
}

function checkOwner(o: unknown, name: string): void {
  const owner = checkObject(o, name, 'an owner { client, attempt }');
  checkNumber(owner.client, `${name}.client`);
  checkNumber(owner.attempt, `${name}.attempt`);
}

/** Whether two owners are the same client's same attempt. */
export function sameOwner(a: Owner, b: Owner): boolean {
  checkOwner(a, 'sameOwner a');
  checkOwner(b, 'sameOwner b');
  return state.sameOwner(a, b);
}

/** The ghost state of `resource` (grants so far, highest token granted, last accepted epoch: what the properties are checked against); NO_GHOST before any. */
export function ghostOf(w: World, resource: string): GhostResource {
  checkWorld(w, 'ghostOf world');
  return state.ghostOf(w, checkResource(resource));
}

/** An in-flight operation as a string with its times relative to now and to the client's clock. */
export function inFlightKey(f: InFlight, nowMs: number, monoMs: number): string {
  checkInFlightAlone(f, 'inFlightKey operation');
  checkTime(nowMs, 'inFlightKey nowMs');
  checkTime(monoMs, 'inFlightKey monoMs');
  return state.inFlightKey(f, nowMs, monoMs);
}

/** Whether `policy` lets a write with `token` through when `highest` was accepted before (FENCE-2). */
export function passes(policy: StorePolicy, token: bigint, highest: bigint | null): boolean {
  checkStorePolicy(policy, 'passes policy');
  checkToken(token);
  if (highest !== null) checkToken(highest);
  return store.passes(policy, token, highest);
}

/** A store with `policy` and no cells. */
export function emptyStore(policy: StorePolicy): StoreState {
  return store.emptyStore(checkStorePolicy(policy, 'emptyStore policy'));
}

/**
 * Applies one write to `s` (unchanged: a new state is returned). A resource,
 * token or value no real store takes is refused (InvalidInputError) as the
 * stores refuse it: a value that is no string, or holds NUL or a lone
 * surrogate, was kept as it came. The servers' size bounds on a value
 * (docs/errors.md) are not modelled: a value past them is kept.
 */
export function writeStore(s: StoreState, resource: string, token: bigint, value: string): ReturnType<typeof store.writeStore> {
  checkStoreAlone(s, 'writeStore store');
  return store.writeStore(s, checkResource(resource), checkToken(token), checkValue(value));
}

/** The store's cell of `resource` (EMPTY_CELL if never written). */
export function cellOf(s: StoreState, resource: string): StoreCell {
  checkStoreAlone(s, 'cellOf store');
  return store.cellOf(s, checkResource(resource));
}

/** Whether the client, by its own clock and what it has been told, holds a valid lease. */
export function holdsValid(w: World, client: number, resource: string): boolean {
  checkWorld(w, 'holdsValid world');
  if (!Number.isInteger(client) || w.clients[client] === undefined) throw new InvalidInputError('unknown-client', `no client ${shown(client)} (have ${w.clients.length})`);
  return world.holdsValid(w, client, checkResource(resource));
}

/** LIVE-1's bound in ms of true time. */
export function liveBoundMs(ttlMs: number, factor: number, expiryToleranceMs: number): number {
  checkTtl(ttlMs);
  if (typeof factor !== 'number' || !(factor >= 0 && factor < 1)) refuse('liveBoundMs driftFactor', 'a number in [0, 1)', factor);
  checkInteger(expiryToleranceMs, 'liveBoundMs expiryToleranceMs', 0, state.MAX_EXPIRY_TOLERANCE_MS);
  return properties.liveBoundMs(ttlMs, factor, expiryToleranceMs);
}

type FieldCheck = readonly [field: string, ok: (v: unknown) => boolean, wanted: string];
const int: FieldCheck[1] = (v) => typeof v === 'number' && Number.isInteger(v);
const text: FieldCheck[1] = (v) => typeof v === 'string';
const big: FieldCheck[1] = (v) => typeof v === 'bigint';
const bigOrNull: FieldCheck[1] = (v) => v === null || typeof v === 'bigint';
const owner: FieldCheck[1] = (v) => isObject(v) && typeof v.client === 'number' && typeof v.attempt === 'number';
const counters: FieldCheck[1] = (v) => isObject(v) && Object.values(v).every((c) => typeof c === 'bigint');

/** The fields the event properties read, per event kind (model/event.ts). */
const EVENT_FIELDS: Readonly<Record<WorldEvent['kind'], readonly FieldCheck[]>> = {
  granted: [['client', int, 'an integer'], ['resource', text, 'a string'], ['token', big, 'a bigint'], ['epoch', int, 'an integer'], ['maxTokenBefore', bigOrNull, 'a bigint or null']],
  write: [
    ['client', int, 'an integer'],
    ['resource', text, 'a string'],
    ['token', big, 'a bigint'],
    ['epoch', int, 'an integer'],
    ['policy', (v) => typeof v === 'string' && (design.STORE_POLICIES as readonly string[]).includes(v), 'a store policy'],
    ['highestBefore', bigOrNull, 'a bigint or null'],
    ['accepted', (v) => typeof v === 'boolean', 'a boolean'],
    ['lastAcceptedEpochBefore', int, 'an integer'],
  ],
  'key-changed': [['node', int, 'an integer'], ['resource', text, 'a string'], ['byClient', int, 'an integer'], ['byOwner', owner, 'an owner { client, attempt }'], ['ownerBefore', owner, 'an owner { client, attempt }'], ['change', (v) => v === 'deleted' || v === 'extended', "'deleted' or 'extended'"]],
  restarted: [['node', int, 'an integer'], ['countersBefore', counters, 'a record of bigint counters'], ['countersAfter', counters, 'a record of bigint counters']],
};

function checkEventList(events: unknown, name: string): void {
  checkArray(events, name, 'an array of events (a step branch events)');
  (events as readonly unknown[]).forEach((e, i) => {
    if (!isObject(e) || typeof e.kind !== 'string' || !Object.hasOwn(EVENT_FIELDS, e.kind)) refuse(`${name}[${i}]`, `an event of kind ${Object.keys(EVENT_FIELDS).join(', ')}`, e);
    for (const [field, ok, wanted] of EVENT_FIELDS[e.kind as WorldEvent['kind']]) if (!ok(e[field])) refuse(`${name}[${i}].${field}`, wanted, e[field]);
  });
}

/** The event properties a step's events violate. */
export function checkEvents(events: readonly WorldEvent[]): Violation[] {
  checkEventList(events, 'checkEvents events');
  return properties.checkEvents(events);
}

/** Every property violated by a step, given its events and the state after it. */
export function checkProperties(events: readonly WorldEvent[], after: World): Violation[] {
  checkEventList(events, 'checkProperties events');
  checkWorld(after, 'checkProperties after');
  return properties.checkProperties(events, after);
}

/** The chooser that takes a step's first branch. */
export const firstBranch: Chooser = modelChooser((branches, c) => {
  checkArray(branches, 'firstBranch branches', 'a non-empty array of branches');
  if (branches.length === 0) refuse('firstBranch branches', 'a non-empty array of branches', branches);
  return run.firstBranch(branches, c);
});

/**
 * Explores every schedule of `alphabet` from `initial` up to
 * `options.maxDepth` (explore.ts), after checking every command of the
 * alphabet against the world's configuration and every option's key
 * (exploreInput.ts): once per call, outside the search. Always bounded:
 * without maxStates at DEFAULT_MAX_STATES, a budget or not; and
 * a world whose tokens could pass 2^63-1 within the depth is refused up
 * front (checkTokenHeadroom).
 */
export function explore(initial: World, alphabet: readonly Command[], options: ExploreOptions): ExploreResult {
  const o = readExploreOptions(options, 'explore options');
  checkExploreCall(initial, alphabet, o, 'explore');
  return exploration.explore(initial, alphabet, boundedOptions(o));
}

/** startExploration (explore.ts), its arguments checked and bounded as explore's. */
export function startExploration(initial: World, alphabet: readonly Command[], options: ExploreOptions): Exploration {
  const o = readExploreOptions(options, 'startExploration options');
  checkExploreCall(initial, alphabet, o, 'startExploration');
  return exploration.startExploration(initial, alphabet, boundedOptions(o));
}

/** Whether renaming the nodes maps the alphabet onto itself (explore.ts). */
export function nodeSymmetric(alphabet: readonly Command[], nodes: number): boolean {
  checkAddressable(alphabet, 'nodeSymmetric alphabet');
  return exploration.nodeSymmetric(alphabet, nodes);
}

/** The symmetries and abstractions an exploration fingerprints its states under (explore.ts). */
export function fingerprintOptionsFor(initial: World, alphabet: readonly Command[], options: Pick<ExploreOptions, 'clientSymmetry' | 'nodeSymmetry'> = {}): FingerprintOptions {
  checkWorld(initial, 'fingerprintOptionsFor initial');
  checkAddressable(alphabet, 'fingerprintOptionsFor alphabet');
  if (isObject(options)) checkKnownKeys(options, 'fingerprintOptionsFor options', ['clientSymmetry', 'nodeSymmetry']);
  return exploration.fingerprintOptionsFor(initial, alphabet, options);
}
