import { describe, expect, it } from 'vitest';
import { VirtualTime } from '../conformance/kit.ts';
import { InvalidInputError } from '../model/errors.ts';
import { clockAt } from '../model/clock.ts';

/**
 * VirtualTime, the kit's time for in-memory backends, checks what it is
 * built with at construction (a settle, onTick or realTime.now that is no
 * function failed as a TypeError at the first advance; a tolerance that is
 * no number switched the real-time check off), and its clocks' schedule()
 * takes no instant that would break time: NaN (the next event ran at t=NaN)
 * and readings no run reaches (past 2^53 the search for their true time
 * never ended, and the next advance hung the process).
 */
function refusedWith(f: () => unknown, names: string): void {
  let error: unknown = null;
  try {
    f();
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(InvalidInputError);
  expect((error as Error).message).toContain(names);
}

describe('VirtualTime options', () => {
  it.each([
    ['settle a number', { settle: 5 }, 'settle must be a function'],
    ['onTick a string', { onTick: 'tick' }, 'onTick must be a function'],
    ['realTime.toleranceMs NaN', { realTime: { toleranceMs: Number.NaN } }, 'realTime.toleranceMs must be a finite number of ms >= 0'],
    ['realTime.toleranceMs negative', { realTime: { toleranceMs: -1 } }, 'realTime.toleranceMs must be a finite number of ms >= 0'],
    ['realTime.toleranceMs a string', { realTime: { toleranceMs: '100' } }, 'realTime.toleranceMs must be a finite number of ms >= 0'],
    ['realTime.toleranceMs absent', { realTime: {} }, 'realTime.toleranceMs must be a finite number of ms >= 0'],
    ['realTime.now a string', { realTime: { toleranceMs: 5, now: 'now' } }, 'realTime.now must be a function'],
  ] as const)('%s: InvalidInputError naming it, at construction', (_what, options, says) => {
    refusedWith(() => new VirtualTime(options as never), says);
  });

  it('good options construct and advance', async () => {
    let ticks = 0;
    // A real clock that moves 10 ms at each reading: the pace never waits.
    let realMs = 0;
    const time = new VirtualTime({ settle: async () => false, onTick: () => void ticks++, realTime: { toleranceMs: 1000, now: () => (realMs += 10) } });
    await time.advanceTo(5);
    expect(time.nowMs()).toBe(5);
    expect(ticks).toBe(1);
  });
});

describe("a VirtualTime clock's schedule()", () => {
  const fresh = () => {
    const time = new VirtualTime();
    return { time, clock: time.clockOf(() => clockAt(0, 0)) };
  };

  it.each([
    ['NaN', Number.NaN],
    ['a string', '5'],
    ['a bigint', 5n],
  ] as const)('refuses an instant that is %s, naming atMs', (_what, atMs) => {
    const { clock } = fresh();
    refusedWith(() => clock.schedule(atMs as never, () => undefined), 'atMs');
  });

  it('refuses a callback that is no function, naming fn', () => {
    const { clock } = fresh();
    refusedWith(() => clock.schedule(5, 'later' as never), 'fn');
  });

  it.each([
    ['Infinity', Number.POSITIVE_INFINITY],
    ['2^48', 2 ** 48],
    ['1e17 (past 2^53)', 1e17],
    ['1e300', 1e300],
  ] as const)('an instant no run reaches (%s) never comes: time stays finite and every advance ends', async (_what, atMs) => {
    const { time, clock } = fresh();
    let fired = false;
    clock.schedule(atMs, () => (fired = true));
    await time.advanceTo(1000);
    expect(await time.runUntil(null, Number.POSITIVE_INFINITY)).toBe(false);
    expect(time.nowMs()).toBe(1000);
    expect(fired).toBe(false);
  });

  it('a far instant on the slowest clock (a tenth of the rate) never comes either: its true time would be past 2^53', async () => {
    const time = new VirtualTime();
    const slow = time.clockOf(() => ({ anchorTrueMs: 0, readingMs: 0, driftPpm: -900_000 }));
    let fired = false;
    slow.schedule(2 ** 50 + 1, () => (fired = true));
    await time.advanceTo(1000);
    expect(time.nowMs()).toBe(1000);
    expect(fired).toBe(false);
  });

  it('a due instant still fires at its time', async () => {
    const { time, clock } = fresh();
    const at: number[] = [];
    clock.schedule(7, () => at.push(time.nowMs()));
    await time.advanceTo(10);
    expect(at).toEqual([7]);
  });
});

describe('SimNetwork options', () => {
  it('a key it does not take (a typo of realReplyBoundMs) is refused, naming it, not run with the default', async () => {
    const { SimNetwork } = await import('../conformance/kit.ts');
    const time = new VirtualTime();
    refusedWith(() => new SimNetwork(time, () => ({ reachable: () => true }), { realReplyBound: 5 } as never), 'SimNetwork options: unknown option "realReplyBound" (did you mean realReplyBoundMs?)');
    expect(() => new SimNetwork(time, () => ({ reachable: () => true }), { realReplyBoundMs: 5 })).not.toThrow();
  });
});
