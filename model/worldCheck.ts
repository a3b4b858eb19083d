import { match } from 'ts-pattern';
import { MAX_DRIFT_PPM, MIN_DRIFT_PPM } from './clock.ts';
import { checkKnownKeys, checkObject, checkOneOf, refuse } from './checks.ts';
import { checkResource, InvalidInputError, MAX_TIME_MS, MAX_TOKEN, MAX_TTL_MS } from './errors.ts';
import type { Design } from './design.ts';
import { hasTtl, leaseTerms, nodeCount, replication, rulesOf, STORE_POLICIES, storeFits, validateDesign } from './design.ts';
import { MAX_CLIENTS, MAX_EXPIRY_TOLERANCE_MS } from './state.ts';
import type { World, WorldConfig } from './state.ts';
import type { StorePolicy } from './design.ts';

/**
 * A world handed in by a caller, checked whole before any public function
 * reads it: every field of every node, client, operation in flight, store
 * cell and ghost entry has the type and range the model gives it, and agrees
 * with the configuration (as many nodes as the design runs on, as many
 * clients as configured, owners and links naming clients and nodes that
 * exist, a replica where the design has one). A wrong one is an
 * InvalidInputError naming its path (`step world.nodes[0].keys`), what was
 * expected and what was given, never a TypeError from deep inside the step,
 * a loop, or a wrong answer. The exploration's hot path does not come here:
 * it steps worlds the model made from one checked here once.
 */

/** Times are ms within the range where +1 still moves a number (a clock's search steps by 1: past 2^53 it would never end). */
const MAX_TIME = MAX_TIME_MS;
const TIME = `a finite number of ms in [-${MAX_TIME}, ${MAX_TIME}]`;
const TIME_OR_NEVER = `${TIME} or Infinity (never)`;
/** The revision counter of a cluster-revision design (node.ts counterKey). */
const REVISION = '#revision';

/** Read once: an imported binding is a getter call per read under tsx's loader, and these are read for every field. */
const TOKEN_MAX = MAX_TOKEN;
const TTL_MAX = MAX_TTL_MS;
const DRIFT_MIN = MIN_DRIFT_PPM;
const DRIFT_MAX = MAX_DRIFT_PPM;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Where the check is: the argument's name and the path below it, joined only when something is refused. */
type Path = string;

function time(v: unknown, at: Path, field: string): number {
  if (typeof v !== 'number' || !(v >= -MAX_TIME && v <= MAX_TIME)) refuse(`${at}.${field}`, TIME, v);
  return v;
}

function timeOrNever(v: unknown, at: Path, field: string): void {
  if (v !== Number.POSITIVE_INFINITY && !(typeof v === 'number' && v >= -MAX_TIME && v <= MAX_TIME)) refuse(`${at}.${field}`, TIME_OR_NEVER, v);
}

function integer(v: unknown, at: Path, field: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) refuse(`${at}.${field}`, `an integer in [${min}, ${max}]`, v);
  return v;
}

function bool(v: unknown, at: Path, field: string): void {
  if (typeof v !== 'boolean') refuse(`${at}.${field}`, 'a boolean', v);
}

function token(v: unknown, at: Path, field: string): bigint {
  if (typeof v !== 'bigint' || v < 0n || v > TOKEN_MAX) refuse(`${at}.${field}`, 'a bigint token in [0, 2^63-1]', v);
  return v;
}

function tokenOrNull(v: unknown, at: Path, field: string): bigint | null {
  return v === null ? null : token(v, at, field);
}

function object(v: unknown, at: Path, wanted: string): Record<string, unknown> {
  if (!isObject(v)) refuse(at, wanted, v);
  return v;
}

/** A record the model iterates with for...in: a plain object (no prototype but Object's, whose enumerable keys for...in would read too). */
function record(v: unknown, at: Path, wanted: string): Record<string, unknown> {
  const o = object(v, at, wanted);
  const proto: unknown = Object.getPrototypeOf(o);
  if (proto !== Object.prototype && proto !== null) refuse(at, `${wanted} (a plain object)`, v);
  return o;
}

/**
 * Resource names found valid: a world's names are checked at every public
 * step, and a string cannot change, so each is checked once (bounded, so a
 * caller's stream of names cannot grow it without end).
 */
const validNames = new Set<string>();

function remember(r: string): void {
  if (validNames.size >= 4096) validNames.clear();
  validNames.add(r);
}

/** A resource name as a key of a record: what checkResource accepts, the refusal naming where it is. */
function resourceKey(r: string, at: Path): void {
  if (validNames.has(r)) return;
  try {
    checkResource(r);
  } catch (e) {
    if (e instanceof InvalidInputError) refuse(`${at} key ${JSON.stringify(r.slice(0, 40))}`, 'a resource name (non-empty, at most 256 characters, well-formed Unicode without NUL)', r);
    throw e;
  }
  remember(r);
}

function resource(v: unknown, at: Path, field: string): string {
  if (typeof v !== 'string') refuse(`${at}.${field}`, 'a resource name (a string)', v);
  if (validNames.has(v)) return v;
  try {
    checkResource(v);
  } catch (e) {
    if (e instanceof InvalidInputError) refuse(`${at}.${field}`, 'a resource name (non-empty, at most 256 characters, well-formed Unicode without NUL)', v);
    throw e;
  }
  remember(v);
  return v;
}

/** The path of a record's entry: built at every step for every entry, so a plain concatenation (no JSON.stringify). */
function entry(at: Path, key: string): Path {
  return at + '["' + key + '"]';
}

function array(v: unknown, at: Path, wanted: string): readonly unknown[] {
  if (!Array.isArray(v)) refuse(at, wanted, v);
  return v;
}

function checkClock(v: unknown, at: Path): void {
  const c = object(v, at, 'a clock { anchorTrueMs, readingMs, driftPpm }');
  time(c.anchorTrueMs, at, 'anchorTrueMs');
  time(c.readingMs, at, 'readingMs');
  // A rate of 0 or less would never reach a reading (trueTimeOf would not end).
  integer(c.driftPpm, at, 'driftPpm', DRIFT_MIN, DRIFT_MAX);
}

/** What the checks of one world share: its configuration, and how many attempts each client has made (owners point into them). */
interface Ctx {
  readonly name: string;
  readonly config: WorldConfig;
  readonly design: Design;
  readonly nodes: number;
  readonly attempts: readonly number[];
  /** What the design says, read once per world: keys and leases with a ttl, one revision counter, a replica, a client deadline. */
  readonly ttl: boolean;
  readonly revision: boolean;
  readonly replica: boolean;
  readonly deadline: boolean;
}

/**
 * What an operation in flight is checked against: its world's design, node
 * count and clients' attempts, or nothing of them (null) when it is handed in
 * alone (inFlightKey), then only its own fields.
 */
interface FlightCtx {
  readonly design: Design | null;
  readonly nodes: number | null;
  readonly attempts: readonly number[] | null;
}

/** An owner: a client of this world and one of the attempts it has made (the model counts attempts from 1). */
function checkOwner(v: unknown, at: Path, ctx: FlightCtx, client: number | null = null): void {
  const o = object(v, at, 'an owner { client, attempt }');
  const c = integer(o.client, at, 'client', 0, ctx.attempts === null ? MAX_CLIENTS - 1 : ctx.attempts.length - 1);
  if (client !== null && c !== client) refuse(`${at}.client`, `${client} (the client it belongs to)`, c);
  integer(o.attempt, at, 'attempt', 1, ctx.attempts === null ? Number.MAX_SAFE_INTEGER : Math.max(1, ctx.attempts[c]!));
}

function checkKeys(v: unknown, at: Path, ctx: Ctx): void {
  const keys = record(v, at, 'a record of keys by resource');
  const ttl = ctx.ttl;
  for (const r of Object.keys(keys)) {
    resourceKey(r, at);
    const kat = entry(at, r);
    const k = object(keys[r], kat, 'a key { owner, expiresAtMs, ttlMs, count, liveSinceTrueMs }');
    checkOwner(k.owner, `${kat}.owner`, ctx);
    // A ttl design's keys expire; a session-bound lock's live with the session.
    if (ttl) {
      time(k.expiresAtMs, kat, 'expiresAtMs');
      integer(k.ttlMs, kat, 'ttlMs', 1, TTL_MAX);
    } else {
      if (k.expiresAtMs !== null) refuse(`${kat}.expiresAtMs`, `null (${ctx.design.kind} keys do not expire)`, k.expiresAtMs);
      if (k.ttlMs !== null) refuse(`${kat}.ttlMs`, `null (${ctx.design.kind} locks have no ttl)`, k.ttlMs);
    }
    integer(k.count, kat, 'count', 1);
    time(k.liveSinceTrueMs, kat, 'liveSinceTrueMs');
  }
}

function checkCounters(v: unknown, at: Path, ctx: Ctx): void {
  const counters = record(v, at, 'a record of bigint counters');
  const revision = ctx.revision;
  for (const k of Object.keys(counters)) {
    if (revision) {
      if (k !== REVISION) refuse(`${at} key ${JSON.stringify(k.slice(0, 40))}`, `'${REVISION}' (${ctx.design.kind} has one revision counter)`, k);
    } else resourceKey(k, at);
    const t = counters[k];
    if (typeof t !== 'bigint' || t < 0n || t > TOKEN_MAX) refuse(entry(at, k), 'a bigint token in [0, 2^63-1]', t);
  }
}

function checkNode(v: unknown, at: Path, ctx: Ctx): void {
  const n = object(v, at, 'a node { wall, mono, up, availableFromTrueMs, keys, counters }');
  checkClock(n.wall, `${at}.wall`);
  checkClock(n.mono, `${at}.mono`);
  bool(n.up, at, 'up');
  time(n.availableFromTrueMs, at, 'availableFromTrueMs');
  checkKeys(n.keys, `${at}.keys`, ctx);
  checkCounters(n.counters, `${at}.counters`, ctx);
  if (!ctx.replica) {
    if (n.replica !== undefined) refuse(`${at}.replica`, `absent (${ctx.design.kind} has no replica)`, n.replica);
  } else {
    const r = object(n.replica, `${at}.replica`, `a replica { keys, counters } (${ctx.design.kind} has one)`);
    checkKeys(r.keys, `${at}.replica.keys`, ctx);
    checkCounters(r.counters, `${at}.replica.counters`, ctx);
  }
  // Absent: no delay (a node-delay of 0 removes the field).
  if (n.delay !== undefined && n.delay !== 'never') integer(n.delay, at, 'delay', 0, TTL_MAX);
}

function checkLease(v: unknown, at: Path, ctx: Ctx, client: number): void {
  const l = object(v, at, 'a lease { owner, token, validUntilMs, count, buffered, epoch }');
  checkOwner(l.owner, `${at}.owner`, ctx, client);
  token(l.token, at, 'token');
  // A deadline on ttl designs whose client keeps one; null for a session-bound lock or a client with no deadline (7.11).
  const deadline = ctx.deadline;
  if (deadline) time(l.validUntilMs, at, 'validUntilMs');
  else if (l.validUntilMs !== null) refuse(`${at}.validUntilMs`, `null (a ${ctx.design.kind} lease has no deadline)`, l.validUntilMs);
  integer(l.count, at, 'count', 1);
  const buffered = array(l.buffered, `${at}.buffered`, 'an array of written values (strings)');
  for (let i = 0; i < buffered.length; i++) if (typeof buffered[i] !== 'string') refuse(`${at}.buffered[${i}]`, 'a string', buffered[i]);
  integer(l.epoch, at, 'epoch', 1);
}

function checkPendingWrite(v: unknown, at: Path): void {
  const p = object(v, at, 'a pending write { resource, value, token, epoch } or null');
  resource(p.resource, at, 'resource');
  if (typeof p.value !== 'string') refuse(`${at}.value`, 'a string', p.value);
  token(p.token, at, 'token');
  integer(p.epoch, at, 'epoch', 1);
}

const DENY_REASONS = ['held', 'no-quorum', 'validity-exhausted'];
const NOT_EXTENDED_REASONS = ['not-held', 'expired', 'no-quorum'];

function oneOf(v: unknown, at: Path, field: string, allowed: readonly string[]): void {
  if (typeof v !== 'string' || !allowed.includes(v)) refuse(`${at}.${field}`, `one of ${allowed.map((a) => `'${a}'`).join(', ')}`, v);
}

/** An outcome a reply in flight carries (model/outcome.ts). */
function checkOutcome(v: unknown, at: Path): void {
  const o = object(v, at, 'an outcome (an object with a kind)');
  const kinds = ['granted', 'denied', 'extended', 'not-extended', 'released', 'not-held', 'accepted', 'rejected', 'value', 'ok', 'timed-out'];
  oneOf(o.kind, at, 'kind', kinds);
  match(o.kind as string)
    .with('granted', () => {
      token(o.token, at, 'token');
      if (o.validUntilMs !== null) time(o.validUntilMs, at, 'validUntilMs');
    })
    .with('denied', () => oneOf(o.reason, at, 'reason', DENY_REASONS))
    .with('extended', () => time(o.validUntilMs, at, 'validUntilMs'))
    .with('not-extended', () => oneOf(o.reason, at, 'reason', NOT_EXTENDED_REASONS))
    .with('rejected', () => token(o.highest, at, 'highest'))
    .with('value', () => {
      if (o.value !== null && typeof o.value !== 'string') refuse(`${at}.value`, 'a string or null', o.value);
      tokenOrNull(o.token, at, 'token');
    })
    .otherwise(() => undefined);
}

function checkArrival(v: unknown, at: Path, field: string): void {
  if (v !== 'failed' && v !== 'never') time(v, at, field);
}

/** One entry per node: the round's arrivals and votes name nodes by index. */
function perNode(v: unknown, at: Path, field: string, ctx: FlightCtx, wanted: string): readonly unknown[] {
  const a = array(v, `${at}.${field}`, ctx.nodes === null ? `an array of ${wanted}` : `an array of ${ctx.nodes} ${wanted} (one per node)`);
  if (ctx.nodes !== null && a.length !== ctx.nodes) refuse(`${at}.${field}`, `an array of ${ctx.nodes} ${wanted} (one per node)`, v);
  // Array.from: the callers check every index, holes included (forEach skips them).
  return Array.from(a);
}

/** An operation in flight across its client's pause (model/state.ts InFlight), of a kind the design makes. */
function checkInFlight(v: unknown, at: Path, ctx: FlightCtx, client: number | null): void {
  const f = object(v, at, 'an operation in flight (an object with a kind) or null');
  const design = ctx.design;
  const round = (): void => {
    if (design !== null && !hasTtl(design)) refuse(`${at}.kind`, `'reply' or 'later' (${design.kind} has no lease rounds)`, f.kind);
    resource(f.resource, at, 'resource');
    integer(f.ttlMs, at, 'ttlMs', 1, TTL_MAX);
    time(f.startedMono, at, 'startedMono');
    time(f.deadlineMs, at, 'deadlineMs');
  };
  const retries = (): void => {
    integer(f.retries, at, 'retries', 0, 100);
    integer(f.retryDelayMs, at, 'retryDelayMs', 0, TTL_MAX);
  };
  oneOf(f.kind, at, 'kind', ['reply', 'later', 'acquire', 'extend', 'lease']);
  match(f.kind as 'reply' | 'later' | 'acquire' | 'extend' | 'lease')
    .with('reply', () => {
      checkOutcome(f.outcome, `${at}.outcome`);
      timeOrNever(f.doneMs, at, 'doneMs');
      if (f.missed !== undefined) {
        const m = object(f.missed, `${at}.missed`, 'an object { afterMs, ends, resource } or absent');
        time(m.afterMs, `${at}.missed`, 'afterMs');
        oneOf(m.ends, `${at}.missed`, 'ends', ['session', 'transaction', 'nothing']);
        resource(m.resource, `${at}.missed`, 'resource');
      }
    })
    .with('later', () => {
      if (design !== null && hasTtl(design)) refuse(`${at}.kind`, `not 'later' (a PostgreSQL acquire's; ${design.kind} has none)`, f.kind);
      if (client === null) integer(f.client, at, 'client', 0, MAX_CLIENTS - 1);
      else if (f.client !== client) refuse(`${at}.client`, `${client} (the client it belongs to)`, f.client);
      resource(f.resource, at, 'resource');
      timeOrNever(f.arrivalMs, at, 'arrivalMs');
      time(f.deadlineMs, at, 'deadlineMs');
    })
    .with('acquire', () => {
      round();
      checkOwner(f.owner, `${at}.owner`, ctx, client);
      perNode(f.arrivals, at, 'arrivals', ctx, 'arrivals').forEach((a, i) => checkArrival(a, at, `arrivals[${i}]`));
      perNode(f.votes, at, 'votes', ctx, 'votes (bigint or null)').forEach((t, i) => tokenOrNull(t, at, `votes[${i}]`));
      retries();
    })
    .with('extend', () => {
      round();
      perNode(f.arrivals, at, 'arrivals', ctx, 'arrivals').forEach((a, i) => checkArrival(a, at, `arrivals[${i}]`));
      perNode(f.votes, at, 'votes', ctx, 'votes (booleans)').forEach((b, i) => bool(b, at, `votes[${i}]`));
    })
    .with('lease', () => {
      round();
      if (design !== null && rulesOf(design).acquireFirstRound(design) === 'put') refuse(`${at}.kind`, `not 'lease' (a consensus lock's; ${design.kind} puts its key at once)`, f.kind);
      checkOwner(f.owner, `${at}.owner`, ctx, client);
      checkArrival(f.arrival, at, 'arrival');
      time(f.leaseExpiresAtMs, at, 'leaseExpiresAtMs');
      retries();
    })
    .exhaustive();
}

function checkClient(v: unknown, at: Path, ctx: Ctx, index: number): void {
  const c = object(v, at, 'a client { mono, paused, pendingWrite, inFlight, sessionLost, attempts, leases }');
  checkClock(c.mono, `${at}.mono`);
  bool(c.paused, at, 'paused');
  if (c.pendingWrite !== null) checkPendingWrite(c.pendingWrite, `${at}.pendingWrite`);
  if (c.inFlight !== null) {
    // Only a paused client has an operation in flight: it is read at the resume.
    if (c.paused !== true) refuse(`${at}.inFlight`, 'null (only a paused client has an operation in flight)', c.inFlight);
    if (c.pendingWrite !== null) refuse(`${at}.inFlight`, 'null (a client pauses with a pending write or an operation in flight, not both)', c.inFlight);
    checkInFlight(c.inFlight, `${at}.inFlight`, ctx, index);
  }
  bool(c.sessionLost, at, 'sessionLost');
  const leases = record(c.leases, `${at}.leases`, 'a record of leases by resource');
  for (const r of Object.keys(leases)) {
    resourceKey(r, `${at}.leases`);
    checkLease(leases[r], entry(`${at}.leases`, r), ctx, index);
  }
}

/** "client:node" links, each once, sorted (as the model keeps them: a fingerprint reads them in order). */
function checkPartitions(v: unknown, at: Path, ctx: Ctx): void {
  const links = array(v, at, 'an array of links "client:node"');
  for (let i = 0; i < links.length; i++) {
    const l = links[i];
    const m = typeof l === 'string' ? /^(0|[1-9]\d?):(0|[1-9]\d?)$/.exec(l) : null;
    if (m === null || Number(m[1]) >= ctx.attempts.length || Number(m[2]) >= ctx.nodes) {
      refuse(`${at}[${i}]`, `a link "client:node" of a client in [0, ${ctx.attempts.length - 1}] and a node in [0, ${ctx.nodes - 1}]`, l);
    }
    if (i > 0 && !((links[i - 1] as string) < l!)) refuse(`${at}[${i}]`, `a link after ${JSON.stringify(links[i - 1])} (links are sorted, each once)`, l);
  }
}

/** A store state: of the configured policy (`policy`), or any (null: handed in alone, to cellOf). */
function checkStore(v: unknown, at: Path, policy: StorePolicy | null): void {
  const s = object(v, at, 'a store state { policy, cells }');
  if (policy === null) checkOneOf(s.policy, `${at}.policy`, STORE_POLICIES);
  else if (s.policy !== policy) refuse(`${at}.policy`, `'${policy}' (the configuration's store)`, s.policy);
  const cells = record(s.cells, `${at}.cells`, 'a record of store cells by resource');
  for (const r of Object.keys(cells)) {
    resourceKey(r, `${at}.cells`);
    const cat = entry(`${at}.cells`, r);
    const c = object(cells[r], cat, 'a store cell { value, token, highest }');
    // A cell is empty, or holds the last accepted write and the highest token accepted.
    if (c.value === null && c.token === null && c.highest === null) continue;
    if (typeof c.value !== 'string') refuse(`${cat}.value`, 'a string (or value, token and highest all null)', c.value);
    const t = token(c.token, cat, 'token');
    const h = token(c.highest, cat, 'highest');
    if (h < t) refuse(`${cat}.highest`, `at least the token ${t}n`, h);
  }
}

function checkGhost(v: unknown, at: Path): void {
  const ghost = record(v, at, 'a record of ghost entries by resource');
  for (const r of Object.keys(ghost)) {
    resourceKey(r, at);
    const gat = entry(at, r);
    const g = object(ghost[r], gat, 'a ghost entry { grants, maxToken, lastAcceptedEpoch }');
    const grants = integer(g.grants, gat, 'grants', 0);
    tokenOrNull(g.maxToken, gat, 'maxToken');
    integer(g.lastAcceptedEpoch, gat, 'lastAcceptedEpoch', 0, grants);
  }
}

/** An operation in flight handed in alone (inFlightKey): every field of its kind, with no world to check it against. */
export function checkInFlightAlone(f: unknown, name: string): void {
  checkInFlight(f, name, { design: null, nodes: null, attempts: null }, null);
}

/** A store state handed in alone (cellOf): its policy one of the model's, every cell whole or empty. */
export function checkStoreAlone(s: unknown, name: string): void {
  checkStore(s, name, null);
}

/** Checks every field of `world` against its configuration; `name` names the argument (`step world`). */
export function checkWorld(world: unknown, name: string): asserts world is World {
  const w = object(world, name, 'a world (as initialWorld or step returned it)');
  checkConfig(w.config, `${name}.config`);
  const config = w.config as WorldConfig;
  const design = config.design;
  time(w.nowMs, name, 'nowMs');
  if ((w.nowMs as number) < 0) refuse(`${name}.nowMs`, 'a time >= 0 (the model starts at 0 and only advances)', w.nowMs);
  const n = nodeCount(design);
  const nodes = array(w.nodes, `${name}.nodes`, `an array of ${n} nodes`);
  if (nodes.length !== n) refuse(`${name}.nodes`, `an array of ${n} nodes (${design.kind} runs on ${n})`, nodes);
  const clients = array(w.clients, `${name}.clients`, `an array of ${config.clients} clients`);
  if (clients.length !== config.clients) refuse(`${name}.clients`, `an array of ${config.clients} clients (config.clients)`, clients);
  // Attempts first: every owner in the world names one of them.
  const attempts: number[] = new Array(clients.length);
  for (let i = 0; i < clients.length; i++) {
    const at = `${name}.clients[${i}]`;
    attempts[i] = integer(object(clients[i], at, 'a client { mono, paused, pendingWrite, inFlight, sessionLost, attempts, leases }').attempts, at, 'attempts', 0);
  }
  const ttl = hasTtl(design);
  const ctx: Ctx = {
    name,
    config,
    design,
    nodes: n,
    attempts,
    ttl,
    revision: rulesOf(design).tokenSource === 'cluster-revision',
    replica: replication(design) !== 'none',
    deadline: ttl && leaseTerms(design).clientDeadline !== 'none',
  };
  for (let i = 0; i < n; i++) checkNode(nodes[i], `${name}.nodes[${i}]`, ctx);
  for (let i = 0; i < clients.length; i++) checkClient(clients[i], `${name}.clients[${i}]`, ctx, i);
  checkPartitions(w.partitions, `${name}.partitions`, ctx);
  checkStore(w.store, `${name}.store`, config.store);
  checkGhost(w.ghost, `${name}.ghost`);
}

/** Every key of WorldConfig. */
const CONFIG_KEYS = ['design', 'store', 'clients', 'tokenBase', 'expiryToleranceMs', 'requestTimeoutMs'];

/**
 * Checks a world configuration whole (`name` names it: `initialWorld config`,
 * `step world.config`): a valid design, a store policy that fits it, a client
 * count and the optional fields in range. A refusal names the field.
 */
export function checkConfig(config: unknown, name: string): asserts config is WorldConfig {
  const c = checkObject(config, name, 'a world configuration { design, store, clients }');
  // A misspelt `tokenbase` would start the counters at 0, silently.
  checkKnownKeys(c, name, CONFIG_KEYS);
  try {
    validateDesign(c.design as Design);
  } catch (e) {
    // The design's own refusal, placed under the argument it came in.
    if (e instanceof InvalidInputError) throw new InvalidInputError(e.code, `${name}.design: ${e.message.slice(e.code.length + 2)}`);
    throw e;
  }
  const store = checkOneOf(c.store, `${name}.store`, STORE_POLICIES);
  if (typeof c.clients !== 'number' || !Number.isInteger(c.clients) || c.clients < 1 || c.clients > MAX_CLIENTS) refuse(`${name}.clients`, `an integer in [1, ${MAX_CLIENTS}]`, c.clients);
  if (c.tokenBase !== undefined && (typeof c.tokenBase !== 'bigint' || c.tokenBase < 0n || c.tokenBase > MAX_TOKEN)) refuse(`${name}.tokenBase`, 'a bigint in [0, 2^63-1] or absent', c.tokenBase, 'invalid-token');
  const tolerance = c.expiryToleranceMs;
  if (tolerance !== undefined && !(typeof tolerance === 'number' && Number.isInteger(tolerance) && tolerance >= 0 && tolerance <= MAX_EXPIRY_TOLERANCE_MS)) {
    refuse(`${name}.expiryToleranceMs`, `an integer in [0, ${MAX_EXPIRY_TOLERANCE_MS}] or absent`, tolerance);
  }
  const timeout = c.requestTimeoutMs;
  if (timeout !== undefined && !(typeof timeout === 'number' && Number.isInteger(timeout) && timeout >= 1 && timeout <= MAX_TTL_MS)) {
    refuse(`${name}.requestTimeoutMs`, `a positive integer of ms in [1, ${MAX_TTL_MS}] or absent`, timeout);
  }
  if (!storeFits(c.design as Design, store)) refuse(`${name}.store`, `a store policy that fits design '${(c.design as Design).kind}' (transactional with pg-xact only, and pg-xact with it only)`, store);
}
