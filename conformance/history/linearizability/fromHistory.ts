import type { AcquireEvent, History, HistoryEvent, OperationEvent, SignalEvent } from '../event.ts';
import { Budget } from '../budget.ts';
import { compositeKey } from '../group.ts';
import { checkLinearizability, type CheckOptions, type LinearizabilityResult } from './check.ts';
import { leaseLock, type LeaseLockInput } from './models/leaseLock.ts';
import { etcdRegister, type RegisterInput, type RegisterOutput } from './models/register.ts';
import type { Model } from './model.ts';
import type { Operation } from './operation.ts';

/**
 * LIN-1 for lockcheck's own histories (conformance/history/event.ts), as
 * linearizability problems: per resource, the lock's acquire/extend/release operations,
 * and the ends of session locks that loss signals show, against `leaseLock()`; per store register (resource and key), its writes
 * and reads against a register that starts absent (`etcdRegister()`).
 *
 * `fail` means the operation did not happen: it is left out. `info`, or no
 * completion, means unknown: the operation is pending (it may have happened
 * at any time after its invoke, or never). Indices in results are into the
 * list of operations of that object; `events` maps them back to events.
 */
export interface ObjectHistory<I, O> {
  /** `lock <resource>` or `register <resource>/<key>`. */
  readonly object: string;
  readonly operations: readonly Operation<I, O>[];
  /** For each operation, the index of its invoke event in the history. */
  readonly events: readonly number[];
}

export class HistoryShapeError extends Error {
  override readonly name = 'HistoryShapeError';
  constructor(
    readonly event: number,
    reason: string,
  ) {
    super(`event ${event}: ${reason}`);
  }
}

interface Paired {
  readonly invoke: OperationEvent;
  readonly index: number;
  /** undefined: pending (info, or never completed). */
  readonly done?: OperationEvent;
  /** The completion (ok or info; it carries its invoke's fields too), else the invoke: what is known of the operation. */
  readonly seen: OperationEvent;
}

/** Pairs each process's invoke with its completion; failed operations are dropped. */
function pair(history: History, budget: Budget): Paired[] {
  const open = new Map<number, { invoke: OperationEvent; index: number }>();
  const out: Paired[] = [];
  history.forEach((ev: HistoryEvent, index) => {
    budget.tick();
    if (ev.type === 'meta' || ev.process === 'nemesis' || ev.type === 'signal') return;
    const op = ev as OperationEvent;
    const p = op.process as number;
    if (op.type === 'invoke') {
      const prior = open.get(p);
      if (prior !== undefined) throw new HistoryShapeError(index, `process ${p} invokes while its operation from event ${prior.index} is in flight`);
      open.set(p, { invoke: op, index });
      return;
    }
    const inv = open.get(p);
    if (inv === undefined) throw new HistoryShapeError(index, `process ${p} completes (${op.type}) with nothing in flight`);
    if (inv.invoke.op !== op.op) throw new HistoryShapeError(index, `process ${p} completes ${op.op} but invoked ${inv.invoke.op}`);
    open.delete(p);
    if (op.type === 'ok') out.push({ ...inv, done: op, seen: op });
    // info: its time says nothing (it stays pending), but what it names (an owner the client chose) still holds.
    else if (op.type === 'info') out.push({ ...inv, seen: op });
    // fail: it did not happen
  });
  for (const inv of open.values()) out.push({ ...inv, seen: inv.invoke });
  return budget.sort(out, (a, b) => a.index - b.index);
}

function group<T>(items: readonly T[], key: (t: T) => string | undefined): Map<string, T[]> {
  const m = new Map<string, T[]>();
  for (const it of items) {
    const k = key(it);
    if (k === undefined) continue;
    let g = m.get(k);
    if (g === undefined) m.set(k, (g = []));
    g.push(it);
  }
  return m;
}

const timing = (p: Paired): { call: number; return?: number } => ({ call: p.invoke.time, ...(p.done === undefined ? {} : { return: p.done.time }) });

interface Signal {
  readonly event: SignalEvent;
  readonly index: number;
}

/** The owner a lock operation's events name (an acquire's only when its ok or info says). */
const ownerNamed = (e: OperationEvent): string | undefined => (e.op === 'acquire' || e.op === 'extend' || e.op === 'release' ? e.owner : undefined);

/**
 * The owner of each acquire: the one it names; else, for a grant (an ok: a
 * recorder that left the owner out), that of the next extend, release or loss
 * signal of its process on its resource, before the process acquires it
 * again, as MUTEX-1's holds match a grant without owner to what ends it
 * (holds.ts); else `process N`, which nothing of the history releases. An
 * unknown outcome naming no owner is not given one: the client never learnt
 * it, so what its process does next is about another lease.
 */
function ownersOfAcquires(ps: readonly Paired[], signals: readonly Signal[], budget: Budget): Map<Paired, string> {
  const named = budget.sort(
    [
      ...ps.map((p) => ({ index: p.index, process: p.invoke.process as number, owner: ownerNamed(p.seen), acquire: p.invoke.op === 'acquire' ? p : undefined })),
      ...signals.map((g) => ({ index: g.index, process: g.event.process, owner: g.event.owner, acquire: undefined })),
    ],
    (a, b) => a.index - b.index,
  );
  const owners = new Map<Paired, string>();
  const waiting = new Map<number, Paired>();
  for (const n of named) {
    budget.tick();
    if (n.acquire !== undefined) {
      if (n.owner === undefined && n.acquire.done !== undefined) waiting.set(n.process, n.acquire);
      else waiting.delete(n.process);
      owners.set(n.acquire, n.owner ?? `process ${String(n.process)}`);
      continue;
    }
    const ownerless = waiting.get(n.process);
    if (ownerless !== undefined && n.owner !== undefined) owners.set(ownerless, n.owner);
    waiting.delete(n.process);
  }
  return owners;
}

/**
 * Signal reasons that say the session ended on the server (spec 7.4: a killed connection, a dead
 * client's closed socket): the server freed the session's locks, before the client learned it.
 * Others (`expired`: the client's clock) are beliefs only and free nothing.
 */
const SESSION_ENDED: ReadonlySet<string> = new Set(['connection-lost', 'process-exited']);

/**
 * A loss signal that ends a session lock (a grant asking no ttl and given no deadline) is the
 * server's release of that session, at an instant between the grant's invoke and the signal:
 * never later (the client learns of it afterwards), never before the grant (it would free nothing).
 * A lease with a deadline is left to its deadline: the server may keep it after its client is gone.
 * A signal with no grant before it in the history frees nothing the lock, starting free, holds.
 * The grant a signal ends is the latest acquire before it of its process and owner whose token does not
 * differ from the signal's: found in one pass over the operations and signals in history order, keeping
 * per process and owner its latest acquire, its latest without token and its latest per token (a
 * backward scan per signal was quadratic when many signals matched nothing).
 */
function sessionEnds(ps: readonly Paired[], signals: readonly Signal[], owners: Map<Paired, string>, budget: Budget): { op: Operation<LeaseLockInput, unknown>; index: number }[] {
  const out: { op: Operation<LeaseLockInput, unknown>; index: number }[] = [];
  interface Latest {
    any?: Paired;
    untokened?: Paired;
    readonly byToken: Map<string, Paired>;
  }
  const latest = new Map<string, Latest>();
  const keyOf = (process: number, owner: string) => compositeKey(String(process), owner);
  let k = 0;
  for (const { event: s, index } of signals) {
    budget.tick();
    for (; k < ps.length && ps[k]!.index < index; k++) {
      budget.tick();
      const p = ps[k]!;
      const owner = owners.get(p);
      if (p.invoke.op !== 'acquire' || owner === undefined) continue;
      const key = keyOf(p.invoke.process as number, owner);
      let l = latest.get(key);
      if (l === undefined) latest.set(key, (l = { byToken: new Map() }));
      l.any = p;
      const token = (p.seen as AcquireEvent).token;
      if (token === undefined) l.untokened = p;
      else l.byToken.set(token, p);
    }
    if (!SESSION_ENDED.has(s.reason)) continue;
    const l = latest.get(keyOf(s.process, s.owner));
    if (l === undefined) continue;
    let grant: Paired | undefined;
    if (s.token === undefined) grant = l.any;
    else {
      const a = l.byToken.get(s.token);
      const b = l.untokened;
      grant = a === undefined ? b : b === undefined ? a : a.index > b.index ? a : b;
    }
    if (grant === undefined || (grant.invoke as AcquireEvent).ttlMs !== undefined || (grant.seen as AcquireEvent).validUntil !== undefined) continue;
    out.push({ index, op: { process: s.process, call: grant.invoke.time, return: s.time, input: { f: 'session-ended', owner: s.owner, latest: s.time } } });
  }
  return out;
}

/**
 * Per resource, its lock operations, and the ends of its session locks that loss signals show. `budget`: the check's
 * (read every few thousand events: past it, OutOfTime), where progress is reported.
 */
export function lockHistories(history: History, budget: Budget = Budget.none): ObjectHistory<LeaseLockInput, unknown>[] {
  budget.phase('building the lock histories', 3 * history.length);
  const byResource = group(pair(history, budget), (p) => (p.invoke.op === 'acquire' || p.invoke.op === 'extend' || p.invoke.op === 'release' ? p.invoke.resource : undefined));
  const signals = group(
    history.flatMap((e, index) => (e.type === 'signal' ? [{ event: e, index }] : [])),
    (g) => g.event.resource,
  );
  return [...byResource].map(([resource, ps]) => {
    const resourceSignals = signals.get(resource) ?? [];
    const owners = ownersOfAcquires(ps, resourceSignals, budget);
    const operations = ps.map((p): Operation<LeaseLockInput, unknown> => {
      budget.tick();
      const inv = p.invoke;
      const done = p.done;
      const owner = owners.get(p) ?? (p.seen as { readonly owner: string }).owner;
      const validUntil = (done !== undefined && 'validUntil' in done ? done.validUntil : undefined) ?? Infinity;
      switch (inv.op) {
        case 'acquire': {
          const token = (p.seen as AcquireEvent).token;
          return { process: inv.process, ...timing(p), input: { f: 'acquire', owner, validUntil, latest: done?.time ?? Infinity, ...(token === undefined ? {} : { token }) } };
        }
        case 'extend':
          return { process: inv.process, ...timing(p), input: { f: 'extend', owner, validUntil, latest: done?.time ?? Infinity } };
        default:
          return { process: inv.process, ...timing(p), input: { f: 'release', owner, latest: done?.time ?? Infinity } };
      }
    });
    const ends = sessionEnds(ps, resourceSignals, owners, budget);
    return { object: `lock ${resource}`, events: [...ps.map((p) => p.index), ...ends.map((e) => e.index)], operations: [...operations, ...ends.map((e) => e.op)] };
  });
}

/** A register as people read it: resource/key, quoted when either has a '/' (so that the name says which register). */
function registerName(e: OperationEvent): string {
  const { resource, key } = e as OperationEvent & { readonly key: string };
  return resource.includes('/') || key.includes('/') ? `'${resource}' key '${key}'` : `${resource}/${key}`;
}

/** Per store register (resource and key), its writes and reads; a read of null saw it never written. */
export function registerHistories(history: History, budget: Budget = Budget.none): ObjectHistory<RegisterInput, RegisterOutput>[] {
  budget.phase('building the register histories', 2 * history.length);
  const paired = pair(history, budget).filter((p) => p.invoke.op === 'write' || (p.invoke.op === 'read' && p.done !== undefined));
  // Grouped by an unambiguous key ('a/b' + 'c' is not 'a' + 'b/c'); named for people as resource/key.
  const byKey = group(paired, (p) => (p.invoke.op === 'write' || p.invoke.op === 'read' ? compositeKey(p.invoke.resource, p.invoke.key) : undefined));
  return [...byKey].map(([, ps]) => ({
    object: `register ${registerName(ps[0]!.invoke)}`,
    events: ps.map((p) => p.index),
    operations: ps.map((p): Operation<RegisterInput, RegisterOutput> => {
      budget.tick();
      const inv = p.invoke;
      if (inv.op === 'write') return { process: inv.process, ...timing(p), input: { f: 'write', value: inv.value } };
      const done = p.done;
      const value = done !== undefined && done.op === 'read' ? done.value : undefined;
      if (value === undefined) throw new HistoryShapeError(p.index, 'a read completed ok without a value (null: never written)');
      return { process: inv.process, ...timing(p), input: { f: 'read' }, output: { value } };
    }),
  }));
}

export interface ObjectVerdict {
  readonly object: string;
  readonly kind: 'lock' | 'register';
  readonly result: LinearizabilityResult;
  /** Event indices of the operations `result` refers to by index. */
  readonly events: readonly number[];
}

/**
 * Checks every lock and every register of a history. The deadline is shared:
 * objects after it get `unknown` (reason `timeout`) without a search. The first
 * object is searched whatever the budget, as checkLinearizability gives its
 * first slice; each later one only before the deadline (each took a slice
 * past it, however many were left).
 */
export function checkHistoryLinearizability(history: History, options: CheckOptions = {}): ObjectVerdict[] {
  const clock = options.clock ?? (() => performance.now());
  const deadline = options.timeoutMs === undefined ? Infinity : clock() + options.timeoutMs;
  // Every option passes through (the memory bound included); only the time left shrinks from object to object.
  const left = (): CheckOptions => ({ ...options, clock, ...(deadline === Infinity ? {} : { timeoutMs: Math.max(0, deadline - clock()) }) });
  const notSearched: LinearizabilityResult = { verdict: 'unknown', reason: 'timeout', stats: { partitions: 0, steps: 0, configurations: 0, elapsedMs: 0 } };
  const verdicts: ObjectVerdict[] = [];
  const search = <I, O>(model: Model<unknown, I, O>, h: ObjectHistory<I, O>): LinearizabilityResult =>
    verdicts.length > 0 && deadline !== Infinity && clock() >= deadline ? notSearched : checkLinearizability(model, h.operations, left());
  for (const h of lockHistories(history)) verdicts.push({ object: h.object, kind: 'lock', events: h.events, result: search(leaseLock(), h) });
  for (const h of registerHistories(history)) verdicts.push({ object: h.object, kind: 'register', events: h.events, result: search(etcdRegister(), h) });
  return verdicts;
}
