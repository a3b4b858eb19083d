/**
 * The time budget of one check (CheckOptions.timeoutMs), shared by every phase: pairing the operations, the interval
 * checks, building each object's history and the linearizability search. Each phase calls `tick()` once per item
 * (event, operation, hold, write...); every TICKS of them the clock is read, and past the deadline `OutOfTime` is
 * thrown, so no phase runs on more than TICKS items past the budget, and the check says `unknown` for what it had
 * not finished (never `safe`). A sort, one call that cannot stop in the middle, goes through `sort()`, which reads the
 * clock before it begins: no sort begins past the deadline. The same looks at the clock report progress.
 * A loop over objects (the search, one object at a time) asks `spent()` before each: past the deadline no new object
 * is searched, so the time past the budget is one slice of one search, however many objects are left.
 */

/** What a long check is doing, for progress lines (CheckOptions.onProgress): at most about one a second. */
export interface CheckProgress {
  /** The phase: 'pairing operations', 'holds', 'lock histories', 'lock search'... */
  readonly phase: string;
  /** Items of the phase done so far, of `total` (events, holds, objects...). */
  readonly done: number;
  readonly total: number;
  /** Since the check began. */
  readonly elapsedMs: number;
  /** The budget (timeoutMs). */
  readonly timeoutMs: number;
}

/** The budget ran out, or the caller asked the check to stop (`interrupted`), during `phase`: the checks not finished are `unknown`. */
export class OutOfTime extends Error {
  override readonly name = 'OutOfTime';
  constructor(
    readonly phase: string,
    readonly interrupted = false,
  ) {
    super(interrupted ? `interrupted while ${phase}` : `the time budget ran out while ${phase}`);
  }

  /** What a check not decided says (CheckResult.note). */
  note(timeoutMs: number): string {
    return this.interrupted ? `not decided: interrupted while ${this.phase}` : `not decided: the ${timeoutMs} ms budget (--timeout-ms) ran out while ${this.phase}`;
  }
}

/** Items between two looks at the clock: cheap against a phase's work per item, often enough to stop within ms. */
const TICKS = 1 << 12;
/**
 * Items done before the deadline is judged at all: a small history (a few thousand events: tens of ms of work) is
 * judged whole whatever the budget, timeoutMs 0 included; the search's steps count toward it (`spend`), so that the
 * work done whatever the budget stays this small however many objects the history has.
 */
const FIRST_LOOK = 1 << 16;
/** Between two progress reports. */
const REPORT_EVERY_MS = 1000;

export class Budget {
  private ticks = 0;
  private phaseName = 'starting';
  private done = 0;
  private total = 0;
  private lastReport: number;
  readonly deadline: number;

  constructor(
    readonly startedAt: number,
    readonly timeoutMs: number,
    private readonly onProgress?: (p: CheckProgress) => void,
    readonly clock: () => number = () => performance.now(),
    /** Polled at each look at the clock: true ends the check as the deadline would, the phase named (CheckOptions.stop). */
    private readonly stop: () => boolean = () => false,
  ) {
    this.deadline = startedAt + timeoutMs;
    this.lastReport = startedAt;
  }

  /** A budget that never runs out and reports nothing (the phase functions called on their own). */
  static readonly none = new Budget(0, Infinity);

  /**
   * A new phase of `total` items begins. Past the work judged whole (FIRST_LOOK) the clock is read first: past the
   * deadline (or asked to stop) the phase does not begin (OutOfTime, naming it), its setup (groupings, sorts) neither.
   */
  phase(name: string, total: number): void {
    this.phaseName = name;
    this.done = 0;
    this.total = total;
    if (this.ticks >= FIRST_LOOK) this.look();
  }

  /** One item of the current phase done; every TICKS items, a look at the clock. */
  tick(): void {
    this.done++;
    if ((++this.ticks & (TICKS - 1)) === 0 && this.ticks >= FIRST_LOOK) this.look();
  }

  /**
   * Sorts `xs` in place (and returns it) as a step of the current phase: a sort is one call, O(n log n), that cannot
   * stop in the middle, so past the work judged whole the clock is read before it begins: past the deadline, or
   * asked to stop, it does not begin (OutOfTime). Its items count as ticks.
   */
  sort<T>(xs: T[], compare: (a: T, b: T) => number): T[] {
    this.ticks += xs.length;
    this.done += xs.length;
    if (this.ticks >= FIRST_LOOK && xs.length > 1) this.look();
    return xs.sort(compare);
  }

  /**
   * Before a step that cannot stop in the middle (an object's setup: its model's relevance, its entry list's sort),
   * past the work judged whole: throws OutOfTime past the deadline (a stop is polled where the search reads its clock).
   */
  beforeStep(): void {
    if (this.ticks >= FIRST_LOOK && this.clock() >= this.deadline) throw new OutOfTime(this.phaseName);
  }

  /** Work done outside a tick (a search's steps): it counts toward the work judged whole (FIRST_LOOK), without a look at the clock. */
  spend(items: number): void {
    this.ticks += items;
  }

  /**
   * Whether a new piece of work (an object's search) may start: the OutOfTime that says why not (past the deadline
   * once the work judged whole is done, or asked to stop), else undefined. Reads the clock each call: a loop over
   * objects asks before each, so that past the deadline none starts, however many are left.
   */
  spent(): OutOfTime | undefined {
    if (this.stop()) return new OutOfTime(this.phaseName, true);
    if (this.ticks < FIRST_LOOK) return undefined;
    const now = this.clock();
    if (now >= this.deadline) return new OutOfTime(this.phaseName);
    this.report(now);
    return undefined;
  }

  /** Time left, in ms (0 when past the deadline). */
  left(): number {
    return Math.max(0, this.deadline - this.clock());
  }

  /** Reads the clock: reports progress when due, throws OutOfTime past the deadline or when asked to stop. */
  look(): number {
    const now = this.clock();
    if (now >= this.deadline) throw new OutOfTime(this.phaseName);
    this.stopIfAsked();
    this.report(now);
    return now;
  }

  /** Throws OutOfTime (interrupted) when the caller asked the check to stop; the search calls it at each of its looks at the clock. */
  stopIfAsked(): void {
    if (this.stop()) throw new OutOfTime(this.phaseName, true);
  }

  /** Reports progress when due, without judging the deadline (the search judges its own). */
  report(now: number, done = this.done, total = this.total): void {
    if (this.onProgress === undefined || now - this.lastReport < REPORT_EVERY_MS) return;
    this.lastReport = now;
    this.onProgress({ phase: this.phaseName, done, total, elapsedMs: now - this.startedAt, timeoutMs: this.timeoutMs });
  }
}
