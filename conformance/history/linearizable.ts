import type { History } from './event.ts';
import type { CheckResult, Finding, Verdict } from './findings.ts';
import { FindingList, sortedUnique } from './findings.ts';
import { ms } from './operations.ts';
import type { LeaseLockInput, LinearizabilityResult, ObjectHistory, Operation, RegisterInput, RegisterOutput } from './linearizability/index.ts';
import { checkLinearizability, etcdRegister, isPending, leaseLock, lockHistories, registerHistories } from './linearizability/index.ts';
import { counted } from '../counted.ts';
import { compositeKey } from './group.ts';
import { Budget, OutOfTime } from './budget.ts';

/**
 * LIN-1 (spec/SPEC.md 10.4.5): each resource's lock and each store register
 * against a sequential lease lock and register, by the Wing–Gong–Lowe search
 * of ./linearizability. One time budget for all objects; an object the
 * search could not finish in it is `unknown`, never a guess.
 */
export interface LinearizabilityReport {
  readonly lock: CheckResult;
  readonly register: CheckResult;
  readonly findings: readonly Finding[];
}

/**
 * Per register (resource and key), the values every write of the history carries, whatever its outcome: a failed
 * write's too. It is left out of the register's operations (it did not take effect), but its value is one the
 * history attempted to write, never one from before it.
 */
function attemptedValues(history: History, budget: Budget): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  budget.phase('finding the values written', history.length);
  for (const e of history) {
    budget.tick();
    if (e.type !== 'invoke' || e.op !== 'write') continue;
    const k = compositeKey(e.resource, e.key);
    let values = out.get(k);
    if (values === undefined) out.set(k, (values = new Set()));
    values.add(e.value);
  }
  return out;
}

/**
 * A register that already held a value when the history began: the one
 * value reads or read-modify-writes saw that no write of the history wrote
 * or attempted (a failed write's value is the history's, so a read of it is
 * not explained by the register's start). With exactly one such value, a
 * write of it is put before everything (the register model starts absent);
 * otherwise the register starts absent.
 */
function withInitialValue(h: ObjectHistory<RegisterInput, RegisterOutput>, history: History, attempted: Map<string, Set<string>>): ObjectHistory<RegisterInput, RegisterOutput> {
  const at = h.events[0] === undefined ? undefined : history[h.events[0]];
  const ofRegister = at !== undefined && at.type !== 'meta' && 'key' in at ? attempted.get(compositeKey(at.resource, at.key)) : undefined;
  const written = new Set<string>(ofRegister);
  for (const o of h.operations) if (o.input.f === 'write' && typeof o.input.value === 'string') written.add(o.input.value);
  const seen = new Set<string>();
  for (const [k, o] of h.operations.entries()) {
    const v = o.output?.value;
    if (typeof v === 'string' && !written.has(v)) seen.add(v);
    const e = history[h.events[k]!]!;
    if (e.type !== 'meta' && 'prev' in e && typeof e.prev === 'string' && !written.has(e.prev)) seen.add(e.prev);
  }
  if (seen.size !== 1 || h.operations.length === 0) return h;
  return startingWith(h, [...seen][0]!);
}

/** The register's history as if it held `value` before it began (null: absent): a write of it put before everything. */
function startingWith(h: ObjectHistory<RegisterInput, RegisterOutput>, value: string | null): ObjectHistory<RegisterInput, RegisterOutput> {
  if (value === null || h.operations.length === 0) return h;
  let first = Infinity;
  for (const o of h.operations) first = Math.min(first, o.call);
  // first - 1 < first: parse.ts refuses times beyond 2^53-1 in magnitude, where it would equal first.
  const initial: Operation<RegisterInput, RegisterOutput> = { process: 'initial', call: first - 1, return: first - 1, input: { f: 'write', value } };
  // Appended, so that the indices of the history's own operations do not move.
  return { ...h, operations: [...h.operations, initial] };
}

/**
 * The other values a register may have held before the history, for when the start withInitialValue chose leaves it
 * not linearizable: values may repeat (a flag written 'on' again), so a value a write of the history carries may also
 * be the one it held before, and no start may be left untried before a violation is claimed. Only a read invoked
 * before the first known write returned can see the start (a later one follows a write), so the candidates are
 * absent and the values such reads returned; a value only rejected writes carry stays the history's own, never the
 * start (withInitialValue). `chosen`: the start already tried, left out.
 */
function otherStarts(chosen: ObjectHistory<RegisterInput, RegisterOutput>, history: History, attempted: Map<string, Set<string>>): ObjectHistory<RegisterInput, RegisterOutput>[] {
  // The history's own operations (withInitialValue appends its start after them).
  const own = { ...chosen, operations: chosen.operations.slice(0, chosen.events.length) };
  const tried = chosen.operations.length > own.operations.length ? (chosen.operations.at(-1)!.input as { readonly value: string }).value : null;
  const at = own.events[0] === undefined ? undefined : history[own.events[0]];
  const ofRegister = at !== undefined && at.type !== 'meta' && 'key' in at ? attempted.get(compositeKey(at.resource, at.key)) : undefined;
  const carried = new Set<unknown>();
  let firstWriteReturn = Infinity;
  for (const o of own.operations) {
    if (o.input.f !== 'write') continue;
    carried.add(o.input.value);
    if (!isPending(o)) firstWriteReturn = Math.min(firstWriteReturn, o.return!);
  }
  const starts = new Set<string | null>([null]);
  for (const o of own.operations) {
    const v = o.output?.value;
    if (o.input.f !== 'read' || o.call > firstWriteReturn || (typeof v !== 'string' && v !== null)) continue;
    if (typeof v === 'string' && ofRegister?.has(v) === true && !carried.has(v)) continue;
    starts.add(v);
  }
  starts.delete(tried);
  return [...starts].map((v) => startingWith(own, v));
}

/**
 * A lock already held when the history began (a recording cut in the middle
 * of a lease): an owner whose extend succeeded with no acquire of it that
 * could come first. Only one owner can have held it then: the first such
 * extend's owner is put as holding it before everything (the lease lock
 * starts free), with its deadline unknown, so that the lease may have run out
 * at any time (an acquire by another stays legal; its owner's extend after
 * that does not). A second such owner is a violation whichever held it. An
 * owner first seen releasing needs nothing: a release by a non-holder is legal.
 */
function withInitialHolder(h: ObjectHistory<LeaseLockInput, unknown>): ObjectHistory<LeaseLockInput, unknown> {
  // Per owner, its earliest acquire's call: an extend returning before it has no acquire to stand on.
  const firstAcquire = new Map<string, number>();
  for (const a of h.operations) if (a.input.f === 'acquire') firstAcquire.set(a.input.owner, Math.min(a.call, firstAcquire.get(a.input.owner) ?? Infinity));
  // The first by call (a scan, not a sort: nothing here looks at the budget's clock).
  let earliest: Operation<LeaseLockInput, unknown> | undefined;
  for (const e of h.operations) if (e.input.f === 'extend' && !isPending(e) && e.return! < (firstAcquire.get(e.input.owner) ?? Infinity) && (earliest === undefined || e.call < earliest.call)) earliest = e;
  const holder = earliest?.input.owner;
  if (holder === undefined) return h;
  let first = Infinity;
  for (const o of h.operations) first = Math.min(first, o.call);
  // first - 1 < first: parse.ts refuses times beyond 2^53-1 in magnitude, where it would equal first.
  const initial: Operation<LeaseLockInput, unknown> = { process: 'initial', call: first - 1, return: first - 1, input: { f: 'acquire', owner: holder, validUntil: -Infinity, latest: first - 1 } };
  // Appended, so that the indices of the history's own operations do not move.
  return { ...h, operations: [...h.operations, initial] };
}

/** One operation of an object's history as a reader finds it: who, what, when, and the line of its invoke. */
function describeOperation(o: Operation<unknown, unknown>, eventIndex: number | undefined, history: History): string {
  if (eventIndex === undefined || history[eventIndex] === undefined) {
    const input = o.input as { readonly value?: unknown; readonly owner?: string };
    return input.owner !== undefined ? `the lock held by ${input.owner} before the history` : `the register's value before the history (${JSON.stringify(input.value ?? null)})`;
  }
  const input = o.input as { readonly f: string; readonly value?: unknown; readonly owner?: string };
  const read = (o.output as RegisterOutput | undefined)?.value;
  const what = input.f === 'write' ? `write of '${String(input.value)}'` : input.f === 'read' ? `read of ${read === null ? 'nothing' : `'${String(read)}'`}` : `${input.f} by ${input.owner ?? '?'}`;
  const returned = o.return === undefined || o.return === Infinity ? 'outcome unknown' : `returned at ${ms(o.return)} ms`;
  return `process ${String(o.process)}'s ${what} (line ${eventIndex! + 1}, invoked at ${ms(o.call)} ms, ${returned})`;
}

function finding(kind: 'lock' | 'register', h: ObjectHistory<unknown, unknown>, result: LinearizabilityResult & { verdict: 'not-linearizable' }, history: History): Finding {
  const eventOf = (i: number | undefined) => (i === undefined ? undefined : h.events[i]);
  const blocked = result.blocked === undefined ? undefined : h.operations[result.blocked];
  const last = result.longestPrefix.slice(-3);
  const lastPlaced = last.at(-1);
  return {
    check: kind === 'lock' ? 'lock-linearizable' : 'register-linearizable',
    property: 'LIN-1',
    message:
      `${h.object} is not linearizable${result.key === undefined ? '' : ` (${result.key})`}: ${result.longestPrefix.length} of its ${counted(h.operations.length, 'operation')} can be put in an order the sequential ${kind} allows` +
      (lastPlaced === undefined ? '' : `, the last of them ${describeOperation(h.operations[lastPlaced]!, eventOf(lastPlaced), history)}`) +
      (blocked === undefined ? '' : `, and then ${describeOperation(blocked, eventOf(result.blocked), history)} cannot be placed`),
    events: sortedUnique([eventOf(result.blocked), ...last.map(eventOf)]),
  };
}

/**
 * The bounds of the search: time shared by every object of the history; memory per object (one object's tables are
 * searched at a time). `budget`: the check's, so that the time counts the work before the search too (building the
 * objects' histories, read every few thousand events) and progress is reported; default a budget of `timeoutMs` from now.
 */
export interface SearchBounds {
  readonly timeoutMs: number;
  readonly maxMemoryBytes: number;
  readonly budget?: Budget;
}

const mib = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10;

type Kind = 'lock' | 'register';
const checkIdOf = (kind: Kind) => (kind === 'lock' ? 'lock-linearizable' : 'register-linearizable');

/** A LIN-1 check the budget ran out on (or the caller stopped) before its search ended: not decided, never safe. */
function outOfTimeResult(kind: Kind, timeoutMs: number, stopped: OutOfTime): CheckResult {
  return { check: checkIdOf(kind), property: 'LIN-1', verdict: 'unknown', findings: null, note: stopped.note(timeoutMs) };
}

/** Why a judge stopped before its last object: what stopped it, and how many objects it never searched. */
interface Cut {
  readonly by: OutOfTime;
  readonly notSearched: number;
}

export function linearizabilityChecks(history: History, bounds: SearchBounds, maxFindings: number): LinearizabilityReport {
  const { timeoutMs, maxMemoryBytes, budget = new Budget(performance.now(), timeoutMs) } = bounds;
  // The search reads its clock every slice of steps: each read is a chance to report progress (the search judges its deadline).
  let searching = { kind: 'lock' as Kind, done: 0, total: 0 };
  const clock = () => {
    const now = budget.clock();
    budget.stopIfAsked();
    budget.report(now, searching.done, searching.total);
    return now;
  };
  // beforeStep: no setup step of an object's search (its sorts) begins past the deadline, its first included.
  const left = () => ({ timeoutMs: budget.left(), maxMemoryBytes, clock, beforeStep: () => budget.beforeStep() });
  /**
   * Searches the objects one at a time. Before each, the budget is asked (`spent`): past the deadline, or asked to
   * stop, no further object is prepared or searched (each would still have had a slice of steps: 4,000 objects ran
   * 1.6 s past the budget); they are counted as not searched, and what was decided before is kept.
   */
  const judge = <I, O>(kind: Kind, objects: readonly ObjectHistory<I, O>[], prepare: (h: ObjectHistory<I, O>) => ObjectHistory<I, O>, run: (h: ObjectHistory<I, O>) => LinearizabilityResult) => {
    const list = new FindingList(maxFindings);
    const unknown = { timeout: 0, memory: 0, interrupted: 0 };
    let cut: Cut | undefined;
    budget.phase(`searching the ${kind} histories`, objects.length);
    searching = { kind, done: 0, total: objects.length };
    for (const [i, raw] of objects.entries()) {
      const by = budget.spent();
      if (by !== undefined) {
        cut = { by, notSearched: objects.length - i };
        break;
      }
      const h = prepare(raw);
      let result: LinearizabilityResult;
      try {
        result = run(h);
      } catch (e) {
        // Asked to stop during this object's search (the search's clock polls it), or past the deadline before a step
        // of its setup: this one undecided, the rest not searched.
        if (!(e instanceof OutOfTime)) throw e;
        if (e.interrupted) unknown.interrupted++;
        else unknown.timeout++;
        cut = { by: e, notSearched: objects.length - i - 1 };
        break;
      }
      // Its steps count toward the work judged whole whatever the budget (Budget.spend), its preparing too.
      budget.spend(h.operations.length + result.stats.steps);
      searching.done++;
      if (result.verdict === 'not-linearizable') list.add(finding(kind, h as ObjectHistory<unknown, unknown>, result, history));
      else if (result.verdict === 'unknown') unknown[result.reason]++;
    }
    const notSearched = cut?.notSearched ?? 0;
    const undecided = unknown.timeout + unknown.memory + unknown.interrupted + notSearched;
    const verdict: Verdict | 'skipped' = objects.length === 0 ? 'skipped' : list.total > 0 ? 'violation' : undecided > 0 ? 'unknown' : 'safe';
    const why = [
      ...(unknown.timeout > 0 ? [`${unknown.timeout} ran out of the ${timeoutMs} ms budget (--timeout-ms)`] : []),
      ...(unknown.memory > 0 ? [`${unknown.memory} reached the ${mib(maxMemoryBytes)} MiB memory bound (--memory-mib)`] : []),
      ...(unknown.interrupted > 0 ? [`${unknown.interrupted} interrupted`] : []),
      ...(notSearched > 0 ? [`${notSearched} not searched (${cut!.by.interrupted ? 'interrupted' : `the ${timeoutMs} ms budget (--timeout-ms) had run out`})`] : []),
    ];
    // One object, interrupted in its search: the note says so as the other checks' do.
    const undecidedNote = cut?.by.interrupted === true && objects.length === 1 ? cut.by.note(timeoutMs) : `${undecided} of ${counted(objects.length, kind)} not decided: ${why.join(', ')}`;
    const note = objects.length === 0 ? `no ${kind} operations` : undecided > 0 ? undecidedNote : undefined;
    // Some objects undecided and none found wrong: not decided, no count (a 0 would read as "none found").
    const result: CheckResult = verdict === 'unknown' ? { check: checkIdOf(kind), property: 'LIN-1', verdict, findings: null, note: undecidedNote } : { check: checkIdOf(kind), property: 'LIN-1', verdict, findings: list.total, ...(note === undefined ? {} : { note }) };
    return { result, list, cut };
  };
  let lock: { result: CheckResult; list: FindingList; cut: Cut | undefined } | undefined;
  try {
    // Each object's start (initial holder, initial value) is found just before its search: past the budget, not at all.
    lock = judge('lock', lockHistories(history, budget), withInitialHolder, (h) => checkLinearizability(leaseLock(), h.operations, left()));
    // The lock search cut short: the registers are not begun (their histories, O(n) to build, neither).
    if (lock.cut !== undefined) return { lock: lock.result, register: outOfTimeResult('register', timeoutMs, lock.cut.by), findings: lock.list.kept };
    // With its initial value in the object (not added inside the search), so that a finding can name that operation too.
    const registers = registerHistories(history, budget);
    const attempted = attemptedValues(history, budget);
    const search = (h: ObjectHistory<RegisterInput, RegisterOutput>) => checkLinearizability(etcdRegister(), h.operations, left());
    const register = judge(
      'register',
      registers,
      (h) => withInitialValue(h, history, attempted),
      (h) => {
        // Not linearizable from the start chosen: so from no start, before it is a finding (an undecided one: unknown).
        const chosen = search(h);
        if (chosen.verdict !== 'not-linearizable') return chosen;
        let undecided: LinearizabilityResult | undefined;
        for (const other of otherStarts(h, history, attempted)) {
          const result = search(other);
          if (result.verdict === 'linearizable') return result;
          if (result.verdict === 'unknown') undecided ??= result;
        }
        return undecided ?? chosen;
      },
    );
    return { lock: lock.result, register: register.result, findings: [...lock.list.kept, ...register.list.kept] };
  } catch (e) {
    if (!(e instanceof OutOfTime)) throw e;
    return { lock: lock?.result ?? outOfTimeResult('lock', timeoutMs, e), register: outOfTimeResult('register', timeoutMs, e), findings: lock?.list.kept ?? [] };
  }
}
