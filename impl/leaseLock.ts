import type { MonotonicClock } from './clock.ts';
import { checkedClock } from './checkedClock.ts';
import { checkTtl, InvalidInputError, MAX_TOKEN } from '../model/errors.ts';
import { isRefusal, mustThrow, ServerRefusedError, TokenOverflowError } from './errors.ts';
import { LeaseHandle } from './lease.ts';
import type { Lease } from './lease.ts';
import type { LeaseNode } from './leaseNode.ts';
import { HeldLeases } from './heldLeases.ts';
import { leaseMargins } from './leaseMargins.ts';
import { abortReason, checkSignal } from './abort.ts';
import { checkLeaseAcquire, type LeaseAcquirePlan } from './leaseAcquireInput.ts';
import { retryDenied } from './retryDenied.ts';
import { checkClock, checkLease, checkMethods, checkObject, checkOptionalFunction, checkTimeoutMs, knownOptions, shown } from './options.ts';
import { Background, Deadlines, Round, Turn, type RoundContext, type Tally, type Vote } from './round.ts';

/** What a lock calls on each of its nodes. */
const NODE_METHODS = ['acquire', 'release', 'extend', 'raiseToken'];

/**
 * A ttl lease lock over N independent nodes: Redlock, and with one node the
 * single-instance lease. One attempt: send set-if-absent to every node in
 * parallel, each bounded by a timeout; count the grants; the lock is held only
 * if a majority granted and validity = ttl - elapsed - (ceil(driftFactor*ttl)
 * + clockMarginMs, 2 by default) is still positive, measured on the monotonic clock from before the
 * first request (spec: redlock). Otherwise release everywhere. The token is
 * the highest counter of the quorum, written back to the quorum before the
 * lease is returned, so the next quorum (which intersects this one) mints a
 * higher one.
 *
 * Every round (acquire, write-back, extend, release) resolves as soon as its
 * outcome is decided: a quorum of yes votes, or too few left to make one. A
 * slow or paused node costs nothing then; its reply is awaited in the
 * background, bounded by the request timeout (`settled()` waits for those).
 * Replies that arrive at the same moment as the deciding one are still
 * counted (the decision waits one turn of the clock for them).
 */
export interface LeaseLockOptions {
  /** The lease nodes, 1..15: one for the single-instance lease, several independent ones for Redlock (a majority must grant). */
  readonly nodes: readonly LeaseNode[];
  /** The client's monotonic clock: validity is measured on it and the lease's deadline is on it. */
  readonly clock: MonotonicClock;
  /** Allowance for clock drift, a fraction of the ttl in [0, 1). Default 0.01. */
  readonly driftFactor?: number;
  /**
   * The fixed part of the allowance, in ms, for the servers' expiry
   * precision and any skew between the client's clock and theirs. Default 2
   * (Redlock's); raise it where the servers' clocks may run ahead.
   */
  readonly clockMarginMs?: number;
  /** Bound on each call to one node, in ms; default: the ttl of the attempt. */
  readonly requestTimeoutMs?: number;
  /** Source of owner values and retry jitter, in [0, 1). Default: crypto-strength random. */
  readonly random?: () => number;
  /** The lease's signal fires this many ms before its validity deadline; an acquire that would leave less usable time than that is denied `validity-exhausted` (the key released). Default 0. */
  readonly safetyMarginMs?: number;
}

/** One acquire's outcome: a lease, a denial and why (held elsewhere; too few nodes answered; the validity left was not positive), or replies too late. */
export type AcquireResult =
  | { readonly kind: 'granted'; readonly lease: Lease }
  | { readonly kind: 'denied'; readonly reason: 'held' | 'no-quorum' | 'validity-exhausted' }
  /** The replies came too late: the nodes may or may not hold our key (a release of it goes out in the background; failing that, it expires by its ttl). */
  | { readonly kind: 'timed-out' };

/** One extend's outcome: the new deadline (ms on the lock's clock), or why not ('expired': the lease was already lost or is not this lock's; 'no-quorum': too few nodes extended it in time). */
export type ExtendResult =
  | { readonly kind: 'extended'; readonly validUntilMs: number }
  | { readonly kind: 'not-extended'; readonly reason: 'expired' | 'no-quorum' };

/** One acquire's request. */
export interface AcquireOptions {
  /** The lease's time to live, in ms: an integer in [1, 2^31-1]. */
  readonly ttlMs: number;
  /** A blocking acquire: after a denial, try again up to this many times. Default 0. */
  readonly retries?: number;
  /** Pause between attempts, in ms. Default 0. */
  readonly retryDelayMs?: number;
  /** Random extra pause of up to this many ms per retry. Default 0. */
  readonly retryJitterMs?: number;
  /**
   * Cancels the acquire: already aborted, it rejects before anything is
   * sent; fired during a wait between attempts, the wait ends at once; fired
   * during an attempt, the attempt finishes (bounded by the request timeout)
   * and a grant it brings is released first. The acquire then rejects with
   * the signal's reason (an AbortError DOMException for a plain abort()).
   */
  readonly signal?: AbortSignal;
}

const checkLockKeys = knownOptions('LeaseLock options', ['nodes', 'clock', 'driftFactor', 'clockMarginMs', 'requestTimeoutMs', 'random', 'safetyMarginMs']);
/** The acquire options every lease lock takes (etcd's too); a backend with more adds its own. */
export const ACQUIRE_OPTIONS = ['ttlMs', 'retries', 'retryDelayMs', 'retryJitterMs', 'signal'] as const;
const checkAcquireKeys = knownOptions('acquire options', ACQUIRE_OPTIONS);

/** Owner values must not collide across clients: draw them from the OS's generator. */
function cryptoRandom(): number {
  return globalThis.crypto.getRandomValues(new Uint32Array(1))[0]! / 2 ** 32;
}

/**
 * The lease lock of LeaseLockOptions: acquire, extend and release over its
 * nodes, each lease carrying a fencing token (bigint) and an AbortSignal
 * that fires when it may no longer be used. The constructor throws
 * InvalidInputError('invalid-config') for bad options.
 */
export class LeaseLock {
  readonly #nodes: readonly LeaseNode[];
  protected readonly clock: MonotonicClock;
  /** The clock as the lock reads it: each reading checked (impl/checkedClock.ts). */
  readonly #clock: MonotonicClock;
  protected readonly driftFactor: number;
  protected readonly clockMarginMs: number;
  readonly #requestTimeoutMs: number | undefined;
  readonly #random: () => number;
  readonly #safetyMarginMs: number;
  readonly #held = new HeldLeases<LeaseHandle>((handle) => handle);
  /** Rounds still awaiting replies, also after they resolved (each bounded by its deadline). */
  readonly #background = new Background();
  /** What the rounds share: the background count, the turn in which decided rounds resolve together, their deadlines. */
  readonly #rounds: RoundContext;

  constructor(options: LeaseLockOptions) {
    checkObject(options, 'LeaseLock options');
    checkLockKeys(options);
    const nodes: unknown = options.nodes;
    if (!Array.isArray(nodes) || nodes.length < 1 || nodes.length > 15) throw new InvalidInputError('invalid-config', `need 1..15 nodes, got ${Array.isArray(nodes) ? nodes.length : shown(nodes)}`);
    // Every index, holes included (forEach skips them).
    for (let i = 0; i < nodes.length; i++) checkMethods(nodes[i], `nodes[${i}]`, 'a LeaseNode', NODE_METHODS);
    const given = checkClock(options.clock);
    const clock = checkedClock(given);
    const { driftFactor, clockMarginMs, safetyMarginMs } = leaseMargins(options, 1000);
    this.#nodes = options.nodes;
    // clockOf() answers the clock given; every reading the lock itself takes is checked.
    this.clock = given;
    this.#clock = clock;
    this.#rounds = { clock, background: this.#background, turn: new Turn(clock), deadlines: new Deadlines(clock) };
    this.driftFactor = driftFactor;
    this.clockMarginMs = clockMarginMs;
    this.#requestTimeoutMs = options.requestTimeoutMs === undefined ? undefined : checkTimeoutMs(options.requestTimeoutMs, 'requestTimeoutMs');
    checkOptionalFunction(options.random, 'random');
    this.#random = options.random ?? cryptoRandom;
    this.#safetyMarginMs = safetyMarginMs;
    // Fields a subclass reads (protected is a compile-time word only): fixed, so a caller's code cannot loosen the margins of a lock in use.
    for (const field of ['clock', 'driftFactor', 'clockMarginMs'] as const) Object.defineProperty(this, field, { writable: false, configurable: false });
  }

  /** The clock this lock times its leases by. */
  clockOf(): MonotonicClock {
    return this.clock;
  }

  /** Nodes that must agree: a majority of them. */
  get quorum(): number {
    return Math.floor(this.#nodes.length / 2) + 1;
  }

  /** One or more attempts, as `options` says. Rejects with InvalidInputError for a bad resource or options. */
  acquire(resource: string, options: AcquireOptions): Promise<AcquireResult> {
    let plan: LeaseAcquirePlan, signal: AbortSignal | undefined, startedMs: number;
    try {
      plan = checkLeaseAcquire(resource, options, checkAcquireKeys);
      signal = checkSignal(options.signal);
      // Cancelled already: nothing is sent.
      if (signal?.aborted) return Promise.reject(abortReason(signal) as Error);
      startedMs = this.#clock.now();
    } catch (error) {
      return Promise.reject(error as Error);
    }
    // A single attempt is the attempt's own promise: no async frame around it (a pair's allocations are most of the lock's CPU).
    if (plan.retries === 0 && signal === undefined) return this.#attempt(resource, plan.ttlMs, startedMs, startedMs);
    // The first attempt starts when the acquire did: one clock read fewer.
    const attempt = (n: number): Promise<AcquireResult> => this.#attempt(resource, plan.ttlMs, startedMs, n === 0 ? startedMs : this.#clock.now());
    return retryDenied(plan, signal, this.#clock, () => this.#draw(), attempt, (lease) => this.release(lease));
  }

  /**
   * Extends a lease this client holds to a fresh ttl, on a majority, within
   * its validity. When too few nodes answered for a quorum and a failure
   * says no retry can help (ConnectionConfigError, ServerRefusedError,
   * InvalidInputError from a node, as for acquire), that error is thrown,
   * not read as `no-quorum`; the lease stays valid until its deadline.
   */
  async extend(lease: Lease, ttlMs: number): Promise<ExtendResult> {
    checkTtl(ttlMs);
    checkLease(lease, 'extend');
    // Read first: a clock that cannot be read is the caller's error to hear (InvalidInputError), before the lease reads it as lost.
    const startedMs = this.#clock.now();
    const handle = this.#held.get(lease);
    if (handle === undefined || handle.lost) return { kind: 'not-extended', reason: 'expired' };
    const validUntilMs = startedMs + ttlMs - this.driftMarginMs(ttlMs);
    // A shorter ttl may be in force on a node as soon as the request arrives: the deadline comes down now (spec 4.1).
    handle.limitTo(validUntilMs);
    const votes = await this.round(ttlMs, (node) => node.extend(lease.resource, lease.owner, ttlMs), isTrue, this.#yesOrNever);
    if (votes.filter((v) => v.ok && v.value).length >= this.quorum && this.#clock.now() < validUntilMs && !handle.lost) {
      handle.extendTo(validUntilMs);
      return { kind: 'extended', validUntilMs };
    }
    throwRefusal(votes, this.quorum);
    return { kind: 'not-extended', reason: 'no-quorum' };
  }

  /**
   * Releases on every node (compare-and-delete) and fires the lease's signal.
   * Resolves once a quorum of nodes answered (the lock is free for others
   * then), or too many failed for one; the rest finish in the background. Never throws for an outage (a
   * node down, slow, in a passing state: its key goes with its ttl). As
   * acquire and extend do, it throws a refusal no retry fixes
   * (ConnectionConfigError, ServerRefusedError) when that refusal kept the
   * release off a quorum: the lease is
   * dropped and its signal fired first, but its key stays on the refusing
   * nodes until its ttl, and every later call meets the same refusal.
   *
   * Resolves to whether the release is known: true when a quorum of nodes
   * answered (the key is gone from a majority), false when too many failed to
   * say (the key may stay until its ttl): a history recorder records the
   * latter as an unknown outcome, never as a release that happened.
   */
  async release(lease: Lease): Promise<boolean> {
    checkLease(lease, 'release');
    this.#held.release(lease);
    const votes = await this.round(undefined, (node) => node.release(lease.resource, lease.owner), isTrue, this.#releaseDecided);
    // A refusal only (isRefusal): a node used after its close is no reason for a release to throw, as on etcd and ZooKeeper.
    throwRefusal(votes, this.quorum, isRefusal);
    return answeredBy(votes) >= this.quorum;
  }

  /** Resolves when no round is still waiting for a slow node's reply (each wait is bounded by the request timeout). */
  async settled(): Promise<void> {
    await this.#background.settled();
  }

  /** Rounds still awaiting nodes' replies. */
  get backgroundRounds(): number {
    return this.#background.count;
  }

  /** Leases this lock still tracks: held, or lost but not yet forgotten (at most about twice the held ones). */
  get trackedLeases(): number {
    return this.#held.size;
  }

  protected driftMarginMs(ttlMs: number): number {
    return Math.ceil(this.driftFactor * ttlMs) + this.clockMarginMs;
  }

  protected newOwner(): string {
    if (this.#random === cryptoRandom) return globalThis.crypto.randomUUID();
    return Array.from({ length: 4 }, () => Math.floor(this.#draw() * 2 ** 32).toString(16).padStart(8, '0')).join('');
  }

  /**
   * One value of the `random` option, checked: anything outside [0, 1) made
   * owners that are not 32 hex digits, or alike for every client (NaN: a
   * stale release then deleted another holder's key), and jitter without
   * bound. The acquire rejects; nothing has been sent yet.
   */
  #draw(): number {
    const x = this.#random();
    if (typeof x !== 'number' || !(x >= 0 && x < 1)) throw new InvalidInputError('invalid-config', `random must return a number in [0, 1), returned ${shown(x)}`);
    return x;
  }

  protected newLease(resource: string, owner: string, token: bigint, validUntilMs: number): LeaseHandle {
    return new LeaseHandle(resource, owner, token, validUntilMs, this.#clock, this.#safetyMarginMs);
  }

  /** The nodes, for subclasses. */
  protected get nodes(): readonly LeaseNode[] {
    return this.#nodes;
  }

  /** Validity is measured from the start of the attempt that succeeded. */
  protected validityStartMs(attemptStartedMs: number, _firstStartedMs: number): number {
    return attemptStartedMs;
  }

  /** A grant needs a quorum and validity left after the quorum answered (Redlock step 3). */
  protected holds(granted: number, validityMs: number): boolean {
    return granted >= this.quorum && validityMs > 0;
  }

  /** The token: the highest counter the quorum minted. */
  protected mintToken(counters: readonly bigint[]): bigint {
    let token = counters[0]!;
    for (const c of counters) if (c > token) token = c;
    return token;
  }

  async #attempt(resource: string, ttlMs: number, firstStartedMs: number, attemptStartedMs: number): Promise<AcquireResult> {
    const owner = this.newOwner();
    const startedMs = this.validityStartMs(attemptStartedMs, firstStartedMs);
    const q = this.quorum;
    // Until the votes are in, every node may have granted.
    let votes: readonly Vote<bigint | null>[] = [];
    let undone = false;
    const undo = (): void => {
      undone = true;
      this.#releaseUnless(resource, owner, ttlMs, votes);
    };
    try {
      // Each node call is bounded (by the ttl unless a shorter request timeout is set), so this wait is too.
      votes = await this.round(ttlMs, (node, i) => node.acquire(resource, owner, ttlMs).then((answer) => answeredToken(answer, resource, i)), isGrant, this.#acquireDecided);
      const answeredMs = this.#clock.now();
      // Replies that took the whole ttl are useless, and whether the nodes hold our key is unknown: released as after any
      // denial (compare-and-delete on our owner, in the background, behind the acquire on each connection), not left for its ttl.
      if (answeredMs - startedMs >= ttlMs) {
        undo();
        return { kind: 'timed-out' };
      }
      const granted: bigint[] = [];
      for (const v of votes) if (v.ok && v.value !== null) granted.push(v.value);
      const validUntilMs = startedMs + ttlMs - this.driftMarginMs(ttlMs);
      // The lease is usable until its signal fires, safetyMarginMs before the deadline: a grant with no usable time left is no grant.
      const usableUntilMs = validUntilMs - this.#safetyMarginMs;
      if (this.holds(granted.length, usableUntilMs - answeredMs)) {
        const token = this.mintToken(granted);
        // The write-back is a second round trip (when a granting counter is behind): validity must still be left after it.
        const inStep = this.#atToken(votes, token) >= this.quorum;
        let refused: unknown;
        const written = inStep || (await this.#writeBack(resource, token, ttlMs, votes, (e) => (refused = e)));
        if (written && this.holds(granted.length, usableUntilMs - (inStep ? answeredMs : this.#clock.now()))) {
          const lease = this.newLease(resource, owner, token, validUntilMs);
          this.#held.add(lease);
          undone = true;
          if (votes.length > 1) this.#restoreLostCounters(resource, token, ttlMs, votes);
          return { kind: 'granted', lease };
        }
        // Without the write-back on a quorum this token could be minted again, so no lease carries it.
        undo();
        if (!written && refused !== undefined) throw refused;
        return { kind: 'denied', reason: written ? 'validity-exhausted' : 'no-quorum' };
      }
      // A node that has not answered yet may still grant: the release goes out now, behind the acquire on the same connection.
      undo();
      const answered = votes.filter((v) => v.ok).length;
      // Too few nodes could grant because of how they are configured (wrong password, no permission, token sequence at its end): say so, not no-quorum.
      throwRefusal(votes, q);
      return { kind: 'denied', reason: this.holds(granted.length, 1) ? 'validity-exhausted' : answered < q ? 'no-quorum' : 'held' };
    } catch (error) {
      // The attempt ends in a throw before its outcome (a node's programming error rejected the round, the clock's reading
      // was refused, a write-back's round failed): what the nodes granted is released as after a denial (a round on a
      // clock that cannot be read still sends its calls, impl/round.ts).
      if (!undone) undo();
      throw error;
    }
  }

  /**
   * Raises the counters of the granting nodes that are behind `token`, and
   * says whether a quorum now holds a counter at or above it (spec 7.3: the
   * write-back must reach a quorum before the lease is returned). Called
   * only when fewer than a quorum are at the token (in the common case they
   * are, and no request goes out).
   */
  async #writeBack(resource: string, token: bigint, ttlMs: number, votes: readonly Vote<bigint | null>[], refused: (error: unknown) => void): Promise<boolean> {
    const atToken = this.#atToken(votes, token);
    const behind = votes.map((v) => v.ok && v.value !== null && v.value < token);
    const needed = this.quorum - atToken;
    const raised = await this.round(
      ttlMs,
      (node, i) => (behind[i] ? node.raiseToken(resource, token).then(() => true) : Promise.resolve(false)),
      isTrue,
      (t) => t.yes >= needed || t.yes + t.pending < needed,
    );
    const reached = raised.filter((v) => v.ok && v.value).length >= needed;
    // A raise refused (no permission, a counter that is no integer) is no outage: the attempt says so (after its release), not no-quorum.
    if (!reached) {
      const refusal = refusalIn(raised);
      if (refusal !== undefined) refused(refusal);
    }
    return reached;
  }

  /** Granting nodes whose counter is at or above `token`. */
  #atToken(votes: readonly Vote<bigint | null>[], token: bigint): number {
    let n = 0;
    for (const v of votes) if (v.ok && v.value !== null && v.value >= token) n++;
    return n;
  }

  /**
   * A node whose counter was deleted behind lockcheck refuses every grant
   * (TOKENLOST: it would mint issued tokens again). The quorum's token is
   * above every token that node issued, so raising its counter to it
   * restores it: in the background, as the release of a refused acquire.
   */
  #restoreLostCounters(resource: string, token: bigint, ttlMs: number, votes: readonly Vote<bigint | null>[]): void {
    const lost = votes.map((v) => !v.ok && v.error instanceof ServerRefusedError && v.error.serverCode === 'TOKENLOST');
    if (lost.includes(true)) void this.round(ttlMs, (node, i) => (lost[i] ? node.raiseToken(resource, token).then(() => true) : Promise.resolve(false)), isTrue, never);
  }

  /** Compare-and-delete `owner` on every node that did not answer no, in the background (bounded and tracked like every round). */
  #releaseUnless(resource: string, owner: string, ttlMs: number, votes: readonly Vote<bigint | null>[]): void {
    const skip = votes.map((v) => v.ok && v.value === null);
    void this.round(ttlMs, (node, i) => (skip[i] ? Promise.resolve(false) : node.release(resource, owner)), isTrue, never);
  }

  /** An acquire is decided once a quorum said yes, or it cannot and whether the cause is contention or unreachable nodes is known (the denial's reason). */
  readonly #acquireDecided = (t: Tally): boolean => {
    const n = this.#nodes.length;
    const q = this.quorum;
    return t.yes >= q || (t.yes + t.pending < q && (t.yes + t.no >= q || t.failed > n - q));
  };

  /**
   * A release's outcome is known once a quorum answered (the key is gone
   * there, and no other quorum can find ours), or too many failed for one:
   * only then may a refusal among the failures be read as what kept it off a
   * quorum (a release resolved at a quorum of answers and failures threw a
   * refusal on two nodes of five while the other three were still freeing it).
   */
  readonly #releaseDecided = (t: Tally): boolean => t.yes + t.no >= this.quorum || t.failed > this.#nodes.length - this.quorum;

  /** Yes on a quorum, or too few left to make one. */
  readonly #yesOrNever = (t: Tally): boolean => t.yes >= this.quorum || t.yes + t.pending < this.quorum;

  /**
   * Every node's vote, waiting for all of them (or the deadline): for
   * variants that need the whole picture.
   */
  protected fanOut<T>(ttlMs: number | undefined, call: (node: LeaseNode, index: number) => Promise<T>): Promise<Vote<T>[]> {
    return this.round(ttlMs, call, () => false, never);
  }

  /**
   * One request to every node in parallel. Resolves with the votes so far
   * once `decided` holds (after one turn of the clock, so that replies
   * arriving at the same moment are counted too), when every node answered,
   * or at the deadline (the request timeout, else `ttlMs`, else 1 s), when
   * the silent ones count as failed. Replies after that are still awaited,
   * in the background and until the same deadline, so that none is left
   * unhandled; `settled()` waits for them.
   */
  protected round<T>(ttlMs: number | undefined, call: (node: LeaseNode, index: number) => Promise<T>, isYes: (value: T) => boolean, decided: (tally: Tally) => boolean): Promise<Vote<T>[]> {
    return new Round(this.#nodes, this.#requestTimeoutMs ?? ttlMs ?? 1000, this.#rounds, call, isYes, decided).votes;
  }
}

/** A failure no retry fixes: a refusal, a token sequence at its end, a node's InvalidInputError (a node used after its close). */
const unfixable = (e: unknown): boolean => mustThrow(e) || e instanceof TokenOverflowError;

/** The first failure among `votes` that `thrown` picks. */
function refusalIn(votes: readonly Vote<unknown>[], thrown: (e: unknown) => boolean = unfixable): unknown {
  for (const v of votes) if (!v.ok && thrown(v.error)) return v.error;
  return undefined;
}

/**
 * Every vote path (acquire, write-back, extend, release) reads a round the
 * same way: when fewer than a quorum of nodes answered and a failure among
 * the rest is one no retry fixes, that failure is why the round missed its
 * quorum, and it is thrown instead of being read as an outage (`no-quorum`).
 * A refusal on a minority, with a quorum answering, is a vote against like
 * any other (Redlock tolerates a minority of nodes out of service).
 */
/** Nodes whose vote came back (yes or no): what they said is known. */
function answeredBy(votes: readonly Vote<unknown>[]): number {
  let answered = 0;
  for (const v of votes) if (v.ok) answered++;
  return answered;
}

function throwRefusal(votes: readonly Vote<unknown>[], quorum: number, thrown: (e: unknown) => boolean = unfixable): void {
  if (answeredBy(votes) >= quorum) return;
  const refusal = refusalIn(votes, thrown);
  if (refusal !== undefined) throw refusal;
}

/**
 * A node's answer to acquire: null (held) or its token. A node of the user's
 * own may answer anything: no lease carries what is no token in [0, 2^63-1]
 * (a counter past it, a number, a string, undefined). Refused as that node's
 * failed vote, so its key is released as any failed vote's.
 */
function answeredToken(answer: unknown, resource: string, node: number): bigint | null {
  if (answer === null) return null;
  if (typeof answer === 'bigint' && answer > MAX_TOKEN) throw new TokenOverflowError(resource);
  if (typeof answer !== 'bigint' || answer < 0n) throw new ServerRefusedError('schema', 'UnexpectedValue', `node ${node} answered acquire of '${resource}' with ${shown(answer)}, not a token in [0, 2^63-1] or null`);
  return answer;
}

const isGrant = (token: bigint | null): boolean => token !== null;
const isTrue = (value: boolean): boolean => value;
/** For rounds nobody waits on beyond every reply or the deadline. */
const never = (): boolean => false;
