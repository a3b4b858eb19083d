import type { FaultEvent, History, OperationEvent } from './event.ts';
import { Budget } from './budget.ts';
import { compositeKey } from './group.ts';

/**
 * A history's operations: each invoke paired with its completion. What the
 * checkers and the report work on. Indices are positions in the history.
 */
export interface OperationRecord {
  readonly process: number;
  /** ok, fail, info, or pending: invoked and never completed (treated as info). */
  readonly outcome: 'ok' | 'fail' | 'info' | 'pending';
  readonly invokeIndex: number;
  readonly completeIndex: number | undefined;
  /** The invoke's time. */
  readonly start: number;
  /** The completion's time; for info and pending, the last the history saw of it (its effect may come later). */
  readonly end: number;
  /** The completion (carrying the invoke's fields), or the invoke while pending. */
  readonly event: OperationEvent;
}

export function operations(history: History, budget: Budget = Budget.none): OperationRecord[] {
  const out: OperationRecord[] = [];
  const open = new Map<number, number>();
  let lastTime = -Infinity;
  budget.phase('pairing operations', history.length);
  history.forEach((e, i) => {
    budget.tick();
    if (e.type === 'meta') return;
    lastTime = Math.max(lastTime, e.time);
    if (e.type === 'signal' || e.process === 'nemesis') return;
    const op = e as OperationEvent;
    if (op.type === 'invoke') open.set(op.process as number, i);
    else {
      const inv = open.get(op.process as number)!;
      open.delete(op.process as number);
      out.push({ process: op.process as number, outcome: op.type, invokeIndex: inv, completeIndex: i, start: (history[inv] as OperationEvent).time, end: op.time, event: op });
    }
  });
  for (const [process, inv] of open) {
    const event = history[inv] as OperationEvent;
    out.push({ process, outcome: 'pending', invokeIndex: inv, completeIndex: undefined, start: event.time, end: Math.max(event.time, lastTime), event });
  }
  return budget.sort(out, (a, b) => a.invokeIndex - b.invokeIndex);
}

/** A fault the nemesis injected, from its begin to its end (or the end of the history). */
export interface FaultInterval {
  readonly fault: string;
  readonly target: string | undefined;
  readonly detail: string | undefined;
  readonly start: number;
  readonly end: number;
  readonly beginIndex: number;
  readonly endIndex: number | undefined;
}

export function faultIntervals(history: History, budget: Budget = Budget.none): FaultInterval[] {
  const out: FaultInterval[] = [];
  // Per fault and target, the begins not yet ended, oldest first (a queue: an end matches the oldest begin).
  const open = new Map<string, { readonly begins: number[]; head: number }>();
  let lastTime = -Infinity;
  budget.phase('pairing faults', history.length);
  history.forEach((e, i) => {
    budget.tick();
    if (e.type === 'meta') return;
    lastTime = Math.max(lastTime, e.time);
    if (e.type === 'signal' || e.process !== 'nemesis') return;
    const f = e as FaultEvent;
    const key = compositeKey(f.fault, f.target ?? '');
    let queue = open.get(key);
    if (queue === undefined) open.set(key, (queue = { begins: [], head: 0 }));
    if (f.type === 'invoke') queue.begins.push(i);
    else if (queue.head < queue.begins.length) {
      const begin = queue.begins[queue.head++]!;
      const b = history[begin] as FaultEvent;
      out.push({ fault: b.fault, target: b.target, detail: b.detail ?? f.detail, start: b.time, end: f.time, beginIndex: begin, endIndex: i });
    }
  });
  for (const queue of open.values()) {
    for (const begin of queue.begins.slice(queue.head)) {
      const b = history[begin] as FaultEvent;
      out.push({ fault: b.fault, target: b.target, detail: b.detail, start: b.time, end: Math.max(b.time, lastTime), beginIndex: begin, endIndex: undefined });
    }
  }
  return budget.sort(out, (a, b) => a.beginIndex - b.beginIndex);
}

/** Milliseconds for messages: 3 decimals at most. */
export function ms(t: number): string {
  return Number.isFinite(t) ? `${Math.round(t * 1000) / 1000}` : '∞';
}
