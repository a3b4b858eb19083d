import type { History, StorePolicy } from './event.ts';
import { STORE_POLICIES } from '../../model/design.ts';
import type { CheckId, CheckResult, Finding, FindingList, Verdict } from './findings.ts';
import { holdIntervals, overlappingHolds } from './holds.ts';
import { DEFAULT_MAX_MEMORY_BYTES } from './linearizability/index.ts';
import { linearizabilityChecks } from './linearizable.ts';
import { Budget, OutOfTime, type CheckProgress } from './budget.ts';
import { faultIntervals, operations } from './operations.ts';
import { lostUpdates, staleWrites, storeCounts } from './store.ts';
import { tokenOrder } from './tokens.ts';
import { checkObject, knownOptions, refuse } from '../../impl/options.ts';
import { HistoryFormatError, validateHistory, wasRead } from './parse.ts';
import { checkResults } from './reportInput.ts';
import { counted } from '../counted.ts';
import { systemClock, type MonotonicClock } from '../../impl/clock.ts';

export type { CheckId, CheckResult, DecidedCheckResult, Finding, HistoryPropertyId, HoldSpan, UndecidedCheckResult, Verdict } from './findings.ts';
export type { CheckProgress } from './budget.ts';

/**
 * Judging a concurrent history (spec/SPEC.md 10.4): every check over one
 * parsed history, one report. Checks never guess: what the history cannot
 * tell (an `info` outcome, a search that ran out of time) is never a finding.
 */
export interface CheckOptions {
  /** The policy of the store behind the writes; wins over the history's meta line. */
  readonly storePolicy?: StorePolicy;
  /**
   * Budget of the whole check, counted from its start: every phase (pairing
   * the operations, the interval checks, building each object's history)
   * reads the clock every few thousand items and before each sort, and the
   * linearizability search, shared by every lock and register, before each
   * object, each step of its setup and every slice of steps: past the deadline
   * no phase, sort or object's search begins.
   * A check the budget ran out on says 'unknown' (never 'safe'), naming the
   * phase, or counting the objects not searched. Default 10000. A small
   * history (under 65,536 items of work, search steps included) is judged
   * whole whatever the budget, 0 included.
   */
  readonly timeoutMs?: number;
  /**
   * Memory bound of the linearizability search, per object (estimated bytes
   * of its memo tables); past it LIN-1 says 'unknown'. Default 1 GiB.
   */
  readonly maxMemoryBytes?: number;
  /** Findings kept per check (all are counted). Default 20. */
  readonly maxFindings?: number;
  /**
   * Called about once a second during a long check (none for a check done within a second): the phase and how far
   * into it, for a progress line. Called synchronously: a slow one takes from the budget.
   */
  readonly onProgress?: (progress: CheckProgress) => void;
  /**
   * Polled as often as the deadline is (every few ms of work): once it returns true the check ends as if its
   * budget had run out, the checks it had decided kept, the others `unknown` ("interrupted while ..."). For a
   * check on a worker thread told to stop by another (lockcheck check's Ctrl-C: a shared flag).
   */
  readonly stop?: () => boolean;
  /** The clock the budget is read on (ms, monotonic; a MonotonicClock of impl/clock.ts will do). Default the process's, performance.now(). */
  readonly clock?: Pick<MonotonicClock, 'now'>;
}

/**
 * What the history holds and what the checks found, counted (all of it, not
 * only the findings kept). A count is null when the budget (timeoutMs) ran out
 * before the phase that counts it: not 0, which would read as counted; the
 * checks it was for say 'unknown' and name the phase.
 */
export interface CheckCounts {
  /** Lines of the history (meta line included). */
  readonly events: number;
  /** Invocations of client operations (acquire, extend, release, write, read). */
  readonly operations: number | null;
  /** ok acquires (grants the clients saw). */
  readonly grants: number | null;
  /** Intervals in which a client believed it held a lease. */
  readonly holds: number | null;
  /** MUTEX-1: pairs of holds of one resource by different processes that overlap. */
  readonly overlappingHolds: number | null;
  /** Writes the store acknowledged (ok). */
  readonly writesAccepted: number | null;
  /** Writes the store rejected (fail: a stale token). */
  readonly writesRejected: number | null;
  /** info or never completed: may or may not have landed. */
  readonly writesUnknown: number | null;
  /** STORE-1: accepted read-modify-writes whose effect no later state builds on. */
  readonly lostUpdates: number | null;
  /** FENCE-2: writes a fenced store accepted although their token does not pass its policy against one accepted before. */
  readonly staleWritesAccepted: number | null;
  /** FENCE-1: grants whose token is not greater than that of a grant completed before they were invoked. */
  readonly tokenOrderViolations: number | null;
  /** Operations whose outcome is unknown (info, or never completed). */
  readonly unknownOutcomes: number | null;
  /** Faults the nemesis injected (each begin with its end). */
  readonly faults: number | null;
}

/** checkHistory's report: the verdict, each check's result, the findings kept, the counts. */
export interface CheckReport {
  /** violation if any check found one; else unknown if any check could not decide; else safe. */
  readonly verdict: Verdict;
  /** The store policy the writes were judged by (the option's, else the meta line's); undefined: not known, FENCE-2 skipped. */
  readonly storePolicy: StorePolicy | undefined;
  /** One result per check, in a fixed order. */
  readonly checks: readonly CheckResult[];
  /** At most maxFindings per check, in check order. */
  readonly findings: readonly Finding[];
  /** What the history holds and what was found, counted. */
  readonly counts: CheckCounts;
}

/** The linearizability search's default budget, in ms (CheckOptions.timeoutMs). */
export const DEFAULT_TIMEOUT_MS = 10_000;

const verdictOf = (list: FindingList): 'safe' | 'violation' => (list.total > 0 ? 'violation' : 'safe');

/** The report's verdict from its checks' results: violation if any found one, else unknown if any could not decide, else safe. Throws InvalidInputError for results not shaped as CheckResult. */
export function overallVerdict(checks: readonly CheckResult[]): Verdict {
  checkResults(checks);
  if (checks.some((c) => c.verdict === 'violation')) return 'violation';
  if (checks.some((c) => c.verdict === 'unknown')) return 'unknown';
  return 'safe';
}

const checkKeys = knownOptions('checkHistory options', ['storePolicy', 'timeoutMs', 'maxMemoryBytes', 'maxFindings', 'onProgress', 'stop', 'clock']);
/** A day: a longer search is a mistake in the unit, not a budget. */
const MAX_TIMEOUT_MS = 86_400_000;

const isIntegerIn = (v: unknown, min: number, max: number): v is number => typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;

/** The options, every value checked: a bad one is an InvalidInputError naming it, never a silent default. */
function checkedOptions(options: CheckOptions): Required<Omit<CheckOptions, 'storePolicy' | 'onProgress' | 'stop'>> & Pick<CheckOptions, 'storePolicy' | 'onProgress' | 'stop'> {
  checkKeys(checkObject(options, 'checkHistory options'));
  const { storePolicy, timeoutMs = DEFAULT_TIMEOUT_MS, maxMemoryBytes = DEFAULT_MAX_MEMORY_BYTES, maxFindings = 20, onProgress, stop, clock = systemClock } = options;
  if (storePolicy !== undefined && !STORE_POLICIES.includes(storePolicy)) refuse('checkHistory options.storePolicy', `one of ${STORE_POLICIES.join(', ')}`, storePolicy);
  if (!isIntegerIn(timeoutMs, 0, MAX_TIMEOUT_MS)) refuse('checkHistory options.timeoutMs', `an integer number of ms in [0, ${MAX_TIMEOUT_MS}]`, timeoutMs);
  if (!isIntegerIn(maxMemoryBytes, 1, Number.MAX_SAFE_INTEGER)) refuse('checkHistory options.maxMemoryBytes', 'a positive integer number of bytes', maxMemoryBytes);
  if (!isIntegerIn(maxFindings, 0, 1_000_000)) refuse('checkHistory options.maxFindings', 'an integer in [0, 1000000]', maxFindings);
  if (onProgress !== undefined && typeof onProgress !== 'function') refuse('checkHistory options.onProgress', 'a function', onProgress);
  if (stop !== undefined && typeof stop !== 'function') refuse('checkHistory options.stop', 'a function', stop);
  if (typeof clock !== 'object' || clock === null || typeof clock.now !== 'function') refuse('checkHistory options.clock', 'an object with a now() function (a MonotonicClock)', clock);
  return { storePolicy, timeoutMs, maxMemoryBytes, maxFindings, onProgress, stop, clock };
}

/**
 * The history to judge: one validateHistory or parseHistory gave as is; any other (a recorder's events, a
 * hand-built array) read by validateHistory first, so a malformed one is a HistoryFormatError naming the event
 * (line = index + 1), never a TypeError or a verdict on garbage. parseHistory's own error, passed on unchecked,
 * is thrown.
 */
export function readHistory(history: History | HistoryFormatError): History {
  if (history instanceof HistoryFormatError) throw history;
  if (wasRead(history)) return history;
  const read = validateHistory(history);
  if (read instanceof HistoryFormatError) throw read;
  return read;
}

/** Whether a history has a client operation (an invoke or completion of a process): the meta line, the nemesis's faults and loss signals judge nothing. */
export const hasClientOperations = (history: History): boolean => history.some((e) => e.type !== 'meta' && e.process !== 'nemesis' && e.type !== 'signal');

/**
 * Judges a history. Throws InvalidInputError for bad options, and HistoryFormatError for a malformed history or one
 * without a client operation (empty, only a meta line, faults or signals): nothing to judge is not 'safe' (an empty or
 * truncated recording would pass as a clean bill of health), as `lockcheck check` refuses it with exit 2.
 */
export function checkHistory(given: History, options: CheckOptions = {}): CheckReport {
  // The budget counts from here: every phase reads it, the building of each object's history before the search too.
  const { storePolicy: policy, timeoutMs, maxMemoryBytes, maxFindings: max, onProgress, stop, clock } = checkedOptions(options);
  // A reading that is no finite number would leave the deadline never reached: refused, naming the option.
  const now = (): number => {
    const t = clock.now();
    return typeof t === 'number' && Number.isFinite(t) ? t : refuse('checkHistory options.clock', 'a clock whose now() is a finite number of ms', t);
  };
  const budget = new Budget(now(), timeoutMs, onProgress, now, stop);
  const history = readHistory(given);
  if (!hasClientOperations(history)) {
    throw new HistoryFormatError(0, undefined, `no client operations (${counted(history.length, 'event')}): nothing to judge; is the recording empty or truncated?`);
  }
  const meta = history[0]?.type === 'meta' ? history[0] : undefined;
  const storePolicy = policy ?? meta?.store;
  // Each check as it is decided; those the budget ran out before say 'unknown', naming the phase (never 'safe').
  const done = new Map<CheckId, { readonly result: CheckResult; readonly findings: readonly Finding[] }>();
  const partial: { ops?: ReturnType<typeof operations>; holds?: number; overlaps?: number; tokens?: number; lost?: number; stale?: number; store?: ReturnType<typeof storeCounts>; faults?: number } = {};
  let outOfTime: OutOfTime | undefined;
  try {
    const ops = (partial.ops = operations(history, budget));
    partial.store = storeCounts(ops);
    partial.faults = faultIntervals(history, budget).length;
    const holds = holdIntervals(history, budget);
    partial.holds = holds.length;
    const overlaps = overlappingHolds(holds, max, budget);
    partial.overlaps = overlaps.total;
    done.set('overlapping-holds', {
      result: { check: 'overlapping-holds', property: 'MUTEX-1', verdict: holds.length === 0 ? 'skipped' : verdictOf(overlaps), findings: overlaps.total, ...(holds.length === 0 ? { note: 'no holds in the history' } : {}) },
      findings: overlaps.kept,
    });
    const tokens = tokenOrder(ops, max, history, budget);
    partial.tokens = tokens.findings.total;
    done.set('token-order', {
      result: { check: 'token-order', property: 'FENCE-1', verdict: tokens.grants < 2 ? 'skipped' : verdictOf(tokens.findings), findings: tokens.findings.total, ...(tokens.grants < 2 ? { note: 'fewer than two grants carry a token' } : {}) },
      findings: tokens.findings.kept,
    });
    const lost = lostUpdates(ops, max, budget);
    partial.lost = lost.lost;
    done.set('lost-updates', {
      result: { check: 'lost-updates', property: 'STORE-1', verdict: lost.judged ? verdictOf(lost.findings) : 'skipped', findings: lost.findings.total, ...(lost.judged ? {} : { note: 'no read-modify-writes (writes with prev) in the history' }) },
      findings: lost.findings.kept,
    });
    const stale = staleWrites(ops, storePolicy ?? 'unfenced', max, budget);
    partial.stale = stale.total;
    const hasTokenedWrites = ops.some((o) => o.event.op === 'write' && o.event.token !== undefined);
    done.set('stale-writes', { result: staleCheck(storePolicy, hasTokenedWrites, stale), findings: stale.kept });
  } catch (e) {
    if (!(e instanceof OutOfTime)) throw e;
    outOfTime = e;
  }
  const lin = outOfTime === undefined ? linearizabilityChecks(history, { timeoutMs, maxMemoryBytes, budget }, max) : undefined;
  if (lin !== undefined) {
    done.set('lock-linearizable', { result: lin.lock, findings: lin.findings.filter((f) => f.check === 'lock-linearizable') });
    done.set('register-linearizable', { result: lin.register, findings: lin.findings.filter((f) => f.check === 'register-linearizable') });
  }
  const CHECKS: readonly (readonly [CheckId, CheckResult['property']])[] = [
    ['overlapping-holds', 'MUTEX-1'],
    ['token-order', 'FENCE-1'],
    ['lost-updates', 'STORE-1'],
    ['stale-writes', 'FENCE-2'],
    ['lock-linearizable', 'LIN-1'],
    ['register-linearizable', 'LIN-1'],
  ];
  const checks = CHECKS.map(([check, property]): CheckResult => done.get(check)?.result ?? { check, property, verdict: 'unknown', findings: null, note: (outOfTime ?? new OutOfTime('checking')).note(timeoutMs) });
  const findings = CHECKS.flatMap(([check]) => done.get(check)?.findings ?? []);
  const ops = partial.ops;
  return {
    verdict: overallVerdict(checks),
    storePolicy,
    checks,
    findings,
    // What the budget left undone is null, not 0 (which reads as counted): the checks' notes say which were not decided.
    counts: {
      events: history.length,
      operations: ops?.length ?? null,
      grants: ops?.filter((o) => o.event.op === 'acquire' && o.outcome === 'ok').length ?? null,
      holds: partial.holds ?? null,
      overlappingHolds: partial.overlaps ?? null,
      writesAccepted: partial.store?.writesAccepted ?? null,
      writesRejected: partial.store?.writesRejected ?? null,
      writesUnknown: partial.store?.writesUnknown ?? null,
      lostUpdates: partial.lost ?? null,
      staleWritesAccepted: partial.stale ?? null,
      tokenOrderViolations: partial.tokens ?? null,
      unknownOutcomes: ops?.filter((o) => o.outcome === 'info' || o.outcome === 'pending').length ?? null,
      faults: partial.faults ?? null,
    },
  };
}

function staleCheck(policy: StorePolicy | undefined, hasTokenedWrites: boolean, stale: FindingList): CheckResult {
  const base = { check: 'stale-writes', property: 'FENCE-2', findings: stale.total } as const;
  if (policy === undefined) return { ...base, verdict: 'skipped', note: 'the store policy is not known: give it in a meta line or with --store-policy' };
  if (policy !== 'strict' && policy !== 'monotonic') return { ...base, verdict: 'skipped', note: `${policy === 'unfenced' ? 'an' : 'a'} ${policy} store fences nothing` };
  if (!hasTokenedWrites) return { ...base, verdict: 'skipped', note: 'no write carries a token' };
  return { ...base, verdict: verdictOf(stale) };
}
