import { describe, expect, it } from 'vitest';
import { finishWithin, rejectAfter } from '../conformance/realTimeLimit.ts';
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

  it('rejectAfter passes an outcome in time through, and rejects with its own error at the limit', async () => {
    await expect(rejectAfter(Promise.resolve('x'), 1_000, () => new Error('late'))).resolves.toBe('x');
    await expect(rejectAfter(Promise.reject(new Error('refused')), 1_000, () => new Error('late'))).rejects.toThrow('refused');
    let fail!: (e: Error) => void;
    const work = new Promise((_, reject) => {
      fail = reject;
    });
    let made = 0;
    await expect(
      rejectAfter(work, 5, () => {
        made++;
        return new Error('late');
      }),
    ).rejects.toThrow('late');
    // A failure after the limit is dropped (no unhandled rejection), and the late error is made once.
    fail(new Error('too late'));
    await Promise.resolve();
    expect(made).toBe(1);
  });
});
