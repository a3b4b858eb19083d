import { match } from 'ts-pattern';
import { checkKnownKeys, checkObject, checkOneOf, checkOptions, refuse, shown } from './checks.ts';
import { InvalidInputError, MAX_TTL_MS } from './errors.ts';
import { frozen } from './frozen.ts';

/**
 * The lock designs lockcheck specifies (spec/SPEC.md, "Designs"). A design
 * fixes how many lock-service nodes there are, how they keep state across a
 * restart, where the fencing token comes from and how a client computes the
 * validity of its lease.
 */
export type Design =
  /** One Redis node: SET NX PX, compare-and-delete release, INCR counter token. */
  | ({ readonly kind: 'redis-single'; readonly persistence: Persistence; readonly restartDelayMs: number; readonly driftFactor: number; readonly clockMarginMs: number; readonly driftRounding?: DriftRounding } & LeaseTerms)
  /** Redlock over N independent Redis nodes; token = max of the quorum's counters, written back to the quorum. */
  | ({ readonly kind: 'redlock'; readonly nodes: number; readonly persistence: Persistence; readonly restartDelayMs: number; readonly driftFactor: number; readonly clockMarginMs: number; readonly driftRounding?: DriftRounding } & LeaseTerms)
  /** PostgreSQL session-scoped advisory lock: lives with its connection, stacks; token from a sequence. */
  | { readonly kind: 'pg-session'; readonly reentrant?: false; readonly statementTimeoutMs?: number }
  /** PostgreSQL transaction-scoped advisory lock: released at commit or rollback; writes commit with it. */
  | { readonly kind: 'pg-xact'; readonly statementTimeoutMs?: number }
  /**
   * One Redis primary with one asynchronously replicated replica, Sentinel
   * promoting the replica when the primary fails. Scripts as redis-single;
   * with `wait`, every script is followed by WAIT 1 and a lease is returned
   * only after the replica acknowledged it.
   */
  | { readonly kind: 'redis-replicated'; readonly wait: boolean; readonly driftFactor: number; readonly clockMarginMs: number }
  /** Consensus lease lock (etcd): lease plus put-if-absent; token = the key's create revision. */
  | ({
      readonly kind: 'etcd-lease';
      readonly driftFactor: number;
      readonly clockMarginMs: number;
      readonly driftRounding?: DriftRounding;
      /** What a new leader adds to every lease's ttl when it refreshes them (etcd's lessor.Promote(election timeout)); absent: 0. */
      readonly leaderChangeExtendMs?: number;
      /**
       * When the lease's ttl runs from: absent, its grant (etcd's LeaseGrant: the put that
       * follows does not renew it); 'last-request', the lock's latest request (a ZooKeeper
       * session, renewed by every request on it, the contender's create included).
       */
      readonly leaseRenewal?: 'last-request';
    } & LeaseTerms);

/**
 * How the client of a ttl lease treats it, where an audited library's
 * declared contract differs from lockcheck's own client (spec 7.11). Both
 * absent: lockcheck's client (a deadline from ttl - elapsed - drift; a
 * refused extension keeps the lease until that deadline, and its keys).
 */
export interface LeaseTerms {
  /**
   * 'none': the client learns no deadline. Its lease stays valid (to it)
   * until it releases it or drops it, whatever the nodes' keys do: a grant
   * needs a quorum only, an extension re-arms the keys and sets no deadline.
   * What that costs (another holder once the keys expired, a stale write)
   * is judged as a property of the design, by its consequence.
   */
  readonly clientDeadline?: 'none';
  /**
   * 'none': a client that keeps a deadline but has no request timeout of its
   * own waits for an extension's replies however late, where lockcheck's
   * client gives up at the ttl (a client without a deadline always does).
   * A quorum read after the new deadline is still a refusal to the model:
   * a library that calls it extended claims a lease that is over.
   */
  readonly clientTimeout?: 'none';
  /**
   * 'every-reply': the client reads a round only once every node it reached
   * has answered (or its timeout came), where lockcheck's client decides as
   * soon as a quorum settles it; after a refused attempt, and a refused
   * extension that deletes its keys, it also waits for every reply of that
   * undo round before it answers (redlock 4's `_lock` and `unlock` count
   * `waiting` down over every server).
   */
  readonly decides?: 'every-reply';
  /** What a refused extension does (default: the lease is kept, its keys too). */
  readonly failedExtend?: FailedExtend;
}

/**
 * A refused extension: the client keeps or drops its lease; the keys it still
 * holds are kept or deleted (compare-and-delete on every node it reaches).
 * 'kept' is lockcheck's client: an extension with a shorter ttl lowers the
 * deadline at its send, and a refusal keeps the lowered one (spec 4.1).
 * 'unchanged': the lease keeps the deadline it had before the extension, in
 * flight and after a refusal (a library's Lock object that the call leaves
 * as it was); what that costs is judged by its consequence, another holder
 * once too few nodes still hold the old key (MUTEX-1), never by lockcheck's bound.
 * 'dropped': the lease ends on any refusal. 'dropped-if-denied': it ends
 * when the nodes' answers refused it (the key gone or another's on so many
 * nodes that no quorum could say yes), and stays as it was ('unchanged')
 * when the refusal is for want of answers: a cut link, a node down, a reply
 * too late (a library that drops its lock on "not yours" and keeps it on a
 * connection error).
 */
export interface FailedExtend {
  readonly lease: 'kept' | 'unchanged' | 'dropped' | 'dropped-if-denied';
  readonly keys: 'kept' | 'deleted';
}

/** The lease terms of a design (none for session locks and redis-replicated: lockcheck's own client). */
export function leaseTerms(design: Design): LeaseTerms {
  return design.kind === 'redis-single' || design.kind === 'redlock' || design.kind === 'etcd-lease' ? design : {};
}

/**
 * How driftFactor * ttl becomes whole ms of the drift allowance: the
 * model's default rounds up; a library may round to
 * nearest (redlock on npm does), which it declares in its contract.
 */
export type DriftRounding = 'ceil' | 'round';

/** The kinds of Design (DESIGN_KINDS lists them). */
export type DesignKind = Design['kind'];

/** How a Redis node keeps its keys and counters across a crash. */
export type Persistence = 'none' | 'aof-always';

/** How the store judges a write's token (spec: FENCE-2). */
export type StorePolicy =
  /** Accepts every write: a lock for efficiency only. */
  | 'unfenced'
  /** Rejects token <= highest accepted: one write per grant. */
  | 'strict'
  /** Rejects token < highest accepted: several writes per grant. */
  | 'monotonic'
  /** The data lives in the lock's own database transaction (pg-xact only). */
  | 'transactional';

/** The proportional part of the drift allowance when a design names none: 1 % of the ttl (Redlock's). */
export const DEFAULT_DRIFT_FACTOR = 0.01;
/** The PostgreSQL clients' statement timeout when a design names none (impl/postgres: statementTimeoutMs). */
export const DEFAULT_STATEMENT_TIMEOUT_MS = 5000;
/** The fixed part of the drift allowance: Redlock's 2 ms for Redis's expiry precision. */
export const DEFAULT_CLOCK_MARGIN_MS = 2;

type LeaseOptions = { driftFactor: number; clockMarginMs: number };

/** A helper's options: absent or an object (not null); the design it makes is checked whole (validateDesign). */
function made(name: string, o: unknown, make: () => Design, known: readonly string[]): Design {
  checkOptions(o, `${name} options`);
  // A misspelt option (`node` for `nodes`) would otherwise leave the default in place, silently.
  if (o !== undefined) checkKnownKeys(o as object, `${name} options`, known);
  // Frozen: the design cannot change after its check, so the checks of the functions it is handed to are done once (validateDesign).
  return validateDesign(frozen(make()));
}

/**
 * Makes each design with its defaults filled in (driftFactor 0.01,
 * clockMarginMs 2, no persistence, redlock on 5 nodes, ...), checked whole
 * and frozen. Each throws InvalidInputError naming a bad option.
 */
export const designs = frozen({
  redisSingle: (o: Partial<{ persistence: Persistence; restartDelayMs: number } & LeaseOptions> = {}): Design => made('designs.redisSingle', o, () => ({
    kind: 'redis-single',
    persistence: o.persistence ?? 'none',
    restartDelayMs: o.restartDelayMs ?? 0,
    driftFactor: o.driftFactor ?? DEFAULT_DRIFT_FACTOR,
    clockMarginMs: o.clockMarginMs ?? DEFAULT_CLOCK_MARGIN_MS,
  }), ['persistence', 'restartDelayMs', 'driftFactor', 'clockMarginMs']),
  redlock: (o: Partial<{ nodes: number; persistence: Persistence; restartDelayMs: number } & LeaseOptions> = {}): Design => made('designs.redlock', o, () => ({
    kind: 'redlock',
    nodes: o.nodes ?? 5,
    persistence: o.persistence ?? 'none',
    restartDelayMs: o.restartDelayMs ?? 0,
    driftFactor: o.driftFactor ?? DEFAULT_DRIFT_FACTOR,
    clockMarginMs: o.clockMarginMs ?? DEFAULT_CLOCK_MARGIN_MS,
  }), ['nodes', 'persistence', 'restartDelayMs', 'driftFactor', 'clockMarginMs']),
  redisReplicated: (o: Partial<{ wait: boolean } & LeaseOptions> = {}): Design => made('designs.redisReplicated', o, () => ({
    kind: 'redis-replicated',
    wait: o.wait ?? false,
    driftFactor: o.driftFactor ?? DEFAULT_DRIFT_FACTOR,
    clockMarginMs: o.clockMarginMs ?? DEFAULT_CLOCK_MARGIN_MS,
  }), ['wait', 'driftFactor', 'clockMarginMs']),
  // reentrant: false is a pg-session design's (a library's session per call), as validateDesign takes it.
  pgSession: (o: { statementTimeoutMs?: number; reentrant?: false } = {}): Design => made('designs.pgSession', o, () => ({ kind: 'pg-session', ...o }), ['statementTimeoutMs', 'reentrant']),
  pgXact: (o: { statementTimeoutMs?: number } = {}): Design => made('designs.pgXact', o, () => ({ kind: 'pg-xact', ...o }), ['statementTimeoutMs']),
  etcdLease: (o: Partial<LeaseOptions & { leaderChangeExtendMs: number; leaseRenewal: 'last-request' }> = {}): Design => made('designs.etcdLease', o, () => ({
    kind: 'etcd-lease',
    driftFactor: o.driftFactor ?? DEFAULT_DRIFT_FACTOR,
    clockMarginMs: o.clockMarginMs ?? DEFAULT_CLOCK_MARGIN_MS,
    // Left out when not given: the design (and its fingerprint) stays what it was.
    ...(o.leaderChangeExtendMs === undefined ? {} : { leaderChangeExtendMs: o.leaderChangeExtendMs }),
    ...(o.leaseRenewal === undefined ? {} : { leaseRenewal: o.leaseRenewal }),
  }), ['driftFactor', 'clockMarginMs', 'leaderChangeExtendMs', 'leaseRenewal']),
} as const);

/**
 * Everything the model does differently per design, in one record per design
 * (RULES): a new design must fill in every field, which the compiler checks.
 * The world's step function reads these fields and never tests a design's kind.
 */
export interface DesignRules<D extends Design = Design> {
  /** Lock-service nodes the design runs on (a consensus cluster is one logical node). */
  readonly nodes: (d: D) => number;
  /** Leases carry a ttl (so `extend` applies), or live with the client's session (connection loss drops them). */
  readonly lifetime: 'ttl' | 'session';
  /** The clock a node expires keys by: its wall clock (Redis, steps hit it) or a step-immune monotonic one (etcd). */
  readonly expiryClock: 'wall' | 'monotonic';
  /** Where a grant's token comes from: a counter per resource (INCR, a sequence) or the cluster's one revision (etcd), which every delete also moves. */
  readonly tokenSource: 'per-resource-counter' | 'cluster-revision';
  /**
   * An acquire by the holder: refused (none), stacks and each release pops
   * one level (per-release: session advisory locks), or stacks and the
   * release, a commit, ends them all (until-commit: transaction advisory locks).
   */
  readonly stacking: 'none' | 'per-release' | 'until-commit';
  /** Writes reach the store at once, or are buffered in the lock's transaction and applied at its commit. */
  readonly writes: 'direct' | 'at-commit';
  /** Whether node state (keys, counters) survives a crash-restart. */
  readonly persists: (d: D) => boolean;
  /**
   * An acquire's first round: the put itself (Redis: SET NX), or a lease
   * (etcd's LeaseGrant, a ZooKeeper session) that the put follows in a later
   * round, with a ttl from the grant or renewed by the put (spec 7.6, 7.10).
   */
  readonly acquireFirstRound: (d: D) => 'put' | 'lease-from-grant' | 'lease-renewed';
  /**
   * At a crash: keys stay as they are (keep), only live ones are kept
   * (drop-expired: etcd's leader revokes leases as they expire), or the
   * replica is promoted with what it has (promote-replica: Sentinel's failover).
   */
  readonly onCrash: 'keep' | 'drop-expired' | 'promote-replica';
  /**
   * A replica: none, asynchronous (it has what a `replicate` step last
   * delivered), or waited for (WAIT 1 after every script: it has everything).
   */
  readonly replication: (d: D) => 'none' | 'async' | 'wait';
  /** At a restart that kept state: keys as they were (keep), or every lease refreshed to its full ttl (refresh: a new etcd leader). */
  readonly onRestart: 'keep' | 'refresh';
  /** What a refresh at restart adds beyond each lease's ttl (etcd: the election timeout, lessor.Promote). */
  readonly refreshExtendMs: (d: D) => number;
  /** True time a restarted node refuses to take part. */
  readonly restartDelayMs: (d: D) => number;
  /** Redlock's clock-drift allowance: driftFactor * ttl + clockMarginMs (0 for session locks). */
  readonly driftFactor: (d: D) => number;
  /** The fixed part of that allowance, ms (0 for session locks). */
  readonly clockMarginMs: (d: D) => number;
  /**
   * How long the client waits for a lock statement's reply (client clock)
   * before it ends the session and reports `timed-out`; null where the ttl
   * bounds the wait instead (a lease's reply after its ttl is `timed-out`).
   */
  readonly replyTimeoutMs: (d: D) => number | null;
  /** What a reply later than replyTimeoutMs (or a failed statement) ends: the client's whole session (session locks), or only the attempt's own connection (a transaction lock's; a library's session per call). */
  readonly lateReplyEnds: (d: D) => 'session' | 'transaction' | null;
}

type RulesByKind = { readonly [K in DesignKind]: DesignRules<Extract<Design, { kind: K }>> };

const redisRules = {
  lifetime: 'ttl',
  expiryClock: 'wall',
  tokenSource: 'per-resource-counter',
  stacking: 'none',
  writes: 'direct',
  persists: (d: { persistence: Persistence }) => d.persistence === 'aof-always',
  acquireFirstRound: () => 'put' as const,
  onCrash: 'keep',
  replication: () => 'none' as const,
  onRestart: 'keep',
  refreshExtendMs: () => 0,
  restartDelayMs: (d: { restartDelayMs: number }) => d.restartDelayMs,
  driftFactor: (d: { driftFactor: number }) => d.driftFactor,
  clockMarginMs: (d: { clockMarginMs: number }) => d.clockMarginMs,
  replyTimeoutMs: () => null,
  lateReplyEnds: () => null,
} as const;

const postgresRules = {
  nodes: () => 1,
  lifetime: 'session',
  // Nothing expires by a clock; a server's own timers are monotonic.
  expiryClock: 'monotonic',
  tokenSource: 'per-resource-counter',
  writes: 'direct',
  persists: () => true,
  acquireFirstRound: () => 'put' as const,
  onCrash: 'keep',
  replication: () => 'none' as const,
  onRestart: 'keep',
  refreshExtendMs: () => 0,
  restartDelayMs: () => 0,
  driftFactor: () => 0,
  clockMarginMs: () => 0,
  replyTimeoutMs: (d: { statementTimeoutMs?: number }) => d.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS,
} as const;

/** The DesignRules of each design kind (rulesOf reads them). */
export const RULES: RulesByKind = frozen({
  'redis-single': { ...redisRules, nodes: () => 1 },
  redlock: { ...redisRules, nodes: (d) => d.nodes },
  'redis-replicated': {
    ...redisRules,
    nodes: () => 1,
    // The primary keeps nothing across its crash; the promoted replica keeps what it had.
    persists: () => true,
    onCrash: 'promote-replica',
    replication: (d) => (d.wait ? 'wait' : 'async'),
    restartDelayMs: () => 0,
  },
  // A library that opens a session per call (reentrant: false) loses only that call's own session, as a transaction lock its connection.
  'pg-session': { ...postgresRules, stacking: 'per-release', lateReplyEnds: (d) => (d.reentrant === false ? 'transaction' : 'session') },
  // Each lock has its own transaction's connection: a late reply drops that one only.
  'pg-xact': { ...postgresRules, stacking: 'until-commit', writes: 'at-commit', lateReplyEnds: () => 'transaction' },
  'etcd-lease': {
    nodes: () => 1,
    lifetime: 'ttl',
    expiryClock: 'monotonic',
    tokenSource: 'cluster-revision',
    stacking: 'none',
    writes: 'direct',
    persists: () => true,
    acquireFirstRound: (d) => (d.leaseRenewal === 'last-request' ? 'lease-renewed' : 'lease-from-grant'),
    onCrash: 'drop-expired',
    replication: () => 'none' as const,
    onRestart: 'refresh',
    refreshExtendMs: (d) => d.leaderChangeExtendMs ?? 0,
    restartDelayMs: () => 0,
    driftFactor: (d) => d.driftFactor,
    clockMarginMs: (d) => d.clockMarginMs,
    replyTimeoutMs: () => null,
    lateReplyEnds: () => null,
  },
});

/** The rules of `design`'s kind. */
export function rulesOf(design: Design): DesignRules {
  return RULES[design.kind] as DesignRules;
}

/** Number of lock-service nodes the design runs on (a consensus cluster is one logical node). */
export function nodeCount(design: Design): number {
  return rulesOf(design).nodes(design);
}

/** Whether leases carry a ttl (and so `extend` applies). PostgreSQL locks live with their session instead. */
export function hasTtl(design: Design): boolean {
  return rulesOf(design).lifetime === 'ttl';
}

/** Whether a lock lives with the client's connection (connection loss drops it on the server). */
export function isSessionBound(design: Design): boolean {
  return !hasTtl(design);
}

/** Whether an acquire by the current holder stacks (PostgreSQL advisory locks do). */
export function isReentrant(design: Design): boolean {
  // A library over session locks may open a session per call: then a holder's second acquire is refused (reentrant: false).
  return rulesOf(design).stacking !== 'none' && !(design.kind === 'pg-session' && design.reentrant === false);
}

/** Whether node state (keys, counters) survives a crash-restart. */
export function persists(design: Design): boolean {
  return rulesOf(design).persists(design);
}

/** Whether the node's key expiry follows its wall clock (Redis) or a step-immune monotonic clock (etcd). */
export function expiresByWallClock(design: Design): boolean {
  return rulesOf(design).expiryClock === 'wall';
}

export function restartDelayMs(design: Design): number {
  return rulesOf(design).restartDelayMs(design);
}

/** What a restart's lease refresh adds beyond each ttl (etcd's new leader: the election timeout). */
export function refreshExtendMs(design: Design): number {
  return rulesOf(design).refreshExtendMs(design);
}

export function driftFactor(design: Design): number {
  return rulesOf(design).driftFactor(design);
}

/** The client's statement timeout on session-bound designs (null on ttl designs: their ttl bounds the wait). */
export function replyTimeoutMs(design: Design): number | null {
  return rulesOf(design).replyTimeoutMs(design);
}

export function clockMarginMs(design: Design): number {
  return rulesOf(design).clockMarginMs(design);
}

/** What a statement's failure or late reply ends: the client's whole session, only the attempt's own connection (a transaction, a session per call), or nothing (ttl designs). */
export function lateReplyEnds(design: Design): 'session' | 'transaction' | null {
  return rulesOf(design).lateReplyEnds(design);
}

/** Whether the design's node has a replica, and whether its scripts wait for it (WAIT 1). */
export function replication(design: Design): 'none' | 'async' | 'wait' {
  return rulesOf(design).replication(design);
}

/** Votes needed for a grant: a majority of the nodes. */
export function quorum(design: Design): number {
  return Math.floor(nodeCount(design) / 2) + 1;
}

/**
 * The clock-drift allowance subtracted from a lease's validity, as in the
 * model: ceil(driftFactor * ttl) + 2 ms (clockMarginMs); a
 * design with driftRounding 'round' rounds to nearest.
 */
export function driftMarginMs(design: Design, ttlMs: number): number {
  if (!hasTtl(design)) return 0;
  const rounding = 'driftRounding' in design && design.driftRounding === 'round' ? Math.round : Math.ceil;
  return rounding(driftFactor(design) * ttlMs) + clockMarginMs(design);
}

/** Every design kind. */
export const DESIGN_KINDS: readonly DesignKind[] = frozen(['redis-single', 'redlock', 'redis-replicated', 'pg-session', 'pg-xact', 'etcd-lease']);
/** Every store policy. */
export const STORE_POLICIES: readonly StorePolicy[] = frozen(['unfenced', 'strict', 'monotonic', 'transactional']);

/**
 * Checks a design's every field, as a design from `designs` has it, and
 * returns it. The model's public functions that take a design pass through
 * here (a wrong type, null or an unknown kind is an InvalidInputError naming
 * the field, never a TypeError); the step function's own reads do not.
 */
export function validateDesign(design: Design): Design {
  if (typeof design === 'object' && design !== null && CHECKED.has(design)) return design;
  checkObject(design, 'design', `a lock design (an object with kind ${DESIGN_KINDS.map((k) => `'${k}'`).join(', ')})`);
  checkOneOf(design.kind, 'design.kind', DESIGN_KINDS);
  // A misspelt optional field (`driftRouding`) would otherwise read as absent: the design would be another, silently.
  checkKnownKeys(design, `${design.kind} design`, DESIGN_FIELDS[design.kind]);
  // A switch and module-level helpers, not ts-pattern and closures: this runs at every public step (the world's design).
  const d = design;
  switch (d.kind) {
    case 'redis-single':
    case 'redlock':
      if (d.kind === 'redlock' && (!Number.isInteger(d.nodes) || d.nodes < 1 || d.nodes > 15)) failDesign(`redlock needs 1..15 nodes, got ${shown(d.nodes)}`);
      checkOneOf(d.persistence, `${d.kind} persistence`, PERSISTENCES);
      checkTerms(d);
      break;
    case 'redis-replicated':
      if (typeof d.wait !== 'boolean') refuse('redis-replicated wait', 'a boolean', d.wait);
      break;
    case 'pg-session':
    case 'pg-xact':
      if ('reentrant' in d && d.reentrant !== undefined && d.reentrant !== false) refuse(`${d.kind} reentrant`, 'false or absent', d.reentrant);
      // Absent is the default; null or a string would be read as the default by replyTimeoutMs's ??.
      if (d.statementTimeoutMs !== undefined && typeof d.statementTimeoutMs !== 'number') refuse(`${d.kind} statementTimeoutMs`, 'a positive integer of ms or absent', d.statementTimeoutMs);
      break;
    case 'etcd-lease':
      optionalOneOf(d.leaseRenewal, d.kind, 'leaseRenewal', LEASE_RENEWALS);
      if (d.leaderChangeExtendMs !== undefined && typeof d.leaderChangeExtendMs !== 'number') refuse('etcd-lease leaderChangeExtendMs', 'an integer in [0, 60000] or absent', d.leaderChangeExtendMs);
      checkTerms(d);
      break;
    default: {
      const unknown: never = d;
      return unknown;
    }
  }
  const df = driftFactor(design);
  if (!(typeof df === 'number' && df >= 0 && df < 1)) failDesign(`driftFactor must be in [0, 1), got ${shown(df)}`);
  const cm = clockMarginMs(design);
  if (!Number.isInteger(cm) || cm < 0 || cm > 1000) failDesign(`clockMarginMs must be an integer in [0, 1000], got ${shown(cm)}`);
  const st = replyTimeoutMs(design);
  if (st !== null && (!Number.isInteger(st) || st < 1 || st > 2 ** 31 - 1)) failDesign(`statementTimeoutMs must be a positive integer, got ${shown(st)}`);
  const rd = restartDelayMs(design);
  // Bounded as every duration is: a restarted node's availability time must stay a time the world check accepts.
  if (!Number.isInteger(rd) || rd < 0 || rd > MAX_TTL_MS) failDesign(`restartDelayMs must be an integer in [0, ${MAX_TTL_MS}], got ${shown(rd)}`);
  const re = refreshExtendMs(design);
  if (!Number.isInteger(re) || re < 0 || re > 60_000) failDesign(`leaderChangeExtendMs must be an integer in [0, 60000], got ${shown(re)}`);
  if (unchangeable(design)) CHECKED.add(design);
  return design;
}

/**
 * Designs checked whole that cannot have changed since: frozen, with plain
 * values (no getter, which could answer otherwise the next time), their
 * failedExtend too. The world check reads the design at every public step;
 * such a design (the designs helpers', MATRIX_ROWS', SCENARIOS') is checked
 * once. A design a caller can still edit is checked every time.
 */
const CHECKED = new WeakSet<object>();

function unchangeable(o: object): boolean {
  if (!Object.isFrozen(o)) return false;
  for (const d of Object.values(Object.getOwnPropertyDescriptors(o))) {
    if (!('value' in d)) return false;
    if (typeof d.value === 'object' && d.value !== null && !unchangeable(d.value as object)) return false;
  }
  return true;
}

/** The fields of each design kind (Design): any other is refused. */
const TERMS = ['clientDeadline', 'clientTimeout', 'decides', 'failedExtend'] as const;
const DESIGN_FIELDS: Readonly<Record<DesignKind, readonly string[]>> = Object.freeze({
  'redis-single': ['kind', 'persistence', 'restartDelayMs', 'driftFactor', 'clockMarginMs', 'driftRounding', ...TERMS],
  redlock: ['kind', 'nodes', 'persistence', 'restartDelayMs', 'driftFactor', 'clockMarginMs', 'driftRounding', ...TERMS],
  'redis-replicated': ['kind', 'wait', 'driftFactor', 'clockMarginMs'],
  'pg-session': ['kind', 'reentrant', 'statementTimeoutMs'],
  'pg-xact': ['kind', 'statementTimeoutMs'],
  'etcd-lease': ['kind', 'driftFactor', 'clockMarginMs', 'driftRounding', 'leaderChangeExtendMs', 'leaseRenewal', ...TERMS],
});

const PERSISTENCES: readonly Persistence[] = Object.freeze(['none', 'aof-always'] as const);
const LEASE_RENEWALS: readonly string[] = Object.freeze(['last-request']);
const CLIENT_DEADLINES: readonly string[] = Object.freeze(['none']);
const DRIFT_ROUNDINGS: readonly string[] = Object.freeze(['ceil', 'round']);
const DECIDES: readonly string[] = Object.freeze(['every-reply']);
const FAILED_EXTEND_LEASE: readonly string[] = Object.freeze(['kept', 'unchanged', 'dropped', 'dropped-if-denied']);
const FAILED_EXTEND_KEYS: readonly string[] = Object.freeze(['kept', 'deleted']);

function failDesign(msg: string): never {
  throw new InvalidInputError('invalid-config', msg);
}

function optionalOneOf(value: unknown, kind: DesignKind, name: string, allowed: readonly string[]): void {
  if (value !== undefined) checkOneOf(value, `${kind} ${name}`, allowed);
}

/** A ttl design's lease terms (spec 7.11): each absent or one of its values. */
function checkTerms(d: Extract<Design, { kind: 'redis-single' | 'redlock' | 'etcd-lease' }>): void {
  optionalOneOf(d.clientDeadline, d.kind, 'clientDeadline', CLIENT_DEADLINES);
  optionalOneOf(d.clientTimeout, d.kind, 'clientTimeout', CLIENT_DEADLINES);
  optionalOneOf(d.decides, d.kind, 'decides', DECIDES);
  if (d.failedExtend !== undefined) {
    checkObject(d.failedExtend, `${d.kind} failedExtend`, "an object { lease: 'kept' | 'unchanged' | 'dropped' | 'dropped-if-denied', keys: 'kept' | 'deleted' } or absent");
    checkKnownKeys(d.failedExtend, `${d.kind} failedExtend`, ['lease', 'keys']);
    checkOneOf(d.failedExtend.lease, `${d.kind} failedExtend.lease`, FAILED_EXTEND_LEASE);
    checkOneOf(d.failedExtend.keys, `${d.kind} failedExtend.keys`, FAILED_EXTEND_KEYS);
  }
  optionalOneOf(d.driftRounding, d.kind, 'driftRounding', DRIFT_ROUNDINGS);
}

export function storeFits(design: Design, policy: StorePolicy): boolean {
  // The transactional store is the lock's own transaction: only a design that writes at commit has one.
  return (policy === 'transactional') === (rulesOf(design).writes === 'at-commit');
}

/** A short human label, e.g. "redlock(5 nodes, aof-always, delayed restart 20ms)". */
export function describeDesign(design: Design): string {
  validateDesign(design);
  // A library's lease terms (spec 7.11) are part of the label: the model of a contract is another design than lockcheck's client.
  const margin = `${clockMarginMs(design) === DEFAULT_CLOCK_MARGIN_MS ? '' : `, clock margin ${clockMarginMs(design)}ms`}${termsLabel(design)}`;
  return match(design)
    .with({ kind: 'redis-single' }, (d) => `redis-single(${d.persistence}${d.restartDelayMs ? `, delayed restart ${d.restartDelayMs}ms` : ''}${margin})`)
    .with({ kind: 'redlock' }, (d) => `redlock(${d.nodes} nodes, ${d.persistence}${d.restartDelayMs ? `, delayed restart ${d.restartDelayMs}ms` : ''}${margin})`)
    .with({ kind: 'redis-replicated' }, (d) => `redis-replicated(${d.wait ? 'WAIT 1' : 'async'}${margin})`)
    .with({ kind: 'pg-session' }, (d) => `pg-session${statementTimeout(d, d.reentrant === false ? ['not reentrant'] : [])}`)
    .with({ kind: 'pg-xact' }, (d) => `pg-xact${statementTimeout(d, [])}`)
    .with({ kind: 'etcd-lease' }, () => `etcd-lease${margin ? `(${margin.slice(2)})` : ''}`)
    .exhaustive();
}

const FAILED_EXTEND_LABEL: Readonly<Record<FailedExtend['lease'], string>> = { kept: 'keeps lease', unchanged: 'keeps unchanged lease', dropped: 'drops lease', 'dropped-if-denied': 'drops lease if denied' };

/** ", no client deadline, failed extend drops lease, deletes keys, drift rounded": what a contract changes, or ''. */
function termsLabel(design: Design): string {
  const terms = leaseTerms(design);
  const rounding = 'driftRounding' in design && design.driftRounding === 'round' ? ', drift rounded' : '';
  const extend = terms.failedExtend === undefined ? '' : `, failed extend ${FAILED_EXTEND_LABEL[terms.failedExtend.lease]}, ${terms.failedExtend.keys === 'kept' ? 'keeps' : 'deletes'} keys`;
  return `${terms.clientDeadline === 'none' ? ', no client deadline' : ''}${terms.clientTimeout === 'none' ? ', no client timeout' : ''}${terms.decides === 'every-reply' ? ', decides on every reply' : ''}${extend}${rounding}`;
}

function statementTimeout(d: { statementTimeoutMs?: number }, more: readonly string[]): string {
  const parts = [...(d.statementTimeoutMs === undefined || d.statementTimeoutMs === DEFAULT_STATEMENT_TIMEOUT_MS ? [] : [`statement timeout ${d.statementTimeoutMs}ms`]), ...more];
  return parts.length ? `(${parts.join(', ')})` : '';
}
