import type { FaultInjectors } from './faults.ts';
import type { Design, DriftRounding, FailedExtend, StorePolicy } from '../model/design.ts';
import type { AcquireOptions, AcquireResult, ExtendResult } from '../impl/leaseLock.ts';
import type { Lease } from '../impl/lease.ts';
import type { FencedStore } from '../impl/fencedStore.ts';
import type { MonotonicClock } from '../impl/clock.ts';
import type { Misconfiguration } from './configuration.ts';

/**
 * The adapter API: what a lock backend implements to be checked by the
 * conformance suite. A backend gives each simulated client a LockClient; its
 * environment gives the runner control over time, and the fault injectors it
 * provides are the faults the backend takes. The runner
 * drives model and backend with the same commands and compares outcomes.
 */

/** What the backend is, and so which commands and properties apply. */
export interface Capabilities {
  /** The store the backend writes through, and the policy it enforces (`unfenced` if none). */
  readonly store: StorePolicy;
  /** Leases carry a ttl (extend applies); false for session-bound locks. */
  readonly ttl: boolean;
  /** The lock lives with the client's connection. */
  readonly sessionBound: boolean;
  /** An acquire by the holder stacks. */
  readonly reentrant: boolean;
  /**
   * The lock hands out fencing tokens (default true). A lock without them
   * (most Redlock libraries) reports token 0n; the runner then compares every
   * outcome but the tokens, and its store must be unfenced.
   */
  readonly tokens?: boolean;
  /**
   * For nodes on their own real clocks (servers the runner does not start):
   * how closely the runner's pacing follows them, in ms. Keys this close to
   * their expiry may be alive or dead; a run whose real time strays further
   * stops as inconclusive (TimingError). Absent: the runner drives the clocks.
   */
  readonly expiryToleranceMs?: number;
  /**
   * The unit the servers grant ttls in, ms (etcd: 1000, whole seconds):
   * generated ttls are rounded up to a whole number of it. Absent: any ms.
   */
  readonly ttlGrainMs?: number;
  /**
   * How tokens are compared with the model's: exactly (default), or by
   * order only ('order': a cluster revision, which moves at events the model
   * does not count, such as lease expiries and other writes; spec 7.7). Then
   * each new grant's token must exceed every token granted before in the run,
   * and stands for the model's token from then on.
   */
  readonly tokensComparedBy?: 'value' | 'order';
}

/** One simulated client's handle on the backend. */
export interface LockClient {
  /** One acquire as the schedule's command asks it (ttl, retries): granted, denied or timed out; throws on an unknown outcome. */
  acquire(resource: string, options: AcquireOptions): Promise<AcquireResult>;
  /** Absent when the backend has no ttl. */
  extend?(lease: Lease, ttlMs: number): Promise<ExtendResult>;
  /**
   * Gives the lease up. The conformance runs do not read what it resolves to, but a throw is judged: the model's
   * release always ends the lease (its request takes effect when sent), so a release the client cannot confirm (a cut
   * link, no reply) resolves, `false` as lockcheck's locks do: a throw is an operation that failed (LIVE-1), but for an
   * UnavailableError where the model has the outcome unknown (a PostgreSQL release, spec 7.4). ConcurrentLock.release,
   * for stress runs, throws or resolves `false` alike.
   */
  release(lease: Lease): Promise<unknown>;
  /** The store, reached over this client's own links. */
  readonly store: FencedStore;
  /** The client's monotonic clock (the one its leases' deadlines are on). */
  readonly clock: MonotonicClock;
}

/** The runner's control over true time: it owns it, and every clock the clients and nodes read follows it. */
export interface TimeControl {
  /** True time now, in ms (for timelines; no client reads it). */
  nowMs(): number;
  /** Lets true time pass to `trueMs`, with everything due on the way. */
  advanceTo(trueMs: number): Promise<void>;
  /** Drives time until `work` settles, at most to `limitMs`; returns whether it settled. */
  runUntil(work: Promise<unknown>, limitMs: number): Promise<boolean>;
  /**
   * Servers on their own real clocks only: how far real time has run ahead
   * of true time, in ms. Before each command the runner lets true time catch
   * up by that much (a recorded `advance` step), so that what the servers see
   * stays within Capabilities.expiryToleranceMs of the model's time.
   */
  realTimeAheadMs?(): number;
}

/**
 * One run's environment: time control, the faults it can inject (a fault
 * left out of `faults` is one the backend does not take: no stubs), and an
 * optional white-box look at the nodes' keys.
 */
export interface Environment extends TimeControl {
  /** The faults this run can inject; what is left out the backend does not take. */
  readonly faults: FaultInjectors;
  /**
   * Optional white-box look: the owner value each node holds for `resource`
   * (null where none). Lets the runner check OWN-1 directly.
   */
  inspect?(resource: string): Promise<ReadonlyArray<string | null>>;
}

/** A backend instance for one run: fresh servers, `clients` clients. */
export interface BackendInstance {
  /** One per simulated client, `InstanceOptions.clients` of them. */
  readonly clients: readonly LockClient[];
  /** The run's time control and faults. */
  readonly env: Environment;
  /** What the run should say beside its verdict (the kit's: real timers that fired in a library's calls, commands past the faults); read before close. */
  warnings?(): readonly string[];
  /** Stops what start() started. Bounded in real time by the runner (LockstepOptions.closeLimitMs, 60 s): a close still running then is left behind and named in the run's warnings. */
  close(): Promise<void>;
}

/** What the runner asks of one instance (BackendUnderTest.start). */
export interface InstanceOptions {
  /** Simulated clients: the instance's `clients` must have this many. */
  readonly clients: number;
  /** Token counters start here (a fresh counter issues tokenBase + 1). */
  readonly tokenBase: bigint;
  /**
   * The clients' bound on each request round to the lock nodes, in ms
   * (absent: the operation's ttl). Drawn per run where the environment
   * offers `nodeDelay`.
   */
  readonly requestTimeoutMs?: number;
}

/**
 * What a library promises, as its adapter declares it. The model judges the
 * library against this contract: what it declares is its documented
 * behaviour and never reads as a finding by itself; only what follows from
 * it (two holders, a stale write landing) does.
 */
export interface LibraryContract {
  /**
   * What the client learns of its lease's validity: a deadline (default), or
   * none (the library reports no validUntilMs; leases say null). Without a
   * deadline the model's client holds the lease until it releases or drops
   * it, as the library's does, and grants on a quorum alone; what that costs
   * is judged by its consequence: another client holding the lock once the
   * keys expired on the server (MUTEX-1), a stale write landing (STORE-1),
   * never the difference from lockcheck's deadline formula.
   */
  readonly deadline?: 'known' | 'none';
  /**
   * The library bounds its calls with a client-side timeout (default true).
   * Without one, a call to an unreachable node waits as long as the link
   * does: an operation that has not settled when the model has it done ends
   * the run as inconclusive rather than as a liveness finding. Its schedules
   * draw no black-holed node and no request timeout (it could take neither).
   */
  readonly clientTimeout?: boolean;
  /**
   * When the library answers a call to several nodes: as soon as a quorum
   * settles it (default 'quorum', lockcheck's client), or only once every
   * node it reached has answered ('every-reply'; redlock 4's `_lock` and
   * `unlock` count every server's callback down), and then, after a refused
   * attempt or an extension that deletes its keys, once every node has
   * answered that undo round too. Without it a slow node leaves such a
   * library's calls pending past the model's answer: inconclusive runs.
   */
  readonly decidesAt?: 'quorum' | 'every-reply';
  /**
   * What extend sets: the ttl it is given (default 'given'), or the ttl the
   * lease was acquired with, whatever extend is asked for ('acquired'; a
   * refresh that re-arms a fixed ttl).
   */
  readonly refreshTtl?: 'given' | 'acquired';
  /**
   * What a refused extension does (default: the lease is kept until its
   * deadline, and its keys too). A library may drop the lease (its signal
   * fires, reason 'expired') and delete the keys it still holds
   * (compare-and-delete on every node it reaches): `{ lease: 'dropped',
   * keys: 'deleted' }`. A library that deletes its keys but still tells its
   * caller the lease is valid declares `{ lease: 'kept', keys: 'deleted' }`,
   * and the model shows what follows (another client gets the lock).
   * 'kept' lowers the deadline when an extension with a shorter ttl is sent,
   * as lockcheck's client does (spec 4.1); a library whose Lock keeps the
   * deadline it had, in flight and after a refusal, declares 'unchanged'.
   */
  readonly failedExtend?: FailedExtend;
  /**
   * The library tells why an acquire was refused (default true): the lock is
   * held, or too few nodes answered. A library that answers `false` either
   * way declares false: its refusals are compared with the model's without
   * their reason (the adapter reports 'held').
   */
  readonly denialReasons?: boolean;
  /**
   * Fencing tokens: bigint (default, exact to 2^63-1), JS numbers (exact to
   * 2^53 only: token counters then start below it), or none (tokens are not
   * compared; the store must be unfenced).
   */
  readonly tokens?: 'bigint' | 'number' | 'none';
  /**
   * The client refuses invalid input (an empty resource, a ttl out of range)
   * with InvalidInputError before touching any state (default true; the
   * runner probes it). A library that takes what it is given says false.
   */
  readonly validatesInput?: boolean;
  /**
   * The library's own drift allowance subtracted from the ttl:
   * rounding(factor * ttl) + fixedMs. Default: the design's.
   */
  readonly driftMargin?: { readonly factor: number; readonly fixedMs: number; readonly rounding: DriftRounding };
}

/**
 * The real servers of a concurrent (stress) run, as one client process
 * reaches them (through the run's proxies when it has link faults). URLs
 * carry the servers' passwords: never print them.
 */
export interface ConcurrentServers {
  /** Redis lock nodes, `redis://:password@host:port`, as many as `ConcurrentClient.servers` asked for (empty for PostgreSQL). */
  readonly redis: readonly string[];
  /** The PostgreSQL database, `postgres://user:password@host:port/db`, or null on Redis. */
  readonly pg: string | null;
}

/**
 * One client process's lock in a concurrent run: the library used as a user
 * would (its own retries off, its own refresh timers on, real time). Every
 * call must settle within a few seconds (give the connections timeouts): a
 * call that outlives the workload's guard (15 s) stops the client.
 */
export interface ConcurrentLock {
  /** One attempt: granted, denied (held elsewhere, or no quorum), or timed-out. Throws when the outcome is unknown. */
  acquire(resource: string, ttlMs: number): Promise<AcquireResult>;
  /** Throws, or resolves `false`, when the outcome is unknown (the history records it as such); any other answer is a release that happened. */
  release(lease: Lease): Promise<unknown>;
  /** PostgreSQL backend pids the client's locks live on, for the `terminate-holder` fault; absent: unknown (that fault then never strikes it). */
  backendPids?(): readonly number[];
  /** Ends the client's connections at the end of the run. */
  close(): Promise<void>;
}

/**
 * How a backend runs in `lockcheck stress` and the matrix's concurrent
 * oracle: real client processes, each building one lock with `connect`, race
 * on servers the runner starts while the nemesis injects faults (issue 16,
 * docs/stress.md). It is loaded in each client process from the module the
 * user named, and must not need anything but the servers it is given.
 */
export interface ConcurrentClient {
  /** The servers the runner starts for it: Redis lock nodes (1 or 5; plus a Redis for the register), or one PostgreSQL. */
  readonly servers: { readonly kind: 'redis'; readonly nodes: 1 | 5 } | { readonly kind: 'postgres' };
  /** The Redis key the lock on `resource` lives in, if the client's leases are Redis keys holding the lease's owner value: lets `clock-step-holder` find a holder's nodes. */
  readonly lockKey?: (resource: string) => string;
  /** Leases carry fencing tokens (default true); without them the register's store must be unfenced. */
  readonly tokens?: boolean;
  /** Builds one lock in a client process, its leases' deadlines on `clock` (the real monotonic clock every process shares). */
  connect(servers: ConcurrentServers, clock: MonotonicClock): Promise<ConcurrentLock>;
}
export type { FaultInjectors, FaultKind } from './faults.ts';

/** A backend as the suite sees it: its declaration and a way to start it. */
export interface BackendUnderTest {
  /** Names it in test titles, reports, timeline files and counterexample files. */
  readonly name: string;
  /** The model it is checked against. */
  readonly design: Design;
  /** What it is (store, ttl, session, reentrancy, tokens): which commands and properties apply. */
  readonly capabilities: Capabilities;
  /** What the library promises (an npm library audited through its adapter); absent: the design's own behaviour. */
  readonly contract?: LibraryContract;
  /** The adapter's own options (the library's settings, e.g. its drift factor): recorded in counterexample files, compared on replay. */
  readonly options?: Readonly<Record<string, string | number | boolean | null>>;
  /** A fresh instance per run. The faults the backend takes are read from its environment's `faults`. */
  start(options: InstanceOptions): Promise<BackendInstance>;
  /** Its client for concurrent runs (`lockcheck stress --backend ./module.ts`); absent: lockstep runs only. */
  readonly concurrent?: ConcurrentClient;
  /**
   * The backend's close hook: stop what it keeps across runs (servers it
   * started, pools). Called once by conformanceSuite (after all) and the CLI
   * when they are done with it; checkConformance leaves it to its caller.
   */
  close?(): Promise<void>;
  /** Configurations the backend must refuse with InvalidInputError naming the option (checkMisconfigurations tries them). */
  readonly misconfigurations?: readonly Misconfiguration[];
}
