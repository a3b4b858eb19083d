import { describe, expect, it } from 'vitest';
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
