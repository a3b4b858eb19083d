import type { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdCluster } from '../../conformance/env/etcdCluster.ts';
import { systemClock } from '../../impl/clock.ts';
import { LeaseLostError, TimeoutError, UnavailableError } from '../../impl/errors.ts';
import { EtcdLock, etcd3Node, etcdClient, etcdFencedStore } from '../../impl/etcd/index.ts';
import { allStopped, backToBaseline, grantedBeforeTheFault, lostUnderUsing, rejectsWithin, resolvesWithin, settles, steadyResources, until } from './blackhole.ts';
import { InvalidInputError } from '../../model/errors.ts';

/**
 * The etcd lock and fenced store under a black hole: the one member paused
 * with SIGSTOP (TLS connections open, no reply), and killed with calls in
 * flight. Every call settles within its request timeout (a generous 10x
 * bound: a loaded machine), typed: an acquire denied `no-quorum` or
 * `timed-out`, a `not-extended`, node and store calls TimeoutError or
 * UnavailableError; and the client's close() then leaves no handle.
 */
const TIMEOUT_MS = 300;
const BOUND_MS = 10 * TIMEOUT_MS + 2000;

let cluster: EtcdCluster;
beforeAll(async () => {
  cluster = await EtcdCluster.start({ members: 1, parentDir: '/dev/shm' });
}, 60_000);
afterAll(async () => {
  if (cluster?.paused(0)) cluster.resume(0);
  await cluster?.stop();
});

function client(): Etcd3 {
  return etcdClient({ ...cluster.clientOptions(), dialTimeoutMs: TIMEOUT_MS });
}

async function pause(): Promise<void> {
  cluster.pause(0);
  await until('the member stopped', () => allStopped(cluster.pid(0)));
}

const NO_REPLY = [{ kind: 'timed-out' }, { kind: 'denied', reason: 'no-quorum' }];
const typedOutage = (e: unknown): boolean => e instanceof TimeoutError || e instanceof UnavailableError;

describe('etcd paused (SIGSTOP)', () => {
  it('acquire, extend, release, store write and read settle typed within the request timeout; close leaves no handle', async () => {
    const baseline = await steadyResources();
    const c = client();
    const node = etcd3Node(c, { clock: systemClock, requestTimeoutMs: TIMEOUT_MS });
    const lock = new EtcdLock({ node, clock: systemClock, prefix: 'p1/' });
    const store = etcdFencedStore(node, 'strict', { prefix: 'p1/' });
    const leasesBefore = new Set((await c.leaseClient.leaseLeases({})).leases.map((l) => String(l.ID)));
    const held = await grantedBeforeTheFault('acquire', 'held', (r) => lock.acquire(r, { ttlMs: 60_000 }));
    try {
      await pause();
      expect(NO_REPLY).toContainEqual(await resolvesWithin('acquire', lock.acquire('r', { ttlMs: 60_000 }), BOUND_MS));
      expect(await resolvesWithin('extend', lock.extend(held.lease, 60_000), BOUND_MS)).toMatchObject({ kind: 'not-extended' });
      expect(await resolvesWithin('release', lock.release(held.lease), BOUND_MS)).toBe(false);
      expect(typedOutage(await rejectsWithin('store write', store.write('c', 1n, 'v'), BOUND_MS))).toBe(true);
      expect(typedOutage(await rejectsWithin('store read', store.read('c'), BOUND_MS))).toBe(true);
      c.close();
    } finally {
      if (cluster.paused(0)) cluster.resume(0);
    }
    await backToBaseline(baseline);
    // The member answers again: the acquire given up on holds nothing (its put was cancelled with its deadline, or its
    // lease revoked). A grant the member took only after the client gave up (its request already in the member's socket)
    // may leave a lease the client never learned of: it holds no key, and goes at its ttl (failed so once, h34).
    const admin = client();
    try {
      const again = new EtcdLock({ node: etcd3Node(admin, { clock: systemClock, requestTimeoutMs: 5000 }), clock: systemClock, prefix: 'p1/' });
      const r = await again.acquire('r', { ttlMs: 60_000 });
      expect(r.kind).toBe('granted');
      if (r.kind === 'granted') await again.release(r.lease);
      // One lease stays for its ttl with its key: the held one, whose release could not reach the member (release() said
      // so: false). No other new lease holds a key.
      await until('no lease of the acquire holds a key', async () => {
        const fresh = (await admin.leaseClient.leaseLeases({})).leases.map((l) => String(l.ID)).filter((id) => !leasesBefore.has(id) && id !== held.lease.owner);
        const keys = await Promise.all(fresh.map(async (id) => (await admin.leaseClient.leaseTimeToLive({ ID: id, keys: true })).keys.length));
        return keys.every((n) => n === 0);
      });
    } finally {
      admin.close();
    }
  });

  it('a client made while the member is paused: the first acquire settles typed; close leaves no handle', async () => {
    const baseline = await steadyResources();
    try {
      await pause();
      const c = client();
      const node = etcd3Node(c, { clock: systemClock, requestTimeoutMs: TIMEOUT_MS });
      const lock = new EtcdLock({ node, clock: systemClock, prefix: 'p2/' });
      const store = etcdFencedStore(node, 'strict', { prefix: 'p2/' });
      expect(NO_REPLY).toContainEqual(await resolvesWithin('acquire', lock.acquire('r', { ttlMs: 60_000 }), BOUND_MS));
      expect(typedOutage(await rejectsWithin('store write', store.write('c', 1n, 'v'), BOUND_MS))).toBe(true);
      c.close();
    } finally {
      if (cluster.paused(0)) cluster.resume(0);
    }
    await backToBaseline(baseline);
  });
});

describe('etcd paused under using()', () => {
  it("the extensions fail, the signal fires by the lease's deadline, fn ends and using() settles; no handle left", async () => {
    const baseline = await steadyResources();
    const c = client();
    const lock = new EtcdLock({ node: etcd3Node(c, { clock: systemClock, requestTimeoutMs: TIMEOUT_MS }), clock: systemClock, prefix: 'p5/' });
    const TTL = 3000;
    let lost: Awaited<ReturnType<typeof lostUnderUsing>>;
    try {
      lost = await lostUnderUsing(lock, 'u', TTL, pause, 10 * TTL + BOUND_MS);
    } finally {
      if (cluster.paused(0)) cluster.resume(0);
    }
    expect(lost.ran).toBe(true);
    expect(lost.outcome.ok ? lost.outcome.value : lost.outcome.error).toBeInstanceOf(LeaseLostError);
    c.close();
    await backToBaseline(baseline);
  });
});

describe('etcd paused: close() with calls in flight', () => {
  it('the client closed while its calls wait on the silent member: every call settles typed; no handle left', async () => {
    const baseline = await steadyResources();
    const c = client();
    const node = etcd3Node(c, { clock: systemClock, requestTimeoutMs: TIMEOUT_MS });
    const lock = new EtcdLock({ node, clock: systemClock, prefix: 'p4/' });
    const store = etcdFencedStore(node, 'strict', { prefix: 'p4/' });
    const held = await grantedBeforeTheFault('acquire', 'held', (r) => lock.acquire(r, { ttlMs: 60_000 }));
    try {
      await pause();
      const calls = [
        settles('acquire', lock.acquire('r', { ttlMs: 60_000 }), BOUND_MS),
        settles('extend', lock.extend(held.lease, 60_000), BOUND_MS),
        settles('store write', store.write('c', 1n, 'v'), BOUND_MS),
        settles('store read', store.read('c'), BOUND_MS),
      ];
      c.close();
      for (const s of await Promise.all(calls)) {
        if (!s.ok) expect(typedOutage(s.error) || s.error instanceof InvalidInputError, String(s.error)).toBe(true);
      }
      expect(await resolvesWithin('release', lock.release(held.lease), BOUND_MS).catch((e: unknown) => e)).not.toBeInstanceOf(TypeError);
      await backToBaseline(baseline);
    } finally {
      if (cluster.paused(0)) cluster.resume(0);
    }
    await backToBaseline(baseline);
  });
});

describe('etcd killed with calls in flight', () => {
  it('the calls in flight settle typed, and the next ones; close leaves no handle', async () => {
    const baseline = await steadyResources();
    const c = client();
    const node = etcd3Node(c, { clock: systemClock, requestTimeoutMs: TIMEOUT_MS });
    const lock = new EtcdLock({ node, clock: systemClock, prefix: 'p3/' });
    const store = etcdFencedStore(node, 'strict', { prefix: 'p3/' });
    const held = await grantedBeforeTheFault('acquire', 'held', (r) => lock.acquire(r, { ttlMs: 60_000 }));
    try {
      await pause();
      const acquiring = resolvesWithin('acquire', lock.acquire('r', { ttlMs: 60_000 }), BOUND_MS);
      const extending = resolvesWithin('extend', lock.extend(held.lease, 60_000), BOUND_MS);
      const writing = rejectsWithin('store write', store.write('c', 1n, 'v'), BOUND_MS);
      await cluster.kill(0);
      expect(NO_REPLY).toContainEqual(await acquiring);
      expect(await extending).toMatchObject({ kind: 'not-extended' });
      expect(typedOutage(await writing)).toBe(true);
      expect(NO_REPLY).toContainEqual(await resolvesWithin('acquire (down)', lock.acquire('r2', { ttlMs: 60_000 }), BOUND_MS));
      const release = await resolvesWithin('release (down)', lock.release(held.lease), BOUND_MS).catch((e: unknown) => e);
      if (release instanceof Error) expect(typedOutage(release), String(release)).toBe(true);
      expect(typedOutage(await rejectsWithin('store read (down)', store.read('c'), BOUND_MS))).toBe(true);
      c.close();
    } finally {
      if (cluster.running(0)) {
        if (cluster.paused(0)) cluster.resume(0);
      } else await cluster.restart(0);
    }
    await backToBaseline(baseline);
  });
});
