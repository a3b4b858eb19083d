import {
  EtcdAuthenticationFailedError,
  EtcdError,
  EtcdInvalidAuthTokenError,
  EtcdPermissionDeniedError,
  EtcdRoleNotGrantedError,
  EtcdUserNotFoundError,
  GRPCDeadlineExceededError,
  GRPCFailedPreconditionError,
  GRPCInvalidArgumentError,
  GRPCNotImplementedError,
  GRPCUnauthenticatedError,
  GRPCUnavailableError,
  type Etcd3,
} from 'etcd3';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { refused } from '../refused.ts';
import { ConnectionConfigError, ServerRefusedError, TimeoutError, TokenOverflowError, UnavailableError } from '../../impl/errors.ts';
import { EtcdLock, etcd3Node, etcdClient, etcdFencedStore, type EtcdNode } from '../../impl/etcd/index.ts';
import { cellKey, highestKey, lockKey } from '../../impl/etcd/keys.ts';
import type { AcquireResult } from '../../impl/leaseLock.ts';
import type { Lease } from '../../impl/lease.ts';
import { InvalidInputError } from '../../model/errors.ts';
import { designs, initialWorld, step, type Branch, type Command, type World } from '../../model/index.ts';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createTlsServer, type TLSSocket } from 'node:tls';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeRunCa } from '../../conformance/env/runCa.ts';
import { ManualClock, sharedEtcd } from './servers.ts';
import { noop } from 'cockatiel';
import * as grpc from '@grpc/grpc-js';

/** What a fake client needs to pass etcd3Node's check that it does not retry on its own (etcdClient's policy). */
const NO_RETRY = { options: { faultHandling: { global: noop } } };

/**
 * impl/etcd against one real single-member etcd (every key under the test's
 * own prefix): grants, create revisions as tokens, validity on the client's
 * clock, keep-alive, conditional delete, the fenced store's transactions and
 * the typed errors. Where a reply must be one etcd cannot give on demand (a
 * round trip that takes the whole ttl, a revision past 2^63-1, a failed
 * call), the real node is wrapped and its reply changed.
 */
const server = sharedEtcd();
const clients: Etcd3[] = [];
let c: Etcd3;
let prefixes = 0;
const MAX = 2n ** 63n - 1n;
/**
 * The calls' real-time bound where a test means them to succeed: each call is sent with it as its gRPC deadline even
 * on a ManualClock, and the library's 2 s is a loaded machine's to outlast.
 */
const TEST_BOUND_MS = 30_000;

beforeAll(() => {
  c = client();
});
afterEach(async () => {
  // Every lease a test left (revoked ones are gone already) goes, and with it the keys under it.
  const { leases } = await c.leaseClient.leaseLeases({});
  await Promise.all(leases.map((l) => c.leaseClient.leaseRevoke({ ID: l.ID }).catch(() => undefined)));
});
afterAll(() => {
  for (const x of clients) x.close();
});

function client(hosts = server().hosts, dialTimeoutMs?: number): Etcd3 {
  const x = etcdClient({ hosts, tls: server().tls, ...(dialTimeoutMs !== undefined ? { dialTimeoutMs } : {}) });
  clients.push(x);
  return x;
}
function prefix(): string {
  return `t${process.pid}-${++prefixes}/`;
}
function granted(r: AcquireResult): Lease {
  if (r.kind !== 'granted') throw new Error(`expected granted, got ${JSON.stringify(r)}`);
  return r.lease;
}
async function leaseCount(): Promise<number> {
  return (await c.leaseClient.leaseLeases({})).leases.length;
}
/** Waits (bounded) until etcd has `n` leases: a denial's or failure's revoke is sent without waiting for it. */
async function leasesBecome(n: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  while ((await leaseCount()) !== n) if (Date.now() > deadline) throw new Error(`etcd never had ${n} leases`);
}
async function createRevision(key: Buffer): Promise<bigint | null> {
  const r = await c.kv.range({ key });
  return r.kvs[0] === undefined ? null : BigInt(r.kvs[0].create_revision);
}
/** The real node with some calls replaced. */
function wrapped(node: EtcdNode, changes: Partial<EtcdNode>): EtcdNode {
  return { ...node, ...changes };
}

/** The real node whose put of a key takes `took.ms` of the test's clock (advanced once the put has answered). */
function slowPuts(real: EtcdNode, clock: ManualClock): { readonly node: EtcdNode; readonly took: { ms: number } } {
  const took = { ms: 0 };
  const node = wrapped(real, {
    putIfAbsent: async (key, value, leaseId) => {
      const r = await real.putIfAbsent(key, value, leaseId);
      clock.advance(took.ms);
      return r;
    },
  });
  return { node, took };
}

/** An EtcdNode whose every call fails: for what must be decided before any call. */
const unused = (): Promise<never> => Promise.reject(new Error('not called'));
const STUB: EtcdNode = { grant: unused, putIfAbsent: unused, keepAlive: unused, owns: unused, deleteIfOwned: unused, revoke: unused, get: unused, fencedWrite: unused };

describe('etcdClient and keys', () => {
  it('needs a host; a client of the hosts given makes calls on them', async () => {
    expect(() => etcdClient({ hosts: [] })).toThrow(expect.objectContaining({ code: 'invalid-config', message: 'invalid-config: hosts must be a non-empty array of URLs, got an array of 0' }));
    const x = client();
    const key = `${prefix()}k`;
    await x.put(key).value('v');
    expect(await x.get(key).string()).toBe('v');
    await x.delete().key(key);
  });

  it('keys sit under their own segments of the prefix', () => {
    expect(lockKey('r').toString()).toBe('lockcheck/lock/r');
    expect(cellKey('r', 'p/').toString()).toBe('p/cell/r');
    expect(highestKey('ü').toString('utf8')).toBe('lockcheck/highest/ü');
  });
});

describe('EtcdLock options', () => {
  const node = STUB;
  const clock = new ManualClock();
  it.each([
    [{ driftFactor: -0.1 }, 'invalid-config: driftFactor must be in [0, 1), got -0.1'],
    [{ driftFactor: 1 }, 'invalid-config: driftFactor must be in [0, 1), got 1'],
    [{ driftFactor: Number.NaN }, 'invalid-config: driftFactor must be in [0, 1), got NaN'],
    // A numeric string compares as a number: only the type check refuses it.
    [{ driftFactor: '0.5' as unknown as number }, 'invalid-config: driftFactor must be in [0, 1), got "0.5"'],
    [{ clockMarginMs: -1 }, 'invalid-config: clockMarginMs must be an integer in [0, 10000], got -1'],
    [{ clockMarginMs: 10_001 }, 'invalid-config: clockMarginMs must be an integer in [0, 10000], got 10001'],
    [{ clockMarginMs: 0.5 }, 'invalid-config: clockMarginMs must be an integer in [0, 10000], got 0.5'],
    [{ safetyMarginMs: -1 }, 'invalid-config: safetyMarginMs must be an integer in [0, 2147483647], got -1'],
    [{ safetyMarginMs: 1.5 }, 'invalid-config: safetyMarginMs must be an integer in [0, 2147483647], got 1.5'],
    [
      { node: { grant: unused } as unknown as EtcdNode },
      'invalid-config: node must be an EtcdNode (with grant(), putIfAbsent(), keepAlive(), owns(), deleteIfOwned(), revoke()), got an object without putIfAbsent(), keepAlive(), owns(), deleteIfOwned(), revoke()',
    ],
    [{ prefix: 5 as unknown as string }, 'invalid-config: prefix must be a string of at most 256 characters, well-formed Unicode without NUL, got 5'],
  ])('refuses %o', (options, message) => {
    expect(() => new EtcdLock({ node, clock, ...options })).toThrow(expect.objectContaining({ code: 'invalid-config', message }));
  });
  it('takes the ends of the ranges', () => {
    expect(() => new EtcdLock({ node, clock, driftFactor: 0, clockMarginMs: 0, safetyMarginMs: 0 })).not.toThrow();
    expect(() => new EtcdLock({ node, clock, driftFactor: 0.999, clockMarginMs: 10_000 })).not.toThrow();
    expect(new EtcdLock({ node, clock }).clockOf()).toBe(clock);
  });
});

describe('EtcdLock', () => {
  it('a grant: the key under a fresh lease, its create revision the token, validity ttl less the drift allowance', async () => {
    const clock = new ManualClock(5000);
    const p = prefix();
    const node = etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS });
    const lock = new EtcdLock({ node, clock, prefix: p, driftFactor: 0.1, clockMarginMs: 3 });
    const lease = granted(await lock.acquire('r', { ttlMs: 2500 }));
    expect(lease.token).toBe(await createRevision(lockKey('r', p)));
    expect(lease.validUntilMs).toBe(5000 + 2500 - (250 + 3));
    expect(lease.resource).toBe('r');
    expect(lock.trackedLeases).toBe(1);
    // The lease etcd granted: ceil(2500 / 1000) = 3 s.
    const ttl = await c.leaseClient.leaseTimeToLive({ ID: lease.owner, keys: false });
    expect(Number(ttl.grantedTTL)).toBe(3);
    expect((await c.kv.range({ key: lockKey('r', p) })).kvs[0]!.lease).toBe(lease.owner);
    // Another client is denied, and its lease revoked.
    const other = new EtcdLock({ node, clock, prefix: p });
    expect(await other.acquire('r', { ttlMs: 2500 })).toEqual({ kind: 'denied', reason: 'held' });
    await leasesBecome(1);
    // The next grant after a release has a larger token.
    await lock.release(lease);
    expect(lease.signal.reason).toMatchObject({ reason: 'released' });
    expect(await createRevision(lockKey('r', p))).toBeNull();
    expect(await leaseCount()).toBe(0);
    expect(lock.trackedLeases).toBe(0);
    const next = granted(await other.acquire('r', { ttlMs: 1000 }));
    expect(next.token).toBeGreaterThan(lease.token);
    // A second release is nothing.
    await lock.release(lease);
    expect(await createRevision(lockKey('r', p))).toBe(next.token);
  });

  it('a safetyMarginMs that leaves no usable time is validity-exhausted, the lease revoked; one that leaves a millisecond is a grant', async () => {
    const clock = new ManualClock(5000);
    const p = prefix();
    const node = etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS });
    // validity 2500 - (250 + 3) = 2247 ms: a margin of 2247 leaves none (the signal would fire at the grant), 2246 leaves 1 ms.
    const none = new EtcdLock({ node, clock, prefix: p, driftFactor: 0.1, clockMarginMs: 3, safetyMarginMs: 2247 });
    expect(await none.acquire('r', { ttlMs: 2500 })).toEqual({ kind: 'denied', reason: 'validity-exhausted' });
    expect(await createRevision(lockKey('r', p))).toBeNull();
    expect(none.trackedLeases).toBe(0);
    const one = new EtcdLock({ node, clock, prefix: p, driftFactor: 0.1, clockMarginMs: 3, safetyMarginMs: 2246 });
    const lease = granted(await one.acquire('r', { ttlMs: 2500 }));
    expect(lease.signal.aborted).toBe(false);
    clock.advance(1);
    expect(lease.signal.aborted).toBe(true);
    await one.release(lease);
  });

  it('defaults: prefix lockcheck/, driftFactor 0.01, clockMarginMs 2, safetyMarginMs 0', async () => {
    const clock = new ManualClock(0);
    const lock = new EtcdLock({ node: etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS }), clock });
    const lease = granted(await lock.acquire(`d-${process.pid}`, { ttlMs: 1000 }));
    expect(lease.validUntilMs).toBe(1000 - 12);
    expect(await createRevision(lockKey(`d-${process.pid}`))).toBe(lease.token);
    clock.advance(987);
    expect(lease.signal.aborted).toBe(false);
    clock.advance(1);
    expect(lease.signal.reason).toMatchObject({ reason: 'expired' });
    await lock.release(lease);
  });

  it('the signal fires safetyMarginMs before the validity', async () => {
    const clock = new ManualClock(0);
    const lock = new EtcdLock({ node: etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS }), clock, prefix: prefix(), driftFactor: 0, clockMarginMs: 0, safetyMarginMs: 100 });
    const lease = granted(await lock.acquire('r', { ttlMs: 1000 }));
    expect(lease.validUntilMs).toBe(1000);
    clock.advance(899);
    expect(lease.signal.aborted).toBe(false);
    clock.advance(1);
    expect(lease.signal.aborted).toBe(true);
    await lock.release(lease);
  });

  it('validates input before any call', async () => {
    let calls = 0;
    const clock = new ManualClock();
    const lock = new EtcdLock({ node: wrapped(STUB, { grant: () => (calls++, Promise.reject(new Error('no'))) }), clock });
    await expect(lock.acquire('', { ttlMs: 10 })).rejects.toThrow(expect.objectContaining({ code: 'invalid-resource' }));
    await expect(lock.acquire('r', { ttlMs: 0 })).rejects.toThrow(expect.objectContaining({ code: 'invalid-ttl' }));
    // No options at all: a typed refusal naming them, not a TypeError from reading ttlMs of undefined.
    for (const options of [undefined, null, 5000]) await expect(lock.acquire('r', options as never)).rejects.toThrow(expect.objectContaining({ name: 'InvalidInputError', code: 'invalid-config', message: `invalid-config: acquire options must be an object, got ${String(options)}` }));
    for (const retries of [-1, 101, 0.5]) await expect(lock.acquire('r', { ttlMs: 10, retries })).rejects.toThrow(expect.objectContaining({ code: 'precondition', message: `precondition: retries must be an integer in [0, 100], got ${retries}` }));
    await expect(lock.acquire('r', { ttlMs: 10, retryDelayMs: -1 })).rejects.toThrow(expect.objectContaining({ code: 'invalid-duration', message: expect.stringContaining('retryDelayMs') }));
    await expect(lock.acquire('r', { ttlMs: 10, retryJitterMs: -1 })).rejects.toThrow(expect.objectContaining({ code: 'invalid-duration', message: expect.stringContaining('retryJitterMs') }));
    expect(calls).toBe(0);
    await expect(lock.extend({} as Lease, 0)).rejects.toThrow(expect.objectContaining({ code: 'invalid-ttl' }));
  });

  it('retries: once plus `retries` attempts, retryDelayMs apart on the clock; a grant ends them', async () => {
    const clock = new ManualClock();
    const p = prefix();
    const real = etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS });
    let grants = 0;
    const node = wrapped(real, { grant: (s) => (grants++, real.grant(s)) });
    const holder = new EtcdLock({ node: real, clock, prefix: p });
    const held = granted(await holder.acquire('r', { ttlMs: 5000 }));
    const lock = new EtcdLock({ node, clock, prefix: p });
    expect(await lock.acquire('r', { ttlMs: 5000, retries: 2 })).toEqual({ kind: 'denied', reason: 'held' });
    expect(grants).toBe(3);
    expect(clock.delays.filter((d) => d === 0)).toHaveLength(2);
    grants = 0;
    const pending = lock.acquire('r', { ttlMs: 5000, retries: 5, retryDelayMs: 40 });
    const deadline = Date.now() + 10_000;
    while (!clock.delays.includes(40)) {
      if (Date.now() > deadline) throw new Error('no retry sleep');
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(grants).toBe(1);
    await holder.release(held);
    clock.advance(40);
    expect(granted(await pending).token).toBeGreaterThan(held.token);
    expect(grants).toBe(2);
    await leasesBecome(1);
    // 100 retries is the most allowed; a free lock is granted at the first.
    expect(granted(await lock.acquire('free', { ttlMs: 5000, retries: 100 })).resource).toBe('free');
  });

  it('retry jitter: a draw in [0, retryJitterMs] added to retryDelayMs', async () => {
    const clock = new ManualClock();
    const p = prefix();
    const real = etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS });
    const held = granted(await new EtcdLock({ node: real, clock, prefix: p }).acquire('r', { ttlMs: 5000 }));
    const lock = new EtcdLock({ node: real, clock, prefix: p });
    const random = vi.spyOn(Math, 'random').mockReturnValue(0.999);
    try {
      const pending = lock.acquire('r', { ttlMs: 5000, retries: 1, retryDelayMs: 40, retryJitterMs: 10 });
      const deadline = Date.now() + 10_000;
      // The node's request timeouts are on this clock too (2000 ms): the retry's sleep is the one below them.
      const sleeps = (): number[] => clock.delays.filter((d) => d >= 40 && d < 2000);
      while (sleeps().length === 0) {
        if (Date.now() > deadline) throw new Error('no retry sleep');
        await new Promise((resolve) => setImmediate(resolve));
      }
      expect(sleeps()).toEqual([50]);
      clock.advance(50);
      expect(await pending).toEqual({ kind: 'denied', reason: 'held' });
    } finally {
      random.mockRestore();
    }
    expect(held.token).toBeGreaterThan(0n);
  });

  it('no validity left after the allowance is a denial (validity-exhausted); one ms left is a grant', async () => {
    const clock = new ManualClock();
    const p = prefix();
    const node = etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS });
    const exhausted = new EtcdLock({ node, clock, prefix: p, driftFactor: 0.5, clockMarginMs: 500 });
    expect(await exhausted.acquire('r', { ttlMs: 1000 })).toEqual({ kind: 'denied', reason: 'validity-exhausted' });
    expect(await leaseCount()).toBe(0);
    expect(await createRevision(lockKey('r', p))).toBeNull();
    const barely = new EtcdLock({ node, clock, prefix: p, driftFactor: 0.5, clockMarginMs: 499 });
    expect(granted(await barely.acquire('r', { ttlMs: 1000 })).validUntilMs).toBe(clock.now() + 1);
  });

  it('a grant that took the whole ttl is timed-out and revoked; one that took less is judged by the allowance', async () => {
    const clock = new ManualClock();
    const p = prefix();
    const real = etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS });
    const { node: slow, took } = slowPuts(real, clock);
    const lock = new EtcdLock({ node: slow, clock, prefix: p, driftFactor: 0, clockMarginMs: 0 });
    took.ms = 1000;
    expect(await lock.acquire('r', { ttlMs: 1000 })).toEqual({ kind: 'timed-out' });
    await leasesBecome(0);
    took.ms = 999;
    const start = clock.now();
    const lease = granted(await lock.acquire('r', { ttlMs: 1000 }));
    expect(lease.validUntilMs).toBe(start + 1000);
  });

  it('failed calls: a grant that fails is no-quorum, a put that fails no-quorum or timed-out (and revoked); configuration errors are thrown', async () => {
    const clock = new ManualClock();
    const p = prefix();
    const real = etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS });
    const grantFails = (e: Error) => new EtcdLock({ node: wrapped(real, { grant: () => Promise.reject(e) }), clock, prefix: p });
    expect(await grantFails(new UnavailableError('x')).acquire('r', { ttlMs: 1000 })).toEqual({ kind: 'denied', reason: 'no-quorum' });
    // A grant that timed out: denied before the ttl has passed on the client's clock, a give-up (timed-out) at it.
    const grantFailsAfter = (ms: number, e: Error) =>
      new EtcdLock({
        node: wrapped(real, {
          grant: () => {
            clock.advance(ms);
            return Promise.reject(e);
          },
        }),
        clock,
        prefix: p,
      });
    expect(await grantFailsAfter(999, new TimeoutError('lease grant', 999)).acquire('r', { ttlMs: 1000 })).toEqual({ kind: 'denied', reason: 'no-quorum' });
    expect(await grantFailsAfter(1000, new TimeoutError('lease grant', 1000)).acquire('r', { ttlMs: 1000 })).toEqual({ kind: 'timed-out' });
    expect(await grantFailsAfter(1000, new UnavailableError('x')).acquire('r', { ttlMs: 1000 })).toEqual({ kind: 'denied', reason: 'no-quorum' });
    const config = new ConnectionConfigError('authentication', 'no');
    await expect(grantFails(config).acquire('r', { ttlMs: 1000 })).rejects.toBe(config);
    const putFails = (e: Error) => new EtcdLock({ node: wrapped(real, { putIfAbsent: () => Promise.reject(e) }), clock, prefix: p });
    expect(await putFails(new UnavailableError('x')).acquire('r', { ttlMs: 1000 })).toEqual({ kind: 'denied', reason: 'no-quorum' });
    expect(await putFails(new TimeoutError('put', 5)).acquire('r', { ttlMs: 1000 })).toEqual({ kind: 'timed-out' });
    await expect(putFails(config).acquire('r', { ttlMs: 1000 })).rejects.toBe(config);
    await leasesBecome(0);
  });

  it('refusals (ServerRefusedError, ConnectionConfigError) of the grant or the put are thrown after one attempt, never retried; a refused put\'s lease is revoked', async () => {
    const clock = new ManualClock();
    const p = prefix();
    // The node's call timers on a clock of their own: the lock's clock sees only retry sleeps.
    const real = etcd3Node(c, { clock: new ManualClock(), requestTimeoutMs: TEST_BOUND_MS });
    const refusals = [new ServerRefusedError('permission', 'PermissionDenied', 'no'), new ServerRefusedError('statement', 'InvalidArgument', 'no'), new ConnectionConfigError('authentication', 'no')];
    for (const refusal of refusals) {
      let grants = 0;
      const grantRefused = new EtcdLock({ node: wrapped(real, { grant: () => (grants++, Promise.reject(refusal)) }), clock, prefix: p });
      await expect(grantRefused.acquire('r', { ttlMs: 1000, retries: 3, retryDelayMs: 0 })).rejects.toBe(refusal);
      let puts = 0;
      const putRefused = new EtcdLock({ node: wrapped(real, { putIfAbsent: () => (puts++, Promise.reject(refusal)) }), clock, prefix: p });
      await expect(putRefused.acquire('r', { ttlMs: 1000, retries: 3, retryDelayMs: 0 })).rejects.toBe(refusal);
      expect([grants, puts, clock.delays.length]).toEqual([1, 1, 0]);
      await leasesBecome(0);
    }
  });

  it("a put answered 'exists' with our own lease (a put resent after it had landed) is our grant, its token the first put's create revision", async () => {
    const clock = new ManualClock();
    const p = prefix();
    const real = etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS });
    let first: bigint | undefined;
    const resent = wrapped(real, {
      putIfAbsent: async (k, v, l) => {
        first = (await real.putIfAbsent(k, v, l)).createRevision;
        const again = await real.putIfAbsent(k, v, l);
        expect(again).toEqual({ kind: 'exists', lease: l, createRevision: first });
        return again;
      },
    });
    const lock = new EtcdLock({ node: resent, clock, prefix: p });
    const lease = granted(await lock.acquire('r', { ttlMs: 1000 }));
    expect(lease.token).toBe(first);
    expect(await createRevision(lockKey('r', p))).toBe(first);
    await lock.release(lease);
    expect(await createRevision(lockKey('r', p))).toBeNull();
  });

  it('a create revision past 2^63-1 is TokenOverflowError naming the resource, and the lease is revoked', async () => {
    const clock = new ManualClock();
    const real = etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS });
    const past = wrapped(real, { putIfAbsent: async (k, v, l) => ({ ...(await real.putIfAbsent(k, v, l)), createRevision: MAX + 1n }) });
    const e = await new EtcdLock({ node: past, clock, prefix: prefix() }).acquire('r', { ttlMs: 1000 }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(TokenOverflowError);
    expect(e).toMatchObject({ resource: 'r' });
    const at = wrapped(real, { putIfAbsent: async (k, v, l) => ({ ...(await real.putIfAbsent(k, v, l)), createRevision: MAX }) });
    expect(granted(await new EtcdLock({ node: at, clock, prefix: prefix() }).acquire('r', { ttlMs: 1000 })).token).toBe(MAX);
    await leasesBecome(1);
  });

  it('extend: one keep-alive renews the granted ttl from the round\'s start; a lease etcd lost is expired; a failed or late round is no-quorum', async () => {
    const clock = new ManualClock(0);
    const p = prefix();
    const real = etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS });
    let mode: 'ok' | 'fail' | 'late' = 'ok';
    const node = wrapped(real, {
      keepAlive: async (id) => {
        if (mode === 'fail') throw new UnavailableError('down');
        const r = await real.keepAlive(id);
        if (mode === 'late') clock.advance(5000);
        return r;
      },
    });
    const lock = new EtcdLock({ node, clock, prefix: p, driftFactor: 0.1, clockMarginMs: 1 });
    const lease = granted(await lock.acquire('r', { ttlMs: 2000 }));
    expect(lease.validUntilMs).toBe(2000 - 201);
    clock.advance(1500);
    // The ttl asked for is not what etcd renews: the granted one is.
    expect(await lock.extend(lease, 60_000)).toEqual({ kind: 'extended', validUntilMs: 1500 + 2000 - 201 });
    expect(lease.validUntilMs).toBe(3299);
    mode = 'fail';
    expect(await lock.extend(lease, 2000)).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
    mode = 'late';
    expect(await lock.extend(lease, 2000)).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
    expect(lease.signal.reason).toMatchObject({ reason: 'expired' });
    expect(await lock.extend(lease, 2000)).toEqual({ kind: 'not-extended', reason: 'expired' });
    mode = 'ok';
    const second = granted(await lock.acquire('s', { ttlMs: 2000 }));
    await c.leaseClient.leaseRevoke({ ID: second.owner });
    expect(await lock.extend(second, 2000)).toEqual({ kind: 'not-extended', reason: 'expired' });
    expect(second.signal.reason).toMatchObject({ reason: 'expired' });
    // A lease this lock never granted.
    expect(await lock.extend({ ...second }, 2000)).toEqual({ kind: 'not-extended', reason: 'expired' });
  });

  it("extend: a key deleted or replaced behind the holder's back (an operator's delete, a put without the lease, another owner's key) is expired, never extended: the signal fires and the lease is revoked", async () => {
    const clock = new ManualClock(0);
    const p = prefix();
    const real = etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS });
    const lock = new EtcdLock({ node: real, clock, prefix: p });
    const other = new EtcdLock({ node: real, clock, prefix: p });
    const tampered: Array<[string, (lease: Lease) => Promise<unknown>]> = [
      ['deleted', (lease) => c.kv.deleteRange({ key: lockKey(lease.resource, p) })],
      // etcdctl put without --lease: same create revision, the key no longer under the holder's lease (it never expires).
      ['put over', (lease) => c.kv.put({ key: lockKey(lease.resource, p), value: Buffer.from('operator') })],
      ['another owner', async (lease) => {
        await c.kv.deleteRange({ key: lockKey(lease.resource, p) });
        const theirs = granted(await other.acquire(lease.resource, { ttlMs: 5000 }));
        expect(theirs.token).toBeGreaterThan(lease.token);
      }],
    ];
    for (const [name, tamper] of tampered) {
      const lease = granted(await lock.acquire(name, { ttlMs: 5000 }));
      expect((await lock.extend(lease, 5000)).kind).toBe('extended');
      const signal = lease.signal;
      await tamper(lease);
      // The keep-alive alone still renews the lease: etcd does not tie a lease to its keys.
      expect(await real.keepAlive(lease.owner)).toBeGreaterThan(0);
      expect(await lock.extend(lease, 5000), name).toEqual({ kind: 'not-extended', reason: 'expired' });
      expect(signal.reason, name).toMatchObject({ reason: 'expired' });
      // The lease is revoked (bounded wait: the revoke is sent without waiting for it).
      const deadline = Date.now() + 10_000;
      while ((await real.keepAlive(lease.owner)) > 0) if (Date.now() > deadline) throw new Error(`${name}: the lease was never revoked`);
      // Its release throws nothing and leaves whatever key is there now.
      const before = await createRevision(lockKey(name, p));
      await lock.release(lease);
      expect(await createRevision(lockKey(name, p))).toBe(before);
    }
  });

  it('extend: a loss either call proves wins over the other\'s failure; a failed check beside a renewed lease is no-quorum', async () => {
    const clock = new ManualClock(0);
    const p = prefix();
    const real = etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS });
    let failing: 'keepAlive' | 'owns' | null = null;
    const node = wrapped(real, {
      keepAlive: (id) => (failing === 'keepAlive' ? Promise.reject(new UnavailableError('down')) : real.keepAlive(id)),
      owns: (...args) => (failing === 'owns' ? Promise.reject(new UnavailableError('down')) : real.owns(...args)),
    });
    const lock = new EtcdLock({ node, clock, prefix: p });
    const lease = granted(await lock.acquire('r', { ttlMs: 5000 }));
    failing = 'owns';
    expect(await lock.extend(lease, 5000)).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
    expect(lease.signal.aborted).toBe(false);
    failing = 'keepAlive';
    expect(await lock.extend(lease, 5000)).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
    await c.kv.deleteRange({ key: lockKey('r', p) });
    expect(await lock.extend(lease, 5000)).toEqual({ kind: 'not-extended', reason: 'expired' });
    expect(lease.signal.reason).toMatchObject({ reason: 'expired' });
    // The other way round: the keep-alive finds the lease gone while the check fails.
    failing = null;
    const second = granted(await lock.acquire('s', { ttlMs: 5000 }));
    await c.leaseClient.leaseRevoke({ ID: second.owner });
    failing = 'owns';
    expect(await lock.extend(second, 5000)).toEqual({ kind: 'not-extended', reason: 'expired' });
    expect(second.signal.reason).toMatchObject({ reason: 'expired' });
  });

  it('extend: a refused keep-alive is thrown, not no-quorum, and the lease stays valid; a release whose delete and revoke are both refused throws, after dropping the lease', async () => {
    const clock = new ManualClock(0);
    const real = etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS });
    let refusal: Error | null = null;
    const node = wrapped(real, {
      keepAlive: (id) => (refusal === null ? real.keepAlive(id) : Promise.reject(refusal)),
      deleteIfOwned: (...args) => (refusal === null ? real.deleteIfOwned(...args) : Promise.reject(refusal)),
      revoke: (id) => (refusal === null ? real.revoke(id) : Promise.reject(refusal)),
    });
    const lock = new EtcdLock({ node, clock, prefix: prefix() });
    const lease = granted(await lock.acquire('r', { ttlMs: 5000 }));
    for (const r of [new ServerRefusedError('permission', 'PermissionDenied', 'no'), new ConnectionConfigError('authentication', 'no')]) {
      refusal = r;
      await expect(lock.extend(lease, 5000)).rejects.toBe(r);
      expect(lease.signal.aborted).toBe(false);
    }
    refusal = null;
    expect((await lock.extend(lease, 5000)).kind).toBe('extended');
    refusal = new ServerRefusedError('permission', 'PermissionDenied', 'no');
    await expect(lock.release(lease)).rejects.toBe(refusal);
    expect(lease.signal.reason).toMatchObject({ reason: 'released' });
    expect(lock.trackedLeases).toBe(0);
  });

  it('a lease released while its extension is in flight is not extended', async () => {
    const clock = new ManualClock(0);
    const real = etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS });
    let during: (() => Promise<void>) | null = null;
    // The release comes once both of the extension's calls were answered (the ownership check too: run beside the
    // release, it found the key gone or not by the servers' order, 'expired' or 'no-quorum', a flake under load).
    let ownsAnswered: Promise<unknown> = Promise.resolve();
    const node = wrapped(real, {
      owns: (...args: Parameters<typeof real.owns>) => {
        const answer = real.owns(...args);
        ownsAnswered = answer.catch(() => undefined);
        return answer;
      },
      keepAlive: async (id) => {
        const r = await real.keepAlive(id);
        await ownsAnswered;
        await during?.();
        return r;
      },
    });
    const lock = new EtcdLock({ node, clock, prefix: prefix() });
    const lease = granted(await lock.acquire('r', { ttlMs: 3000 }));
    during = async () => {
      await lock.release(lease);
    };
    expect(await lock.extend(lease, 3000)).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
    expect(lease.signal.reason).toMatchObject({ reason: 'released' });
  });

  it('an extension that lands exactly at the new deadline is no-quorum', async () => {
    const clock = new ManualClock(0);
    // The ownership check beside the keep-alive must not time out on the clock the keep-alive's reply moves.
    const real = etcd3Node(c, { clock, requestTimeoutMs: 10_000 });
    let advance = 0;
    const node = wrapped(real, { keepAlive: async (id) => ((await real.keepAlive(id)) + (clock.advance(advance), 0)) });
    const lock = new EtcdLock({ node, clock, prefix: prefix(), driftFactor: 0, clockMarginMs: 0 });
    const lease = granted(await lock.acquire('r', { ttlMs: 3000 }));
    advance = 2999;
    expect(await lock.extend(lease, 3000)).toEqual({ kind: 'extended', validUntilMs: 3000 });
    advance = 3000;
    expect(await lock.extend(lease, 3000)).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
  });

  it('release deletes only a key still ours, revokes the lease, and never throws for etcd failures', async () => {
    const clock = new ManualClock(0);
    const p = prefix();
    const real = etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS });
    const lock = new EtcdLock({ node: real, clock, prefix: p });
    const lease = granted(await lock.acquire('r', { ttlMs: 5000 }));
    // Someone else's key now (deleted and re-created under another lease): the release leaves it.
    await c.kv.deleteRange({ key: lockKey('r', p) });
    const theirs = granted(await new EtcdLock({ node: real, clock, prefix: p }).acquire('r', { ttlMs: 5000 }));
    await lock.release(lease);
    expect(await createRevision(lockKey('r', p))).toBe(theirs.token);
    expect(await leaseCount()).toBe(1);
    const broken = new EtcdLock({ node: wrapped(real, { deleteIfOwned: () => Promise.reject(new Error('x')), revoke: () => Promise.reject(new Error('y')) }), clock, prefix: p });
    const l2 = granted(await broken.acquire('s', { ttlMs: 5000 }));
    await broken.release(l2);
    expect(l2.signal.reason).toMatchObject({ reason: 'released' });
  });

  it('forgets lost leases once it tracks 64, and next when the map has doubled', async () => {
    const clock = new ManualClock(0);
    const lock = new EtcdLock({ node: etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS }), clock, prefix: prefix() });
    granted(await lock.acquire('r0', { ttlMs: 1000 }));
    clock.advance(1000);
    // Below 64 nothing is forgotten, lost or not.
    granted(await lock.acquire('r1', { ttlMs: 1000 }));
    expect(lock.trackedLeases).toBe(2);
    for (let i = 2; i < 64; i++) granted(await lock.acquire(`r${i}`, { ttlMs: 1000 }));
    expect(lock.trackedLeases).toBe(64);
    clock.advance(1000);
    granted(await lock.acquire('kept', { ttlMs: 5000 }));
    expect(lock.trackedLeases).toBe(1);
    // The next check is at 64 again (never below): a lost lease stays until then.
    clock.advance(5000);
    granted(await lock.acquire('u', { ttlMs: 100_000 }));
    expect(lock.trackedLeases).toBe(2);
    for (let i = 0; i < 62; i++) granted(await lock.acquire(`s${i}`, { ttlMs: 100_000 }));
    expect(lock.trackedLeases).toBe(64);
    // At 64: 'kept' (lost) is forgotten; 63 live ones stay, so the next check is at 126.
    granted(await lock.acquire('t', { ttlMs: 100_000 }));
    expect(lock.trackedLeases).toBe(64);
    clock.advance(100_000);
    granted(await lock.acquire('v', { ttlMs: 100_000 }));
    expect(lock.trackedLeases).toBe(65);
  });

  it('a release that got no answer is tried again by the next release of the lease, which answers what it found', async () => {
    const clock = new ManualClock(0);
    const p = prefix();
    const real = etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS });
    let down = true;
    const failing = (): Promise<never> => Promise.reject(new UnavailableError('etcd: no answer (test)'));
    const flaky = wrapped(real, {
      deleteIfOwned: (...a) => (down ? failing() : real.deleteIfOwned(...a)),
      revoke: (...a) => (down ? failing() : real.revoke(...a)),
    });
    const lock = new EtcdLock({ node: flaky, clock, prefix: p });
    const lease = granted(await lock.acquire('r', { ttlMs: 600_000 }));
    expect(await lock.release(lease)).toBe(false);
    expect(await lock.release(lease)).toBe(false);
    expect(await createRevision(lockKey('r', p))).toBe(lease.token);
    expect(lock.trackedLeases).toBe(0);
    down = false;
    expect(await lock.release(lease)).toBe(true);
    expect(await createRevision(lockKey('r', p))).toBeNull();
    // Known now: a release after that has nothing left to do.
    expect(await lock.release(lease)).toBe(true);
  });

  it('a lost lease the prune forgot is still released in etcd: its release deletes the key its etcd lease kept', async () => {
    const clock = new ManualClock(0);
    const p = prefix();
    const lock = new EtcdLock({ node: etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS }), clock, prefix: p });
    const lost = granted(await lock.acquire('gone', { ttlMs: 60_000 }));
    // Lost on the client's clock; etcd, on real time, still has its lease and its key.
    clock.advance(60_000);
    for (let i = 0; i < 64; i++) granted(await lock.acquire(`h${i}`, { ttlMs: 600_000 }));
    // The 65th grant forgot the lost lease.
    expect(lock.trackedLeases).toBe(64);
    expect(await createRevision(lockKey('gone', p))).toBe(lost.token);
    expect(await lock.release(lost)).toBe(true);
    expect(await createRevision(lockKey('gone', p))).toBeNull();
  });

  it("a lease another lock granted is released by what it names, as the Redis lock's: its key deleted only while it carries the lease's etcd lease and create revision, then that lease revoked", async () => {
    const clock = new ManualClock(0);
    const p = prefix();
    const real = etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS });
    const calls: string[] = [];
    const counted = wrapped(real, {
      deleteIfOwned: (...a) => (calls.push('delete'), real.deleteIfOwned(...a)),
      revoke: (...a) => (calls.push('revoke'), real.revoke(...a)),
    });
    // Another process's lock, say: this one never saw the grant.
    const theirs = new EtcdLock({ node: real, clock, prefix: p });
    const ours = new EtcdLock({ node: counted, clock, prefix: p });
    const before = await leaseCount();
    const lease = granted(await theirs.acquire('r', { ttlMs: 600_000 }));
    // A copy naming the grant with another token (an older grant's, say) touches nothing.
    expect(await ours.release({ ...lease, signal: lease.signal, token: lease.token - 1n })).toBe(true);
    expect(calls).toEqual(['delete']);
    expect(await createRevision(lockKey('r', p))).toBe(lease.token);
    expect(await leaseCount()).toBe(before + 1);
    // The grant itself, as a plain record of it (the fields a process would keep): its key goes, then its etcd lease.
    expect(await ours.release({ resource: lease.resource, owner: lease.owner, token: lease.token, validUntilMs: lease.validUntilMs, signal: lease.signal })).toBe(true);
    expect(calls).toEqual(['delete', 'delete', 'revoke']);
    expect(await createRevision(lockKey('r', p))).toBeNull();
    expect(await leaseCount()).toBe(before);
    const next = granted(await ours.acquire('r', { ttlMs: 600_000 }));
    // Released again: the key is another grant's now, and stays.
    expect(await ours.release({ ...lease, signal: lease.signal })).toBe(true);
    expect(await createRevision(lockKey('r', p))).toBe(next.token);
    // An owner that is no etcd lease id names nothing in etcd: no call. A token that is no bigint is no lease's.
    calls.length = 0;
    expect(await ours.release({ ...next, signal: next.signal, owner: 'not-a-lease' })).toBe(true);
    expect(calls).toEqual([]);
    for (const token of [5 as unknown as bigint, -1n, 2n ** 63n]) {
      await expect(ours.release({ ...next, signal: next.signal, token }), String(token)).rejects.toMatchObject({ name: 'InvalidInputError', code: 'precondition' });
    }
    // A resource acquire would refuse is refused alike, before anything is sent.
    await expect(ours.release({ ...next, signal: next.signal, resource: '' })).rejects.toMatchObject({ name: 'InvalidInputError', code: 'invalid-resource' });
    expect(calls).toEqual([]);
    // No answer is unknown, and a refusal is thrown, as for a tracked lease.
    const down = new EtcdLock({ node: wrapped(real, { deleteIfOwned: () => Promise.reject(new UnavailableError('etcd: no answer (test)')) }), clock, prefix: p });
    expect(await down.release({ ...next, signal: next.signal })).toBe(false);
    const refused = new EtcdLock({ node: wrapped(real, { deleteIfOwned: () => Promise.reject(new ServerRefusedError('permission', 'PermissionDenied', 'etcd: permission denied (test)')) }), clock, prefix: p });
    await expect(refused.release({ ...next, signal: next.signal })).rejects.toBeInstanceOf(ServerRefusedError);
    expect(await createRevision(lockKey('r', p))).toBe(next.token);
    expect(await ours.release(next)).toBe(true);
  });

  it('a grant whose round trip ate the validity the allowance needs is validity-exhausted', async () => {
    const clock = new ManualClock();
    const real = etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS });
    const { node: slow, took } = slowPuts(real, clock);
    took.ms = 600;
    const lock = new EtcdLock({ node: slow, clock, prefix: prefix(), driftFactor: 0, clockMarginMs: 400 });
    expect(await lock.acquire('r', { ttlMs: 1000 })).toEqual({ kind: 'denied', reason: 'validity-exhausted' });
    await leasesBecome(0);
  });

  it('a failed attempt whose put landed answers only once its lease is revoked: its key is gone, and the next acquire at once is granted, never held by it', async () => {
    const clock = new ManualClock();
    const p = prefix();
    const real = etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS });
    // When each revoke was answered, against when each attempt answered: a revoke left in the background lands after.
    const order: string[] = [];
    const revoking = (over: Partial<EtcdNode>): EtcdNode =>
      wrapped(real, {
        ...over,
        revoke: async (leaseId) => {
          const r = await real.revoke(leaseId);
          order.push('revoked');
          return r;
        },
      });
    const putThen = (after: (r: Awaited<ReturnType<EtcdNode['putIfAbsent']>>) => Awaited<ReturnType<EtcdNode['putIfAbsent']>> | Promise<never>): Partial<EtcdNode> => ({
      putIfAbsent: async (k, v, l) => after(await real.putIfAbsent(k, v, l)),
    });
    const next = new EtcdLock({ node: real, clock, prefix: p });
    const attempts: Array<readonly [string, EtcdNode, AcquireResult | 'overflow']> = [
      // The put landed, then the whole ttl was gone: timed-out.
      ['timed-out', revoking(putThen((r) => (clock.advance(1000), r))), { kind: 'timed-out' }],
      // The put landed and its reply was lost (a failure, not a silence): no-quorum.
      ['no-quorum', revoking(putThen(() => Promise.reject(new UnavailableError('reply lost')))), { kind: 'denied', reason: 'no-quorum' }],
      // The put landed with a revision past the range: thrown.
      ['overflow', revoking(putThen((r) => ({ ...r, createRevision: MAX + 1n }))), 'overflow'],
    ];
    for (const [name, node, expected] of attempts) {
      order.length = 0;
      const outcome = await new EtcdLock({ node, clock, prefix: p }).acquire('f', { ttlMs: 1000 }).catch((e: unknown) => (e instanceof TokenOverflowError ? 'overflow' : e));
      expect(outcome, name).toEqual(expected);
      expect(order, name).toEqual(['revoked']);
      expect(await createRevision(lockKey('f', p)), name).toBeNull();
      await next.release(granted(await next.acquire('f', { ttlMs: 1000 })));
    }
  });

  it("a put under a lease that ran out before it (etcd: lease not found) is no-quorum, nothing set, as the model says: no holder refused it", async () => {
    const clock = new ManualClock();
    const p = prefix();
    const real = etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS });
    // The grant's lease is gone before the put goes out, as the leader revokes one whose ttl ran out.
    const expired = wrapped(real, {
      grant: async (ttlSeconds) => {
        const lease = await real.grant(ttlSeconds);
        await real.revoke(lease.id);
        return lease;
      },
    });
    expect(await new EtcdLock({ node: expired, clock, prefix: p }).acquire('r', { ttlMs: 1000 })).toEqual({ kind: 'denied', reason: 'no-quorum' });
    expect(await createRevision(lockKey('r', p))).toBeNull();
    // The model: the client reads its lease's grant late (paused), on a cluster whose clock ran fast enough that the lease
    // is over when the put arrives.
    const w0 = initialWorld({ design: designs.etcdLease(), store: 'strict', clients: 1 });
    const fast = step(w0, { kind: 'clock-drift', target: { node: 0 }, driftPpm: 500_000 })[0]!.next;
    const paused = step(fast, { kind: 'pause', client: 0, inFlight: { kind: 'acquire', client: 0, resource: 'r', ttlMs: 1000 } }).find((b) => b.next.clients[0]!.inFlight?.kind === 'lease')!;
    const resumed = step(step(paused.next, { kind: 'advance', ms: 800 })[0]!.next, { kind: 'resume', client: 0 });
    expect(resumed.map((b) => b.outcome)).toEqual([{ kind: 'denied', reason: 'no-quorum' }]);
    expect(resumed[0]!.next.nodes[0]!.keys).toEqual({});
  });

  it("the model's revision moves as real etcd's at every delete: a release's, and a denied attempt's undo of its own key", async () => {
    // Real etcd: a grant, its release, an attempt whose put landed but whose round trip ate the validity (its key
    // deleted again), and a grant: four writes after the first grant's put, each one revision.
    const clock = new ManualClock();
    const p = prefix();
    const real = etcd3Node(c, { clock, requestTimeoutMs: TEST_BOUND_MS });
    const { node: slow, took } = slowPuts(real, clock);
    const lock = new EtcdLock({ node: slow, clock, prefix: p });
    const first = granted(await lock.acquire('r', { ttlMs: 1000 }));
    await lock.release(first);
    took.ms = 995;
    expect(await lock.acquire('q', { ttlMs: 1000 })).toEqual({ kind: 'denied', reason: 'validity-exhausted' });
    await leasesBecome(0);
    expect(await createRevision(lockKey('q', p))).toBeNull();
    took.ms = 0;
    const next = granted(await lock.acquire('r', { ttlMs: 1000 }));
    await lock.release(next);
    // The model, the same steps (the slow round trip as the attempt's latency).
    const pick = (w: World, command: Command, kind: string): Branch => {
      const b = step(w, command).find((x) => x.outcome.kind === kind);
      if (b === undefined) throw new Error(`no ${kind} branch for ${JSON.stringify(command)}`);
      return b;
    };
    const w0 = initialWorld({ design: designs.etcdLease(), store: 'strict', clients: 1 });
    const g1 = pick(w0, { kind: 'acquire', client: 0, resource: 'r', ttlMs: 1000 }, 'granted');
    const w1 = pick(g1.next, { kind: 'release', client: 0, resource: 'r' }, 'released').next;
    const denied = pick(w1, { kind: 'acquire', client: 0, resource: 'q', ttlMs: 1000, latencyMs: 995 }, 'denied');
    expect(denied.outcome).toEqual({ kind: 'denied', reason: 'validity-exhausted' });
    const g2 = pick(denied.next, { kind: 'acquire', client: 0, resource: 'r', ttlMs: 1000 }, 'granted');
    const token = (b: Branch): bigint => (b.outcome.kind === 'granted' ? b.outcome.token : -1n);
    expect(token(g2) - token(g1)).toBe(next.token - first.token);
    expect(next.token - first.token).toBe(4n);
  });
});

describe('etcd3Node', () => {
  it('grant, put-if-absent, keep-alive, delete-if-owned, revoke and get, each one call', async () => {
    const clock = new ManualClock();
    const node = etcd3Node(c, { clock, requestTimeoutMs: 5000 });
    const p = prefix();
    const g = await node.grant(7);
    expect(g.ttlSeconds).toBe(7);
    const key = lockKey('r', p);
    const put = await node.putIfAbsent(key, 'v', g.id);
    expect(put.kind).toBe('created');
    expect(put.createRevision).toBe(await createRevision(key));
    expect(await node.get(key)).toBe('v');
    const g2 = await node.grant(7);
    expect(await node.putIfAbsent(key, 'w', g2.id)).toEqual({ kind: 'exists', lease: g.id, createRevision: put.createRevision });
    expect(await node.get(key)).toBe('v');
    const remaining = await node.keepAlive(g.id);
    expect(remaining).toBeGreaterThan(0);
    expect(remaining).toBeLessThanOrEqual(7);
    expect(await node.deleteIfOwned(key, g2.id, put.createRevision)).toBe(false);
    expect(await node.deleteIfOwned(key, g.id, put.createRevision + 1n)).toBe(false);
    expect(await node.deleteIfOwned(key, g.id, put.createRevision)).toBe(true);
    expect(await node.get(key)).toBeNull();
    await node.revoke(g.id);
    await node.revoke(g.id);
    expect(await node.keepAlive(g.id)).toBeLessThanOrEqual(0);
    await node.revoke(g2.id);
  });

  it("late requests (spec 3, \"Delayed requests\"): a release, keep-alive or put held past the lease's expiry and another holder's grant changes nothing of the holder's", async () => {
    const node = etcd3Node(c, { clock: new ManualClock(), requestTimeoutMs: 5000 });
    const key = lockKey('r', prefix());
    const old = await node.grant(1);
    const first = await node.putIfAbsent(key, 'o1', old.id);
    if (first.kind !== 'created') throw new Error('the first put must create');
    // The lessor's own expiry of the 1 s lease takes the key (bounded wait: etcd says when).
    const deadline = Date.now() + 10_000;
    while ((await node.get(key)) !== null) if (Date.now() > deadline) throw new Error('the 1 s lease never expired');
    const held = await node.grant(60);
    const second = await node.putIfAbsent(key, 'o2', held.id);
    if (second.kind !== 'created') throw new Error('the second put must create');
    expect(second.createRevision).toBeGreaterThan(first.createRevision);
    // The requests o1 sent before the expiry land now, as sent: each is judged by lease and create revision, not by the key's name.
    expect(await node.deleteIfOwned(key, old.id, first.createRevision)).toBe(false);
    expect(await node.keepAlive(old.id)).toBeLessThanOrEqual(0);
    const late = await node.grant(60);
    expect(await node.putIfAbsent(key, 'o3', late.id)).toEqual({ kind: 'exists', lease: held.id, createRevision: second.createRevision });
    expect(await node.get(key)).toBe('o2');
    expect(await createRevision(key)).toBe(second.createRevision);
    // A put held past the end of its own lease puts nothing, even on a free key: etcd refuses a lease it no longer has.
    expect(await node.deleteIfOwned(key, held.id, second.createRevision)).toBe(true);
    await node.revoke(late.id);
    await expect(node.putIfAbsent(key, 'o3', late.id)).rejects.toThrow();
    expect(await node.get(key)).toBeNull();
    await node.revoke(held.id);
  });

  it('a call still out when the bound passes on the clock is a TimeoutError naming the call', async () => {
    const clock = new ManualClock();
    // A client of its own, connected first: the shared one's channel may be reconnecting after an earlier test's deadlines (UNAVAILABLE at the start, under load).
    const own = client();
    await own.kv.range({ key: Buffer.from(prefix()) });
    const node = etcd3Node(own, { clock, requestTimeoutMs: 1 });
    // The clock passes the bound before any reply can have been read.
    const grant = node.grant(5).catch((x: unknown) => x);
    const get = node.get(lockKey('r')).catch((x: unknown) => x);
    clock.advance(1);
    const e = await grant;
    expect(e).toBeInstanceOf(TimeoutError);
    expect((e as Error).message).toBe('etcd lease grant timed out after 1 ms');
    expect(await get).toMatchObject({ name: 'TimeoutError', message: 'etcd range timed out after 1 ms' });
  });

  it('the gRPC deadline is sent with each call: one already passed is a TimeoutError even when our own timer never fires', async () => {
    const never = { now: () => 0, schedule: () => () => undefined };
    const node = etcd3Node(c, { clock: never, requestTimeoutMs: 1 });
    /** Starts a call while Date.now reads a minute early: the gRPC deadline it sets (Date.now() + 1 ms) is long past. */
    const late = <T,>(start: () => Promise<T>): Promise<T> => {
      const real = Date.now;
      Date.now = () => real() - 60_000;
      try {
        return start();
      } finally {
        Date.now = real;
      }
    };
    const e = await late(() => node.grant(5)).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(TimeoutError);
    expect((e as Error).message).toBe('etcd lease grant timed out after 1 ms');
    // Each call names itself.
    const key = lockKey('r', prefix());
    await expect(late(() => node.putIfAbsent(key, 'v', '1'))).rejects.toThrow(new TimeoutError('etcd put-if-absent', 1));
    await expect(late(() => node.deleteIfOwned(key, '1', 1n))).rejects.toThrow(new TimeoutError('etcd delete-if-owned', 1));
    await expect(late(() => node.revoke('1'))).rejects.toThrow(new TimeoutError('etcd lease revoke', 1));
    await expect(late(() => node.get(key))).rejects.toThrow(new TimeoutError('etcd range', 1));
    await expect(late(() => node.fencedWrite(cellKey('r', 'x/'), highestKey('r', 'x/'), 1n, 'v', 'strict'))).rejects.toThrow(new TimeoutError('etcd fenced write', 1));
  });

  it('our own deadline bounds a call etcd does not answer; an unreachable host is UnavailableError naming the call', async () => {
    const clock = new ManualClock();
    const node = etcd3Node(c, { clock, requestTimeoutMs: 60_000 });
    // The keep-alive of a lease that never answers... is answered; a stalled call is our clock running out first.
    const pending = node.keepAlive('1').catch((x: unknown) => x);
    clock.advance(60_000);
    const e = await pending;
    expect(e).toBeInstanceOf(TimeoutError);
    expect((e as Error).message).toBe('etcd lease keep-alive timed out after 60000 ms');
    const nowhere = etcd3Node(client(['http://127.0.0.1:1'], 300), { clock: new ManualClock(), requestTimeoutMs: 5000 });
    const u = await nowhere.grant(5).catch((x: unknown) => x);
    expect(u).toBeInstanceOf(UnavailableError);
    expect((u as Error).message).toMatch(/^etcd lease grant: ./);
    await expect(nowhere.revoke('1')).rejects.toThrow(/^etcd lease revoke: /);
  });

  it.each([
    ['EtcdPermissionDeniedError', new EtcdPermissionDeniedError('7 PERMISSION_DENIED: etcdserver: permission denied'), ServerRefusedError, { code: 'permission', serverCode: 'PermissionDenied' }],
    ['EtcdRoleNotGrantedError', new EtcdRoleNotGrantedError('9 FAILED_PRECONDITION: etcdserver: role is not granted to the user'), ServerRefusedError, { code: 'permission', serverCode: 'RoleNotGranted' }],
    ['GRPCInvalidArgumentError', new GRPCInvalidArgumentError('3 INVALID_ARGUMENT: etcdserver: request is too large'), ServerRefusedError, { code: 'statement', serverCode: 'InvalidArgument' }],
    ['GRPCNotImplementedError', new GRPCNotImplementedError('12 UNIMPLEMENTED: The server does not implement the method /etcdserverpb.Lease/LeaseGrant'), ServerRefusedError, { code: 'statement', serverCode: 'Unimplemented' }],
    ['EtcdAuthenticationFailedError', new EtcdAuthenticationFailedError('3 INVALID_ARGUMENT: etcdserver: authentication failed, invalid user ID or password'), ConnectionConfigError, { code: 'authentication' }],
    ['EtcdUserNotFoundError', new EtcdUserNotFoundError('9 FAILED_PRECONDITION: etcdserver: user name not found'), ConnectionConfigError, { code: 'authentication' }],
    ['GRPCUnauthenticatedError', new GRPCUnauthenticatedError('16 UNAUTHENTICATED: x'), ConnectionConfigError, { code: 'authentication' }],
    ['user name is empty (InvalidArgument)', new GRPCInvalidArgumentError('3 INVALID_ARGUMENT: etcdserver: user name is empty'), ConnectionConfigError, { code: 'authentication' }],
    ['authentication is not enabled (FailedPrecondition)', new GRPCFailedPreconditionError('9 FAILED_PRECONDITION: etcdserver: authentication is not enabled'), ConnectionConfigError, { code: 'authentication' }],
    ['a raw gRPC PERMISSION_DENIED (a stream\'s error)', Object.assign(new Error('7 PERMISSION_DENIED: etcdserver: permission denied'), { code: 7 }), ServerRefusedError, { code: 'permission', serverCode: 'PermissionDenied' }],
    ['EtcdInvalidAuthTokenError (expired: etcd3 authenticates again)', new EtcdInvalidAuthTokenError('16 UNAUTHENTICATED: etcdserver: invalid auth token'), UnavailableError, {}],
    ['revision of auth store is old (InvalidArgument, etcd 3.5)', new GRPCInvalidArgumentError('3 INVALID_ARGUMENT: etcdserver: revision of auth store is old'), UnavailableError, {}],
    ['other FailedPrecondition (not leader)', new GRPCFailedPreconditionError('9 FAILED_PRECONDITION: etcdserver: not leader'), UnavailableError, {}],
    ['GRPCUnavailableError', new GRPCUnavailableError('14 UNAVAILABLE: etcdserver: no leader'), UnavailableError, {}],
    ['EtcdError', new EtcdError('etcdserver: something new'), UnavailableError, {}],
    ['a plain Error', new Error('x'), UnavailableError, {}],
  ] as const)('a failed call: %s is typed, with etcd3\'s error as the cause', async (_, error, type, fields) => {
    const broken = { ...NO_RETRY, kv: { txn: unused, range: unused }, leaseClient: { leaseGrant: () => Promise.reject(error), leaseKeepAlive: unused, leaseRevoke: unused } } as unknown as Etcd3;
    const e = await etcd3Node(broken, { clock: new ManualClock() }).grant(1).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(type);
    expect(e).toMatchObject(fields);
    expect((e as Error).message).toContain(`etcd lease grant: ${error.message}`);
    const cause = (e as Error).cause;
    // The raw gRPC error arrives cast by etcd3's own rule, the rest as they were.
    if (error.constructor === Error && 'code' in error) expect(cause).toBeInstanceOf(EtcdPermissionDeniedError);
    else expect(cause).toBe(error);
  });

  it('a gRPC deadline is a TimeoutError; typed errors pass through unchanged', async () => {
    const refusal = new ServerRefusedError('permission', 'PermissionDenied', 'no');
    const node = (error: Error) => etcd3Node({ ...NO_RETRY, kv: { txn: unused, range: unused }, leaseClient: { leaseGrant: () => Promise.reject(error), leaseKeepAlive: unused, leaseRevoke: unused } } as unknown as Etcd3, { clock: new ManualClock(), requestTimeoutMs: 7 });
    await expect(node(new GRPCDeadlineExceededError('4 DEADLINE_EXCEEDED')).grant(1)).rejects.toThrow(new TimeoutError('etcd lease grant', 7));
    await expect(node(refusal).grant(1)).rejects.toBe(refusal);
  });

  it('credentials sent to an etcd without auth are ConnectionConfigError authentication (real etcd: authentication is not enabled)', async () => {
    const x = etcdClient({ ...server(), auth: { username: 'u', password: 'p' } });
    clients.push(x);
    const e = await new EtcdLock({ node: etcd3Node(x, { clock: new ManualClock() }), clock: new ManualClock(), prefix: prefix() }).acquire('r', { ttlMs: 1000 }).catch((y: unknown) => y);
    expect(e).toBeInstanceOf(ConnectionConfigError);
    expect(e).toMatchObject({ code: 'authentication' });
    expect((e as Error).message).toMatch(/authentication is not enabled/);
    expect((e as Error).cause).toBeInstanceOf(GRPCFailedPreconditionError);
  });

  it('configuration mistakes are thrown by acquire (real etcd), never a denial: a host that does not resolve, TLS the member refuses or cannot be verified, a closed client', async () => {
    const acquireError = async (x: Etcd3): Promise<unknown> => {
      clients.push(x);
      const lock = new EtcdLock({ node: etcd3Node(x, { clock: new ManualClock(), requestTimeoutMs: 10_000 }), clock: new ManualClock(), prefix: prefix() });
      return lock.acquire('r', { ttlMs: 60_000, retries: 3 }).catch((y: unknown) => y);
    };
    const port = new URL(server().hosts[0]!).port;
    const unknown = await acquireError(etcdClient({ hosts: [`https://no-such-host.invalid:${port}`], tls: server().tls }));
    expect(unknown).toBeInstanceOf(ConnectionConfigError);
    expect(unknown).toMatchObject({ code: 'unknown-host', message: expect.stringMatching(/^unknown-host: the host name does not resolve: etcd lease grant: .*no-such-host\.invalid/) });
    expect((unknown as Error).cause).toBeInstanceOf(GRPCUnavailableError);
    // The member's certificate checked against a CA that did not sign it (the client's own certificate given as the CA).
    const unverified = await acquireError(etcdClient({ hosts: server().hosts, tls: { ...server().tls, ca: server().tls.cert } }));
    expect(unverified).toBeInstanceOf(ConnectionConfigError);
    expect(unverified).toMatchObject({ code: 'tls', message: expect.stringMatching(/^tls: etcd lease grant: .*unable to verify/) });
    // A client certificate of another CA: the member refuses the handshake.
    const dir = mkdtempSync(join(tmpdir(), 'lockcheck-test-ca-'));
    try {
      const other = (await makeRunCa(dir)).client;
      const foreign = await acquireError(etcdClient({ hosts: server().hosts, tls: { ca: server().tls.ca, cert: other.cert, key: other.key } }));
      expect(foreign).toBeInstanceOf(ConnectionConfigError);
      expect(foreign).toMatchObject({ code: 'tls' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    // A closed client stays closed: a misuse thrown by acquire and extend; release still never throws.
    const x = client();
    const lock = new EtcdLock({ node: etcd3Node(x, { clock: new ManualClock() }), clock: new ManualClock(), prefix: prefix() });
    const lease = granted(await lock.acquire('r', { ttlMs: 60_000 }));
    x.close();
    const closed = { name: 'InvalidInputError', code: 'precondition' };
    await expect(lock.acquire('s', { ttlMs: 60_000, retries: 3 })).rejects.toMatchObject({ ...closed, message: 'precondition: etcd lease grant: the client was closed' });
    await expect(lock.extend(lease, 60_000)).rejects.toMatchObject({ ...closed, message: 'precondition: etcd lease keep-alive: the client was closed' });
    await lock.release(lease);
  });

  it("a host that refuses at connect (its name does not resolve, its certificate not the CA's) beside one that serves is passed over, never a refusal: every call is served (it was ConnectionConfigError 'unknown-host' or 'tls' for each call etcd3 sent there); with every host refusing, the refusal at the first call", async () => {
    const port = new URL(server().hosts[0]!).port;
    // A member whose certificate another CA signed: the client's handshake refuses it.
    const dir = mkdtempSync(join(tmpdir(), 'lockcheck-test-ca-'));
    const other = await makeRunCa(dir);
    const foreign = createTlsServer({ cert: readFileSync(other.server.certFile), key: readFileSync(other.server.keyFile) }, (socket) => socket.destroy());
    foreign.on('tlsClientError', () => undefined);
    await new Promise<void>((resolve) => foreign.listen(0, '127.0.0.1', resolve));
    const foreignHost = `https://127.0.0.1:${(foreign.address() as AddressInfo).port}`;
    try {
      for (const [bad, code] of [[`https://no-such-host.invalid:${port}`, 'unknown-host'], [foreignHost, 'tls']] as const) {
        // etcd3 picks a host at random for each call: enough calls that some land on the bad one (one in two did).
        const mixed = client([bad, ...server().hosts]);
        const node = etcd3Node(mixed, { clock: new ManualClock(), requestTimeoutMs: 10_000 });
        const lock = new EtcdLock({ node, clock: new ManualClock(), prefix: prefix() });
        for (let i = 0; i < 8; i++) {
          const lease = granted(await lock.acquire(`r${i}`, { ttlMs: 60_000 }));
          expect(await node.keepAlive(lease.owner), code).toBeGreaterThan(0);
          expect(await lock.release(lease), code).toBe(true);
        }
        const none = client([bad, bad]);
        const refusal = await new EtcdLock({ node: etcd3Node(none, { clock: new ManualClock(), requestTimeoutMs: 10_000 }), clock: new ManualClock(), prefix: prefix() })
          .acquire('r', { ttlMs: 60_000 })
          .catch((e: unknown) => e);
        expect(refusal, code).toBeInstanceOf(ConnectionConfigError);
        expect(refusal, code).toMatchObject({ code });
      }
    } finally {
      await new Promise<void>((resolve) => foreign.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("tls.serverName: sent as the TLS server name and checked against the member's certificate (an IP address is no server name: Node's DEP0123); a name the certificate lacks is ConnectionConfigError('tls')", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lockcheck-test-ca-'));
    try {
      const ca = await makeRunCa(dir);
      expect(ca.client.serverName).toBe('localhost');
      // What a member sees of the handshake: a TLS server with the run's certificate, recording the server name sent.
      const names: Array<string | false | null> = [];
      const tlsServer = createTlsServer({ cert: readFileSync(ca.server.certFile), key: readFileSync(ca.server.keyFile) }, (socket) => socket.destroy());
      tlsServer.on('secureConnection', (socket: TLSSocket) => names.push(socket.servername));
      tlsServer.on('tlsClientError', () => undefined);
      await new Promise<void>((resolve) => tlsServer.listen(0, '127.0.0.1', resolve));
      try {
        const x = etcdClient({ hosts: [`https://127.0.0.1:${(tlsServer.address() as AddressInfo).port}`], tls: ca.client, dialTimeoutMs: 2000 });
        clients.push(x);
        await new EtcdLock({ node: etcd3Node(x, { clock: new ManualClock(), requestTimeoutMs: 5000 }), clock: new ManualClock(), prefix: prefix() }).acquire('r', { ttlMs: 1000 }).catch(() => undefined);
        x.close();
      } finally {
        await new Promise<void>((resolve) => tlsServer.close(() => resolve()));
      }
      expect(names.length).toBeGreaterThan(0);
      expect(new Set(names)).toEqual(new Set(['localhost']));
      // A name the real member's certificate does not carry is refused by the check, not skipped.
      const wrongName = etcdClient({ hosts: server().hosts, tls: { ...server().tls, serverName: 'not-the-member.example' } });
      clients.push(wrongName);
      const e = await new EtcdLock({ node: etcd3Node(wrongName, { clock: new ManualClock(), requestTimeoutMs: 10_000 }), clock: new ManualClock(), prefix: prefix() }).acquire('r', { ttlMs: 60_000 }).catch((y: unknown) => y);
      expect(e).toBeInstanceOf(ConnectionConfigError);
      expect(e).toMatchObject({ code: 'tls' });
      for (const serverName of ['127.0.0.1', '::1', '', 5]) expect(() => etcdClient({ hosts: server().hosts, tls: { ...ca.client, serverName: serverName as never } })).toThrow(InvalidInputError);
      // Not a host name as TLS sends it (RFC 6066: ASCII, no trailing dot): etcd refused 'localhost.' at every handshake
      // with an alert that read as an outage (every acquire denied no-quorum); the others no certificate carries.
      for (const serverName of ['localhost.', 'local host', 'local/host', 'l\u00f6calhost', 'localhost\uD800', '-localhost', 'localhost-', 'a..b', `${'x'.repeat(64)}.example`, `${'x.'.repeat(127)}x`]) {
        expect(refused(() => etcdClient({ hosts: server().hosts, tls: { ...ca.client, serverName } })).message, serverName).toMatch(/^invalid-config: tls\.serverName must be a host name as TLS sends it \(/);
      }
      for (const serverName of ['localhost', 'LOCALHOST', 'a-b.example', 'under_score.example', `${'x'.repeat(63)}.example`]) etcdClient({ hosts: server().hosts, tls: { ...ca.client, serverName } }).close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('hosts etcd3 cannot dial and TLS material that does not parse or match are refused at construction, naming the option (the key never shown)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lockcheck-test-ca-'));
    let other: { cert: string; key: string };
    try {
      other = (await makeRunCa(dir)).client;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    for (const bad of ['ftp://127.0.0.1:2379', '127.0.0.1', 'not a url', 'https://u:p@h:2379', 'https://h:2379/v3', 'https://h:99999', 'https://h:0', 'unix:///tmp/etcd.sock']) {
      const e = refused(() => etcdClient({ hosts: ['http://127.0.0.1:1', bad] }));
      expect(e.code, bad).toBe('invalid-config');
      expect(e.message, bad).toMatch(/^invalid-config: hosts\[1\] must be http:\/\/host:port, https:\/\/host:port or host:port with a port in 1\.\.65535, got /);
    }
    expect(refused(() => etcdClient({ hosts: ['https://u:p@h:2379'] })).message).not.toContain('u:p');
    // A hole in the array is no host (forEach skipped it, and etcd3 threw a TypeError reading it).
    expect(refused(() => etcdClient({ hosts: new Array<string>(1) })).message).toBe('invalid-config: hosts[0] must be http://host:port, https://host:port or host:port with a port in 1..65535, got undefined');
    expect(refused(() => etcdClient({ hosts: Object.assign(['http://127.0.0.1:1'], { length: 2 }) })).message).toMatch(/^invalid-config: hosts\[1\] must be /);
    for (const good of ['http://h:1', 'https://a.b-c:2379/', 'h:65535', 'https://[::1]:2379']) etcdClient({ hosts: [good] }).close();
    const tls = server().tls;
    expect(refused(() => etcdClient({ hosts: server().hosts, tls: { ...tls, ca: 'not a pem' } })).message).toBe('invalid-config: tls.ca must be a PEM certificate, got "not a pem"');
    expect(refused(() => etcdClient({ hosts: server().hosts, tls: { ...tls, cert: tls.key } })).message).toMatch(/^invalid-config: tls.cert must be a PEM certificate, got a string of \d+ characters$/);
    expect(refused(() => etcdClient({ hosts: server().hosts, tls: { ...tls, key: 'garbage key' } })).message).toBe('invalid-config: tls.key must be a PEM private key, got a string of 11 characters (not shown: it may hold a secret)');
    // Another certificate's key: gRPC threw a bare OpenSSL error (ERR_OSSL_X509_KEY_VALUES_MISMATCH) from the constructor.
    expect(refused(() => etcdClient({ hosts: server().hosts, tls: { ...tls, key: other.key } })).message).toBe('invalid-config: tls.key is not the private key of tls.cert');
  });

  it("with auth, etcd3's authentication before a call is bounded by dialTimeoutMs: a member that accepts and never answers no longer hangs the call, nor every later one, for ever", { timeout: 20_000 }, async () => {
    const silent: Socket[] = [];
    const hole = createServer((socket) => void silent.push(socket));
    await new Promise<void>((resolve) => hole.listen(0, '127.0.0.1', resolve));
    try {
      const x = etcdClient({ hosts: [`http://127.0.0.1:${(hole.address() as AddressInfo).port}`], auth: { username: 'u', password: 'p' }, dialTimeoutMs: 300 });
      clients.push(x);
      // Our clock never moves: only the authentication's own deadline can end the call.
      const node = etcd3Node(x, { clock: new ManualClock(), requestTimeoutMs: 60_000 });
      for (let call = 0; call < 2; call++) await expect(node.grant(5)).rejects.toBeInstanceOf(TimeoutError);
      expect(silent.length).toBeGreaterThan(0);
    } finally {
      for (const socket of silent) socket.destroy();
      await new Promise((resolve) => hole.close(resolve));
    }
  });

  it("a gRPC server that is not etcd (it implements none of etcd's methods) is ServerRefusedError('statement', 'Unimplemented'), thrown by acquire at once, never read as no-quorum", async () => {
    const other = new grpc.Server();
    try {
      const port = await new Promise<number>((resolve, reject) => other.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
      const x = etcdClient({ hosts: [`127.0.0.1:${port}`] });
      clients.push(x);
      const node = etcd3Node(x, { clock: new ManualClock() });
      const e = await new EtcdLock({ node, clock: new ManualClock(), prefix: prefix() }).acquire('r', { ttlMs: 2000, retries: 3 }).catch((y: unknown) => y);
      expect(e).toBeInstanceOf(ServerRefusedError);
      expect(e).toMatchObject({ code: 'statement', serverCode: 'Unimplemented', message: expect.stringMatching(/^statement \(Unimplemented\): etcd lease grant: 12 UNIMPLEMENTED: /) });
      expect((e as Error).cause).toBeInstanceOf(GRPCNotImplementedError);
      // The keep-alive's stream error comes raw from gRPC: cast the same way.
      expect(await node.keepAlive('1').catch((y: unknown) => y)).toMatchObject({ serverCode: 'Unimplemented' });
    } finally {
      other.forceShutdown();
    }
  });

  it('a work function that throws at once is a failed call, typed', async () => {
    const broken = { ...NO_RETRY, kv: { txn: unused, range: unused }, leaseClient: { leaseGrant: () => { throw new Error('sync'); }, leaseKeepAlive: unused, leaseRevoke: unused } } as unknown as Etcd3;
    const e = await etcd3Node(broken, { clock: new ManualClock() }).grant(1).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(UnavailableError);
    expect((e as Error).message).toBe('etcd lease grant: sync');
  });
});

describe('etcdFencedStore', () => {
  it("a cell or highest key holding what the store did not write is ServerRefusedError('schema', 'UnexpectedValue') naming the key, never a bare SyntaxError or an outage; the data is not shown", async () => {
    const p = prefix();
    const store = etcdFencedStore(etcd3Node(c, { clock: new ManualClock(), requestTimeoutMs: TEST_BOUND_MS }), 'strict', { prefix: p });
    const foreign = (key: Buffer, why: string) => ({ name: 'ServerRefusedError', code: 'schema', serverCode: 'UnexpectedValue', message: `schema (UnexpectedValue): etcd key '${key.toString()}' does not hold a lockcheck cell (${why})` });
    for (const [text, why] of [
      ['secret-ish text', 'not JSON'],
      ['[1]', 'not a JSON object'],
      ['{"value":1,"token":"1"}', 'value is not a string'],
      ['{"value":"v","token":"-1"}', 'token is not a token'],
      ['{"value":"v","token":"9223372036854775808"}', 'token is not a token'],
    ] as const) {
      await c.put(cellKey('r', p)).value(text);
      const e = await store.read('r').catch((x: unknown) => x);
      expect(e, text).toMatchObject(foreign(cellKey('r', p), why));
      expect((e as Error).message).not.toContain(text);
    }
    await c.put(highestKey('w', p)).value('not digits');
    await expect(store.write('w', 1n, 'v')).rejects.toMatchObject(foreign(highestKey('w', p), 'the highest token is not a token'));
    // A highest token not padded to 19 digits (edited by hand) compares wrongly as bytes: refused as foreign, not a rejection naming 5.
    await c.put(highestKey('z', p)).value('5');
    await expect(store.write('z', 10n, 'v')).rejects.toMatchObject(foreign(highestKey('z', p), 'the highest token is not a token as the store writes it'));
  });

  it('a value whose write cannot fit in an etcd request, with the widest token, is refused before it is sent (precondition); the largest that fits lands with any token', async () => {
    const p = prefix();
    const store = etcdFencedStore(etcd3Node(c, { clock: new ManualClock(), requestTimeoutMs: TEST_BOUND_MS }), 'strict', { prefix: p });
    // etcd's default --max-request-bytes (1.5 MiB) less 256 bytes of framing (the request's own was 92 here); the write carries the cell twice and the highest key six times.
    const most = 1_572_864 - 256;
    // Judged with the widest token (19 digits), whatever the write's: a value fits or not whatever its token.
    const cell = (n: number): number => Buffer.byteLength(JSON.stringify({ value: 'v'.repeat(n), token: '9'.repeat(19) }));
    const fixed = 2 * cellKey('r', p).length + 6 * highestKey('r', p).length + 4 * 19;
    let n = Math.floor((most - fixed) / 2) - cell(0);
    while (fixed + 2 * cell(n + 1) <= most) n++;
    const e = await store.write('r', 1n, 'v'.repeat(n + 1)).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(InvalidInputError);
    expect(e).toMatchObject({ code: 'precondition', message: `precondition: fenced write too large for an etcd request: ${fixed + 2 * cell(n + 1)} bytes of keys and values, at most ${most} (etcd's default --max-request-bytes less room for the request's framing)` });
    // Well past the limit too (the server would refuse it): refused up front, nothing written.
    await expect(store.write('r', 1n, 'v'.repeat(2_000_000))).rejects.toMatchObject({ code: 'precondition' });
    expect(await store.read('r')).toEqual({ value: null, token: null });
    // The largest value that passes the check is one etcd takes, with a small token and with the largest.
    expect(await store.write('r', 1n, 'v'.repeat(n))).toEqual({ kind: 'accepted' });
    expect((await store.read('r')).value).toHaveLength(n);
    expect(await store.write('r', 2n ** 63n - 1n, 'v'.repeat(n))).toEqual({ kind: 'accepted' });
    expect(await store.read('r')).toMatchObject({ token: 2n ** 63n - 1n });
  });

  it('refuses a transactional policy and bad input before any call', async () => {
    const node = etcd3Node(c, { clock: new ManualClock(), requestTimeoutMs: TEST_BOUND_MS });
    expect(() => etcdFencedStore(node, 'transactional')).toThrow(expect.objectContaining({ code: 'invalid-config', message: 'invalid-config: an etcd store cannot be transactional' }));
    const store = etcdFencedStore(node, 'strict', { prefix: prefix() });
    await expect(store.write('', 1n, 'v')).rejects.toThrow(expect.objectContaining({ code: 'invalid-resource' }));
    await expect(store.write('r', -1n, 'v')).rejects.toThrow(expect.objectContaining({ code: 'invalid-token' }));
    await expect(store.write('r', 1n, 1 as unknown as string)).rejects.toThrow(expect.objectContaining({ code: 'precondition', message: 'precondition: value must be a string' }));
    await expect(store.read('')).rejects.toThrow(InvalidInputError);
    expect(await store.read('r')).toEqual({ value: null, token: null });
  });

  it.each([
    ['strict', [[5n, 'accepted'], [5n, 'rejected'], [4n, 'rejected'], [6n, 'accepted'], [MAX, 'accepted'], [7n, 'rejected']], { value: 'v4', token: MAX }],
    ['monotonic', [[5n, 'accepted'], [5n, 'accepted'], [4n, 'rejected'], [10n, 'accepted'], [9n, 'rejected']], { value: 'v3', token: 10n }],
    ['unfenced', [[5n, 'accepted'], [2n, 'accepted'], [7n, 'accepted'], [3n, 'accepted']], { value: 'v3', token: 3n }],
  ] as const)('%s: writes judged against the highest (digit-length boundaries included)', async (policy, writes, last) => {
    const p = prefix();
    const node = etcd3Node(c, { clock: new ManualClock(), requestTimeoutMs: TEST_BOUND_MS });
    const store = etcdFencedStore(node, policy, { prefix: p });
    let highest = 0n;
    for (const [i, [token, outcome]] of writes.entries()) {
      const r = await store.write('r', token, `v${i}`);
      expect(r).toEqual(outcome === 'accepted' ? { kind: 'accepted' } : { kind: 'rejected', highest });
      if (token > highest) highest = token;
    }
    expect(await store.read('r')).toEqual(last);
    expect((await c.kv.range({ key: highestKey('r', p) })).kvs[0]!.value.toString()).toBe(highest.toString().padStart(19, '0'));
    // Across a decimal-length boundary: 9 < 10 as numbers, though '9' > '10' as text.
    const q = etcdFencedStore(node, policy, { prefix: prefix() });
    expect(await q.write('s', 9n, 'a')).toEqual({ kind: 'accepted' });
    expect((await q.write('s', 10n, 'b')).kind).toBe('accepted');
  });
});
