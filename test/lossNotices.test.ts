import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LossNotices } from '../conformance/env/lossNotices.ts';

/** Rejections nobody handled, as Node reports them (after a macrotask: Node looks once the microtasks have run). */
const unhandled: unknown[] = [];
const record = (e: unknown): void => void unhandled.push(e);
const macrotask = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('LossNotices: bounded waits for lost connections, armed before the step that causes them', () => {
  beforeEach(() => {
    unhandled.length = 0;
    process.on('unhandledRejection', record);
    // Only the timeouts are fake: setImmediate stays real, so Node gets to report unhandled rejections.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  });
  afterEach(() => {
    vi.useRealTimers();
    process.off('unhandledRejection', record);
  });

  it('a wait resolves once every client named has reported its loss, also one reported before the await', async () => {
    const losses = new LossNotices(3, 10_000);
    const told = losses.expect([0, 2]);
    losses.noticed(2);
    losses.noticed(1);
    let done = false;
    void told.done.then(() => (done = true));
    await macrotask();
    expect(done).toBe(false);
    losses.noticed(0);
    await told.done;
    told.cancel();
    expect(vi.getTimerCount()).toBe(0);
    await expect(losses.expect([]).done).resolves.toBeUndefined();
  });

  it('a wait whose step failed before it was awaited (left alone past its timeout): no unhandled rejection', async () => {
    const losses = new LossNotices(2, 10_000);
    const told = losses.expect([0, 1]);
    // The step that should have ended the sessions fails; `told` is never awaited.
    await expect(Promise.reject(new Error('terminate refused'))).rejects.toThrow('terminate refused');
    await vi.advanceTimersByTimeAsync(10_000);
    await macrotask();
    expect(unhandled).toEqual([]);
    // Awaited all the same, it still fails, naming the client.
    await expect(told.done).rejects.toThrow('client 0 did not notice its lost connection within 10000 ms');
  });

  it('cancel ends the timers: none left running after a failed step', async () => {
    const losses = new LossNotices(2, 10_000);
    const told = losses.expect([0, 1]);
    expect(vi.getTimerCount()).toBe(2);
    told.cancel();
    expect(vi.getTimerCount()).toBe(0);
    // A loss reported later finds no wait of the cancelled one's.
    losses.noticed(0);
    await macrotask();
    expect(unhandled).toEqual([]);
  });
});
