import { afterEach, describe, expect, it, vi } from 'vitest';
import { inSlot, RunSlot, slotOf } from '../conformance/env/runSlot.ts';
import { RunEnvironmentError } from '../conformance/env/runEnvironment.ts';

/** Whether a promise has settled, after every queued microtask has run (fake timers: no real time passes). */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(
    () => (done = true),
    () => (done = true),
  );
  await vi.advanceTimersByTimeAsync(0);
  return done;
}

describe('RunSlot: one run at a time on servers the runner resets', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('lets runs in one by one, in the order they entered, each once the one before has left', async () => {
    vi.useFakeTimers();
    const slot = new RunSlot('test run', 1_000);
    const first = slot.enter();
    const second = slot.enter();
    const third = slot.enter();
    expect(slot.waiting).toBe(3);
    const leaveFirst = await first;
    expect(await settled(second)).toBe(false);
    expect(slot.waiting).toBe(2);
    leaveFirst();
    leaveFirst(); // leaving twice lets no one else in
    const leaveSecond = await second;
    expect(await settled(third)).toBe(false);
    leaveSecond();
    (await third)();
    expect(slot.waiting).toBe(0);
  });

  it('fails a run whose predecessor never leaves as an environment error (inconclusive), and the runs behind it wait only for that predecessor', async () => {
    vi.useFakeTimers();
    const slot = new RunSlot('test run', 1_000);
    const leaveFirst = await slot.enter();
    const second = slot.enter();
    const failed = expect(second).rejects.toBeInstanceOf(RunEnvironmentError);
    await vi.advanceTimersByTimeAsync(500);
    const third = slot.enter();
    await vi.advanceTimersByTimeAsync(499);
    expect(await settled(second)).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await failed;
    expect(await settled(third)).toBe(false);
    leaveFirst();
    (await third)();
    expect(slot.waiting).toBe(0);
  });

  it('rejects a limit that is not a positive number', () => {
    expect(() => new RunSlot('x', 0)).toThrow(RangeError);
    expect(() => new RunSlot('x', Number.NaN)).toThrow(RangeError);
  });

  it('inSlot: the run holds the slot from its start to the end of its close, also when the start or the close fails', async () => {
    vi.useFakeTimers();
    const slot = new RunSlot('test run', 1_000);
    const order: string[] = [];
    const run = (name: string, fail?: 'start' | 'close') =>
      inSlot(slot, async () => {
        order.push(`${name} starts`);
        if (fail === 'start') throw new Error(`${name}: start failed`);
        return {
          name,
          close: async () => {
            order.push(`${name} closes`);
            if (fail === 'close') throw new Error(`${name}: close failed`);
          },
        };
      });
    const a = run('a', 'close');
    const b = run('b', 'start');
    // Its failure expected as it is made: b fails while a's close is awaited.
    const bFailed = expect(b).rejects.toThrow('b: start failed');
    const c = run('c');
    const first = await a;
    expect(first.name).toBe('a');
    expect(await settled(c)).toBe(false);
    await expect(first.close()).rejects.toThrow('a: close failed');
    await bFailed;
    await (await c).close();
    expect(order).toEqual(['a starts', 'a closes', 'b starts', 'c starts', 'c closes']);
    expect(slot.waiting).toBe(0);
  });

  it('slotOf: one slot per set of servers, named by the object that holds them or by URL', () => {
    const cluster = {};
    expect(slotOf(cluster, 'x')).toBe(slotOf(cluster, 'x'));
    expect(slotOf({}, 'x')).not.toBe(slotOf(cluster, 'x'));
    expect(slotOf('postgres://127.0.0.1:1/a', 'x')).toBe(slotOf('postgres://127.0.0.1:1/a', 'x'));
    expect(slotOf('postgres://127.0.0.1:2/a', 'x')).not.toBe(slotOf('postgres://127.0.0.1:1/a', 'x'));
  });

  it('inSlot: a close that never ends leaves the slot at its limit, so later runs are not held by it', async () => {
    vi.useFakeTimers();
    const slot = new RunSlot('test run', 10_000);
    const stuck = await inSlot(slot, async () => ({ close: () => new Promise<void>(() => undefined) }), 1_000);
    void stuck.close();
    const next = inSlot(slot, async () => ({ close: async () => undefined }), 1_000);
    await vi.advanceTimersByTimeAsync(999);
    expect(await settled(next)).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await (await next).close();
    expect(slot.waiting).toBe(0);
  });
});
