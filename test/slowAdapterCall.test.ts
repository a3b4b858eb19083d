import { afterEach, describe, expect, it, vi } from 'vitest';
import { AdapterError, callAdapter, onSlowAdapterCall, SLOW_CALL_FIRST_MS } from '../conformance/adapterCall.ts';

/**
 * An adapter call that takes long is said as it waits: a start() that never
 * settled was a silent wait of START_LIMIT_MS (180 s) before the CLI said anything.
 */
describe('an adapter call still pending', () => {
  afterEach(() => {
    onSlowAdapterCall(null);
    vi.useRealTimers();
  });

  it('is told to the listener after 10 s, then every 30 s, until it is given up on; a call that settles is never told', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const told: string[] = [];
    onSlowAdapterCall((backend, call, waitedMs, limitMs) => told.push(`${backend} ${call} ${Math.round(waitedMs / 1000)}/${limitMs / 1000}`));
    const quick = callAdapter('quick', 'start()', () => Promise.resolve(1), 180_000);
    await vi.advanceTimersByTimeAsync(0);
    await expect(quick).resolves.toBe(1);
    const hanging = callAdapter('my lock', 'start()', () => new Promise<never>(() => {}), 180_000);
    const outcome = hanging.catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(SLOW_CALL_FIRST_MS - 1);
    expect(told).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(told).toEqual(['my lock start() 10/180']);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(told).toEqual(['my lock start() 10/180', 'my lock start() 40/180']);
    await vi.advanceTimersByTimeAsync(140_000);
    expect(await outcome).toBeInstanceOf(AdapterError);
    const count = told.length;
    expect(told.at(-1)).toBe('my lock start() 160/180');
    // Given up on: no notice after.
    await vi.advanceTimersByTimeAsync(60_000);
    expect(told).toHaveLength(count);
  });

  it('without a listener (a library caller), nothing is told and nothing is scheduled', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const hanging = callAdapter('my lock', 'start()', () => new Promise<never>(() => {}), 20_000).catch((e: unknown) => e);
    expect(vi.getTimerCount()).toBe(1); // the call's own bound
    await vi.advanceTimersByTimeAsync(20_000);
    expect(await hanging).toBeInstanceOf(AdapterError);
  });
});
