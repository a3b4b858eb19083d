import { describe, expect, it } from 'vitest';
import { leftWithin, pauseWithin } from '../conformance/env/deadline.ts';

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
