import { describe, expect, it } from 'vitest';
import { leaseStressClient } from '../conformance/stress/client.ts';
import { LeaseHandle } from '../impl/lease.ts';
import { clockAt } from '../model/clock.ts';
import { VirtualTime } from '../conformance/sim/time.ts';

/** A stress client over a lease lock: what it reports of a release is what the history records. */
describe('stress: a release the lock could not confirm', () => {
  const lease = new LeaseHandle('r', 'o', 1n, null, new VirtualTime().clockOf(() => clockAt()));
  const store = { read: async () => ({ value: null }), write: async () => ({ kind: 'accepted' as const }) };
  const over = (answer: unknown) => leaseStressClient({ acquire: async () => ({ kind: 'timed-out' }), release: async () => answer }, store, async () => undefined);

  it('is an error (recorded as an unknown outcome), never a release that happened', async () => {
    await expect(over(false).release(lease)).rejects.toThrow(/release not confirmed/);
  });

  it('a confirmed release, or a lock that answers nothing (void), is one that happened', async () => {
    expect(await over(true).release(lease)).toBe(true);
    expect(await over(undefined).release(lease)).toBe(true);
  });
});
