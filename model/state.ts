import type { Clock } from './clock.ts';
import { clockAt } from './clock.ts';
import type { Design, StorePolicy } from './design.ts';
import { nodeCount, replication } from './design.ts';
import { checkConfig } from './worldCheck.ts';
import { frozen } from './frozen.ts';
import type { Outcome } from './outcome.ts';
import type { Arrival } from './round.ts';
import { relativeArrivals } from './round.ts';
import type { StoreState } from './store.ts';
import { emptyStore } from './store.ts';
import { entryOf } from './record.ts';

/**
 * The world's state as plain data: lock-service nodes, clients, the store,
 * and ghost variables that exist only so the properties can be checked
 * (the true order of grants; no process can observe them).
 */

/** Who set a key: a client and the number of its acquisition attempt (the random owner value of a real lock). */
export interface Owner {
  /** The client's index. */
  readonly client: number;
  /** The client's acquisition attempt, from 1. */
  readonly attempt: number;
}

/** A lock key as a node holds it. */
export interface NodeKey {
  readonly owner: Owner;
  /** Expiry on the node's expiry clock; null for a session-bound lock. */
  readonly expiresAtMs: number | null;
  /** The ttl it was set or last extended with, ms; null for a session-bound lock. */
  readonly ttlMs: number | null;
  /** Stack depth (PostgreSQL advisory locks stack; others are always 1). */
  readonly count: number;
  /** Ghost: true time of the last grant, extension or lease refresh (LIVE-1). */
  readonly liveSinceTrueMs: number;
}

/** One lock-service node: its clocks, whether it is up, its keys and token counters. */
export interface NodeState {
  /** Wall clock: Redis expires keys by it; steps hit it. */
  readonly wall: Clock;
  /** Monotonic clock: etcd expires leases by it; steps do not hit it. */
  readonly mono: Clock;
  /** False between a crash and its restart. */
  readonly up: boolean;
  /** True time before which a restarted node refuses to take part (delayed restart). */
  readonly availableFromTrueMs: number;
  /** Lock keys by resource. */
  readonly keys: Readonly<Record<string, NodeKey>>;
  /** Token counters: per resource (Redis INCR, PostgreSQL sequence) or one revision (etcd). */
  readonly counters: Readonly<Record<string, bigint>>;
  /** The replica's copy of keys and counters (redis-replicated), as far as replication has delivered it; absent without a replica. */
  readonly replica?: ReplicaState;
  /** Every reply from this node comes this much later, or never (a black hole); absent: no delay. */
  readonly delay?: number | 'never';
}

/** What a replica holds: the primary's keys and counters as of the last replication. */
export interface ReplicaState {
  readonly keys: Readonly<Record<string, NodeKey>>;
  readonly counters: Readonly<Record<string, bigint>>;
}

/** A lease as its client believes it holds it. */
export interface Lease {
  readonly owner: Owner;
  /** Its fencing token. */
  readonly token: bigint;
  /** Deadline on the client's monotonic clock; null for a session-bound lock. */
  readonly validUntilMs: number | null;
  /** Stack depth: acquires by the holder not yet released (1 unless the design stacks). */
  readonly count: number;
  /** Writes buffered in the open transaction (pg-xact), applied at commit. */
  readonly buffered: readonly string[];
  /** Ghost: the grant's place in the true order of grants of its resource. */
  readonly epoch: number;
}

/** A write on its way to the store (ClientState.pendingWrite). */
export interface PendingWrite {
  readonly resource: string;
  readonly value: string;
  /** The token it carries. */
  readonly token: bigint;
  /** Ghost: the epoch of the lease it was written under (STORE-1). */
  readonly epoch: number;
}

/** One client: its monotonic clock, whether it is paused, what it has in flight, and the leases it believes it holds. */
export interface ClientState {
  /** The client's monotonic clock (its leases' deadlines are on it; drift faults hit it). */
  readonly mono: Clock;
  readonly paused: boolean;
  /**
   * A write whose lease check passed and that has not reached the store: held by the paused client (sent unchecked at
   * resume), or, while the client runs, held by the network (a delayed request: it lands at `deliver`; the client waits).
   */
  readonly pendingWrite: PendingWrite | null;
  /** An operation sent just before the pause, its replies read at resume. */
  readonly inFlight: InFlight | null;
  /** The server dropped this client's session while it was paused; it notices at resume. */
  readonly sessionLost: boolean;
  /** Acquisition attempts so far (the next attempt's Owner.attempt is one more). */
  readonly attempts: number;
  /** The leases it believes it holds, by resource. */
  readonly leases: Readonly<Record<string, Lease>>;
}

/**
 * An operation in flight across its client's pause. A release, write or read
 * has its outcome settled when sent (`reply`); an acquire's or extend's
 * first round is judged at the resume, by the client's clock then.
 */
export type InFlight =
  | {
      readonly kind: 'reply';
      readonly outcome: Outcome;
      readonly doneMs: number;
      /**
       * A statement to a PostgreSQL server: a client paused past its timeout
       * (true time `afterMs`) reads no reply at its resume but its timer, and
       * drops the connection (7.4): the whole session, the lease's own
       * transaction, or nothing more (a stacked level, a COMMIT that ran).
       */
      readonly missed?: { readonly afterMs: number; readonly ends: 'session' | 'transaction' | 'nothing'; readonly resource: string };
    }
  /**
   * A PostgreSQL acquire whose first round trip is a connect or a BEGIN: its
   * lock statement goes out only once the client has read that reply (at
   * `arrivalMs`, or its resume), unless its timeout (`deadlineMs`) came first.
   */
  | { readonly kind: 'later'; readonly client: number; readonly resource: string; readonly arrivalMs: number; readonly deadlineMs: number }
  | {
      readonly kind: 'acquire';
      readonly resource: string;
      readonly ttlMs: number;
      readonly owner: Owner;
      readonly startedMono: number;
      readonly deadlineMs: number;
      readonly arrivals: readonly Arrival[];
      /** Per node: the token it minted for us, or null (held by another, or no request arrived). */
      readonly votes: ReadonlyArray<bigint | null>;
      readonly retries: number;
      readonly retryDelayMs: number;
    }
  | {
      readonly kind: 'extend';
      readonly resource: string;
      readonly ttlMs: number;
      readonly startedMono: number;
      readonly deadlineMs: number;
      readonly arrivals: readonly Arrival[];
      readonly votes: readonly boolean[];
    }
  /**
   * A consensus lock's acquire paused between its rounds (etcd, ZooKeeper):
   * its first round only granted a lease (a session), which changes no
   * lock state; the put goes out once the client has read that reply (at
   * `arrival`, or its resume), unless its timeout (`deadlineMs`) came first.
   * `leaseExpiresAtMs`: the lease's end on the node's expiry clock, had
   * nothing renewed it since the grant.
   */
  | {
      readonly kind: 'lease';
      readonly resource: string;
      readonly ttlMs: number;
      readonly owner: Owner;
      readonly startedMono: number;
      readonly deadlineMs: number;
      readonly arrival: Arrival;
      readonly leaseExpiresAtMs: number;
      readonly retries: number;
      readonly retryDelayMs: number;
    };

/** Whether a client's in-flight operation is a lock-service round the client times by its clock (an acquire's or extend's). */
export function roundInFlight(f: InFlight | null): boolean {
  return f?.kind === 'acquire' || f?.kind === 'extend' || f?.kind === 'lease';
}

/** An outcome as a string (a token as its digits and n). */
export function outcomeKey(o: Outcome): string {
  return JSON.stringify(o, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v));
}

/** An in-flight operation as a string with its times relative to now and to the client's clock (for state keys). */
export function inFlightKey(f: InFlight, nowMs: number, monoMs: number): string {
  switch (f.kind) {
    case 'reply':
      return `reply:${outcomeKey(f.outcome)}:${f.doneMs - nowMs}${f.missed === undefined ? '' : `:${f.missed.afterMs - nowMs}/${f.missed.ends}/${f.missed.resource}`}`;
    case 'later':
      return `later:${f.resource}:${f.arrivalMs - nowMs}:${f.deadlineMs - nowMs}`;
    case 'acquire':
      return `acquire:${f.resource}:${f.ttlMs}:${f.owner.client}/${f.owner.attempt}:${f.startedMono - monoMs}:${f.deadlineMs - nowMs}:${relativeArrivals(f.arrivals, nowMs)}:${f.votes.join(',')}:${f.retries}:${f.retryDelayMs}`;
    case 'extend':
      return `extend:${f.resource}:${f.ttlMs}:${f.startedMono - monoMs}:${f.deadlineMs - nowMs}:${relativeArrivals(f.arrivals, nowMs)}:${f.votes.join(',')}`;
    case 'lease':
      return `lease:${f.resource}:${f.ttlMs}:${f.owner.client}/${f.owner.attempt}:${f.startedMono - monoMs}:${f.deadlineMs - nowMs}:${relativeArrivals([f.arrival], nowMs)}:${f.leaseExpiresAtMs - nowMs}:${f.retries}:${f.retryDelayMs}`;
  }
}

/** Ghost variables of one resource: the true order of its grants and writes, which no process can observe. */
export interface GhostResource {
  /** Number of grants so far, in true order. */
  readonly grants: number;
  /** Highest token granted so far (FENCE-1). */
  readonly maxToken: bigint | null;
  /** Highest epoch of an accepted write (STORE-1). */
  readonly lastAcceptedEpoch: number;
}

/** What a world is made of (initialWorld). */
export interface WorldConfig {
  /** The lock design the world runs. */
  readonly design: Design;
  /** The store's policy. */
  readonly store: StorePolicy;
  /** Number of clients, 1..MAX_CLIENTS. */
  readonly clients: number;
  /** Where token counters start (a fresh counter issues tokenBase + 1); default 0. Lets a run reach 2^53 and 2^63-1. */
  readonly tokenBase?: bigint;
  /**
   * How closely the nodes' expiry clocks follow the model's time, in ms
   * (default 0: the runner drives them). A key within this distance of its
   * expiry may be alive or dead. For servers on their own real clocks, which
   * the runner can only pace (spec §7.8).
   */
  readonly expiryToleranceMs?: number;
  /**
   * The clients' bound on each request round to the lock-service nodes, in
   * ms on their own clocks (ttl designs). Default: the ttl of the operation
   * (1000 ms for a release).
   */
  readonly requestTimeoutMs?: number;
}

/** The whole state of the model at one instant: what step() takes and returns. */
export interface World {
  readonly config: WorldConfig;
  /** True time, ms. */
  readonly nowMs: number;
  readonly nodes: readonly NodeState[];
  readonly clients: readonly ClientState[];
  /** Links that lose every message, as "client:node". */
  readonly partitions: readonly string[];
  readonly store: StoreState;
  /** Ghost variables by resource (ghostOf). */
  readonly ghost: Readonly<Record<string, GhostResource>>;
}

/** The most clients a world may have. */
export const MAX_CLIENTS = 16;
/** The largest WorldConfig.expiryToleranceMs, in ms. */
export const MAX_EXPIRY_TOLERANCE_MS = 1000;

/**
 * The world at true time 0: every node up with no keys, clocks at 0, the
 * clients idle with no leases, an empty store. Throws InvalidInputError for
 * a config that is not valid (naming the field).
 */
export function initialWorld(config: WorldConfig): World {
  checkConfig(config, 'initialWorld config');
  const plain: NodeState = { wall: clockAt(), mono: clockAt(), up: true, availableFromTrueMs: 0, keys: {}, counters: {} };
  const node: NodeState = replication(config.design) === 'none' ? plain : { ...plain, replica: { keys: {}, counters: {} } };
  const client: ClientState = { mono: clockAt(), paused: false, pendingWrite: null, inFlight: null, sessionLost: false, attempts: 0, leases: {} };
  return {
    config,
    nowMs: 0,
    nodes: Array.from({ length: nodeCount(config.design) }, () => node),
    clients: Array.from({ length: config.clients }, () => client),
    partitions: [],
    store: emptyStore(config.store),
    ghost: {},
  };
}

/** A resource's ghost before its first grant. */
export const NO_GHOST: GhostResource = frozen({ grants: 0, maxToken: null, lastAcceptedEpoch: 0 });

export function ghostOf(world: World, resource: string): GhostResource {
  return entryOf(world.ghost, resource) ?? NO_GHOST;
}

export function sameOwner(a: Owner, b: Owner): boolean {
  return a.client === b.client && a.attempt === b.attempt;
}
