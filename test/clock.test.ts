import { describe, expect, it, vi } from 'vitest';
import { systemClock } from '../impl/clock.ts';
import { clockAt, read, setDrift, step } from '../model/clock.ts';

describe('clock', () => {
  it('reads true time plus its offset when it does not drift', () => {
    expect(read(clockAt(100, 0), 50)).toBe(150);
  });
  it('runs slow or fast by its drift, continuously across a change of rate', () => {
    const slow = setDrift(clockAt(0, 0), 1000, -500_000);
    expect(read(slow, 1000)).toBe(1000);
    expect(read(slow, 3000)).toBe(2000);
    const fast = setDrift(slow, 3000, 1_000_000);
    expect(read(fast, 4000)).toBe(4000);
  });
  it('steps forwards and backwards from the current reading', () => {
    const c = step(clockAt(0, 0), 10, -25);
    expect(read(c, 10)).toBe(-15);
    expect(read(c, 20)).toBe(-5);
  });
});

describe('systemClock.schedule', () => {
  it('refuses NaN as InvalidInputError(invalid-duration), and waits for a deadline past the longest timer in steps: before, each armed a 1 ms timer again and again for ever', async () => {
    expect(() => systemClock.schedule(Number.NaN, () => undefined)).toThrow(expect.objectContaining({ code: 'invalid-duration', message: 'invalid-duration: atMs must be a number of ms on the clock, got NaN' }));
    const timers = vi.spyOn(globalThis, 'setTimeout');
    try {
      let fired = 0;
      const cancels = [Number.POSITIVE_INFINITY, 1e308, systemClock.now() + 2 ** 32].map((at) => systemClock.schedule(at, () => fired++));
      // A bounded real wait: the loop, when there is one, arms a timer every ms.
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 100);
        t.unref?.();
      });
      for (const cancel of cancels) cancel();
      expect(fired).toBe(0);
      // The three deadlines' timers and the wait's own.
      expect(timers.mock.calls.length).toBe(4);
    } finally {
      timers.mockRestore();
    }
  });
  it('still fires a deadline already due, and one a few ms away', async () => {
    const order: string[] = [];
    await new Promise<void>((resolve) => {
      systemClock.schedule(systemClock.now() - 5, () => order.push('due'));
      systemClock.schedule(systemClock.now() + 5, () => {
        order.push('soon');
        resolve();
      });
    });
    expect(order).toEqual(['due', 'soon']);
  });
});
