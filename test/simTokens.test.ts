import { describe, expect, it } from 'vitest';
import type { BackendUnderTest } from '../conformance/adapter.ts';
import { simLeaseBackend } from '../conformance/index.ts';
import { simSessionBackend } from '../conformance/sim/sessionBackend.ts';
import { TokenOverflowError } from '../impl/errors.ts';
import type { AcquireOptions } from '../impl/leaseLock.ts';
import { designs } from '../model/index.ts';

/**
 * The simulated token sources (the in-memory Redis node of simLeaseBackend,
 * the in-memory PostgreSQL server of the session backend) end where the real
 * ones do: 2^63-1 is minted exactly, the grant after it is refused with
 * TokenOverflowError and leaves nothing held, never a token of 2^63.
 */
const MAX = 2n ** 63n - 1n;
/** A session lock takes no ttl (the lock clients' type asks for one). */
const ttl = (b: BackendUnderTest): AcquireOptions => (b.capabilities.ttl ? { ttlMs: 1000 } : ({} as AcquireOptions));

describe.each([
  ['redis-single', simLeaseBackend(designs.redisSingle(), 'strict')],
  ['redlock', simLeaseBackend(designs.redlock(), 'strict')],
  ['pg-session', simSessionBackend('strict')],
])('%s', (_name, backend) => {
  it('mints 2^63-1 from a base of 2^63-2, then refuses by name; the refused grant holds nothing', async () => {
    const instance = await backend.start({ clients: 2, tokenBase: MAX - 1n });
    try {
      const [a, b] = instance.clients as [(typeof instance.clients)[0], (typeof instance.clients)[0]];
      const first = await a.acquire('r', ttl(backend));
      if (first.kind !== 'granted') throw new Error(`expected a grant, got ${first.kind}`);
      expect(first.lease.token).toBe(MAX);
      await a.release(first.lease);
      await expect(a.acquire('r', ttl(backend))).rejects.toBeInstanceOf(TokenOverflowError);
      // Not 'held': the refused grant took no lock.
      await expect(b.acquire('r', ttl(backend))).rejects.toBeInstanceOf(TokenOverflowError);
      // Another resource's counter is its own.
      const other = await b.acquire('other', ttl(backend));
      expect(other.kind === 'granted' && other.lease.token).toBe(MAX);
    } finally {
      await instance.close();
    }
  });
});
