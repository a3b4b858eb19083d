/**
 * What a history checker says (spec/SPEC.md 10.4): a verdict per check and
 * findings that name the events involved.
 */

/** safe: nothing wrong found; violation: a finding; unknown: could not decide (timeout, too large). */
export type Verdict = 'safe' | 'violation' | 'unknown';

/** The spec property a check judges (section 5; LIN-1 in section 10.4). */
export type HistoryPropertyId = 'MUTEX-1' | 'FENCE-1' | 'FENCE-2' | 'STORE-1' | 'LIN-1';

/** The checks checkHistory makes, each judging one property (CheckResult.property). */
export type CheckId = 'overlapping-holds' | 'token-order' | 'stale-writes' | 'lost-updates' | 'lock-linearizable' | 'register-linearizable';

/** One thing a check found wrong, naming the events involved. */
export interface Finding {
  readonly check: CheckId;
  readonly property: HistoryPropertyId;
  /** What is wrong, in a sentence, for the report. */
  readonly message: string;
  /** Indices (0-based, = line - 1) of the events involved, in history order. */
  readonly events: readonly number[];
  /** MUTEX-1: the two hold intervals that overlap, in ms on the history clock. */
  readonly intervals?: readonly HoldSpan[];
}

/** An interval in which a process believed it held a lease on `resource`. */
export interface HoldSpan {
  /** The client process. */
  readonly process: number;
  readonly resource: string;
  /** When the hold began (the acquire's or extend's ok), ms on the history clock. */
  readonly start: number;
  /** null: never ended within the history (a session lock never released). */
  readonly end: number | null;
}

/**
 * One check's result over the whole history: decided (a count of findings,
 * 0 included) or not (verdict unknown, findings null: the budget ran out
 * first, and a 0 would read as "checked, found none"; the note says why).
 */
export type CheckResult = DecidedCheckResult | UndecidedCheckResult;

/** A check that decided: it judged the history (or had nothing to judge: skipped, see note). */
export interface DecidedCheckResult {
  readonly check: CheckId;
  readonly property: HistoryPropertyId;
  /** skipped: nothing to judge (no such operations, or the store policy is unknown); see note. */
  readonly verdict: 'safe' | 'violation' | 'skipped';
  /** Findings of this check in total (the report keeps at most `maxFindings` of them). */
  readonly findings: number;
  /** Why the check was skipped, or what limited it. */
  readonly note?: string;
}

/** A check that could not decide (timeout, too large): no count of findings. */
export interface UndecidedCheckResult {
  readonly check: CheckId;
  readonly property: HistoryPropertyId;
  readonly verdict: 'unknown';
  /** Not counted: the check did not finish. */
  readonly findings: null;
  /** Why it could not decide (the budget or memory bound it ran into). */
  readonly note: string;
}

/** Keep a finding list bounded, counting the rest. */
export class FindingList {
  readonly kept: Finding[] = [];
  total = 0;
  constructor(private readonly max: number) {}
  add(f: Finding): void {
    this.total++;
    if (this.kept.length < this.max) this.kept.push(f);
  }
  /** Whether another finding would be kept (if not, it need not be built: `count` it). */
  get room(): boolean {
    return this.kept.length < this.max;
  }
  /** Findings counted but not kept. */
  count(n: number): void {
    this.total += n;
  }
}

export function sortedUnique(xs: Iterable<number | undefined>): number[] {
  return [...new Set([...xs].filter((x): x is number => x !== undefined))].sort((a, b) => a - b);
}
