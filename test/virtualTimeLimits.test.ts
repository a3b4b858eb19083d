import { describe, expect, it } from 'vitest';
import { VirtualTime, VirtualTimeLimitError } from '../conformance/kit.ts';

/**
 * VirtualTime's runaway bounds end an advance with a VirtualTimeLimitError a
 * caller can catch by class (and tell apart by `limit`): before, a plain
 * Error, told from an adapter's own only by its message.
 */
async function limitOf(p: Promise<unknown>): Promise<VirtualTimeLimitError> {
  const e = await p.then(
    () => null,
    (error: unknown) => error,
  );
  expect(e).toBeInstanceOf(VirtualTimeLimitError);
  return e as VirtualTimeLimitError;
}

describe('VirtualTime runaway bounds', () => {
  it('more than 100,000 events in one advance (a timer that re-arms itself at the same time)', async () => {
    const time = new VirtualTime();
    const again = (): void => void time.at(0, again);
    time.at(0, again);
    const e = await limitOf(time.advanceTo(1));
    expect([e.name, e.limit, e.message]).toEqual(['VirtualTimeLimitError', 'events', 'virtual time: more than 100000 events before t=1']);
  });

  it('outside work that never settles', async () => {
    const time = new VirtualTime({ settle: () => Promise.resolve(true) });
    const e = await limitOf(time.advanceTo(1));
    expect([e.limit, e.message]).toEqual(['settle', 'virtual time: outside work never settles']);
  });

  it('a real-time pace whose now() stopped: before, waited for it for ever', async () => {
    const time = new VirtualTime({ realTime: { toleranceMs: 5, now: () => 0 } });
    const e = await limitOf(time.advanceTo(2));
    expect([e.limit, e.message]).toEqual(['pace', 'virtual time: real time (realTime.now) stopped moving 2 ms before t=2']);
    // A moving real clock is paced as before.
    let real = 0;
    const paced = new VirtualTime({ realTime: { toleranceMs: 5, now: () => (real += 0.5) } });
    await paced.advanceTo(2);
    expect(paced.nowMs()).toBe(2);
  });
});
