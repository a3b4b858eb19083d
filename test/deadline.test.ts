import { describe, expect, it, vi } from 'vitest';
import { leftWithin, pauseWithin } from '../conformance/env/deadline.ts';
import { onSamePort } from '../conformance/env/processes.ts';

// The pauses onSamePort asks node:timers/promises for, recorded: what the cut is judged by, not how long a loaded
// machine took to run them.
const pauses = vi.hoisted((): number[] => []);
vi.mock('node:timers/promises', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:timers/promises')>();
  return {
    ...real,
    setTimeout: (ms?: number, ...rest: unknown[]) => {
      pauses.push(ms ?? 0);
      return (real.setTimeout as (...a: unknown[]) => Promise<unknown>)(ms, ...rest);
    },
  };
});

describe('deadline.ts: attempts and pauses cut to what is left of a deadline', () => {
  it('an attempt gets its cap while the deadline is far, what is left near it, and 1 ms past it', () => {
    const now = Date.now();
    expect(leftWithin(500, now + 60_000)).toBe(500);
    const near = leftWithin(500, now + 100);
    expect(near).toBeLessThanOrEqual(100);
    expect(near).toBeGreaterThan(0);
    expect(leftWithin(500, now - 1000)).toBe(1);
  });

  it('a pause is cut the same way, and is 0 past the deadline', () => {
    const now = Date.now();
    expect(pauseWithin(50, now + 60_000)).toBe(50);
    expect(pauseWithin(50, now + 10)).toBeLessThanOrEqual(10);
    expect(pauseWithin(50, now - 1)).toBe(0);
  });
});

describe('processes.ts onSamePort: the pause between restarts is cut to what is left of the deadline', () => {
  it('a start that keeps finding its port taken fails at the deadline, not a whole 50 ms pause (and one more start) past it', async () => {
    // Date.now is driven by the starts alone (each takes 70 ms of it), so a loaded machine cannot change the schedule:
    // start 1 ends 30 ms before the deadline (a pause cut to 30), start 2 ends past it (the error, no pause).
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      const t0 = Date.now();
      let starts = 0;
      pauses.length = 0;
      const tooLate = new Error('stayed in use');
      const start = (): Promise<boolean> => {
        starts++;
        vi.setSystemTime(t0 + 70 * starts);
        return Promise.resolve(false);
      };
      const error: unknown = await onSamePort(t0 + 100, start, () => tooLate).then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBe(tooLate);
      expect(starts).toBe(2);
      // The uncut pause would be a whole 50 ms, and a third start after it.
      expect(pauses).toEqual([30]);
    } finally {
      vi.useRealTimers();
    }
  });

  it('a pause far from the deadline is a whole one', async () => {
    let starts = 0;
    pauses.length = 0;
    await onSamePort(Date.now() + 60_000, () => Promise.resolve(++starts > 1), () => new Error('stayed in use'));
    expect(pauses).toEqual([50]);
  });
});
