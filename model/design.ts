import { match } from 'ts-pattern';
import { InvalidInputError } from './errors.ts';

/**
 * The lock designs lockcheck specifies (spec/SPEC.md, "Designs"). A design
 * fixes how many lock-service nodes there are, how they keep state across a
 * restart, where the fencing token comes from and how a client computes the
 * validity of its lease.
 */
export type Design =
  /** One Redis node: SET NX PX, compare-and-delete release, INCR counter token. */
  | { readonly kind: 'redis-single'; readonly persistence: Persistence; readonly restartDelayMs: number; readonly driftFactor: number; readonly clockMarginMs: number; readonly driftRounding?: DriftRounding }
  /** Redlock over N independent Redis nodes; token = max of the quorum's counters, written back to the quorum. */
  | { readonly kind: 'redlock'; readonly nodes: number; readonly persistence: Persistence; readonly restartDelayMs: number; readonly driftFactor: number; readonly clockMarginMs: number; readonly driftRounding?: DriftRounding }
  /** PostgreSQL session-scoped advisory lock: lives with its connection, stacks; token from a sequence. */
  | { readonly kind: 'pg-session'; readonly reentrant?: false }
  /** PostgreSQL transaction-scoped advisory lock: released at commit or rollback; writes commit with it. */
  | { readonly kind: 'pg-xact' }
  /** Consensus lease lock (etcd): lease plus put-if-absent; token = the key's create revision. */
  | { readonly kind: 'etcd-lease'; readonly driftFactor: number; readonly clockMarginMs: number; readonly driftRounding?: DriftRounding };

/**
 * How driftFactor * ttl becomes whole ms of the drift allowance: Redlock's
 * description (and the model's default) rounds up; a library may round to
 * nearest (redlock on npm does), which it declares in its contract.
 */
export type DriftRounding = 'ceil' | 'round';

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

export const DEFAULT_DRIFT_FACTOR = 0.01;
/** The fixed part of the drift allowance: Redlock's 2 ms for Redis's expiry precision. */
export const DEFAULT_CLOCK_MARGIN_MS = 2;

type LeaseOptions = { driftFactor: number; clockMarginMs: number };

export const designs = {
  redisSingle: (o: Partial<{ persistence: Persistence; restartDelayMs: number } & LeaseOptions> = {}): Design => ({
    kind: 'redis-single',
    persistence: o.persistence ?? 'none',
    restartDelayMs: o.restartDelayMs ?? 0,
    driftFactor: o.driftFactor ?? DEFAULT_DRIFT_FACTOR,
    clockMarginMs: o.clockMarginMs ?? DEFAULT_CLOCK_MARGIN_MS,
  }),
  redlock: (o: Partial<{ nodes: number; persistence: Persistence; restartDelayMs: number } & LeaseOptions> = {}): Design => ({
    kind: 'redlock',
    nodes: o.nodes ?? 5,
    persistence: o.persistence ?? 'none',
    restartDelayMs: o.restartDelayMs ?? 0,
    driftFactor: o.driftFactor ?? DEFAULT_DRIFT_FACTOR,
    clockMarginMs: o.clockMarginMs ?? DEFAULT_CLOCK_MARGIN_MS,
  }),
  pgSession: (): Design => ({ kind: 'pg-session' }),
  pgXact: (): Design => ({ kind: 'pg-xact' }),
  etcdLease: (o: Partial<LeaseOptions> = {}): Design => ({
    kind: 'etcd-lease',
    driftFactor: o.driftFactor ?? DEFAULT_DRIFT_FACTOR,
    clockMarginMs: o.clockMarginMs ?? DEFAULT_CLOCK_MARGIN_MS,
  }),
} as const;

/** Number of lock-service nodes the design runs on (a consensus cluster is one logical node). */
export function nodeCount(design: Design): number {
  return match(design)
    .with({ kind: 'redlock' }, (d) => d.nodes)
    .with({ kind: 'redis-single' }, { kind: 'pg-session' }, { kind: 'pg-xact' }, { kind: 'etcd-lease' }, () => 1)
    .exhaustive();
}

/** Whether leases carry a ttl (and so `extend` applies). PostgreSQL locks live with their session instead. */
export function hasTtl(design: Design): boolean {
  return match(design.kind)
    .with('redis-single', 'redlock', 'etcd-lease', () => true)
    .with('pg-session', 'pg-xact', () => false)
    .exhaustive();
}

/** Whether a lock lives with the client's connection (connection loss drops it on the server). */
export function isSessionBound(design: Design): boolean {
  return !hasTtl(design);
}

/** Whether an acquire by the current holder stacks (PostgreSQL advisory locks do). */
export function isReentrant(design: Design): boolean {
  // A library over session locks may open a session per call: then a holder's second acquire is refused (reentrant: false).
  return isSessionBound(design) && !(design.kind === 'pg-session' && design.reentrant === false);
}

/** Whether node state (keys, counters) survives a crash-restart. */
export function persists(design: Design): boolean {
  return match(design)
    .with({ kind: 'redis-single' }, { kind: 'redlock' }, (d) => d.persistence === 'aof-always')
    .with({ kind: 'pg-session' }, { kind: 'pg-xact' }, { kind: 'etcd-lease' }, () => true)
    .exhaustive();
}

/** Whether the node's key expiry follows its wall clock (Redis) or a step-immune monotonic clock (etcd). */
export function expiresByWallClock(design: Design): boolean {
  return design.kind === 'redis-single' || design.kind === 'redlock';
}

export function restartDelayMs(design: Design): number {
  return design.kind === 'redis-single' || design.kind === 'redlock' ? design.restartDelayMs : 0;
}

export function driftFactor(design: Design): number {
  return design.kind === 'redis-single' || design.kind === 'redlock' || design.kind === 'etcd-lease' ? design.driftFactor : 0;
}

export function clockMarginMs(design: Design): number {
  return design.kind === 'redis-single' || design.kind === 'redlock' || design.kind === 'etcd-lease' ? design.clockMarginMs : 0;
}

/** Votes needed for a grant: a majority of the nodes. */
export function quorum(design: Design): number {
  return Math.floor(nodeCount(design) / 2) + 1;
}

/**
 * The clock-drift allowance subtracted from a lease's validity, as in the
 * Redlock description: ceil(driftFactor * ttl) + 2 ms (clockMarginMs); a
 * design with driftRounding 'round' rounds to nearest.
 */
export function driftMarginMs(design: Design, ttlMs: number): number {
  if (!hasTtl(design)) return 0;
  const rounding = 'driftRounding' in design && design.driftRounding === 'round' ? Math.round : Math.ceil;
  return rounding(driftFactor(design) * ttlMs) + clockMarginMs(design);
}

export function validateDesign(design: Design): Design {
  const fail = (msg: string): never => {
    throw new InvalidInputError('invalid-config', msg);
  };
  match(design)
    .with({ kind: 'redlock' }, (d) => {
      if (!Number.isInteger(d.nodes) || d.nodes < 1 || d.nodes > 15) fail(`redlock needs 1..15 nodes, got ${d.nodes}`);
    })
    .otherwise(() => undefined);
  const df = driftFactor(design);
  if (!(df >= 0 && df < 1)) fail(`driftFactor must be in [0, 1), got ${df}`);
  const cm = clockMarginMs(design);
  if (!Number.isInteger(cm) || cm < 0 || cm > 1000) fail(`clockMarginMs must be an integer in [0, 1000], got ${cm}`);
  const rd = restartDelayMs(design);
  if (!Number.isInteger(rd) || rd < 0) fail(`restartDelayMs must be a non-negative integer, got ${rd}`);
  return design;
}

export function storeFits(design: Design, policy: StorePolicy): boolean {
  return policy === 'transactional' ? design.kind === 'pg-xact' : design.kind !== 'pg-xact';
}

/** A short human label, e.g. "redlock(5 nodes, aof-always, delayed restart 20ms)". */
export function describeDesign(design: Design): string {
  const margin = clockMarginMs(design) === DEFAULT_CLOCK_MARGIN_MS ? '' : `, clock margin ${clockMarginMs(design)}ms`;
  return match(design)
    .with({ kind: 'redis-single' }, (d) => `redis-single(${d.persistence}${d.restartDelayMs ? `, delayed restart ${d.restartDelayMs}ms` : ''}${margin})`)
    .with({ kind: 'redlock' }, (d) => `redlock(${d.nodes} nodes, ${d.persistence}${d.restartDelayMs ? `, delayed restart ${d.restartDelayMs}ms` : ''}${margin})`)
    .with({ kind: 'pg-session' }, () => 'pg-session')
    .with({ kind: 'pg-xact' }, () => 'pg-xact')
    .with({ kind: 'etcd-lease' }, () => `etcd-lease${margin ? `(${margin.slice(2)})` : ''}`)
    .exhaustive();
}
