import { describe, expect, it } from 'vitest';
import { leftWithin, pauseWithin } from '../conformance/env/deadline.ts';
import { onSamePort } from '../conformance/env/processes.ts';

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
    let starts = 0;
    const startedAt = performance.now();
    const tooLate = new Error('stayed in use');
    // The deadline is 5 ms away: the first pause must end there, and the one more start then fails the restart.
    const error: unknown = await onSamePort(Date.now() + 5, () => Promise.resolve(++starts > 100), () => tooLate).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBe(tooLate);
    // A whole pause is at least 50 ms (a timer never ends early by more than Node's 1 ms clock step); the cut one about
    // 5: the bound leaves a loaded machine's event loop more than 40 ms of its own delay.
    expect(performance.now() - startedAt).toBeLessThan(48);
  });
});
