import { describe, expect, it } from 'vitest';
import { TimingError, VirtualTime } from '../conformance/sim/time.ts';

/**
 * Virtual time paced to a server's real clock (the user's own servers): a
 * move waits for real time, and a server answering while real time is ahead
 * by more than the tolerance makes the run inconclusive. The real clock here
 * is a counter the test moves, so nothing depends on the machine's speed.
 */
describe('virtual time paced to real time', () => {
  it('records a server reply beyond the tolerance and then refuses to go on (TimingError)', async () => {
    let real = 1000;
    const time = new VirtualTime({ realTime: { toleranceMs: 5, now: () => real } });
    time.noteServerReply(); // the first look fixes true time 0 at real 1000
    real += 5;
    time.noteServerReply();
    await time.advanceTo(5); // real time is there already: no wait
    expect(time.lagMs()).toBe(0);
    real += 6;
    expect(time.lagMs()).toBe(6);
    time.assertOnTime(); // lag alone is no fault: only a server answering then
    time.noteServerReply();
    expect(() => time.assertOnTime()).toThrow(TimingError);
    await expect(time.runUntil(Promise.resolve(), 5)).rejects.toThrow(/real time ran 6.0 ms ahead of true time t=5 .*tolerance 5 ms/);
  });

  it('waits for real time before it moves true time on', async () => {
    let real = 0;
    let reads = 0;
    // Each reading of the real clock moves it on by 1 ms: the wait ends after it has read its way there.
    const time = new VirtualTime({ realTime: { toleranceMs: 5, now: () => (reads++, real++) } });
    time.noteServerReply();
    await time.advanceTo(3);
    expect(time.nowMs()).toBe(3);
    expect(real).toBeGreaterThanOrEqual(4);
    expect(reads).toBeGreaterThan(2);
  });

  it('without a pace, reads no real clock at all', async () => {
    const time = new VirtualTime();
    time.noteServerReply();
    await time.advanceTo(1_000_000);
    expect(time.lagMs()).toBe(0);
    time.assertOnTime();
  });
});

describe('virtual time and a library that settles on later turns of the event loop', () => {
  it("gives pending work a few macrotask turns (bluebird resolves on setImmediate, as redlock 4's promises do) before calling it unsettled", async () => {
    const time = new VirtualTime();
    const hops = (n: number): Promise<void> => (n === 0 ? Promise.resolve() : new Promise<void>((resolve) => setImmediate(resolve)).then(() => hops(n - 1)));
    expect(await time.runUntil(hops(5), 0)).toBe(true);
    // Work that waits on something else entirely is still unsettled, and no time passed.
    expect(await time.runUntil(new Promise(() => undefined), 0)).toBe(false);
    expect(time.nowMs()).toBe(0);
  });
});
