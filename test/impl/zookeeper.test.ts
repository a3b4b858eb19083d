import { AssertionError } from 'node:assert';
import { readdir, readFile } from 'node:fs/promises';
import zookeeper from 'node-zookeeper-client';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { eventually } from '../probes.ts';
import { refused } from '../refused.ts';
import { ConnectionConfigError, InvalidInputError, LeaseLostError, ServerRefusedError, TimeoutError, TokenOverflowError, UnavailableError } from '../../impl/errors.ts';
import { ZookeeperLock, zookeeperFencedStore, zookeeperNode, type ZookeeperAcquireOptions, type ZookeeperNode, type ZookeeperSession } from '../../impl/zookeeper/index.ts';
import { zxid } from '../../impl/zookeeper/node.ts';
import { CONTENDER, DEFAULT_ROOT, cellPath, inLine, lockDir, sequenceOf } from '../../impl/zookeeper/paths.ts';
import { shown } from '../../impl/options.ts';
import type { AcquireResult } from '../../impl/leaseLock.ts';
import type { Lease, LeaseHandle } from '../../impl/lease.ts';
import type { Exception } from 'node-zookeeper-client';
import { TcpProxy } from '../../conformance/env/proxy.ts';
import { ManualClock, sharedZookeeper } from './servers.ts';
import { systemClock } from '../../impl/clock.ts';

/**
 * impl/zookeeper against one real one-member ZooKeeper (every znode under
 * the test's own root): contenders and their create zxids as tokens, the
 * line and its watch, validity on the client's clock, the fenced store's
 * versioned writes, and the typed errors. Where a reply must be one a
 * healthy ensemble does not give on demand (a round trip that takes the
 * whole ttl, a zxid past 2^63-1, a failed call), the real node is wrapped
 * and its reply changed; to hold every reply back the member is paused
 * (SIGSTOP) for a moment while a test clock runs the bounds out.
 */
const server = sharedZookeeper();
const nodes: ZookeeperNode[] = [];
// Unique per run: under `npm run mutation` one ensemble serves every run of this file.
const run = `${process.pid}-${Date.now().toString(36)}`;
let roots = 0;
const MAX = 2n ** 63n - 1n;
/** Each test takes well under a second: a mutant that makes one hang fails it soon (under `npm run mutation` too). */
const QUICK = { timeout: 15_000 };

afterEach(() => {
  vi.restoreAllMocks();
});
afterAll(() => {
  for (const n of nodes) n.close();
});

/**
 * Every call is also bounded in real time by requestTimeoutMs: the tests' calls get a bound a loaded machine's ensemble
 * meets (a 1 MiB write, a JVM pause), unless a test is about the bound ('library-default': the node's own default).
 */
const TEST_BOUND_MS = 20_000;
function node(clock = new ManualClock(), requestTimeoutMs: number | 'library-default' = TEST_BOUND_MS): ZookeeperNode {
  const n = zookeeperNode({ connectString: server().connectString, auth: server().auth, clock, ...(requestTimeoutMs !== 'library-default' ? { requestTimeoutMs } : {}) });
  nodes.push(n);
  return n;
}
function root(): string {
  return `/t${run}-${++roots}`;
}
function granted(r: AcquireResult): Lease {
  if (r.kind !== 'granted') throw new Error(`expected granted, got ${JSON.stringify(r)}`);
  return r.lease;
}
async function thrown(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    (v) => new Error(`expected a rejection, got ${String(v)}`),
    (e: unknown) => e,
  );
}
/** Bounded wait for a condition on the server (a close or a deletion is sent without being waited for). */

/** Whether every thread of process `pid` is stopped (state T). */
async function allStopped(pid: number): Promise<boolean> {
  const tasks = await readdir(`/proc/${pid}/task`);
  const states = await Promise.all(tasks.map(async (t) => (await readFile(`/proc/${pid}/task/${t}/stat`, 'utf8')).replace(/^.*\) /s, '')[0]));
  return states.every((state) => state === 'T' || state === 't');
}

/** The node's calls, counted, each replaceable. */
interface Spied {
  readonly node: ZookeeperNode;
  readonly calls: Record<string, number>;
  readonly watches: Array<{ path: string; waitMs: number }>;
}
function spied(real: ZookeeperNode, over: Partial<ZookeeperNode> = {}): Spied {
  const calls: Record<string, number> = {};
  const watches: Array<{ path: string; waitMs: number }> = [];
  const wrapped = { ...real, ...over } as ZookeeperNode;
  const out = {} as Record<string, unknown>;
  for (const [name, fn] of Object.entries(wrapped)) {
    out[name] = (...args: unknown[]): unknown => {
      calls[name] = (calls[name] ?? 0) + 1;
      if (name === 'watchGone') watches.push({ path: args[1] as string, waitMs: args[2] as number });
      return (fn as (...a: unknown[]) => unknown)(...args);
    };
  }
  return { node: out as unknown as ZookeeperNode, calls, watches };
}

/** Retry sleeps (short delays) pass at once; call bounds (2000 ms) only when the test advances. */
class SleepsAtOnce extends ManualClock {
  override schedule(atMs: number, fn: () => void): () => void {
    const cancel = super.schedule(atMs, fn);
    const ms = atMs - this.now();
    if (ms > 0 && ms < 1000) queueMicrotask(() => this.advance(ms));
    return cancel;
  }
}

describe('zxid', () => {
  it('reads the 8 bytes unsigned: a top bit set is past 2^63-1 (refused by the lock), never a negative token', () => {
    expect(zxid(Buffer.from('0000000100000002', 'hex'))).toBe(2n ** 32n + 2n);
    expect(zxid(Buffer.from('7fffffffffffffff', 'hex'))).toBe(MAX);
    expect(zxid(Buffer.from('8000000000000001', 'hex'))).toBe(MAX + 2n);
  });
});

describe('paths', QUICK, () => {
  it('percent-encodes resources (and dots) under the root; sequences are the signed number after the prefix\'s dash, in line across the wrap', () => {
    expect(DEFAULT_ROOT).toBe('/lockcheck');
    expect(CONTENDER).toBe('c-');
    expect(lockDir('a/b.c é')).toBe('/lockcheck/lock/a%2Fb%2Ec%20%C3%A9');
    expect(cellPath('..')).toBe('/lockcheck/cell/%2E%2E');
    expect(lockDir('x', '/r')).toBe('/r/lock/x');
    expect(cellPath('x', '/r')).toBe('/r/cell/x');
    expect(sequenceOf('c-0000000012')).toBe(12);
    expect(sequenceOf('a-b-0000000003')).toBe(3);
    // Past 2^31-1 the counter wraps: %010d of a negative int.
    expect(sequenceOf('c--2147483648')).toBe(-(2 ** 31));
    expect(sequenceOf('c--000000001')).toBe(-1);
    expect(inLine(['c--2147483647', 'c--2147483648', 'c-2147483646', 'c-2147483647'])).toEqual(['c-2147483646', 'c-2147483647', 'c--2147483648', 'c--2147483647']);
  });
});

describe('ZookeeperLock (real ZooKeeper)', QUICK, () => {
  it('grants with the contender as owner and its create zxid as token; denies while held leaving nothing behind; release deletes, closes and fires released', async () => {
    const clock = new ManualClock();
    const r = root();
    const s = spied(node(clock));
    const lock = new ZookeeperLock({ node: s.node, clock, root: r });
    expect(lock.clockOf()).toBe(clock);
    const lease = granted(await lock.acquire('a.b/c', { ttlMs: 30_001 }));
    expect(lease.resource).toBe('a.b/c');
    expect(lease.owner).toBe(`${r}/lock/a%2Eb%2Fc/c-0000000000`);
    // validity = start + ttl - (ceil(0.01 * 30001) + 2)
    expect(lease.validUntilMs).toBe(1000 + 30_001 - 303);
    expect(lock.trackedLeases).toBe(1);
    const look = node();
    const probe = await look.openSession(5000);
    expect(await look.touch(probe, lease.owner)).toBe(lease.token);
    expect(typeof lease.token).toBe('bigint');
    expect(s.calls).toEqual({ openSession: 1, contenders: 2, enqueue: 1 });

    const other = spied(node(clock));
    const second = new ZookeeperLock({ node: other.node, clock, root: r });
    expect(await second.acquire('a.b/c', { ttlMs: 30_001 })).toEqual({ kind: 'denied', reason: 'held' });
    expect(other.calls).toEqual({ openSession: 1, contenders: 1, closeSession: 1 });
    expect(await look.contenders(probe, lockDir('a.b/c', r))).toEqual(['c-0000000000']);
    expect(second.trackedLeases).toBe(0);

    const signal = lease.signal;
    await lock.release(lease);
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBeInstanceOf(LeaseLostError);
    expect((signal.reason as LeaseLostError).reason).toBe('released');
    expect(lock.trackedLeases).toBe(0);
    expect(s.calls['deleteOwned']).toBe(1);
    expect(s.calls['closeSession']).toBe(1);
    expect(await look.contenders(probe, lockDir('a.b/c', r))).toEqual([]);
    await lock.release(lease);
    expect(s.calls['deleteOwned']).toBe(1);
    expect(s.calls['closeSession']).toBe(1);
    expect(await lock.extend(lease, 1000)).toEqual({ kind: 'not-extended', reason: 'expired' });

    const again = granted(await second.acquire('a.b/c', { ttlMs: 30_001 }));
    expect(again.owner).toBe(`${r}/lock/a%2Eb%2Fc/c-0000000001`);
    expect(again.token).toBeGreaterThan(lease.token);
    await second.release(again);
    await look.closeSession(probe);
  });

  it('the default root is /lockcheck; the margins are the options given', async () => {
    const clock = new ManualClock();
    const n = node(clock);
    const resource = `default-${run}`;
    const lock = new ZookeeperLock({ node: n, clock, driftFactor: 0.5, clockMarginMs: 10_000, safetyMarginMs: 100 });
    const lease = granted(await lock.acquire(resource, { ttlMs: 30_001 }));
    expect(lease.owner).toBe(`/lockcheck/lock/${resource}/c-0000000000`);
    // 30001 - (ceil(15000.5) + 10000)
    expect(lease.validUntilMs).toBe(1000 + 30_001 - 25_001);
    const signal = lease.signal;
    clock.advance(5000 - 101);
    expect(signal.aborted).toBe(false);
    clock.advance(1);
    expect(signal.aborted).toBe(true);
    expect((signal.reason as LeaseLostError).reason).toBe('expired');
    await lock.release(lease);
  });

  it('a safetyMarginMs that leaves no usable time is validity-exhausted, the contender gone; one that leaves a millisecond is a grant', async () => {
    const clock = new ManualClock();
    const r = root();
    // validity 30001 - (ceil(15000.5) + 10000) = 5000 ms: a margin of 5000 leaves none, 4999 leaves 1 ms.
    const none = new ZookeeperLock({ node: node(clock), clock, root: r, driftFactor: 0.5, clockMarginMs: 10_000, safetyMarginMs: 5000 });
    expect(await none.acquire('m', { ttlMs: 30_001 })).toEqual({ kind: 'denied', reason: 'validity-exhausted' });
    expect(none.trackedLeases).toBe(0);
    const one = new ZookeeperLock({ node: node(clock), clock, root: r, driftFactor: 0.5, clockMarginMs: 10_000, safetyMarginMs: 4999 });
    // Granted at once: the denied contender left nothing ahead of it.
    const lease = granted(await one.acquire('m', { ttlMs: 30_001 }));
    expect(lease.signal.aborted).toBe(false);
    clock.advance(1);
    expect(lease.signal.aborted).toBe(true);
    await one.release(lease);
  });

  it('refuses bad options and input with typed errors naming them, before any call', async () => {
    const clock = new ManualClock();
    const s = spied(node(clock));
    // Not a string, even one that reads as a path, is refused.
    for (const bad of ['relative', '/trailing/', '/', '//x', '/a//b', 42, { toString: () => '/a' }]) {
      const e = refused(() => new ZookeeperLock({ node: s.node, clock, root: bad as string }));
      expect(e.code).toBe('invalid-config');
      expect(e.message).toBe(`invalid-config: root must be an absolute znode path without a trailing slash, got ${shown(bad)}`);
    }
    for (const reserved of ['/zookeeper', '/zookeeper/quota', '/zookeeper/x/y']) {
      expect(refused(() => new ZookeeperLock({ node: s.node, clock, root: reserved })).message).toBe(`invalid-config: root must not be ZooKeeper's own /zookeeper subtree, got ${shown(reserved)}`);
    }
    expect(() => new ZookeeperLock({ node: s.node, clock, root: '/zookeeperish' })).not.toThrow();
    expect(refused(() => new ZookeeperLock({ node: s.node, clock, driftFactor: 1 })).message).toBe('invalid-config: driftFactor must be in [0, 1), got 1');
    expect(refused(() => new ZookeeperLock({ node: s.node, clock, clockMarginMs: 10_001 })).message).toBe('invalid-config: clockMarginMs must be an integer in [0, 10000], got 10001');
    expect(refused(() => new ZookeeperLock({ node: s.node, clock, safetyMarginMs: -1 })).code).toBe('invalid-config');
    expect(refused(() => new ZookeeperLock({ node: { openSession: () => Promise.reject(new Error('not called')) } as unknown as ZookeeperNode, clock })).message).toBe(
      'invalid-config: node must be a ZookeeperNode (with openSession(), contenders(), enqueue(), touch(), watchGone(), deleteOwned(), closeSession()), got an object without contenders(), enqueue(), touch(), watchGone(), deleteOwned(), closeSession()',
    );
    const lock = new ZookeeperLock({ node: s.node, clock, root: '/a/b' });
    const bad = async (p: Promise<unknown>, code: string, message: string): Promise<void> => {
      const e = await thrown(p);
      expect(e).toBeInstanceOf(InvalidInputError);
      expect((e as InvalidInputError).code).toBe(code);
      expect((e as Error).message).toBe(`${code}: ${message}`);
    };
    await bad(lock.acquire('', { ttlMs: 1000 }), 'invalid-resource', 'resource must be a non-empty string of at most 256 characters');
    await bad(lock.acquire('x', { ttlMs: 0 }), 'invalid-ttl', 'ttl must be an integer number of ms in [1, 2147483647], got 0');
    // No options at all: a typed refusal naming them, not a TypeError from reading ttlMs of undefined.
    for (const options of [undefined, null, 5000]) await bad(lock.acquire('x', options as never), 'invalid-config', `acquire options must be an object, got ${String(options)}`);
    for (const retries of [-1, 101, 1.5]) await bad(lock.acquire('x', { ttlMs: 1000, retries }), 'precondition', `retries must be an integer in [0, 100], got ${retries}`);
    await bad(lock.acquire('x', { ttlMs: 1000, retryDelayMs: -1 }), 'invalid-duration', 'retryDelayMs must be an integer number of ms in [0, 2147483647], got -1');
    await bad(lock.acquire('x', { ttlMs: 1000, retryJitterMs: -1 }), 'invalid-duration', 'retryJitterMs must be an integer number of ms in [0, 2147483647], got -1');
    await bad(lock.acquire('x', { ttlMs: 1000, waitMs: -1 }), 'invalid-duration', 'waitMs must be an integer number of ms in [0, 2147483647], got -1');
    await bad(lock.extend({} as Lease, 0), 'invalid-ttl', 'ttl must be an integer number of ms in [1, 2147483647], got 0');
    expect(s.calls).toEqual({});
  });

  it('retries a denial `retries` times, sleeping retryDelayMs plus the jitter drawn between', async () => {
    const clock = new SleepsAtOnce();
    const r = root();
    const holder = new ZookeeperLock({ node: node(clock), clock, root: r });
    const held = granted(await holder.acquire('busy', { ttlMs: 30_000 }));
    const s = spied(node(clock));
    const lock = new ZookeeperLock({ node: s.node, clock, root: r });
    vi.spyOn(Math, 'random').mockReturnValue(0.5);
    expect(await lock.acquire('busy', { ttlMs: 5000, retries: 2, retryDelayMs: 10, retryJitterMs: 5 })).toEqual({ kind: 'denied', reason: 'held' });
    expect(s.calls['openSession']).toBe(3);
    // floor(0.5 * (5 + 1)) = 3
    expect(clock.delays.filter((d) => d < 1000)).toEqual([13, 13]);
    // A grant ends the retries: 100 is allowed.
    expect((await lock.acquire('free', { ttlMs: 5000, retries: 100 })).kind).toBe('granted');
    expect(s.calls['openSession']).toBe(4);
    await holder.release(held);
  });

  it('with waitMs, waits for its predecessor only (a third of the session at most), counts the lease from its last renewal, and is granted at the release', async () => {
    const clock = new ManualClock();
    const r = root();
    const holder = new ZookeeperLock({ node: node(clock), clock, root: r });
    const first = granted(await holder.acquire('line', { ttlMs: 30_000 }));
    const real = node(clock);
    let watched = (): void => undefined;
    const s = spied(real, {
      watchGone: async (session, path, waitMs) => {
        clock.advance(100);
        const gone = real.watchGone(session, path, waitMs);
        watched();
        return gone;
      },
    });
    const lock = new ZookeeperLock({ node: s.node, clock, root: r });
    const inLine = new Promise<void>((resolve) => (watched = resolve));
    const waiting = lock.acquire('line', { ttlMs: 30_000, waitMs: 20_000 });
    await inLine;
    expect(s.watches).toEqual([{ path: first.owner, waitMs: 10_000 }]);
    await holder.release(first);
    const second = granted(await waiting);
    expect(second.owner).toBe(`${r}/lock/line/c-0000000001`);
    expect(second.token).toBeGreaterThan(first.token);
    // renewed at 1100 (the touch after the watch), not at the start (1000)
    expect(second.validUntilMs).toBe(1100 + 30_000 - 302);
    expect(s.calls['touch']).toBe(1);
    await lock.release(second);
  });

  it('a line past the sequence wrap (2^31-1 to -2^31) is read in creation order: the contender after the holder waits for it, not ahead of it', async () => {
    const clock = new ManualClock();
    const r = root();
    // Names as ZooKeeper gives them once the directory's counter has wrapped (%010d of a signed 32-bit int):
    // the real c-0000000000 reads c--2147483648, c-0000000001 reads c--2147483647.
    const wrap = (name: string): string => `c-${Number(name.slice(2)) - 2 ** 31}`;
    const unwrap = (name: string): string => `c-${String(Number(name.slice(2)) + 2 ** 31).padStart(10, '0')}`;
    const onPath = (path: string, f: (name: string) => string): string => `${path.slice(0, path.lastIndexOf('/'))}/${f(path.slice(path.lastIndexOf('/') + 1))}`;
    let watched = (): void => undefined;
    const wrapped = (real: ZookeeperNode): ZookeeperNode =>
      spied(real, {
        contenders: async (session, dir) => (await real.contenders(session, dir)).map(wrap),
        enqueue: async (session, dir) => {
          const own = await real.enqueue(session, dir);
          return { ...own, name: wrap(own.name) };
        },
        touch: (session, path) => real.touch(session, onPath(path, unwrap)),
        watchGone: (session, path, waitMs) => {
          const gone = real.watchGone(session, onPath(path, unwrap), waitMs);
          watched();
          return gone;
        },
        deleteOwned: (session, path, czxid) => real.deleteOwned(session, onPath(path, unwrap), czxid),
      }).node;
    const holder = new ZookeeperLock({ node: wrapped(node(clock)), clock, root: r });
    const first = granted(await holder.acquire('wrap', { ttlMs: 30_000 }));
    expect(first.owner).toBe(`${r}/lock/wrap/c--2147483648`);
    const lock = new ZookeeperLock({ node: wrapped(node(clock)), clock, root: r });
    const waits = new Promise<string>((resolve) => (watched = () => resolve('waits')));
    const waiting = lock.acquire('wrap', { ttlMs: 30_000, waitMs: 20_000 });
    // Read by value (the digits after the last dash), c--2147483647 came before c--2147483648: granted while held.
    expect(await Promise.race([waits, waiting.then((a) => `answered ${a.kind}`)])).toBe('waits');
    await holder.release(first);
    const second = granted(await waiting);
    expect(second.owner).toBe(`${r}/lock/wrap/c--2147483647`);
    expect(second.token).toBeGreaterThan(first.token);
    await lock.release(second);
  });

  it('with waitMs, is denied once it has waited that long (its contender removed with its session); a line read out of order is sorted', async () => {
    const clock = new ManualClock();
    const r = root();
    const holder = new ZookeeperLock({ node: node(clock), clock, root: r });
    const first = granted(await holder.acquire('wait', { ttlMs: 30_000 }));
    const real = node(clock);
    const s = spied(real, {
      // Ours first: only sorting by sequence puts the holder's ahead.
      contenders: async (session, dir) => (await real.contenders(session, dir)).sort().reverse(),
      // Nothing is deleted: each watch ends after 20 ms on the clock.
      watchGone: async () => {
        clock.advance(20);
      },
    });
    const lock = new ZookeeperLock({ node: s.node, clock, root: r });
    expect(await lock.acquire('wait', { ttlMs: 30_000, waitMs: 50 })).toEqual({ kind: 'denied', reason: 'held' });
    // Each watch lasts what is left of waitMs; at 60 ms waited, the attempt gives up.
    expect(s.watches).toEqual([50, 30, 10].map((waitMs) => ({ path: first.owner, waitMs })));
    expect(s.calls['closeSession']).toBe(1);
    // Waited exactly waitMs: denied then, not after a watch of 0 ms more.
    const exact = spied(real, {
      watchGone: async () => {
        clock.advance(25);
      },
    });
    expect(await new ZookeeperLock({ node: exact.node, clock, root: r }).acquire('wait', { ttlMs: 30_000, waitMs: 50 })).toEqual({ kind: 'denied', reason: 'held' });
    expect(exact.watches).toEqual([50, 25].map((waitMs) => ({ path: first.owner, waitMs })));
    const look = node();
    const probe = await look.openSession(5000);
    await eventually(async () => (await look.contenders(probe, lockDir('wait', r))).length === 1, 'the waiter left the line');
    expect(await look.contenders(probe, lockDir('wait', r))).toEqual(['c-0000000000']);
    await look.closeSession(probe);
    await holder.release(first);
  });

  it('a contender missing from the line is a timeout; failed calls deny with no-quorum; a timed-out call is timed-out; each closes its session', async () => {
    const clock = new ManualClock();
    const r = root();
    const real = node(clock);
    const missing = spied(real, { contenders: async () => ['c-9999999999'] });
    expect(await new ZookeeperLock({ node: missing.node, clock, root: r }).acquire('gone', { ttlMs: 3000, waitMs: 10 })).toEqual({ kind: 'timed-out' });
    expect(missing.calls['closeSession']).toBe(1);
    const noSession = spied(real, { openSession: () => Promise.reject(new UnavailableError('down')) });
    expect(await new ZookeeperLock({ node: noSession.node, clock, root: r }).acquire('x', { ttlMs: 3000 })).toEqual({ kind: 'denied', reason: 'no-quorum' });
    expect(noSession.calls['closeSession']).toBeUndefined();
    // A connect that timed out: denied before the ttl has passed on the client's clock, a give-up (timed-out) at it.
    const slowConnect = (ms: number) =>
      spied(real, {
        openSession: () => {
          clock.advance(ms);
          return Promise.reject(new TimeoutError('zookeeper connect', ms));
        },
      });
    expect(await new ZookeeperLock({ node: slowConnect(2999).node, clock, root: r }).acquire('x', { ttlMs: 3000 })).toEqual({ kind: 'denied', reason: 'no-quorum' });
    expect(await new ZookeeperLock({ node: slowConnect(3000).node, clock, root: r }).acquire('x', { ttlMs: 3000 })).toEqual({ kind: 'timed-out' });
    const failing = spied(real, { contenders: () => Promise.reject(new UnavailableError('down')) });
    expect(await new ZookeeperLock({ node: failing.node, clock, root: r }).acquire('x', { ttlMs: 3000 })).toEqual({ kind: 'denied', reason: 'no-quorum' });
    expect(failing.calls['closeSession']).toBe(1);
    const late = spied(real, { enqueue: () => Promise.reject(new TimeoutError('zookeeper create', 5)) });
    expect(await new ZookeeperLock({ node: late.node, clock, root: r }).acquire('x', { ttlMs: 3000 })).toEqual({ kind: 'timed-out' });
    expect(late.calls['closeSession']).toBe(1);
  });

  it('a refusal no retry fixes is thrown, not read as no-quorum: from the connect, the line or the create (session closed, no retry), and from extend', async () => {
    const clock = new ManualClock();
    const r = root();
    const real = node(clock);
    const refused = (): ServerRefusedError => new ServerRefusedError('permission', 'NO_AUTH', 'zookeeper create: NO_AUTH');
    const authentication = new ConnectionConfigError('authentication', 'zookeeper connect: AUTH_FAILED');
    const connect = spied(real, { openSession: () => Promise.reject(authentication) });
    expect(await thrown(new ZookeeperLock({ node: connect.node, clock, root: r }).acquire('x', { ttlMs: 3000, retries: 5 }))).toBe(authentication);
    expect(connect.calls['openSession']).toBe(1);
    for (const call of ['contenders', 'enqueue'] as const) {
      const failing = spied(real, { [call]: () => Promise.reject(refused()) });
      const e = await thrown(new ZookeeperLock({ node: failing.node, clock, root: r }).acquire('x', { ttlMs: 3000, retries: 5 }));
      expect(e).toBeInstanceOf(ServerRefusedError);
      expect(failing.calls['openSession']).toBe(1);
      expect(failing.calls['closeSession']).toBe(1);
    }
    const touchRefused = spied(real, { touch: () => Promise.reject(refused()) });
    const lock = new ZookeeperLock({ node: touchRefused.node, clock, root: r });
    const lease = granted(await lock.acquire('ext', { ttlMs: 3000 }));
    expect(await thrown(lock.extend(lease, 3000))).toBeInstanceOf(ServerRefusedError);
    await lock.release(lease);
  });

  it('a create zxid past 2^63-1 is a TokenOverflowError (session closed); 2^63-1 itself is a token', async () => {
    const clock = new ManualClock();
    const r = root();
    const real = node(clock);
    const over = spied(real, { enqueue: async (session, dir) => ({ ...(await real.enqueue(session, dir)), czxid: MAX + 1n }) });
    const e = await thrown(new ZookeeperLock({ node: over.node, clock, root: r }).acquire('top', { ttlMs: 3000 }));
    expect(e).toBeInstanceOf(TokenOverflowError);
    expect((e as TokenOverflowError).resource).toBe('top');
    expect(over.calls['closeSession']).toBe(1);
    const max = spied(real, { enqueue: async (session, dir) => ({ ...(await real.enqueue(session, dir)), czxid: MAX }) });
    const lock = new ZookeeperLock({ node: max.node, clock, root: r });
    await eventually(async () => (await real.children(lockDir('top', r))).length === 0, 'the overflowing contender went with its session');
    const lease = granted(await lock.acquire('top', { ttlMs: 3000 }));
    expect(lease.token).toBe(MAX);
    await lock.release(lease);
  });

  it('the time the calls took counts against the lease: the whole session is timed-out, down to validity is validity-exhausted', async () => {
    const clock = new ManualClock();
    const r = root();
    const real = node(clock);
    const slow = (ms: number): Spied =>
      spied(real, {
        enqueue: async (session, dir) => {
          const c = await real.enqueue(session, dir);
          clock.advance(ms);
          return c;
        },
      });
    const outcome = async (ms: number, resource: string): Promise<AcquireResult> => {
      const s = slow(ms);
      const result = await new ZookeeperLock({ node: s.node, clock, root: r }).acquire(resource, { ttlMs: 3000 });
      if (result.kind !== 'granted') expect(s.calls['closeSession']).toBe(1);
      return result;
    };
    expect(await outcome(3000, 'a')).toEqual({ kind: 'timed-out' });
    // validity = 3000 - 32: at exactly that it is exhausted
    expect(await outcome(2968, 'b')).toEqual({ kind: 'denied', reason: 'validity-exhausted' });
    const start = clock.now();
    const lease = granted(await outcome(2967, 'c'));
    expect(lease.validUntilMs).toBe(start + 2968);
  });

  it("a failed attempt answers only once its session is closed: its contender is out of line, and the next acquire at once is granted, never held by it", async () => {
    const clock = new ManualClock();
    const r = root();
    const real = node(clock);
    // When each close was answered, against when each attempt answered: a close left in the background lands after.
    const order: string[] = [];
    const closing = (over: Partial<ZookeeperNode>): ZookeeperNode =>
      spied(real, {
        ...over,
        closeSession: async (session) => {
          await real.closeSession(session);
          order.push('closed');
        },
      }).node;
    const slowCreate = (ms: number): Partial<ZookeeperNode> => ({
      enqueue: async (session, dir) => {
        const c = await real.enqueue(session, dir);
        clock.advance(ms);
        return c;
      },
    });
    const holder = new ZookeeperLock({ node: node(clock), clock, root: r });
    const next = new ZookeeperLock({ node: node(clock), clock, root: r });
    const attempts: Array<readonly [string, ZookeeperLock, ZookeeperAcquireOptions, AcquireResult, boolean]> = [
      // Made its contender, then the session's whole ttl was gone: timed-out.
      ['timed-out', new ZookeeperLock({ node: closing(slowCreate(3000)), clock, root: r }), { ttlMs: 3000 }, { kind: 'timed-out' }, false],
      // Made its contender, then no validity was left.
      ['validity-exhausted', new ZookeeperLock({ node: closing(slowCreate(2968)), clock, root: r }), { ttlMs: 3000 }, { kind: 'denied', reason: 'validity-exhausted' }, false],
      // Made its contender, then the line could not be read: no-quorum.
      ['no-quorum', new ZookeeperLock({ node: closing({ contenders: () => Promise.reject(new UnavailableError('down')) }), clock, root: r }), { ttlMs: 3000, waitMs: 10 }, { kind: 'denied', reason: 'no-quorum' }, false],
      // Waited in line behind a holder until waitMs: held; the holder then releases.
      ['held after waiting', new ZookeeperLock({ node: closing({
          watchGone: async () => {
            clock.advance(20);
          },
        }), clock, root: r }), { ttlMs: 3000, waitMs: 30 }, { kind: 'denied', reason: 'held' }, true],
    ];
    for (const [name, lock, options, expected, behindHolder] of attempts) {
      order.length = 0;
      const held = behindHolder ? granted(await holder.acquire('f', { ttlMs: 30_000 })) : null;
      expect(await lock.acquire('f', options), name).toEqual(expected);
      expect(order, name).toEqual(['closed']);
      if (held !== null) expect(await holder.release(held)).toBe(true);
      const lease = granted(await next.acquire('f', { ttlMs: 30_000 }));
      expect(await next.release(lease)).toBe(true);
    }
  });

  it('the lease is the session the ensemble negotiated (a shorter one, or the maximum); the session ending fires expired', async () => {
    const clock = new ManualClock();
    const r = root();
    const real = node(clock);
    let end = (): void => undefined;
    const short = spied(real, {
      openSession: async (ms) => {
        const session = await real.openSession(ms);
        return { ...session, timeoutMs: 500, expired: new Promise<void>((resolve) => (end = resolve)) } as ZookeeperSession;
      },
    });
    const lock = new ZookeeperLock({ node: short.node, clock, root: r });
    const lease = granted(await lock.acquire('short', { ttlMs: 30_000 }));
    expect(lease.validUntilMs).toBe(1000 + 500 - 7);
    clock.advance(100);
    expect(await lock.extend(lease, 30_000)).toEqual({ kind: 'extended', validUntilMs: 1100 + 493 });
    const signal = lease.signal;
    end();
    await Promise.resolve();
    expect(signal.aborted).toBe(true);
    expect((signal.reason as LeaseLostError).reason).toBe('expired');
    await lock.release(lease);

    const long = new ZookeeperLock({ node: real, clock, root: r });
    const capped = granted(await long.acquire('long', { ttlMs: 70_000 }));
    expect(capped.validUntilMs).toBe(clock.now() + 60_000 - 602);
    await long.release(capped);
  });

  it('extend renews for the granted session from its start; a lost, released or foreign lease is expired; a failed or late round trip is no-quorum; a deleted contender loses the lease', async () => {
    const clock = new ManualClock();
    const r = root();
    const real = node(clock);
    const realTouch: ZookeeperNode['touch'] = (session, path) => real.touch(session, path);
    let touch = realTouch;
    const s = spied(real, { touch: (session, path) => touch(session, path) });
    const lock = new ZookeeperLock({ node: s.node, clock, root: r });
    const lease = granted(await lock.acquire('ext', { ttlMs: 30_001 }));
    clock.advance(500);
    // The ttl asked for is checked, but the session's timeout is what a renewal lasts.
    expect(await lock.extend(lease, 1)).toEqual({ kind: 'extended', validUntilMs: 1500 + 30_001 - 303 });
    expect(lease.validUntilMs).toBe(1500 + 29_698);

    touch = () => Promise.reject(new UnavailableError('down'));
    expect(await lock.extend(lease, 30_001)).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
    expect((lease as LeaseHandle).lost).toBe(false);
    // The round trip took the whole validity: a ms before the new deadline it is extended, at exactly it is no-quorum.
    const late = (ms: number): ZookeeperNode['touch'] => async (session, path) => {
      const c = await real.touch(session, path);
      clock.advance(ms);
      return c;
    };
    touch = late(29_697);
    const before = clock.now();
    expect(await lock.extend(lease, 30_001)).toEqual({ kind: 'extended', validUntilMs: before + 29_698 });
    // Released while the round trip was out: no-quorum.
    touch = async (session, path) => {
      void lock.release(lease);
      return real.touch(session, path);
    };
    expect(await lock.extend(lease, 30_001)).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
    touch = realTouch;
    const slow = granted(await lock.acquire('ext-late', { ttlMs: 30_001 }));
    touch = late(29_698);
    expect(await lock.extend(slow, 30_001)).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
    await lock.release(slow);

    touch = realTouch;
    const gone = granted(await lock.acquire('ext-gone', { ttlMs: 30_001 }));
    touch = async () => gone.token + 1n;
    const signal = gone.signal;
    expect(await lock.extend(gone, 30_001)).toEqual({ kind: 'not-extended', reason: 'expired' });
    expect(signal.aborted).toBe(true);
    expect((signal.reason as LeaseLostError).reason).toBe('expired');
    const touches = s.calls['touch'];
    expect(await lock.extend(gone, 30_001)).toEqual({ kind: 'not-extended', reason: 'expired' });
    expect(s.calls['touch']).toBe(touches);
    await lock.release(gone);

    touch = realTouch;
    const stale = granted(await lock.acquire('ext-stale', { ttlMs: 30_001 }));
    clock.advance(29_698);
    expect(await lock.extend(stale, 30_001)).toEqual({ kind: 'not-extended', reason: 'expired' });
    expect(s.calls['touch']).toBe(touches);
    const foreign = granted(await new ZookeeperLock({ node: real, clock, root: r }).acquire('ext-foreign', { ttlMs: 30_001 }));
    expect(await lock.extend(foreign, 30_001)).toEqual({ kind: 'not-extended', reason: 'expired' });
    await lock.release(stale);
  });

  it("a contender deleted by another session (an operator's delete), or replaced by a znode of the same name, fires the signal at the deletion (the grant's watch) and is expired at the next extend; the release leaves the other's znode", async () => {
    const clock = new ManualClock();
    const r = root();
    const real = node(clock);
    const watching = new ZookeeperLock({ node: real, clock, root: r });
    // Without the grant's watch: what extend alone sees.
    const unwatched: ZookeeperNode = { ...real, enqueue: async (session, dir) => ({ ...(await real.enqueue(session, dir)), deleted: undefined }) };
    const blind = new ZookeeperLock({ node: unwatched, clock, root: r });
    const raw = zookeeper.createClient(server().connectString, { retries: 0 });
    for (const a of server().auth) raw.addAuthInfo(a.scheme, Buffer.from(a.credentials));
    const done = <T>(work: (cb: (e: Error | Exception | null, v?: T) => void) => void): Promise<T | undefined> =>
      new Promise((resolve, reject) => work((e, v) => (e ? reject(e) : resolve(v))));
    try {
      await new Promise<void>((resolve) => {
        raw.once('connected', () => resolve());
        raw.connect();
      });
      const acl = [new zookeeper.ACL(zookeeper.Permission.ALL, new zookeeper.Id('auth', ''))];
      for (const [lock, replaced] of [[watching, false], [watching, true], [blind, false], [blind, true]] as const) {
        const resource = `${lock === watching ? 'watched' : 'blind'}-${replaced ? 'replaced' : 'deleted'}`;
        const lease = granted(await lock.acquire(resource, { ttlMs: 30_000 }));
        expect((await lock.extend(lease, 30_000)).kind).toBe('extended');
        const signal = lease.signal;
        // Another client's setData first uses up the one-shot watch: it is armed again, and the deletion still fires it.
        if (!replaced) await done((cb) => raw.setData(lease.owner, Buffer.from('edited'), -1, cb));
        await done((cb) => raw.remove(lease.owner, -1, cb));
        if (replaced) await done<string>((cb) => raw.create(lease.owner, Buffer.alloc(0), acl, zookeeper.CreateMode.PERSISTENT, cb));
        // No extend yet, no clock moved: the watch the grant set fires the signal (bounded wait for the event).
        if (lock === watching) await eventually(() => Promise.resolve(signal.aborted), `${resource}: the signal fires at the deletion`);
        else expect(signal.aborted, resource).toBe(false);
        expect(await lock.extend(lease, 30_000), resource).toEqual({ kind: 'not-extended', reason: 'expired' });
        expect(signal.reason, resource).toMatchObject({ reason: 'expired' });
        // Known: the ensemble answered the delete, and nothing of the lease is in line (as Redis's compare-and-delete
        // that finds another owner); `false` is for a delete with no answer.
        expect(await lock.release(lease), resource).toBe(true);
        // The other's znode stays: the release deletes only a contender with our create zxid.
        expect(await done<unknown>((cb) => raw.exists(lease.owner, cb)).then((stat) => stat !== null), resource).toBe(replaced);
        if (replaced) await done((cb) => raw.remove(lease.owner, -1, cb));
      }
    } finally {
      raw.close();
    }
  });

  it('release never throws for ZooKeeper failures and still closes the session', async () => {
    const clock = new ManualClock();
    const r = root();
    const real = node(clock);
    const s = spied(real, { deleteOwned: () => Promise.reject(new UnavailableError('down')), closeSession: () => Promise.reject(new UnavailableError('down')) });
    const lock = new ZookeeperLock({ node: s.node, clock, root: r });
    const lease = granted(await lock.acquire('rel', { ttlMs: 30_000 }));
    await lock.release(lease);
    expect(s.calls['closeSession']).toBe(1);
    expect((lease as LeaseHandle).lost).toBe(true);
    // Denials close their sessions through the same path.
    const other = new ZookeeperLock({ node: s.node, clock, root: r });
    const held = granted(await new ZookeeperLock({ node: real, clock, root: r }).acquire('rel-2', { ttlMs: 30_000 }));
    expect(await other.acquire('rel-2', { ttlMs: 30_000 })).toEqual({ kind: 'denied', reason: 'held' });
    expect(s.calls['closeSession']).toBe(2);
    await new Promise((resolve) => setImmediate(resolve));
    expect((held as LeaseHandle).lost).toBe(false);
  });

  it('forgets lost leases once it holds 64 (not before), keeps the held ones, and then waits for twice what it kept', async () => {
    const clock = new ManualClock();
    const r = root();
    const lock = new ZookeeperLock({ node: node(clock), clock, root: r });
    const leases: Lease[] = [];
    const take = async (resource: string, ttlMs: number): Promise<void> => {
      leases.push(granted(await lock.acquire(resource, { ttlMs })));
    };
    await take('p0', 1000);
    clock.advance(1000);
    // p0 is lost, but below 64 tracked leases nothing is forgotten.
    for (let i = 1; i < 24; i++) await take(`p${i}`, 10_000);
    for (let i = 24; i < 64; i++) await take(`p${i}`, 60_000);
    expect(lock.trackedLeases).toBe(64);
    clock.advance(10_000);
    // 24 lost, 40 held: the 65th grant forgets the lost ones only, and the next pruning is at 80.
    await take('c', 60_000);
    expect(lock.trackedLeases).toBe(41);
    for (let i = 0; i < 23; i++) await take(`d${i}`, 10_000);
    expect(lock.trackedLeases).toBe(64);
    clock.advance(10_000);
    await take('e', 60_000);
    expect(lock.trackedLeases).toBe(65);
    for (const l of leases) await lock.release(l);
    expect(lock.trackedLeases).toBe(0);
  }, 30_000);

  it('a release whose delete got no answer is asked again by the next release of the lease, on a session of its own', async () => {
    const clock = new ManualClock();
    const r = root();
    const real = node(clock);
    let down = true;
    const s = spied(real, { deleteOwned: (...a) => (down ? Promise.reject(new UnavailableError('zookeeper: no answer (test)')) : real.deleteOwned(...a)) });
    const lock = new ZookeeperLock({ node: s.node, clock, root: r });
    const lease = granted(await lock.acquire('r', { ttlMs: 20_000 }));
    expect(await lock.release(lease)).toBe(false);
    expect(await lock.release(lease)).toBe(false);
    expect(s.calls['deleteOwned']).toBe(2);
    expect(lock.trackedLeases).toBe(0);
    down = false;
    expect(await lock.release(lease)).toBe(true);
    expect(s.calls).toMatchObject({ openSession: 3, deleteOwned: 3, closeSession: 3 });
    const look = node();
    const probe = await look.openSession(5000);
    expect(await look.contenders(probe, lockDir('r', r))).toEqual([]);
    // Known now: a release after that has nothing left to do.
    expect(await lock.release(lease)).toBe(true);
    expect(s.calls['deleteOwned']).toBe(3);
  }, 30_000);

  it('a lost lease the prune forgot is still released on the ensemble: its release deletes the contender its session left', async () => {
    const clock = new ManualClock();
    const r = root();
    const lock = new ZookeeperLock({ node: node(clock), clock, root: r });
    // A session timeout the 64 grants below take far less real time than, on a loaded machine too.
    const lost = granted(await lock.acquire('gone', { ttlMs: 20_000 }));
    // Lost on the client's clock; the ensemble, on real time, still has its session and its contender.
    clock.advance(20_000);
    expect((lost as LeaseHandle).lost).toBe(true);
    const held: Lease[] = [];
    for (let i = 0; i < 64; i++) held.push(granted(await lock.acquire(`h${i}`, { ttlMs: 60_000 })));
    // The 65th grant forgot the lost lease.
    expect(lock.trackedLeases).toBe(64);
    const look = node();
    const probe = await look.openSession(5000);
    expect(await look.contenders(probe, lockDir('gone', r))).toEqual(['c-0000000000']);
    expect(await lock.release(lost)).toBe(true);
    expect(await look.contenders(probe, lockDir('gone', r))).toEqual([]);
    for (const l of held) await lock.release(l);
  }, 30_000);
});

describe('zookeeperNode (real ZooKeeper)', QUICK, () => {
  it("a lease another lock granted is released by the contender it names, as the Redis lock's by owner: deleted on a session of its own only while its create zxid is the lease's token", async () => {
    const clock = new ManualClock();
    const r = root();
    const real = node(clock);
    const s = spied(real);
    // Another process's lock, say: this one never saw the grant.
    const theirs = new ZookeeperLock({ node: real, clock, root: r });
    const ours = new ZookeeperLock({ node: s.node, clock, root: r });
    const lease = granted(await theirs.acquire('r', { ttlMs: 20_000 }));
    const look = node();
    const probe = await look.openSession(5000);
    // A copy naming the contender with another token (an older grant's, say) touches nothing.
    expect(await ours.release({ ...lease, signal: lease.signal, token: lease.token - 1n })).toBe(true);
    expect(s.calls).toEqual({ openSession: 1, deleteOwned: 1, closeSession: 1 });
    expect(await look.contenders(probe, lockDir('r', r))).toEqual(['c-0000000000']);
    // The grant itself, as a plain record of it (the fields a process would keep): its contender goes.
    const record: Lease = { resource: lease.resource, owner: lease.owner, token: lease.token, validUntilMs: lease.validUntilMs, signal: lease.signal };
    expect(await ours.release(record)).toBe(true);
    expect(s.calls).toEqual({ openSession: 2, deleteOwned: 2, closeSession: 2 });
    expect(await look.contenders(probe, lockDir('r', r))).toEqual([]);
    // Answered: the same record released again has nothing left to ask.
    expect(await ours.release(record)).toBe(true);
    expect(s.calls['deleteOwned']).toBe(2);
    // An owner outside this lock's line for the resource (another resource's, another root's, not a contender) names
    // nothing of this lock's: no call. A token that is no bigint is no lease's.
    for (const owner of [`${lockDir('other', r)}/c-0000000000`, `${lockDir('r', '/elsewhere')}/c-0000000000`, `${lockDir('r', r)}/x`, `${lockDir('r', r)}/c-1/c-2`, 'c-0000000000']) {
      expect(await ours.release({ ...record, owner }), owner).toBe(true);
    }
    expect(s.calls['openSession']).toBe(2);
    for (const token of [5 as unknown as bigint, -1n, 2n ** 63n]) {
      await expect(ours.release({ ...record, token }), String(token)).rejects.toMatchObject({ name: 'InvalidInputError', code: 'precondition' });
    }
    // A resource acquire would refuse is refused alike, before anything is sent.
    await expect(ours.release({ ...record, resource: '\u0000' })).rejects.toMatchObject({ name: 'InvalidInputError', code: 'invalid-resource' });
    expect(s.calls['openSession']).toBe(2);
    // No answer is unknown, as for a tracked lease.
    const next = granted(await theirs.acquire('r', { ttlMs: 20_000 }));
    const down = new ZookeeperLock({ node: spied(real, { deleteOwned: () => Promise.reject(new UnavailableError('zookeeper: no answer (test)')) }).node, clock, root: r });
    expect(await down.release({ ...next, signal: next.signal })).toBe(false);
    expect(await look.contenders(probe, lockDir('r', r))).toEqual(['c-0000000001']);
    expect(await theirs.release(next)).toBe(true);
    expect(await theirs.release(lease)).toBe(true);
  }, 30_000);

  it("late requests (spec 3, \"Delayed requests\"): a delete, touch or enqueue of a session that ended lands on nothing of the next holder's", async () => {
    const n = node();
    const dir = `${root()}/lock/q`;
    const old = await n.openSession(30_000);
    const a = await n.enqueue(old, dir);
    // The session's end (closed here; an expiry ends it the same way) deletes its ephemeral contender.
    await n.closeSession(old);
    await eventually(async () => (await n.children(dir)).length === 0, 'the ended session left its contender');
    const s = await n.openSession(30_000);
    const b = await n.enqueue(s, dir);
    expect(b.name).not.toBe(a.name);
    // The ended session's requests, as sent (its path, its zxid), land now: the ensemble refuses every one (the session is gone).
    const outcomes = await Promise.all([
      n.deleteOwned(old, `${dir}/${a.name}`, a.czxid).catch(() => 'refused'),
      n.touch(old, `${dir}/${a.name}`).catch(() => 'refused'),
      n.enqueue(old, dir).catch(() => 'refused'),
    ]);
    expect(outcomes).toEqual(['refused', 'refused', 'refused']);
    expect(await n.children(dir)).toEqual([b.name]);
    expect(await n.touch(s, `${dir}/${b.name}`)).toBe(b.czxid);
    await n.closeSession(s);
  });

  it('contenders, enqueue, touch, deleteOwned and closeSession on a session', async () => {
    const n = node();
    const r = root();
    const dir = `${r}/lock/q`;
    const brief = await n.openSession(300);
    expect(brief.timeoutMs).toBe(300);
    await n.closeSession(brief);
    const s = await n.openSession(30_000);
    expect(await n.contenders(s, dir)).toEqual([]);
    const a = await n.enqueue(s, dir);
    const b = await n.enqueue(s, dir);
    expect(a.name).toBe('c-0000000000');
    expect(b.name).toBe('c-0000000001');
    expect(b.czxid).toBeGreaterThan(a.czxid);
    expect((await n.contenders(s, dir)).sort()).toEqual(['c-0000000000', 'c-0000000001']);
    expect(await n.touch(s, `${dir}/${a.name}`)).toBe(a.czxid);
    expect(await n.touch(s, `${dir}/absent`)).toBeNull();
    expect(await n.deleteOwned(s, `${dir}/${a.name}`, a.czxid + 1n)).toBe(false);
    expect(await n.deleteOwned(s, `${dir}/${a.name}`, a.czxid)).toBe(true);
    expect(await n.deleteOwned(s, `${dir}/${a.name}`, a.czxid)).toBe(false);
    expect(await n.children(dir)).toEqual(['c-0000000001']);
    await n.closeSession(s);
    expect(await n.children(dir)).toEqual([]);
    expect(await n.children(`${r}/absent`)).toEqual([]);
  });

  it('close() ends every session the node opened, also one nobody closed: its contender goes with it', async () => {
    const n = zookeeperNode({ connectString: server().connectString, auth: server().auth, clock: new ManualClock() });
    const watcher = node();
    const dir = `${root()}/lock/c`;
    const forgotten = await n.openSession(30_000);
    const c = await n.enqueue(forgotten, dir);
    const ws = await watcher.openSession(30_000);
    const gone = watcher.watchGone(ws, `${dir}/${c.name}`, 60_000);
    n.close();
    // Resolves only at the deletion (the watcher's clock never moves): the ensemble ended the session.
    await gone;
    expect(await watcher.children(dir)).toEqual([]);
    await watcher.closeSession(ws);
  });

  it("close() with a lease held fires its signal at once (connection-lost), before another client can be granted: the lease's contender went with the session", async () => {
    const clock = new ManualClock();
    const n = zookeeperNode({ connectString: server().connectString, auth: server().auth, clock });
    const r = root();
    const lease = granted(await new ZookeeperLock({ node: n, clock, root: r }).acquire('held', { ttlMs: 30_000 }));
    const signal = lease.signal;
    const fired = new Promise<unknown>((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true }));
    n.close();
    // The clock never moves: only the session's end can fire the signal.
    const reason = await fired;
    expect(reason).toBeInstanceOf(LeaseLostError);
    expect((reason as LeaseLostError).reason).toBe('connection-lost');
    const other = new ZookeeperLock({ node: node(), clock: new ManualClock(), root: r });
    let next: AcquireResult;
    const deadline = Date.now() + 10_000;
    while ((next = await other.acquire('held', { ttlMs: 30_000 })).kind !== 'granted') if (Date.now() > deadline) throw new Error('the closed session kept its contender');
    expect(next.lease.token).toBeGreaterThan(lease.token);
  });

  it('after close() every call, and a connect in progress, is InvalidInputError(precondition): no new client is opened, and the lock throws it rather than deny', async () => {
    const clock = new ManualClock();
    const n = zookeeperNode({ connectString: server().connectString, auth: server().auth, clock });
    const lock = new ZookeeperLock({ node: n, clock, root: root() });
    const store = zookeeperFencedStore(n, 'strict', { root: root() });
    const closedError = async (p: Promise<unknown>, what: string): Promise<void> => {
      const e = await thrown(p);
      expect(e).toBeInstanceOf(InvalidInputError);
      expect((e as Error).message).toBe(`precondition: zookeeper ${what}: the node was closed`);
    };
    const connecting = lock.acquire('r', { ttlMs: 30_000 });
    n.close();
    await closedError(connecting, 'connect');
    await closedError(lock.acquire('r', { ttlMs: 30_000 }), 'connect');
    await closedError(n.openSession(30_000), 'connect');
    await closedError(store.write('r', 1n, 'v'), 'fenced write');
    await closedError(store.read('r'), 'get data');
    await closedError(n.children('/'), 'get children');
  });

  it('a call in flight at close() sends no request after it: an acquire whose create went out before the close, and a store write, reject with precondition (they were denied no-quorum and UnavailableError); a reply already on its way still grants, its lease lost', async () => {
    const clock = new ManualClock();
    const n = zookeeperNode({ connectString: server().connectString, auth: server().auth, clock });
    nodes.push(n);
    const r = root();
    // The close comes right after the create is queued: its reply arrives, and the read of the new znode's stat is not sent.
    const closing: ZookeeperNode = { ...n, enqueue: (s, dir) => Object.assign(n.enqueue(s, dir), n.close()) };
    const e = await thrown(new ZookeeperLock({ node: closing, clock, root: r }).acquire('r', { ttlMs: 30_000 }));
    expect(e).toBeInstanceOf(InvalidInputError);
    expect((e as Error).message).toBe('precondition: zookeeper create: the node was closed');
    // A request sent before the close gets its reply: the line read that grants comes back, with the lease lost already.
    const k = zookeeperNode({ connectString: server().connectString, auth: server().auth, clock });
    nodes.push(k);
    let reads = 0;
    const lastRead: ZookeeperNode = { ...k, contenders: (s, dir) => Object.assign(k.contenders(s, dir), ++reads === 2 && k.close()) };
    const lease = granted(await new ZookeeperLock({ node: lastRead, clock, root: r }).acquire('k', { ttlMs: 30_000 }));
    expect(lease.signal.aborted).toBe(true);
    expect((lease.signal.reason as LeaseLostError).reason).toBe('connection-lost');
    const m = node(clock);
    const store = zookeeperFencedStore(m, 'strict', { root: r });
    // The store's session is open: the write's read is queued after this turn, when the node is closed already.
    expect(await store.read('x')).toEqual({ value: null, token: null });
    const write = store.write('x', 1n, 'v');
    m.close();
    const w = await thrown(write);
    expect(w).toBeInstanceOf(InvalidInputError);
    expect((w as Error).message).toBe('precondition: zookeeper fenced write: the node was closed');
    // Nothing of either is left on the ensemble: the contender went with its session.
    const look = node();
    await eventually(async () => (await look.children(`${r}/lock/r`)).length + (await look.children(`${r}/lock/k`)).length === 0, 'the closed sessions took their contenders');
    expect(await look.get(cellPath('x', r))).toBeNull();
  });

  it("zookeeperNode's calls refuse wrong arguments as InvalidInputError naming them, before anything is sent: openSession(1e308) ended the process, a token -1n broke its cell, others read as outages", async () => {
    const n = node();
    const r = root();
    const refusedWith = async (call: Promise<unknown>, code: string, named: string): Promise<void> => {
      const e = await thrown(call);
      expect(e, named).toBeInstanceOf(InvalidInputError);
      expect(e, named).toMatchObject({ code });
      expect((e as Error).message, named).toContain(named);
    };
    for (const ms of [Number.NaN, -1, 1e308]) await refusedWith(n.openSession(ms), 'invalid-ttl', 'ttl');
    const s = await n.openSession(30_000);
    const { name, czxid } = await n.enqueue(s, `${r}/lock/q`);
    await refusedWith(n.contenders({ timeoutMs: 1, expired: Promise.resolve() }, `${r}/lock/q`), 'invalid-config', 'session');
    await refusedWith(n.touch(s, 'relative'), 'invalid-config', 'path');
    await refusedWith(n.watchGone(s, `${r}/lock/q/${name}`, Number.NaN), 'invalid-config', 'waitMs');
    await refusedWith(n.deleteOwned(s, `${r}/lock/q/${name}`, 1 as never), 'invalid-config', 'czxid');
    await refusedWith(n.get(42 as never), 'invalid-config', 'path');
    await refusedWith(n.fencedWrite(`${r}/cell/c`, -1n, 'v', 'strict'), 'invalid-token', 'token');
    await refusedWith(n.fencedWrite(`${r}/cell/c`, 1n, 'v', 'bogus' as never), 'invalid-config', 'policy');
    // Nothing was written or deleted.
    expect(await n.get(`${r}/cell/c`)).toBeNull();
    expect(await n.touch(s, `${r}/lock/q/${name}`)).toBe(czxid);
    await n.closeSession(s);
  });

  it("a path ZooKeeper would not take (an empty or '.' component, a trailing slash, a control character) is refused naming it, before anything is sent (the library asserted on it, read as an outage: UnavailableError)", async () => {
    const n = node();
    const r = root();
    const s = await n.openSession(30_000);
    const bad = [`${r}/a/../b`, `${r}/./c`, `${r}/c/`, `${r}//c`, `${r}/c\u0001`, `${r}/\u{1f600}`];
    for (const path of bad) {
      for (const [call, name] of [[n.get(path), 'path'], [n.children(path), 'dir'], [n.fencedWrite(path, 1n, 'v', 'strict'), 'path'], [n.contenders(s, path), 'dir'], [n.enqueue(s, path), 'dir'], [n.touch(s, path), 'path'], [n.watchGone(s, path, 10), 'path']] as const) {
        const e = await thrown(call);
        expect(e, `${name} ${path}`).toBeInstanceOf(InvalidInputError);
        expect(e, `${name} ${path}`).toMatchObject({ code: 'invalid-config' });
        expect((e as Error).message).toMatch(new RegExp(`^invalid-config: ${name} must be an absolute znode path ZooKeeper takes \\(`));
      }
    }
    // The calls on a path it takes still go out, the session and the store's up.
    expect(await n.children(`${r}/lock`)).toEqual([]);
    expect(await n.fencedWrite(`${r}/cell/c`, 1n, 'v', 'strict')).toEqual({ kind: 'accepted' });
    await n.closeSession(s);
  });

  it("the library's own assertion on a request is InvalidInputError('precondition'), thrown by the lock at the first attempt, never no-quorum retried (it was an UnavailableError)", async () => {
    const n = node();
    const r = root();
    const lock = new ZookeeperLock({ node: n, clock: new ManualClock(), root: r });
    const s = await n.openSession(5000);
    const assertion = new AssertionError({ message: 'Node path must not contain relative path(s).' });
    (s as unknown as { client: zookeeper.Client }).client.getChildren = () => {
      throw assertion;
    };
    const e = await thrown(n.contenders(s, `${r}/lock/a`));
    expect(e).toBeInstanceOf(InvalidInputError);
    expect(e).toMatchObject({ code: 'precondition', message: "precondition: zookeeper get children: Node path must not contain relative path(s). (refused by the client library before it was sent)" });
    await n.closeSession(s);
    // Through the lock: every new session's client asserts (as on a connect string the library cannot use).
    const create = vi.spyOn(zookeeper, 'createClient').mockImplementation(() => {
      throw assertion;
    });
    const acquired = await thrown(lock.acquire('a', { ttlMs: 5000, retries: 3 }));
    expect(acquired).toBeInstanceOf(InvalidInputError);
    expect(acquired).toMatchObject({ code: 'precondition' });
    expect(create).toHaveBeenCalledTimes(1);
  });

  it("a znode path past the ensemble's 1 MiB request bound is refused before it is sent (precondition); the store's session stays up", async () => {
    const n = node();
    const r = root();
    const long = `${r}/cell/${'p'.repeat(1_100_000)}`;
    for (const [call, name] of [[n.get(long), 'path'], [n.children(long), 'dir']] as const) {
      const e = await thrown(call);
      expect(e).toBeInstanceOf(InvalidInputError);
      expect(e).toMatchObject({ code: 'precondition', message: `precondition: ${name} too long for a ZooKeeper request: ${long.length} bytes, at most 1047552` });
    }
    expect(await n.fencedWrite(`${r}/cell/c`, 1n, 'v', 'strict')).toEqual({ kind: 'accepted' });
  });

  it('a waiting acquire on the system clock (fractional ms left to wait) is granted when the holder releases: the checked waitMs takes fractions', async () => {
    const r = root();
    const holderNode = zookeeperNode({ connectString: server().connectString, auth: server().auth, clock: systemClock, requestTimeoutMs: TEST_BOUND_MS });
    const waiterNode = zookeeperNode({ connectString: server().connectString, auth: server().auth, clock: systemClock, requestTimeoutMs: TEST_BOUND_MS });
    nodes.push(holderNode, waiterNode);
    const holder = new ZookeeperLock({ node: holderNode, clock: systemClock, root: r });
    const waiter = new ZookeeperLock({ node: waiterNode, clock: systemClock, root: r });
    const held = granted(await holder.acquire('w', { ttlMs: 30_000 }));
    // A wait shorter than a third of the ttl: what is left of it, a fraction of a ms on performance.now(), is watchGone's bound.
    const waiting = waiter.acquire('w', { ttlMs: 30_000, waitMs: 5_000 });
    await eventually(async () => (await holderNode.children(lockDir('w', r))).length === 2, 'the waiter in line');
    await holder.release(held);
    await waiter.release(granted(await waiting));
  });

  it('close() ends a watchGone in progress at once with InvalidInputError(precondition): it resolved as if the znode ahead were gone', async () => {
    const n = node();
    const dir = `${root()}/lock/w`;
    const s = await n.openSession(30_000);
    const ahead = await n.enqueue(s, dir);
    const outcome = n.watchGone(s, `${dir}/${ahead.name}`, 60_000).then(
      () => 'resolved',
      (e: unknown) => e,
    );
    // A session's requests are answered in order: once the touch is back, the watch is set on the ensemble.
    expect(await n.touch(s, `${dir}/${ahead.name}`)).toBe(ahead.czxid);
    n.close();
    let bound: NodeJS.Timeout | undefined;
    const late = new Promise((resolve) => (bound = setTimeout(() => resolve('still waiting 3 s after close()'), 3_000)));
    const e = await Promise.race([outcome, late]).finally(() => clearTimeout(bound));
    expect(e).toBeInstanceOf(InvalidInputError);
    expect((e as Error).message).toBe('precondition: zookeeper exists (watch): the node was closed');
  });

  it("a connect string none of whose hosts resolves is ConnectionConfigError('unknown-host'), thrown by acquire at once; one host that resolves is enough", async () => {
    const clock = new ManualClock();
    const lockOn = (connectString: string): ZookeeperLock => {
      const n = zookeeperNode({ connectString, auth: server().auth, clock, requestTimeoutMs: 10_000 });
      nodes.push(n);
      return new ZookeeperLock({ node: n, clock, root: root() });
    };
    const e = await thrown(lockOn('no-such-host.invalid:2181,other.invalid:2181').acquire('r', { ttlMs: 30_000, retries: 3 }));
    expect(e).toBeInstanceOf(ConnectionConfigError);
    expect(e).toMatchObject({ code: 'unknown-host', message: 'unknown-host: the host name does not resolve: zookeeper connect: no-such-host.invalid, other.invalid' });
    expect((e as Error).cause).toMatchObject({ code: 'ENOTFOUND' });
    granted(await lockOn(`no-such-host.invalid:2181,${server().connectString}`).acquire('r', { ttlMs: 30_000 }));
  });

  it('an auth list with a hole is refused at construction, naming the entry (forEach skipped it, and every connect threw a TypeError on it)', () => {
    for (const auth of [new Array(1), Object.assign([{ scheme: 'digest', credentials: 'u:p' }], { length: 2 })]) {
      const e = refused(() => zookeeperNode({ connectString: '127.0.0.1:9', clock: new ManualClock(), auth }));
      expect(e).toBeInstanceOf(InvalidInputError);
      expect(e.message).toBe(`invalid-config: auth[${auth.length - 1}] must be an object, got undefined`);
    }
  });

  it("a connect string whose chroot does not exist: acquire and the store's first write throw ServerRefusedError('schema', 'NO_NODE') with the cause, not retried (they were denied no-quorum and UnavailableError)", async () => {
    const clock = new ManualClock();
    const chroot = root();
    const n = zookeeperNode({ connectString: `${server().connectString}${chroot}`, auth: server().auth, clock, requestTimeoutMs: TEST_BOUND_MS });
    nodes.push(n);
    const { node: counted, calls } = spied(n);
    const e = await thrown(new ZookeeperLock({ node: counted, clock }).acquire('r', { ttlMs: 30_000, retries: 3 }));
    expect(e).toBeInstanceOf(ServerRefusedError);
    expect(e).toMatchObject({ code: 'schema', serverCode: 'NO_NODE', message: "schema (NO_NODE): zookeeper create: the connect string's chroot does not exist (ZooKeeper makes none: create it first)" });
    expect((e as Error).cause).toBeInstanceOf(zookeeper.Exception);
    expect(calls.openSession).toBe(1);
    const w = await thrown(zookeeperFencedStore(n, 'strict').write('r', 1n, 'v'));
    expect(w).toMatchObject({ name: 'ServerRefusedError', code: 'schema', serverCode: 'NO_NODE' });
    // Once the chroot is there, both work under it.
    const outside = node();
    await outside.fencedWrite(`${chroot}/made`, 1n, 'v', 'strict');
    const lock = new ZookeeperLock({ node: n, clock });
    await lock.release(granted(await lock.acquire('r', { ttlMs: 30_000 })));
    expect(await zookeeperFencedStore(n, 'strict').write('r', 1n, 'v')).toEqual({ kind: 'accepted' });
  });

  it('a connect string the library cannot use is refused at construction, naming it (a port out of range was thrown from its reconnect timer and ended the process)', () => {
    for (const bad of ['127.0.0.1:99999', '127.0.0.1:0', 'zk://127.0.0.1:2181', 'not a host', 'a:1:2', 'a:1,,b:2', 'a:x', 'a:1/', 'a:1/b/', 'a:1//b', ':2181']) {
      let e: unknown;
      try {
        zookeeperNode({ connectString: bad, clock: new ManualClock() });
      } catch (error) {
        e = error;
      }
      expect(e, bad).toBeInstanceOf(InvalidInputError);
      expect((e as InvalidInputError).code).toBe('invalid-config');
      expect((e as Error).message).toMatch(/^invalid-config: connectString must be host\[:port\]\[,host\[:port\]\.\.\.\]\[\/chroot\] \(.+\), got "/);
    }
    for (const good of ['h', 'h:2181', 'a.b-c:1,10.0.0.2:65535', 'h:2181/chroot/x']) zookeeperNode({ connectString: good, clock: new ManualClock() }).close();
  });

  it('a lease session renews itself by no ping: nobody touching it, the ensemble ends it and deletes its contender', async () => {
    const n = node();
    const dir = `${root()}/lock/idle`;
    // A second: a client that pinged (every third of it) would keep it alive even on a loaded machine.
    const s = await n.openSession(1000);
    await n.enqueue(s, dir);
    expect(await n.children(dir)).toHaveLength(1);
    await eventually(async () => (await n.children(dir)).length === 0, 'the idle session ended');
    await n.closeSession(s).catch(() => undefined);
  });

  it('watchGone waits re-armed on the same znode share one watch: no listener piles up (a wait in line of a dozen rounds warned MaxListenersExceededWarning), and a deletion still wakes the last', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => void warnings.push(w);
    process.on('warning', onWarning);
    try {
      const clock = new ManualClock();
      const n = node(clock);
      const dir = `${root()}/lock/w`;
      const holder = await n.openSession(30_000);
      const ahead = await n.enqueue(holder, dir);
      const s = await n.openSession(30_000);
      const path = `${dir}/${ahead.name}`;
      // As the lock waits in line: a round of the wait on the clock, then the session renewed, a dozen times.
      for (let round = 0; round < 12; round++) {
        const wait = n.watchGone(s, path, 10);
        await n.touch(s, path);
        clock.advance(10);
        await wait;
      }
      const last = n.watchGone(s, path, 60_000);
      await n.touch(s, path);
      await n.closeSession(holder);
      await last;
      // A warning is emitted on the next tick after the listener that passed the limit.
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
      await n.closeSession(s);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('a wait in line ends with its session: an acquire cancelled in line leaves no timer on the clock, and watchGone on a session closed meanwhile rejects at once (precondition)', async () => {
    const clock = new ManualClock();
    const { node: n, watches } = spied(node(clock));
    const r = root();
    const lock = new ZookeeperLock({ node: n, clock, root: r });
    const holder = granted(await lock.acquire('w', { ttlMs: 30_000 }));
    const armed = clock.armed;
    const controller = new AbortController();
    const waiting = thrown(lock.acquire('w', { ttlMs: 30_000, waitMs: 60_000, signal: controller.signal }));
    await eventually(() => watches.length === 1, 'the waiter watches the holder');
    controller.abort();
    expect((await waiting as DOMException).name).toBe('AbortError');
    // The wait's own timer (a third of the session) went with its session: it was left armed until it ran out.
    expect(clock.armed).toBe(armed);
    const s = await n.openSession(30_000);
    const watch = thrown(n.watchGone(s, `${lockDir('w', r)}/${holder.owner.slice(holder.owner.lastIndexOf('/') + 1)}`, 60_000));
    await n.closeSession(s);
    const e = await watch;
    expect(e).toBeInstanceOf(InvalidInputError);
    expect((e as Error).message).toBe('precondition: zookeeper exists (watch): the session was closed');
    expect(clock.armed).toBe(armed);
    await lock.release(holder);
  });

  it('watchGone resolves at a deletion, at once for an absent znode, and after its wait on the clock', async () => {
    const clock = new ManualClock();
    const n = node(clock);
    const dir = `${root()}/lock/w`;
    const s = await n.openSession(5000);
    const other = await n.openSession(5000);
    const c = await n.enqueue(other, dir);
    let done = false;
    const watch = n.watchGone(s, `${dir}/${c.name}`, 10_000).then(() => (done = true));
    await n.touch(s, `${dir}/${c.name}`);
    expect(done).toBe(false);
    await n.closeSession(other);
    await watch;
    await n.watchGone(s, `${dir}/${c.name}`, 10_000);
    const third = await n.openSession(5000);
    const d = await n.enqueue(third, dir);
    done = false;
    const timed = n.watchGone(s, `${dir}/${d.name}`, 50).then(() => (done = true));
    await n.touch(s, `${dir}/${d.name}`);
    clock.advance(49);
    await n.touch(s, `${dir}/${d.name}`);
    expect(done).toBe(false);
    clock.advance(1);
    await timed;
    expect(await n.touch(s, `${dir}/${d.name}`)).toBe(d.czxid);
    await n.closeSession(third);
    await n.closeSession(s);
    // A watch on a closed session fails, typed.
    const e = await thrown(n.watchGone(s, `${dir}/${d.name}`, 10_000));
    expect(e).toBeInstanceOf(UnavailableError);
    expect((e as Error).message).toMatch(/^zookeeper exists \(watch\): /);
  });

  it('a programming error inside a call (the library throwing a TypeError) passes as it is, not as an UnavailableError (read as no-quorum)', async () => {
    const n = node();
    const s = await n.openSession(5000);
    const bug = new TypeError("Cannot read properties of undefined (reading 'getCode')");
    // The session's client (the node keeps it on the session) breaks as a library bug would.
    (s as unknown as { client: zookeeper.Client }).client.getChildren = () => {
      throw bug;
    };
    expect(await thrown(n.contenders(s, `${root()}/lock/b`))).toBe(bug);
    await n.closeSession(s);
  });

  it('a failed call is an UnavailableError naming the call; a refusal no retry fixes is a ServerRefusedError with its code and cause', async () => {
    const n = node();
    const dir = `${root()}/lock/e`;
    const s = await n.openSession(5000);
    const c = await n.enqueue(s, dir);
    // Ephemeral znodes cannot have children: a path the lock cannot use, whatever it retries.
    const e = await thrown(n.enqueue(s, `${dir}/${c.name}`));
    expect(e).toBeInstanceOf(ServerRefusedError);
    expect(e).toMatchObject({ code: 'schema', serverCode: 'NO_CHILDREN_FOR_EPHEMERALS' });
    expect((e as Error).cause).toBeInstanceOf(zookeeper.Exception);
    expect((e as Error).message).toMatch(/zookeeper create: .*NO_CHILDREN_FOR_EPHEMERALS/);
    // A path with a trailing slash, which the library asserts on, is refused before it is sent (it was an UnavailableError).
    for (const call of [n.contenders(s, `${dir}/${c.name}/x/`), n.children(`${dir}/`), n.get(`${dir}/`), n.touch(s, `${dir}/`), n.deleteOwned(s, `${dir}/`, 1n), n.fencedWrite(`${dir}/`, 1n, 'v', 'strict')]) {
      expect(await thrown(call)).toMatchObject({ code: 'invalid-config' });
    }
    // A delete the server refuses for another reason than a race (the line's directory still has a contender).
    const line = await thrown(n.deleteOwned(s, dir, (await n.touch(s, dir))!));
    expect(line).toBeInstanceOf(UnavailableError);
    expect((line as Error).message).toMatch(/^zookeeper delete: .*NOT_EMPTY/);

    await n.closeSession(s);
  });

  it('every call is bounded by requestTimeoutMs on the clock, with a TimeoutError naming it (the member paused)', async () => {
    const clock = new ManualClock();
    // The bounds are also real-time bounds: long enough for the calls before the stop on a loaded machine.
    const n = node(clock, 5000);
    const dir = `${root()}/lock/t`;
    const defaultClock = new ManualClock();
    const m = node(defaultClock, 'library-default');
    await m.children(dir);
    const still = node(new ManualClock(), 3000);
    await still.children(dir);
    const s = await n.openSession(60_000);
    const c = await n.enqueue(s, dir);
    await n.children(dir);
    const pid = server().pid;
    process.kill(pid, 'SIGSTOP');
    // kill() returns before every thread of the JVM has stopped: wait (bounded) until none runs.
    await eventually(async () => allStopped(pid), 'the member stopped');
    let errors: unknown[];
    try {
      const calls: Array<[string, Promise<unknown>]> = [
        ['get children', n.contenders(s, dir)],
        ['create', n.enqueue(s, dir)],
        ['exists', n.touch(s, `${dir}/${c.name}`)],
        ['delete', n.deleteOwned(s, `${dir}/${c.name}`, c.czxid)],
        ['get children', n.children(dir)],
        ['get data', n.get(`${dir}/${c.name}`)],
        ['fenced write', n.fencedWrite(`${dir}-cell`, 1n, 'v', 'strict')],
      ];
      const settled = calls.map(([, p]) => thrown(p));
      const bounded = thrown(m.children(dir));
      const connecting = thrown(n.openSession(100));
      // A clock that never moves: the real-time bound ends the call all the same.
      const stuck = thrown(still.children(dir));
      clock.advance(5000);
      defaultClock.advance(2000);
      errors = await Promise.all(settled);
      for (const [i, [what]] of calls.entries()) {
        expect(errors[i]).toBeInstanceOf(TimeoutError);
        expect((errors[i] as Error).message).toBe(`zookeeper ${what} timed out after 5000 ms`);
      }
      const connect = await connecting;
      expect(connect).toBeInstanceOf(TimeoutError);
      expect((connect as Error).message).toBe('zookeeper connect timed out after 5000 ms');
      const real = await stuck;
      expect(real).toBeInstanceOf(TimeoutError);
      expect((real as Error).message).toBe('zookeeper get children timed out after 3000 ms');
      // The default bound is 2000 ms.
      expect(((await bounded) as Error).message).toBe('zookeeper get children timed out after 2000 ms');
      const closing = thrown(n.closeSession(s));
      clock.advance(5000);
      const closed = await closing;
      expect(closed).toBeInstanceOf(TimeoutError);
      expect((closed as Error).message).toBe('zookeeper close session timed out after 5000 ms');
    } finally {
      process.kill(pid, 'SIGCONT');
    }
  });
});

describe('zookeeperFencedStore (real ZooKeeper)', QUICK, () => {
  it("a cell znode holding what the store did not write is ServerRefusedError('schema', 'UnexpectedValue') naming it, on read and write; an empty one too", async () => {
    const n = node();
    const r = root();
    const store = zookeeperFencedStore(n, 'strict', { root: r });
    expect(await store.write('c', 1n, 'v')).toEqual({ kind: 'accepted' });
    const path = cellPath('c', r);
    // Another client of the same identity writes the cell (the node's own calls only ever write cells).
    const raw = zookeeper.createClient(server().connectString, { retries: 0 });
    for (const a of server().auth) raw.addAuthInfo(a.scheme, Buffer.from(a.credentials));
    try {
      await new Promise<void>((resolve) => {
        raw.once('connected', () => resolve());
        raw.connect();
      });
      for (const [data, why] of [
        ['not json at all', 'not JSON'],
        ['{"value":"v","token":"1","highest":"x"}', 'highest is not a token'],
        ['{"value":"v","token":"1"}', 'highest is not a token'],
        ['', 'no data'],
      ] as const) {
        await new Promise<void>((resolve, reject) => raw.setData(path, Buffer.from(data), -1, (e) => (e ? reject(e) : resolve())));
        const expected = { name: 'ServerRefusedError', code: 'schema', serverCode: 'UnexpectedValue', message: `schema (UnexpectedValue): zookeeper znode '${path}' does not hold a lockcheck cell (${why})` };
        await expect(store.read('c'), data).rejects.toMatchObject(expected);
        await expect(store.write('c', 2n, 'w'), data).rejects.toMatchObject(expected);
      }
    } finally {
      raw.close();
    }
  });

  it('judges by policy against the highest accepted (kept across policies), reads value and token; the default root is /lockcheck', async () => {
    const n = node();
    const r = root();
    const open = zookeeperFencedStore(n, 'unfenced', { root: r });
    const strict = zookeeperFencedStore(n, 'strict', { root: r });
    const mono = zookeeperFencedStore(n, 'monotonic', { root: r });
    expect(await strict.read('s')).toEqual({ value: null, token: null });
    // The first write to a cell is accepted whatever its token, 0 included, and 0 is then the highest.
    expect(await strict.write('zero', 0n, 'z')).toEqual({ kind: 'accepted' });
    expect(await strict.write('zero', 0n, 'z')).toEqual({ kind: 'rejected', highest: 0n });
    expect(await strict.write('s', 5n, 'a')).toEqual({ kind: 'accepted' });
    expect(await strict.write('s', 5n, 'b')).toEqual({ kind: 'rejected', highest: 5n });
    expect(await mono.write('s', 5n, 'b')).toEqual({ kind: 'accepted' });
    expect(await mono.write('s', 4n, 'c')).toEqual({ kind: 'rejected', highest: 5n });
    expect(await open.write('s', 1n, 'low')).toEqual({ kind: 'accepted' });
    expect(await open.read('s')).toEqual({ value: 'low', token: 1n });
    // The unfenced write kept the highest at 5.
    expect(await strict.write('s', 5n, 'd')).toEqual({ kind: 'rejected', highest: 5n });
    expect(await strict.write('s', MAX, 'top')).toEqual({ kind: 'accepted' });
    expect(await strict.read('s')).toEqual({ value: 'top', token: MAX });
    expect(JSON.parse((await n.get(cellPath('s', r)))!)).toEqual({ value: 'top', token: MAX.toString() });
    expect(await open.write('s', 6n, 'again')).toEqual({ kind: 'accepted' });
    expect(await mono.write('s', MAX - 1n, 'x')).toEqual({ kind: 'rejected', highest: MAX });

    const resource = `default-${run}`;
    const plain = zookeeperFencedStore(n, 'strict');
    expect(await plain.write(resource, 1n, 'v')).toEqual({ kind: 'accepted' });
    expect(await n.get(`/lockcheck/cell/${resource}`)).toBe(JSON.stringify({ value: 'v', token: '1' }));
  });

  it("the store's session expiring (a partition or pause past its 30 s) costs one failed call at most: the next call opens a fresh session", async () => {
    const made: zookeeper.Client[] = [];
    const create = zookeeper.createClient.bind(zookeeper);
    vi.spyOn(zookeeper, 'createClient').mockImplementation((...args: Parameters<typeof zookeeper.createClient>) => {
      const c = create(...args);
      made.push(c);
      return c;
    });
    const [host, port] = server().connectString.split(',')[0]!.split(':');
    const proxy = await TcpProxy.start({ host: host!, port: Number(port) });
    try {
      const n = zookeeperNode({ connectString: `127.0.0.1:${proxy.port}`, auth: server().auth, clock: new ManualClock() });
      nodes.push(n);
      const store = zookeeperFencedStore(n, 'strict', { root: root() });
      expect(await store.write('e', 1n, 'a')).toEqual({ kind: 'accepted' });
      expect(made).toHaveLength(1);
      const shared = made[0]!;
      const expired = new Promise<void>((resolve) => shared.once('expired', () => resolve()));
      // Cut off, the store's client cannot renew; another client takes its session over and closes it: the
      // ensemble ends it, as it ends one that timed out. Back on the link, the store's client hears it expired.
      proxy.setMode({ kind: 'reset' });
      const taken = create(server().connectString, { sessionId: shared.getSessionId(), sessionPassword: shared.getSessionPassword(), retries: 0 } as never);
      for (const a of server().auth) taken.addAuthInfo(a.scheme, Buffer.from(a.credentials));
      await new Promise<void>((resolve) => {
        taken.once('connected', () => resolve());
        taken.connect();
      });
      await new Promise<void>((resolve) => {
        taken.once('disconnected', () => resolve());
        taken.close();
      });
      proxy.setMode({ kind: 'pass' });
      await expired;
      // At most the call that meets the expiry fails (an outage); the ones after it are served.
      await store.write('e', 2n, 'b').catch((e: unknown) => expect(e).toBeInstanceOf(UnavailableError));
      expect(await store.write('e', 3n, 'c')).toEqual({ kind: 'accepted' });
      expect(await store.read('e')).toEqual({ value: 'c', token: 3n });
      expect(made.length).toBeGreaterThan(1);
    } finally {
      await proxy.close();
    }
  });

  it('concurrent first writes and racing writes are judged again on what is there: the highest ends up stored', async () => {
    const store = zookeeperFencedStore(node(), 'monotonic', { root: root() });
    const tokens = Array.from({ length: 8 }, (_v, i) => BigInt(i + 1));
    expect(await Promise.all(tokens.map((t) => store.write('race', t, `v${t}`)))).toContainEqual({ kind: 'accepted' });
    expect(await store.read('race')).toEqual({ value: 'v8', token: 8n });
  });

  it('a write whose cell another writer moved between its read and its write is judged again, never lands stale (setData at the version read)', async () => {
    const r = root();
    const a = zookeeperFencedStore(node(), 'monotonic', { root: r });
    const b = zookeeperFencedStore(node(), 'monotonic', { root: r });
    expect(await a.write('cas', 5n, 'five')).toEqual({ kind: 'accepted' });
    // The race made certain on the real ensemble: a's read of the cell is answered, then b writes a higher token, then a writes.
    type GetData = (path: string, ...rest: unknown[]) => void;
    // The library's Client class, from a client never connected (it is not exported).
    const proto = Object.getPrototypeOf(zookeeper.createClient('127.0.0.1:1')) as { getData: GetData };
    const getData = proto.getData;
    // Held in an object: set inside the callback, which the compiler's narrowing does not see.
    const race: { written: Promise<unknown> | null } = { written: null };
    proto.getData = function (this: unknown, path: string, ...rest: unknown[]): void {
      const done = rest.pop() as (...reply: unknown[]) => void;
      if (race.written !== null || path !== cellPath('cas', r)) return getData.call(this, path, ...rest, done);
      proto.getData = getData;
      return getData.call(this, path, ...rest, (...reply: unknown[]) => {
        race.written = b.write('cas', 9n, 'nine');
        race.written.then(
          () => done(...reply),
          () => done(...reply),
        );
      });
    };
    try {
      expect(await a.write('cas', 7n, 'seven')).toEqual({ kind: 'rejected', highest: 9n });
    } finally {
      proto.getData = getData;
    }
    expect(await race.written).toEqual({ kind: 'accepted' });
    expect(await a.read('cas')).toEqual({ value: 'nine', token: 9n });
  });

  it('refuses bad input with typed errors and a transactional policy', async () => {
    const n = node();
    const r = root();
    const store = zookeeperFencedStore(n, 'strict', { root: r });
    const bad = async (p: Promise<unknown>, code: string, message: string): Promise<void> => {
      const e = await thrown(p);
      expect(e).toBeInstanceOf(InvalidInputError);
      expect((e as InvalidInputError).code).toBe(code);
      expect((e as Error).message).toBe(`${code}: ${message}`);
    };
    await bad(store.write('', 1n, 'v'), 'invalid-resource', 'resource must be a non-empty string of at most 256 characters');
    await bad(store.write('x', -1n, 'v'), 'invalid-token', 'token must be a bigint in [0, 2^63-1], got -1');
    await bad(store.write('x', 1n, 42 as unknown as string), 'precondition', 'value must be a string');
    await bad(store.read(''), 'invalid-resource', 'resource must be a non-empty string of at most 256 characters');
    // A value whose cell cannot fit in a znode (the ensemble's 1 MiB request bound): refused before sending, not
    // an outage every retry meets again (the ensemble dropped the connection).
    await bad(store.write('x', 1n, 'v'.repeat(1_100_000)), 'precondition', `value too large for a ZooKeeper store cell: ${1_100_000 + cellPath('x', r).length + 74} bytes with its path and tokens, at most 1047552`);
    const overhead = cellPath('x', r).length + JSON.stringify({ value: '', token: '9'.repeat(19), highest: '9'.repeat(19) }).length;
    await bad(store.write('x', 1n, 'v'.repeat(1_047_552 - overhead + 1)), 'precondition', 'value too large for a ZooKeeper store cell: 1047553 bytes with its path and tokens, at most 1047552');
    expect(await store.write('x', 1n, 'v'.repeat(1_047_552 - overhead))).toEqual({ kind: 'accepted' });
    let e: unknown;
    try {
      zookeeperFencedStore(n, 'transactional');
    } catch (error) {
      e = error;
    }
    expect(e).toBeInstanceOf(InvalidInputError);
    expect((e as InvalidInputError).code).toBe('invalid-config');
    expect((e as Error).message).toBe('invalid-config: a ZooKeeper store cannot be transactional');
  });
});
