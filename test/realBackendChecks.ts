/** What the etcd and ZooKeeper tests check alike on their real servers: the lock's grant after a release, the fenced store's policies. */

import { expect } from 'vitest';
import type { FencedStore } from '../impl/fencedStore.ts';
import { InvalidInputError } from '../impl/errors.ts';
import type { Lease } from '../impl/lease.ts';
import type { AcquireOptions, AcquireResult } from '../impl/leaseLock.ts';
import type { StorePolicy } from '../model/index.ts';

/** The part of a lock these checks use. */
interface Lock {
  acquire(resource: string, options: AcquireOptions): Promise<AcquireResult>;
  release(lease: Lease): Promise<unknown>;
}

/**
 * `a` releases `first` ('mutex', which `b` was denied): its signal fires, and `b` is granted 'mutex' with a
 * bigint token above `other`'s (`b`'s later grant on another resource); then `b` releases both.
 */
export async function expectGrantedAfterRelease(a: Lock, b: Lock, first: Lease, other: Lease): Promise<void> {
  await a.release(first);
  expect(first.signal.aborted).toBe(true);
  const again = await b.acquire('mutex', { ttlMs: 5000 });
  if (again.kind !== 'granted') throw new Error('expected a grant after the release');
  expect(again.lease.token).toBeGreaterThan(other.token);
  expect(typeof again.lease.token).toBe('bigint');
  await b.release(again.lease);
  await b.release(other);
}

/**
 * What every fenced store on a real server does by policy, each on registers of its own ('s', 'm', 'u'):
 * strict rejects token <= highest, monotonic rejects token < highest, unfenced accepts; reads return value and
 * token; a negative token is refused with InvalidInputError.
 */
export async function expectStorePolicies(storeOf: (policy: StorePolicy) => FencedStore): Promise<void> {
  const strict = storeOf('strict');
  expect(await strict.write('s', 5n, 'a')).toEqual({ kind: 'accepted' });
  expect(await strict.write('s', 5n, 'b')).toEqual({ kind: 'rejected', highest: 5n });
  expect(await strict.write('s', 4n, 'b')).toEqual({ kind: 'rejected', highest: 5n });
  expect(await strict.write('s', 2n ** 63n - 1n, 'c')).toEqual({ kind: 'accepted' });
  expect(await strict.read('s')).toEqual({ value: 'c', token: 2n ** 63n - 1n });
  const mono = storeOf('monotonic');
  expect(await mono.write('m', 7n, 'a')).toEqual({ kind: 'accepted' });
  expect(await mono.write('m', 7n, 'b')).toEqual({ kind: 'accepted' });
  expect(await mono.write('m', 6n, 'c')).toEqual({ kind: 'rejected', highest: 7n });
  const open = storeOf('unfenced');
  expect(await open.write('u', 9n, 'a')).toEqual({ kind: 'accepted' });
  expect(await open.write('u', 1n, 'b')).toEqual({ kind: 'accepted' });
  expect(await open.read('u')).toEqual({ value: 'b', token: 1n });
  expect(await open.read('absent')).toEqual({ value: null, token: null });
  await expect(strict.write('s', -1n, 'x')).rejects.toBeInstanceOf(InvalidInputError);
}

/** Ten concurrent writes with distinct tokens (1 to 10) to one register: the highest ends up stored. */
export async function expectHighestWins(store: FencedStore): Promise<void> {
  const tokens = Array.from({ length: 10 }, (_v, i) => BigInt(i + 1));
  await Promise.all(tokens.map((t) => store.write('race', t, `v${t}`)));
  expect(await store.read('race')).toEqual({ value: 'v10', token: 10n });
}
