import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { dyingWith } from '../conformance/dyingLease.ts';
import { LeaseLostError } from '../impl/errors.ts';
import type { Lease } from '../impl/lease.ts';

const leaseOf = (token: bigint): { lease: Lease; controller: AbortController } => {
  const controller = new AbortController();
  return { controller, lease: { resource: 'r', owner: `o${token}`, token, validUntilMs: 1000, signal: controller.signal } };
};

describe('dyingWith: a library lease that also dies with its client process', () => {
  it('fires connection-lost when the client dies while the lease is held', () => {
    const died = new AbortController();
    const { lease } = dyingWith(leaseOf(1n).lease, () => died.signal);
    const signal = lease.signal;
    died.abort();
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBeInstanceOf(LeaseLostError);
    expect((signal.reason as LeaseLostError).reason).toBe('connection-lost');
  });

  it('leaves no listener on the client\'s signal once a lease is over (its signal fired, or released): 50 leases, none left', () => {
    const died = new AbortController();
    for (let i = 0; i < 50; i++) {
      const own = leaseOf(BigInt(i));
      const { lease, detach } = dyingWith(own.lease, () => died.signal);
      expect(lease.signal.aborted).toBe(false);
      // Half end by their own signal (a release that fires it, a loss), half by a release whose signal never fires.
      if (i % 2 === 0) own.controller.abort(LeaseLostError.of('released', 'r'));
      else detach();
    }
    expect(getEventListeners(died.signal, 'abort')).toHaveLength(0);
    // A lease released before its signal was read no longer dies with the client either.
    const late = leaseOf(99n);
    const { lease, detach } = dyingWith(late.lease, () => died.signal);
    detach();
    const signal = lease.signal;
    expect(getEventListeners(died.signal, 'abort')).toHaveLength(0);
    died.abort();
    expect(signal.aborted).toBe(false);
  });
});
