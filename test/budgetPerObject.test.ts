import { describe, expect, it } from 'vitest';
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
    // Polled before each register and at each look of a search at its clock: the 8th poll is in the first hard register's search.
    const r = checkHistory(history(5), { timeoutMs: 600_000, stop: () => ++polls > 7 });
    const register = r.checks.find((c) => c.check === 'register-linearizable')!;
    expect(register).toMatchObject({ verdict: 'violation', findings: 2 });
    expect(register.note).toBe('5 of 7 registers not decided: 1 interrupted, 4 not searched (interrupted)');
    // Polled once more (by the search it stopped), never by a search after it.
    expect(polls).toBe(8);
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
