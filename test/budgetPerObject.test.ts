import { describe, expect, it, vi } from 'vitest';
import { checkHistory } from '../conformance/history/check.ts';
import type { History } from '../conformance/history/event.ts';
import { checkHistoryLinearizability, checkLinearizability, kvStore, type KvInput, type KvOutput, type Operation } from '../conformance/history/linearizability/index.ts';
import { InvalidInputError } from '../model/errors.ts';

/**
 * The time budget bounds the whole check, not each object: once the deadline has passed no new search starts, so the
 * time past it is one slice of one search however many locks, registers or partitions are left (every one of them
 * used to get a slice: 4,000 hard registers ran 1.6 s past a 6 s budget). Driven by a clock that moves a fixed step at
 * each read: the reads after the deadline count the searches begun after it (each begins with one).
 */

/** A register no order explains, whose search runs until its deadline: 30 writes of unknown outcome, 60 reads of them, each read twice. */
function hardRegister(key: string, t0: number): object[] {
  const events: object[] = [];
  for (let p = 0; p < 30; p++) events.push({ type: 'invoke', process: p, time: t0, op: 'write', resource: 'r', key, value: `${key}-${p}` });
  for (let p = 0; p < 30; p++) events.push({ type: 'info', process: p, time: t0 + 1, op: 'write', resource: 'r', key });
  for (let i = 0; i < 60; i++) {
    const t = t0 + 2 + 2 * i;
    events.push({ type: 'invoke', process: 30, time: t, op: 'read', resource: 'r', key }, { type: 'ok', process: 30, time: t + 1, op: 'read', resource: 'r', key, value: `${key}-${(i * 7) % 30}` });
  }
  return events;
}

/** A register decided at once: two reads of values no write carries (two, so neither is the register's start). */
function wrongRegister(key: string, t0: number): object[] {
  return ['x', 'y'].flatMap((v, i) => [
    { type: 'invoke', process: 31, time: t0 + 2 * i, op: 'read', resource: 'r', key },
    { type: 'ok', process: 31, time: t0 + 2 * i + 1, op: 'read', resource: 'r', key, value: v },
  ]);
}

/** Two registers found wrong, then `hard` registers each of which would search until the deadline. */
function history(hard: number): History {
  const events: object[] = [...wrongRegister('w0', 0), ...wrongRegister('w1', 10)];
  for (let k = 0; k < hard; k++) events.push(...hardRegister(`h${k}`, 100 + 200 * k));
  return events as History;
}

/** A clock that moves `step` ms at each read, counting the reads at or past `deadline`. */
function steppingClock(step: number, deadline: number) {
  const c = { t: 0, readsPast: 0, now: () => ((c.t += step), c.t >= deadline && c.readsPast++, c.t) };
  return c;
}

describe('past the deadline no new search starts, however many objects are left', () => {
  it('checkHistory: the registers after the deadline are not searched, counted in the note; those decided before stay decided', () => {
    // 80 registers: past the work judged whole whatever the budget (2^16 items) before the search begins. 10 ms a
    // read, a 1 s budget: the clock is read a dozen times before the search, and the first hard register's search
    // reaches the deadline.
    const clock = steppingClock(10, 1000);
    const r = checkHistory(history(80), { timeoutMs: 1000, clock });
    const register = r.checks.find((c) => c.check === 'register-linearizable')!;
    expect(register).toMatchObject({ verdict: 'violation', findings: 2 });
    expect(register.note).toBe('80 of 82 registers not decided: 1 ran out of the 1000 ms budget (--timeout-ms), 79 not searched (the 1000 ms budget (--timeout-ms) had run out)');
    expect(r.verdict).toBe('violation');
    // A handful: the search's look that finds the deadline, its stats, the loop's before the next register; not a
    // search's three or more per register left (before: over 300).
    expect(clock.readsPast).toBeLessThanOrEqual(5);
  });

  it('checkHistory stopped by its caller: no search starts after the stop, the findings of the registers before kept', () => {
    let polls = 0;
    // Polled before each register and at each look of a search at its clock: 7 for each wrong register (before it, and
    // its three searches, one per start it may have had: absent, 'x', 'y'), so the 16th is in the first hard register's.
    const r = checkHistory(history(5), { timeoutMs: 600_000, stop: () => ++polls > 15 });
    const register = r.checks.find((c) => c.check === 'register-linearizable')!;
    expect(register).toMatchObject({ verdict: 'violation', findings: 2 });
    expect(register.note).toBe('5 of 7 registers not decided: 1 interrupted, 4 not searched (interrupted)');
    // Polled once more (by the search it stopped), never by a search after it.
    expect(polls).toBe(16);
  });

  it('checkHistoryLinearizability: objects after the deadline are unknown (timeout) without a search', () => {
    const clock = steppingClock(100, 1000);
    const verdicts = checkHistoryLinearizability(history(20), { timeoutMs: 1000, clock: clock.now });
    expect(verdicts.map((v) => v.result.verdict)).toEqual(['not-linearizable', 'not-linearizable', ...Array<string>(20).fill('unknown')]);
    expect(verdicts.slice(3).every((v) => v.result.stats.steps === 0)).toBe(true);
    // One read per object not searched, and those of the search the deadline passed in (before, each object past the
    // deadline began a search: three reads or more each).
    expect(clock.readsPast).toBeLessThanOrEqual(25);
  });

  it('checkLinearizability: a partition whose turn comes after the deadline is not begun', () => {
    // 200 keys, each put then read back: each partition decided in a handful of steps, all within one slice.
    const ops: Operation<KvInput, KvOutput>[] = [];
    for (let k = 0; k < 200; k++) {
      ops.push({ process: 0, call: 4 * k, return: 4 * k + 1, input: { f: 'put', key: `k${k}`, value: 'v' } });
      ops.push({ process: 0, call: 4 * k + 2, return: 4 * k + 3, input: { f: 'get', key: `k${k}` }, output: { value: 'v' } });
    }
    const clock = steppingClock(1000, 1001);
    const result = checkLinearizability(kvStore(), ops, { timeoutMs: 1, clock: clock.now });
    // The first slice runs whatever the budget; the deadline has passed before the second partition's.
    expect(result).toMatchObject({ verdict: 'unknown', reason: 'timeout' });
    expect(result.stats.steps).toBeLessThan(20);
    // With no deadline the same history is linearizable.
    expect(checkLinearizability(kvStore(), ops).verdict).toBe('linearizable');
  });
});

describe('checkHistory options.clock', () => {
  it.each([
    ['a number', 42, 'an object with a now() function (a MonotonicClock), got 42'],
    ['now no function', { now: 1 }, 'an object with a now() function (a MonotonicClock), got an object'],
    ['now() NaN', { now: () => Number.NaN }, 'a clock whose now() is a finite number of ms, got NaN'],
    ['now() a string', { now: () => '5' }, 'a clock whose now() is a finite number of ms, got "5"'],
  ])('%s is refused, naming the option (a reading that is no number would never reach the deadline)', (_, clock, message) => {
    let thrown: unknown;
    try {
      checkHistory(history(0), { clock: clock as never });
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(InvalidInputError);
    expect((thrown as Error).message).toBe(`invalid-config: checkHistory options.clock must be ${message}`);
  });
});

/**
 * A sort is one call that cannot stop in the middle: every phase's sort (and each object's setup in the search: its
 * model's relevance, its entry list) used to begin without a look at the clock, so a deadline that passed during the
 * work before it was seen only after it (up to 7 sorts of the interval checks, and the search's setup, ran past it).
 * Driven by the injected clock: the clock jumps past the deadline during one sort of each place that sorts, in turn;
 * no large sort may begin after that, and the check may not say safe.
 */
describe('no sort begins past the deadline', () => {
  /**
   * Faults first (cheap to read, so that the budget is judged before the checks' sorts), then sequential cycles of
   * acquire, fenced read-modify-write, read, release over 4 resources: every phase has large sorts.
   */
  function cycles(n: number): History {
    const events: object[] = [{ type: 'meta', store: 'strict' }];
    let t = 0;
    for (let f = 0; f < 12_000; f++) events.push({ type: 'invoke', process: 'nemesis', time: t++, op: 'fault', fault: 'pause-client' }, { type: 'ok', process: 'nemesis', time: t++, op: 'fault', fault: 'pause-client' });
    for (let c = 0; c < n; c++) {
      const process = c % 8;
      const resource = `r${c % 4}`;
      const owner = `o${c}`;
      const token = String(c + 1);
      const prev = c < 4 ? null : `v${c - 4}`;
      const value = `v${c}`;
      events.push(
        { type: 'invoke', process, time: t++, op: 'acquire', resource, owner, ttlMs: 1000 },
        { type: 'ok', process, time: t++, op: 'acquire', resource, owner, token, validUntil: t + 1000 },
        { type: 'invoke', process, time: t++, op: 'write', resource, key: 'k', value, prev, token },
        { type: 'ok', process, time: t++, op: 'write', resource, key: 'k', value, prev, token },
        { type: 'invoke', process, time: t++, op: 'read', resource, key: 'k' },
        { type: 'ok', process, time: t++, op: 'read', resource, key: 'k', value },
        { type: 'invoke', process, time: t++, op: 'release', resource, owner, token },
        { type: 'ok', process, time: t++, op: 'release', resource, owner, token },
      );
    }
    return events as History;
  }
  const LARGE = 100;
  /** The sort's caller: the first frame past the spy and the budget's sort (which sorts for the phases). */
  const callerOf = (stack: string) => stack.split('\n').slice(3).find((f) => !f.includes('budget.ts'))!.trim();
  const sortOf = Array.prototype.sort;
  /** Calls `onLarge(site)` before each sort of LARGE items or more (site: the caller's frame), then sorts. */
  function watchSorts(onLarge: (site: string) => (() => void) | void): () => void {
    const spy = vi.spyOn(Array.prototype, 'sort').mockImplementation(function (this: unknown[], compare?: (a: unknown, b: unknown) => number) {
      const after = this.length >= LARGE ? onLarge(callerOf(new Error().stack!)) : undefined;
      const sorted = sortOf.call(this, compare);
      after?.();
      return sorted;
    });
    return () => spy.mockRestore();
  }
  const history = cycles(1500);

  it('whichever sort the deadline passes in, no large sort begins after it', () => {
    // Where the check sorts once the budget is judged at all (past the first read of the clock, at its start).
    const free = { t: 0, reads: 0, now: () => (free.reads++, free.t) };
    const sites: string[] = [];
    // A model's relevance is one step (sorts inside it not told apart): the deadline is made to pass at its first sort.
    const restore = watchSorts((site) => void (free.reads > 1 && !sites.includes(site) && !(site.includes('Relevance') && sites.some((s) => s.includes('Relevance'))) && sites.push(site)));
    try {
      expect(checkHistory(history, { timeoutMs: 600_000, clock: free }).verdict).toBe('safe');
    } finally {
      restore();
    }
    // The interval checks' sorts, building the objects' histories, and the search's setup.
    expect(sites.length).toBeGreaterThanOrEqual(10);
    expect(sites.some((s) => s.includes('buildEntries'))).toBe(true);
    for (const site of sites) {
      const clock = { t: 0, reads: 0, now: () => (clock.reads++, clock.t) };
      let jumped = false;
      let previous = '';
      const begunPast: string[] = [];
      const stop = watchSorts((at) => {
        // A sort in the model's relevance right after another is in the same step.
        const sameStep = at.includes('Relevance') && previous.includes('Relevance');
        previous = at;
        if (clock.reads <= 1) return;
        if (clock.t >= 1000 && !sameStep) begunPast.push(at);
        if (jumped || at !== site) return;
        jumped = true;
        return () => void (clock.t = 1000);
      });
      let report;
      try {
        report = checkHistory(history, { timeoutMs: 1000, clock });
      } finally {
        stop();
      }
      expect({ site, begunPast }).toEqual({ site, begunPast: [] });
      expect(report.verdict, site).toBe('unknown');
    }
  });
});
