import type { MonotonicClock } from './clock.ts';
import type { LeaseNode } from './leaseNode.ts';

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
    if (this.#due.push(round) === 1) this.#clock.schedule(this.#clock.now(), this.#flush);
  }

  readonly #flush = (): void => {
    const due = this.#due;
    this.#due = [];
    for (const round of due) round.publish();
  };
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
  readonly #cancelDeadline: () => void;
  #resolve: ((votes: Vote<T>[]) => void) | null = null;
  readonly #isYes: (value: T) => boolean;
  readonly #decided: (tally: Tally) => boolean;
  readonly #background: Background;
  readonly #turn: Turn;

  /** Resolves with the votes once the round is decided, every node answered, or the deadline passed. */
  readonly votes: Promise<Vote<T>[]>;

  constructor(
    nodes: readonly LeaseNode[],
    limitMs: number,
    clock: MonotonicClock,
    background: Background,
    turn: Turn,
    call: (node: LeaseNode, index: number) => Promise<T>,
    isYes: (value: T) => boolean,
    decided: (tally: Tally) => boolean,
  ) {
    const n = nodes.length;
    this.#votes = new Array<Vote<T>>(n).fill(SILENT);
    this.#pending = n;
    this.#isYes = isYes;
    this.#decided = decided;
    this.#background = background;
    this.#turn = turn;
    this.votes = new Promise((resolve) => (this.#resolve = resolve));
    background.started();
    this.#cancelDeadline = clock.schedule(clock.now() + limitMs, () => this.#end());
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

  /** Resolves the votes so far, once. */
  publish(): void {
    const resolve = this.#resolve;
    if (resolve === null) return;
    this.#resolve = null;
    // A round still open keeps counting late replies into its own array: the caller gets a copy of the votes so far.
    resolve(this.#ended ? this.#votes : this.#votes.slice());
  }

  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#cancelDeadline();
    this.publish();
    this.#background.ended();
  }
}
