import { describe, expect, it } from 'vitest';
import { finishWithin } from '../conformance/realTimeLimit.ts';
import { settleWithin } from '../conformance/env/processes.ts';

describe('finishWithin / settleWithin (bounded waits on real time)', () => {
  it('says whether the work finished in time, and throws a failure in time', async () => {
    expect(await finishWithin(Promise.resolve('x'), 1_000)).toBe(true);
    expect(await finishWithin(new Promise(() => undefined), 5)).toBe(false);
    await expect(finishWithin(Promise.reject(new Error('close failed')), 1_000)).rejects.toThrow('close failed');
  });

  it('drops a failure that comes after the limit (no unhandled rejection)', async () => {
    let fail!: (e: Error) => void;
    const work = new Promise((_, reject) => {
      fail = reject;
    });
    expect(await finishWithin(work, 5)).toBe(false);
    fail(new Error('too late'));
    await Promise.resolve();
  });

  it('settleWithin never rejects and ends at the limit', async () => {
    await expect(settleWithin(Promise.reject(new Error('x')), 1_000)).resolves.toBeUndefined();
    await expect(settleWithin(new Promise(() => undefined), 5)).resolves.toBeUndefined();
  });
});
