import { readingOrNaN } from './checkedClock.ts';
import type { MonotonicClock } from './clock.ts';
import type { LeaseNode } from './leaseNode.ts';
import { isDefect } from './errors.ts';

/** One node's answer in a round; a node that has not answered (yet) is `{ ok: false }` without an error. */
export type Vote<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error?: unknown };

/** The votes of a round so far. */
export interface Tally {
  readonly yes: number;
  /** Answered, but not yes. */
  readonly no: number;
  readonly failed: number;
  readonly pending: number;
}

/** Counts rounds still awaiting replies (also after they resolved), so that a client can wait until none is. */
export class Background {
  #count = 0;
  #waiters: Array<() => void> = [];

  get count(): number {
    return this.#count;
  }

  started(): void {
    this.#count++;
  }

  ended(): void {
    if (--this.#count === 0) for (const wake of this.#waiters.splice(0)) wake();
  }

  /** Resolves when no round is running. */
  async settled(): Promise<void> {
    while (this.#count > 0) await new Promise<void>((resolve) => this.#waiters.push(resolve));
  }
}

/** The clock's reading, or -Infinity (due already) when it cannot be read. */
function dueNow(clock: MonotonicClock): number {
  const nowMs = readingOrNaN(clock);
  return Number.isNaN(nowMs) ? Number.NEGATIVE_INFINITY : nowMs;
}

/**
 * Decided rounds resolve one turn of the clock after their decision, so that
 * replies arriving at the same moment are counted too. The rounds decided in
 * one turn share one scheduled call: one timer per turn instead of one per
 * round, and their callers' next commands are sent in the same tick, where
 * a node can write them together (impl/redis/tickWrites.ts).
 */
export class Turn {
  #due: Array<Round<unknown>> = [];
  readonly #clock: MonotonicClock;

  constructor(clock: MonotonicClock) {
    this.#clock = clock;
  }

  /** Publishes `round` at the end of this turn (unless it ended before). */
  defer(round: Round<unknown>): void {
    // Run from a node's reply (a promise callback), where a throw was an unhandled rejection and left the round unpublished:
    // a clock that cannot be read (NaN) is due at once all the same.
    if (this.#due.push(round) === 1) this.#clock.schedule(dueNow(this.#clock), this.#flush);
  }

  readonly #flush = (): void => {
    const due = this.#due;
    this.#due = [];
    for (const round of due) round.publish();
  };
}

/**
 * The deadlines of one lock's rounds. Every round is bounded by the request
 * timeout, and nearly every round ends long before it: a timer per round
 * (set, unref, clear, and the closures around them) was the largest part of
 * the lock's own CPU per pair. Rounds with the same limit reach their
 * deadlines in the order they started, so one queue per limit with one
 * timer, for its oldest round, is enough. A round that ends early leaves the
 * queue when it is the oldest; the timer stays armed (it would only be set
 * again for the next round) and, when it fires, ends the rounds that are
 * due and arms itself for the oldest one left.
 */
export class Deadlines {
  readonly #queues = new Map<number, DeadlineQueue>();
  readonly #clock: MonotonicClock;

  constructor(clock: MonotonicClock) {
    this.#clock = clock;
  }

  /** The queue of the rounds bounded by `limitMs`. */
  of(limitMs: number): DeadlineQueue {
    let queue = this.#queues.get(limitMs);
    if (queue === undefined) this.#queues.set(limitMs, (queue = new DeadlineQueue(this.#clock, () => this.#queues.delete(limitMs))));
    return queue;
  }

  /** Limits with a queue: those used within the longest limit (a queue goes when its timer finds it empty). */
  get limits(): number {
    return this.#queues.size;
  }
}

/** Rounds with one limit, oldest first (so their deadlines are in order). */
export class DeadlineQueue {
  #rounds: Array<Round<unknown>> = [];
  #head = 0;
  #armed = false;
  readonly #clock: MonotonicClock;
  /** Called when the timer finds the queue empty: a lock whose limits vary (the ttl as limit) keeps no queue per ttl it ever used. */
  readonly #idle: () => void;

  constructor(clock: MonotonicClock, idle: () => void) {
    this.#clock = clock;
    this.#idle = idle;
  }

  add(round: Round<unknown>): void {
    this.#rounds.push(round);
    if (!this.#armed) this.#arm(round.deadlineMs);
  }

  /** Drops the ended rounds at the head (called when a round ends): the queue keeps rounds from the oldest open one on. */
  trim(): void {
    const rounds = this.#rounds;
    let head = this.#head;
    while (head < rounds.length && rounds[head]!.ended) head++;
    if (head === rounds.length) {
      rounds.length = 0;
      head = 0;
    } else if (head >= 1024 && 2 * head >= rounds.length) {
      rounds.splice(0, head);
      head = 0;
    }
    this.#head = head;
  }

  #arm(atMs: number): void {
    this.#armed = true;
    this.#clock.schedule(atMs, this.#fire);
  }

  readonly #fire = (): void => {
    this.#armed = false;
    let nowMs: number;
    try {
      nowMs = this.#clock.now();
    } catch {
      // A clock that can no longer be read (checkedClock refused its reading): every bound is over, so no round waits on it;
      // the operations read the clock again as they end and reject with the refusal, where their caller catches it. Thrown
      // here, in a timer, it was an uncaught exception that ended the process.
      nowMs = Number.POSITIVE_INFINITY;
    }
    const rounds = this.#rounds;
    // Each expire() trims the head, so the oldest open round is always first.
    this.trim();
    while (this.#head < rounds.length && rounds[this.#head]!.deadlineMs <= nowMs) rounds[this.#head]!.expire();
    if (this.#head < rounds.length) this.#arm(rounds[this.#head]!.deadlineMs);
    else this.#idle();
  };
}

/** What the rounds of one lock share. */
export interface RoundContext {
  readonly clock: MonotonicClock;
  readonly background: Background;
  readonly turn: Turn;
  readonly deadlines: Deadlines;
}

const SILENT = { ok: false } as const;

/**
 * One request to every node in parallel (see LeaseLock's `round`). The
 * state of one round lives in one object with methods, not in closures made
 * per round: a lock round runs per acquire and per release, and under 50
 * concurrent loops the closures, their promises and timers were most of the
 * client's own CPU.
 */
export class Round<T> {
  readonly #votes: Vote<T>[];
  #pending: number;
  #yes = 0;
  #failed = 0;
  #ended = false;
  #deferred = false;
  /** When the silent nodes count as failed, on the lock's clock. */
  readonly deadlineMs: number;
  readonly #queue: DeadlineQueue;
  #resolve: ((votes: Vote<T>[]) => void) | null = null;
  #reject: ((error: unknown) => void) | null = null;
  readonly #isYes: (value: T) => boolean;
  readonly #decided: (tally: Tally) => boolean;
  readonly #background: Background;
  readonly #turn: Turn;

  /**
   * Resolves with the votes once the round is decided, every node answered,
   * or the deadline passed. Rejects, as soon as it happens, with a
   * programming error (isDefect: a TypeError, ...) that a node's call threw
   * or failed with: that is no vote against, and the caller learns of it
   * (the round itself still ends as usual, the other nodes' replies
   * awaited). A round nobody awaits (a release in the background) drops it.
   */
  readonly votes: Promise<Vote<T>[]>;

  constructor(
    nodes: readonly LeaseNode[],
    limitMs: number,
    context: RoundContext,
    call: (node: LeaseNode, index: number) => Promise<T>,
    isYes: (value: T) => boolean,
    decided: (tally: Tally) => boolean,
  ) {
    const n = nodes.length;
    this.#votes = new Array<Vote<T>>(n).fill(SILENT);
    this.#pending = n;
    this.#isYes = isYes;
    this.#decided = decided;
    this.#background = context.background;
    this.#turn = context.turn;
    this.votes = new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    // A clock that cannot be read (NaN) has this round's bound over at once: its calls still go (a release in the
    // background frees keys that would stay until their ttl), and it ends at the queue's next timer. Read before the round
    // counts as started: a throw after it left settled() waiting for ever.
    const nowMs = readingOrNaN(context.clock);
    this.deadlineMs = Number.isNaN(nowMs) ? Number.NEGATIVE_INFINITY : nowMs + limitMs;
    context.background.started();
    this.#queue = context.deadlines.of(limitMs);
    this.#queue.add(this as Round<unknown>);
    for (let i = 0; i < n; i++) {
      let answer: Promise<T>;
      try {
        answer = call(nodes[i]!, i);
      } catch (error) {
        answer = Promise.reject(error instanceof Error ? error : new Error('node call failed'));
      }
      answer.then(
        (value) => this.#answered(i, value),
        (error: unknown) => this.#failedWith(i, error),
      );
    }
  }

  #answered(i: number, value: T): void {
    // After the deadline a reply is not counted: the silent node voted against.
    if (this.#ended) return;
    this.#votes[i] = { ok: true, value };
    if (this.#isYes(value)) this.#yes++;
    this.#counted();
  }

  #failedWith(i: number, error: unknown): void {
    if (isDefect(error)) this.#defect(error);
    if (this.#ended) return;
    this.#votes[i] = { ok: false, error };
    this.#failed++;
    this.#counted();
  }

  #counted(): void {
    if (--this.#pending === 0) return this.#end();
    if (this.#resolve === null || this.#deferred) return;
    const yes = this.#yes;
    const failed = this.#failed;
    const pending = this.#pending;
    if (!this.#decided({ yes, no: this.#votes.length - pending - yes - failed, failed, pending })) return;
    // One turn of the clock, so that replies arriving at the same moment are counted too.
    this.#deferred = true;
    this.#turn.defer(this as Round<unknown>);
  }

  /** Rejects the votes with `error`, once, unless they were published. */
  #defect(error: unknown): void {
    const reject = this.#reject;
    if (this.#resolve === null || reject === null) return;
    this.#resolve = null;
    this.#reject = null;
    // Handled here too: a round nobody awaits must not make an unhandled rejection; a caller that awaits still gets it.
    this.votes.catch(ignore);
    reject(error);
  }

  /** Resolves the votes so far, once. */
  publish(): void {
    const resolve = this.#resolve;
    if (resolve === null) return;
    this.#resolve = null;
    // A round still open keeps counting late replies into its own array: the caller gets a copy of the votes so far.
    resolve(this.#ended ? this.#votes : this.#votes.slice());
  }

  /** Every node answered, or (from the deadline queue) the deadline passed. */
  get ended(): boolean {
    return this.#ended;
  }

  /** The deadline passed: the nodes that have not answered count as failed. */
  expire(): void {
    this.#end();
  }

  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#queue.trim();
    this.publish();
    this.#background.ended();
  }
}

const ignore = (): void => undefined;
