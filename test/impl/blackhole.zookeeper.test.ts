import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZookeeperEnsemble } from '../../conformance/env/zookeeperEnsemble.ts';
import { systemClock } from '../../impl/clock.ts';
import { LeaseLostError, TimeoutError, UnavailableError } from '../../impl/errors.ts';
import { ZookeeperLock, zookeeperFencedStore, zookeeperNode, type ZookeeperNode } from '../../impl/zookeeper/index.ts';
import { lockDir } from '../../impl/zookeeper/paths.ts';
import { InvalidInputError } from '../../model/errors.ts';
import { acceptedBeforeTheFault, allStopped, backToBaseline, grantedBeforeTheFault, lostUnderUsing, rejectsWithin, resolvesWithin, settles, steadyResources, until, waiterInLine } from './blackhole.ts';

/**
 * The ZooKeeper lock and fenced store under a black hole: the one member
 * paused with SIGSTOP (connections open, no reply), and killed with calls in
 * flight. Every call settles within the node's request timeout (a generous
 * 10x bound: a loaded machine), typed; the node's close() then leaves no
 * handle; and a connect given up on leaves no session on the ensemble when
 * the member answers it late.
 */
const TIMEOUT_MS = 300;
const BOUND_MS = 10 * TIMEOUT_MS + 2000;
/** Lease sessions far longer than the test: a session left behind does not expire before it is counted. */
const TTL_MS = 60_000;

let ensemble: ZookeeperEnsemble;
beforeAll(async () => {
  ensemble = await ZookeeperEnsemble.start({ members: 1, parentDir: '/dev/shm' });
}, 90_000);
afterAll(async () => {
  if (ensemble?.paused(0)) ensemble.resume(0);
  await ensemble?.stop();
});

let roots = 0;
function parts(given?: string): { node: ZookeeperNode; lock: ZookeeperLock; store: ReturnType<typeof zookeeperFencedStore>; root: string } {
  const node = zookeeperNode({ ...ensemble.clientOptions(), clock: systemClock, requestTimeoutMs: TIMEOUT_MS });
  const root = given ?? `/bh${process.pid}-${++roots}`;
  return { node, lock: new ZookeeperLock({ node, clock: systemClock, root }), store: zookeeperFencedStore(node, 'strict', { root }), root };
}

async function pause(): Promise<void> {
  ensemble.pause(0);
  await until('the member stopped', () => allStopped(ensemble.pid(0)));
}

async function sessions(): Promise<number> {
  let n: number | null = null;
  await until('the member answers mntr', async () => (n = await ensemble.sessions(0)) !== null);
  return n!;
}

/** Waits (bounded, far below the lease sessions' timeout) until the member tracks `n` sessions. */
async function sessionsBecome(n: number): Promise<void> {
  let last = -1;
  await until(`the member tracks ${n} sessions (last seen: ${last})`, async () => (last = await sessions()) === n, 8000).catch((e: unknown) => {
    throw new Error(`the member tracks ${last} sessions, expected ${n}`, { cause: e });
  });
}

const NO_REPLY = [{ kind: 'timed-out' }, { kind: 'denied', reason: 'no-quorum' }];
const typedOutage = (e: unknown): boolean => e instanceof TimeoutError || e instanceof UnavailableError;

describe('ZooKeeper: a connect that timed out leaves no session when the member answers late', () => {
  it('a lease session: the acquire is denied, and the session the member opens on resume is closed', async () => {
    const baseline = await steadyResources();
    const { node, lock } = parts();
    const before = await sessions();
    try {
      await pause();
      expect(NO_REPLY).toContainEqual(await resolvesWithin('acquire', lock.acquire('late', { ttlMs: TTL_MS }), BOUND_MS));
    } finally {
      if (ensemble.paused(0)) ensemble.resume(0);
    }
    // The member reads the connect it was sent while paused: no session of it may stay open (it would for TTL_MS).
    await sessionsBecome(before);
    node.close();
    await backToBaseline(baseline);
    await sessionsBecome(before);
  });

  it("the store's session: a store call that timed out in its connect, then close(): no session stays", async () => {
    const baseline = await steadyResources();
    const { node, store } = parts();
    const before = await sessions();
    try {
      await pause();
      expect(await rejectsWithin('store write', store.write('c', 1n, 'v'), BOUND_MS)).toBeInstanceOf(TimeoutError);
      node.close();
    } finally {
      if (ensemble.paused(0)) ensemble.resume(0);
    }
    await sessionsBecome(before);
    await backToBaseline(baseline);
  });
});

describe('ZooKeeper paused (SIGSTOP)', () => {
  it('acquire, extend, release, store write and read settle typed within the request timeout; close leaves no handle', async () => {
    const baseline = await steadyResources();
    const { node, lock, store } = parts();
    const before = await sessions();
    const held = await grantedBeforeTheFault('acquire', 'held', (r) => lock.acquire(r, { ttlMs: TTL_MS }));
    const key = await acceptedBeforeTheFault('store write', 'c', (k) => store.write(k, 1n, 'v'));
    try {
      await pause();
      expect(NO_REPLY).toContainEqual(await resolvesWithin('acquire', lock.acquire('r', { ttlMs: TTL_MS }), BOUND_MS));
      expect(await resolvesWithin('extend', lock.extend(held.lease, TTL_MS), BOUND_MS)).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
      expect(await resolvesWithin('release', lock.release(held.lease), BOUND_MS)).toBe(false);
      expect(await rejectsWithin('store write', store.write(key, 2n, 'w'), BOUND_MS)).toBeInstanceOf(TimeoutError);
      expect(await rejectsWithin('store read', store.read(key), BOUND_MS)).toBeInstanceOf(TimeoutError);
      node.close();
      // Cut while the member is still paused: the closes it was sent are in its socket buffers only.
      await backToBaseline(baseline);
    } finally {
      if (ensemble.paused(0)) ensemble.resume(0);
    }
    await backToBaseline(baseline);
    await sessionsBecome(before);
  });

  it('an acquire waiting in line (waitMs) when the member pauses settles typed within its wait and the request timeout', async () => {
    const baseline = await steadyResources();
    const { node, lock, root } = parts();
    const { resource } = await grantedBeforeTheFault('acquire', 'line', (r) => lock.acquire(r, { ttlMs: TTL_MS }));
    const WAIT_MS = 1000;
    const wait = (o: ReturnType<typeof parts>) => resolvesWithin('acquire in line', o.lock.acquire(resource, { ttlMs: TTL_MS, waitMs: WAIT_MS }), 10 * WAIT_MS + BOUND_MS);
    let other = parts(root);
    try {
      // In line once its contender is there (two children of the lock's directory; a look the short timeout cut is tried
      // again). Its session and contender are setup on the live member too (waiterInLine).
      const { waiting } = await waiterInLine('the second contender in line', wait(other), async () => (await node.children(lockDir(resource, root)).catch(() => [])).length === 2, () => {
        other.node.close();
        other = parts(root);
        return wait(other);
      });
      await pause();
      expect([...NO_REPLY, { kind: 'denied', reason: 'held' }]).toContainEqual(await waiting);
      node.close();
      other.node.close();
      await backToBaseline(baseline);
    } finally {
      if (ensemble.paused(0)) ensemble.resume(0);
    }
    await backToBaseline(baseline);
  });

  it('a node made while the member is paused: its first acquire and store call settle typed; close leaves no handle', async () => {
    const baseline = await steadyResources();
    const before = await sessions();
    try {
      await pause();
      const { node, lock, store } = parts();
      expect(NO_REPLY).toContainEqual(await resolvesWithin('acquire', lock.acquire('r', { ttlMs: TTL_MS }), BOUND_MS));
      expect(await rejectsWithin('store write', store.write('c', 1n, 'v'), BOUND_MS)).toBeInstanceOf(TimeoutError);
      node.close();
      // Cut while the member is still paused: the closes it was sent are in its socket buffers only.
      await backToBaseline(baseline);
    } finally {
      if (ensemble.paused(0)) ensemble.resume(0);
    }
    await backToBaseline(baseline);
    await sessionsBecome(before);
  });
});

describe('ZooKeeper paused under using()', () => {
  it("the extensions fail, the signal fires by the lease's deadline, fn ends and using() settles; no handle left", async () => {
    const baseline = await steadyResources();
    const { node, lock } = parts();
    const TTL = 1500;
    let lost: Awaited<ReturnType<typeof lostUnderUsing>>;
    try {
      lost = await lostUnderUsing(lock, 'u', TTL, pause, 10 * TTL + BOUND_MS);
    } finally {
      if (ensemble.paused(0)) ensemble.resume(0);
    }
    expect(lost.ran).toBe(true);
    expect(lost.outcome.ok ? lost.outcome.value : lost.outcome.error).toBeInstanceOf(LeaseLostError);
    node.close();
    await backToBaseline(baseline);
  });
});

describe('ZooKeeper paused: close() with calls in flight', () => {
  it('the node closed while its calls wait on the silent member: every call settles, no handle and no session left', async () => {
    const baseline = await steadyResources();
    const before = await sessions();
    const { node, lock, store } = parts();
    const held = await grantedBeforeTheFault('acquire', 'cl-held', (r) => lock.acquire(r, { ttlMs: TTL_MS }));
    const key = await acceptedBeforeTheFault('store write', 'c', (k) => store.write(k, 1n, 'v'));
    try {
      await pause();
      const calls = [
        settles('acquire (connecting)', lock.acquire('cl-r', { ttlMs: TTL_MS }), BOUND_MS),
        settles('extend', lock.extend(held.lease, TTL_MS), BOUND_MS),
        settles('store write', store.write(key, 2n, 'w'), BOUND_MS),
        settles('store read', store.read(key), BOUND_MS),
      ];
      node.close();
      for (const c of await Promise.all(calls)) {
        if (!c.ok) expect(typedOutage(c.error) || c.error instanceof InvalidInputError, String(c.error)).toBe(true);
      }
      await backToBaseline(baseline);
    } finally {
      if (ensemble.paused(0)) ensemble.resume(0);
    }
    await backToBaseline(baseline);
    await sessionsBecome(before);
  });
});

describe('ZooKeeper killed with calls in flight', () => {
  it('the calls in flight settle typed, and the next ones; close leaves no handle', async () => {
    const baseline = await steadyResources();
    const { node, lock, store } = parts();
    const held = await grantedBeforeTheFault('acquire', 'held', (r) => lock.acquire(r, { ttlMs: TTL_MS }));
    const key = await acceptedBeforeTheFault('store write', 'c', (k) => store.write(k, 1n, 'v'));
    try {
      await pause();
      const acquiring = resolvesWithin('acquire', lock.acquire('r', { ttlMs: TTL_MS }), BOUND_MS);
      const extending = resolvesWithin('extend', lock.extend(held.lease, TTL_MS), BOUND_MS);
      const writing = rejectsWithin('store write', store.write(key, 2n, 'w'), BOUND_MS);
      await ensemble.kill(0);
      expect(NO_REPLY).toContainEqual(await acquiring);
      expect(await extending).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
      expect(typedOutage(await writing)).toBe(true);
      expect(NO_REPLY).toContainEqual(await resolvesWithin('acquire (down)', lock.acquire('r2', { ttlMs: TTL_MS }), BOUND_MS));
      expect(await resolvesWithin('release (down)', lock.release(held.lease), BOUND_MS)).toBe(false);
      const r = await rejectsWithin('store read (down)', store.read(key), BOUND_MS);
      expect(typedOutage(r) || r instanceof InvalidInputError, String(r)).toBe(true);
      node.close();
      await backToBaseline(baseline);
    } finally {
      if (!ensemble.running(0)) await ensemble.restart(0);
      else if (ensemble.paused(0)) ensemble.resume(0);
    }
    // Not counted here: the member restarts on its data, sessions included, and a session whose close could not be sent
    // (the member down longer than CLOSE_ON_RECONNECT_MS) lives its timeout, as release() returning false says.
  });
});
