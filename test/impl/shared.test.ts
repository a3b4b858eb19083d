import { stat } from 'node:fs/promises';
import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { refused } from '../refused.ts';
import { sleep, systemClock } from '../../impl/clock.ts';
import { ConnectionConfigError, InvalidInputError, LeaseLostError, ReplicationError, ServerRefusedError, TimeoutError, TokenOverflowError, UnavailableError, withTimeout } from '../../impl/errors.ts';
import { LeaseHandle } from '../../impl/lease.ts';
import { leaseMargins } from '../../impl/leaseMargins.ts';
import { LeaseLock, type LeaseLockOptions } from '../../impl/leaseLock.ts';
import type { LeaseNode } from '../../impl/leaseNode.ts';
import { Background } from '../../impl/round.ts';
import { LockNotAcquiredError, using } from '../../impl/using.ts';
import { ManualClock } from './servers.ts';

/**
 * The pieces of impl/ every client shares, in memory: the system clock and
 * sleep, the typed errors and withTimeout, the lease margins, LeaseLock's
 * options, owners, pruning and rounds over lease nodes written here (one
 * that keeps keys in a map, one that throws), and using()'s options. Each
 * test milliseconds.
 */

/** In memory, each test takes milliseconds: a mutant that makes one hang fails it soon (under `npm run mutation` too). */
const QUICK = { timeout: 10_000 };

async function thrown(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    (v) => new Error(`expected a rejection, got ${String(v)}`),
    (e: unknown) => e,
  );
}

/** A lease node keeping keys in a map (no expiry: the tests move no server time). */
class MapNode implements LeaseNode {
  readonly keys = new Map<string, string>();
  counter = 0n;
  async acquire(resource: string, owner: string): Promise<bigint | null> {
    if (this.keys.has(resource)) return null;
    this.keys.set(resource, owner);
    return ++this.counter;
  }
  async release(resource: string, owner: string): Promise<boolean> {
    if (this.keys.get(resource) !== owner) return false;
    this.keys.delete(resource);
    return true;
  }
  async extend(resource: string, owner: string): Promise<boolean> {
    return this.keys.get(resource) === owner;
  }
  async raiseToken(_resource: string, token: bigint): Promise<void> {
    if (this.counter < token) this.counter = token;
  }
}

function lockOver(nodes: LeaseNode[], options: Partial<LeaseLockOptions> = {}): { lock: LeaseLock; clock: ManualClock } {
  const clock = new ManualClock();
  return { lock: new LeaseLock({ nodes, clock, random: () => 0.5, ...options }), clock };
}

describe('systemClock and sleep', QUICK, () => {
  it('a due time in the past runs as an immediate, before a timer set first; a future one runs at its time, in order', async () => {
    // From an I/O callback, immediates run before the next round of timers.
    const order = await new Promise<string[]>((resolve, reject) => {
      stat('.').then(() => {
        const seen: string[] = [];
        setTimeout(() => {
          seen.push('timer');
          resolve(seen);
        }, 0);
        systemClock.schedule(systemClock.now() - 1, () => seen.push('clock'));
      }, reject);
    });
    expect(order).toEqual(['clock', 'timer']);
    const startedMs = systemClock.now();
    let firedAtMs = 0;
    let fallback: ReturnType<typeof setTimeout> | undefined;
    const fired = await new Promise<string>((resolve) => {
      systemClock.schedule(startedMs + 20, () => {
        firedAtMs = systemClock.now();
        resolve('clock');
      });
      // Only so that a clock that never fires fails the test instead of hanging it.
      fallback = setTimeout(() => resolve('fallback'), 1000);
    });
    clearTimeout(fallback);
    expect(fired).toBe('clock');
    // Never before its time, although Node's timers run on a ms clock that can lag performance.now() (under load it does).
    expect(firedAtMs).toBeGreaterThanOrEqual(startedMs + 20);
  });

  it('cancelling stops a timer and an immediate', async () => {
    const calls: string[] = [];
    systemClock.schedule(systemClock.now() - 1, () => calls.push('past'))();
    const cancel = systemClock.schedule(systemClock.now() + 5, () => calls.push('future'));
    cancel();
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(calls).toEqual([]);
  });

  it('sleep resolves on the clock and leaves no listener; an abort rejects with its reason and cancels the timer; an aborted signal rejects at once', async () => {
    const clock = new ManualClock();
    const controller = new AbortController();
    const slept = sleep(clock, 10, controller.signal);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    clock.advance(10);
    await slept;
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);

    const reason = new Error('stop');
    const aborted = sleep(clock, 10, controller.signal);
    controller.abort(reason);
    expect(await thrown(aborted)).toBe(reason);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    // Its timer was cancelled: no callback left on the clock.
    clock.advance(10);
    const early = sleep(clock, 10, controller.signal);
    clock.advance(10);
    expect(await thrown(early)).toBe(reason);
    expect(clock.delays).toEqual([10, 10]);
    await sleep(clock, 0);
  });
});

describe('typed errors and withTimeout', QUICK, () => {
  it('carry their names, fields and messages', () => {
    const t = new TimeoutError('SET', 250);
    expect([t.name, t.message, t instanceof Error]).toEqual(['TimeoutError', 'SET timed out after 250 ms', true]);
    expect(new UnavailableError('down').name).toBe('UnavailableError');
    const r = new ReplicationError(2, 1);
    expect([r.name, r.message, r.wanted, r.acknowledged]).toEqual(['ReplicationError', 'WAIT: 1 of 2 replicas acknowledged', 2, 1]);
    const o = new TokenOverflowError('res');
    expect([o.name, o.message, o.resource]).toEqual(['TokenOverflowError', "the fencing token of 'res' reached 2^63-1; no further grant is possible", 'res']);
    const c = new ConnectionConfigError('authentication', 'bad password');
    expect([c.name, c.message, c.code]).toEqual(['ConnectionConfigError', 'authentication: bad password', 'authentication']);
    const cause = new Error('driver');
    const s = new ServerRefusedError('permission', '42501', 'no', { cause });
    expect([s.name, s.message, s.code, s.serverCode, s.cause]).toEqual(['ServerRefusedError', 'permission (42501): no', 'permission', '42501', cause]);
    const l = new LeaseLostError('released', 'res');
    expect([l.name, l.message, l.reason]).toEqual(['LeaseLostError', "lease on 'res' released", 'released']);
  });

  it('LeaseLostError.of has no stack frames and restores the stack trace limit', () => {
    const limit = Error.stackTraceLimit;
    const e = LeaseLostError.of('expired', 'r');
    expect(e.message).toBe("lease on 'r' expired");
    expect(e.stack?.split('\n').filter((line) => line.trim().startsWith('at '))).toEqual([]);
    expect(Error.stackTraceLimit).toBe(limit);
  });

  it('withTimeout passes a value or an error on and cancels its timer; past the bound it is a TimeoutError', async () => {
    const clock = new ManualClock();
    expect(await withTimeout(clock, 100, 'get', Promise.resolve(7))).toBe(7);
    const failure = new Error('no');
    expect(await thrown(withTimeout(clock, 100, 'get', Promise.reject(failure)))).toBe(failure);
    // Both timers cancelled: advancing past them rejects nothing (an unhandled rejection would fail the file).
    clock.advance(100);
    const late = thrown(withTimeout(clock, 100, 'get', new Promise(() => undefined)));
    clock.advance(99);
    const settledEarly = await Promise.race([late, Promise.resolve('pending')]);
    expect(settledEarly).toBe('pending');
    clock.advance(1);
    const e = await late;
    expect(e).toBeInstanceOf(TimeoutError);
    expect((e as Error).message).toBe('get timed out after 100 ms');
  });
});

describe('leaseMargins', QUICK, () => {
  it('defaults to 0.01, 2 and 0 and refuses values out of range, naming them', () => {
    expect(leaseMargins({}, 10)).toEqual({ driftFactor: 0.01, clockMarginMs: 2, safetyMarginMs: 0 });
    expect(leaseMargins({ driftFactor: 0, clockMarginMs: 10, safetyMarginMs: 5 }, 10)).toEqual({ driftFactor: 0, clockMarginMs: 10, safetyMarginMs: 5 });
    expect(leaseMargins({ driftFactor: 0.99, clockMarginMs: 0 }, 10).driftFactor).toBe(0.99);
    const cases: Array<[Parameters<typeof leaseMargins>[0], string]> = [
      [{ driftFactor: 1 }, 'driftFactor must be in [0, 1), got 1'],
      [{ driftFactor: -0.01 }, 'driftFactor must be in [0, 1), got -0.01'],
      [{ driftFactor: Number.NaN }, 'driftFactor must be in [0, 1), got NaN'],
      [{ clockMarginMs: 11 }, 'clockMarginMs must be an integer in [0, 10], got 11'],
      [{ clockMarginMs: -1 }, 'clockMarginMs must be an integer in [0, 10], got -1'],
      [{ clockMarginMs: 1.5 }, 'clockMarginMs must be an integer in [0, 10], got 1.5'],
      [{ safetyMarginMs: -1 }, 'safetyMarginMs must be an integer in [0, 2147483647], got -1'],
      [{ safetyMarginMs: 0.5 }, 'safetyMarginMs must be an integer in [0, 2147483647], got 0.5'],
    ];
    for (const [options, message] of cases) {
      const e = refused(() => leaseMargins(options, 10));
      expect([e.code, e.message]).toEqual(['invalid-config', `invalid-config: ${message}`]);
    }
  });
});

describe('LeaseLock over nodes written here', QUICK, () => {
  it('refuses bad options naming them; the quorum is a majority', async () => {
    const node = new MapNode();
    const clock = new ManualClock();
    const make = (o: Partial<LeaseLockOptions>): LeaseLock => new LeaseLock({ nodes: [node], clock, ...o });
    const cases: Array<[Partial<LeaseLockOptions>, string, string]> = [
      [{ nodes: [] }, 'invalid-config', 'need 1..15 nodes, got 0'],
      [{ nodes: Array.from({ length: 16 }, () => node) }, 'invalid-config', 'need 1..15 nodes, got 16'],
      [{ driftFactor: 1 }, 'invalid-config', 'driftFactor must be in [0, 1), got 1'],
      [{ driftFactor: -0.1 }, 'invalid-config', 'driftFactor must be in [0, 1), got -0.1'],
      [{ clockMarginMs: 1001 }, 'invalid-config', 'clockMarginMs must be an integer in [0, 1000], got 1001'],
      [{ clockMarginMs: -1 }, 'invalid-config', 'clockMarginMs must be an integer in [0, 1000], got -1'],
      [{ clockMarginMs: 0.5 }, 'invalid-config', 'clockMarginMs must be an integer in [0, 1000], got 0.5'],
      [{ requestTimeoutMs: 0 }, 'invalid-config', 'requestTimeoutMs must be an integer number of ms in [1, 2147483647], got 0'],
      [{ safetyMarginMs: -1 }, 'invalid-config', 'safetyMarginMs must be an integer in [0, 2147483647], got -1'],
      [{ safetyMarginMs: 0.5 }, 'invalid-config', 'safetyMarginMs must be an integer in [0, 2147483647], got 0.5'],
      [
        { nodes: [node, { acquire: () => Promise.resolve(null) } as unknown as LeaseNode] },
        'invalid-config',
        'nodes[1] must be a LeaseNode (with acquire(), release(), extend(), raiseToken()), got an object without release(), extend(), raiseToken()',
      ],
      [{ random: 5 as unknown as () => number }, 'invalid-config', 'random must be a function, got 5'],
    ];
    for (const [options, code, message] of cases) {
      const e = refused(() => make(options));
      expect([e.code, e.message]).toEqual([code, `${code}: ${message}`]);
    }
    expect(refused(() => new LeaseLock(7 as never)).message).toBe('invalid-config: LeaseLock options must be an object, got 7');
    // The fields a subclass reads are fixed: a caller cannot loosen the margins of a lock in use.
    const fixed = make({});
    for (const field of ['clock', 'driftFactor', 'clockMarginMs']) expect(Object.getOwnPropertyDescriptor(fixed, field), field).toMatchObject({ writable: false, configurable: false });
    expect(make({ clockMarginMs: 1000, driftFactor: 0, safetyMarginMs: 0, requestTimeoutMs: 1 }).clockOf()).toBe(clock);
    expect(make({ clockMarginMs: 0 }).clockOf()).toBe(clock);
    // No options object at all: a typed refusal naming them, not a TypeError from reading ttlMs of undefined.
    for (const options of [undefined, null, 5000]) {
      const e = await thrown(make({}).acquire('r', options as never));
      expect(e).toBeInstanceOf(InvalidInputError);
      expect([(e as InvalidInputError).code, (e as Error).message]).toEqual(['invalid-config', `invalid-config: acquire options must be an object, got ${String(options)}`]);
    }
    for (const retries of [-1, 101, 0.5, '3']) {
      const e = await thrown(make({}).acquire('r', { ttlMs: 100, retries } as never));
      expect(e).toBeInstanceOf(InvalidInputError);
      const got = typeof retries === 'number' ? retries : JSON.stringify(retries);
      expect([(e as InvalidInputError).code, (e as Error).message]).toEqual(['precondition', `precondition: retries must be an integer in [0, 100], got ${got}`]);
    }
    for (const name of ['retryDelayMs', 'retryJitterMs']) {
      const e = await thrown(make({}).acquire('r', { ttlMs: 100, [name]: -1 }));
      expect((e as Error).message).toBe(`invalid-duration: ${name} must be an integer number of ms in [0, 2147483647], got -1`);
    }
    expect([1, 2, 3, 4, 5, 15].map((n) => make({ nodes: Array.from({ length: n }, () => node) }).quorum)).toEqual([1, 2, 2, 3, 3, 8]);
  });

  it('checks what random returns: outside [0, 1) the acquire rejects naming random, for an owner before anything is sent and for a retry\'s jitter', async () => {
    const clock = new ManualClock();
    for (const bad of [Number.NaN, -0.1, 1, 1e6, Number.POSITIVE_INFINITY, '0.5', undefined]) {
      const node = new MapNode();
      const e = await thrown(new LeaseLock({ nodes: [node], clock, random: () => bad as number }).acquire('r', { ttlMs: 100 }));
      expect(e, String(bad)).toBeInstanceOf(InvalidInputError);
      expect((e as Error).message).toBe(`invalid-config: random must return a number in [0, 1), returned ${typeof bad === 'string' ? JSON.stringify(bad) : String(bad)}`);
      // Nothing was sent: no key taken.
      expect(node.keys.size).toBe(0);
    }
    // Good owners, then a jitter out of range after a denial: the retry's pause is never planned from it.
    const node = new MapNode();
    await node.acquire('r', 'someone else');
    const draws = [0.25, 0.5, 0.75, 0.125, 7];
    const e = await thrown(new LeaseLock({ nodes: [node], clock, random: () => draws.shift()! }).acquire('r', { ttlMs: 100, retries: 1, retryJitterMs: 100 }));
    expect((e as Error).message).toBe('invalid-config: random must return a number in [0, 1), returned 7');
    // The only timers are the rounds' deadlines (the ttl): no pause of 7 x 101 ms.
    expect(clock.delays.filter((d) => d !== 100)).toEqual([]);
    // The edges of the range are good: 0 and the largest double below 1 make 32 hex digits.
    for (const edge of [0, 1 - 2 ** -53]) {
      const r = await new LeaseLock({ nodes: [new MapNode()], clock, random: () => edge }).acquire('r', { ttlMs: 100 });
      expect(r.kind === 'granted' && r.lease.owner).toMatch(/^[0-9a-f]{32}$/);
    }
  });

  it('owners: a UUID by default, else 32 hex digits drawn from the random source; retry jitter from it too', async () => {
    const node = new MapNode();
    const plain = new LeaseLock({ nodes: [node], clock: new ManualClock() });
    const a = await plain.acquire('a', { ttlMs: 1000 });
    if (a.kind !== 'granted') throw new Error('expected a grant');
    expect(a.lease.owner).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    // The default random source draws the jitter in [0, retryJitterMs].
    const plainClock = new ManualClock();
    const jittered = new LeaseLock({ nodes: [node], clock: plainClock });
    const waiting = jittered.acquire('a', { ttlMs: 1000, retries: 1, retryJitterMs: 3 });
    await new Promise((resolve) => setImmediate(resolve));
    const [jitter] = plainClock.delays.filter((d) => d !== 1000);
    expect(jitter === 0 || jitter === 1 || jitter === 2 || jitter === 3).toBe(true);
    plainClock.advance(3);
    expect(await waiting).toEqual({ kind: 'denied', reason: 'held' });
    const { lock, clock } = lockOver([node], { random: () => 0.75 });
    const b = await lock.acquire('b', { ttlMs: 1000 });
    if (b.kind !== 'granted') throw new Error('expected a grant');
    expect(b.lease.owner).toBe('c0000000'.repeat(4));
    const denied = lock.acquire('b', { ttlMs: 1000, retries: 1, retryDelayMs: 10, retryJitterMs: 3 });
    // floor(0.75 * 4) = 3
    await new Promise((resolve) => setImmediate(resolve));
    expect(clock.delays.filter((d) => d !== 1000)).toEqual([13]);
    clock.advance(13);
    expect(await denied).toEqual({ kind: 'denied', reason: 'held' });
  });

  it('forgets lost leases once it tracks 64, then at twice what it keeps', async () => {
    const node = new MapNode();
    const { lock, clock } = lockOver([node]);
    for (let i = 0; i < 64; i++) expect((await lock.acquire(`p${i}`, { ttlMs: 1000 })).kind).toBe('granted');
    expect(lock.trackedLeases).toBe(64);
    clock.advance(1000);
    const kept: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await lock.acquire(`q${i}`, { ttlMs: 100_000 });
      if (r.kind === 'granted') kept.push(r.lease.resource);
    }
    // The 64 expired leases went at the 65th grant; nothing is pruned again until 64 are tracked.
    expect(kept).toHaveLength(3);
    expect(lock.trackedLeases).toBe(3);
    for (let i = 3; i < 64; i++) await lock.acquire(`q${i}`, { ttlMs: 100_000 });
    expect(lock.trackedLeases).toBe(64);
    // All held: the 65th prunes nothing, and the next pruning waits for 2 x 65.
    await lock.acquire('q64', { ttlMs: 100_000 });
    expect(lock.trackedLeases).toBe(65);
  });

  it('a pruning that kept every lease waits for twice as many before the next; lost leases under the bound are kept', async () => {
    const node = new MapNode();
    const { lock, clock } = lockOver([node]);
    for (let i = 0; i < 10; i++) await lock.acquire(`e${i}`, { ttlMs: 10 });
    clock.advance(10);
    // Ten lost leases, far below the bound: the next grant prunes nothing.
    await lock.acquire('e10', { ttlMs: 100_000 });
    expect(lock.trackedLeases).toBe(11);
    for (let i = 11; i < 64; i++) await lock.acquire(`e${i}`, { ttlMs: 100_000 });
    // At 64 tracked the next grant prunes the ten lost ones (54 left), and the next pruning is at 2 x 54.
    await lock.acquire('f0', { ttlMs: 100_000 });
    expect(lock.trackedLeases).toBe(55);
    for (let i = 1; i < 53; i++) await lock.acquire(`f${i}`, { ttlMs: 100_000 });
    expect(lock.trackedLeases).toBe(107);
    clock.advance(100_000);
    // All lost, 107 tracked, below 108: kept until the count reaches it.
    await lock.acquire('g0', { ttlMs: 1000 });
    expect(lock.trackedLeases).toBe(108);
    await lock.acquire('g1', { ttlMs: 1000 });
    expect(lock.trackedLeases).toBe(2);
  });

  it('owners pad each 32-bit draw to 8 hex digits', async () => {
    const { lock } = lockOver([new MapNode()], { random: () => 5 / 2 ** 32 });
    const r = await lock.acquire('a', { ttlMs: 1000 });
    expect(r.kind === 'granted' && r.lease.owner).toBe('00000005'.repeat(4));
  });

  it('a grant needs validity left when the quorum answered: a reply at the deadline (ttl less the margin) is validity-exhausted, one 1 ms before is a grant', async () => {
    // ttl 40: the margin is ceil(0.01 x 40) + 2 = 3 ms, so the lease is valid until 37 ms after the request.
    const clock = new ManualClock(0);
    const node = new MapNode();
    const slow = (ms: number): LeaseNode => ({
      acquire: (r, o) => new Promise((resolve) => clock.schedule(clock.now() + ms, () => resolve(node.acquire(r, o)))),
      release: (r, o) => node.release(r, o),
      extend: (r, o) => node.extend(r, o),
      raiseToken: (r, t) => node.raiseToken(r, t),
    });
    const acquireAfter = async (ms: number) => {
      const lock = new LeaseLock({ nodes: [slow(ms)], clock, random: () => 0.5 });
      const p = lock.acquire('v', { ttlMs: 40 });
      await new Promise((resolve) => setImmediate(resolve));
      clock.advance(ms);
      const result = await p;
      await new Promise((resolve) => setImmediate(resolve));
      return result;
    };
    expect(await acquireAfter(37)).toEqual({ kind: 'denied', reason: 'validity-exhausted' });
    expect(node.keys.size).toBe(0);
    const granted = await acquireAfter(36);
    expect(granted).toMatchObject({ kind: 'granted', lease: { validUntilMs: 37 + 37 } });
  });

  it('an extension needs its replies before its new deadline: one at the deadline is no-quorum, one 1 ms before extends; a released or unknown lease is expired, and releasing it again is quiet', async () => {
    const clock = new ManualClock(0);
    const node = new MapNode();
    let delayMs = 0;
    const slow: LeaseNode = {
      acquire: (r, o) => node.acquire(r, o),
      release: (r, o) => node.release(r, o),
      extend: (r, o) => new Promise((resolve) => clock.schedule(clock.now() + delayMs, () => resolve(node.extend(r, o)))),
      raiseToken: (r, t) => node.raiseToken(r, t),
    };
    const lock = new LeaseLock({ nodes: [slow], clock, random: () => 0.5 });
    const r = await lock.acquire('x', { ttlMs: 1000 });
    if (r.kind !== 'granted') throw new Error('expected a grant');
    const extendAfter = async (ms: number) => {
      delayMs = ms;
      const p = lock.extend(r.lease, 40);
      await new Promise((resolve) => setImmediate(resolve));
      clock.advance(ms);
      return p;
    };
    // ttl 40: valid until 37 ms after the extension was sent.
    expect(await extendAfter(36)).toEqual({ kind: 'extended', validUntilMs: 37 });
    // Sent at 36, due by 73: a reply at 73 is too late.
    expect(await extendAfter(37)).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
    expect(r.lease.signal.aborted).toBe(true);
    await lock.release(r.lease);
    expect(node.keys.size).toBe(0);
    // The node would still say yes to an extension of this owner's key if it were there: the client answers for a lease it no longer holds.
    node.keys.set('x', r.lease.owner);
    expect(await lock.extend(r.lease, 40)).toEqual({ kind: 'not-extended', reason: 'expired' });
    await lock.release(r.lease);
    const stranger = { ...r.lease };
    expect(await lock.extend(stranger, 40)).toEqual({ kind: 'not-extended', reason: 'expired' });
  });

  it("an extension answered at its new deadline is no-quorum even while the lease's timer has not run yet (timers lag the clock under load)", async () => {
    // A clock whose timers never run: only the deadline read at the reply can refuse the extension.
    let nowMs = 0;
    const clock = { now: () => nowMs, schedule: () => () => undefined };
    const node = new MapNode();
    let answer: () => void = () => undefined;
    const held: LeaseNode = {
      acquire: (r, o) => node.acquire(r, o),
      release: (r, o) => node.release(r, o),
      extend: (r, o) => new Promise((resolve) => (answer = () => resolve(node.extend(r, o)))),
      raiseToken: (r, t) => node.raiseToken(r, t),
    };
    const lock = new LeaseLock({ nodes: [held], clock, random: () => 0.5 });
    const r = await lock.acquire('x', { ttlMs: 1000 });
    if (r.kind !== 'granted') throw new Error('expected a grant');
    const extendAnsweredAt = async (atMs: number) => {
      const sentMs = nowMs;
      const p = lock.extend(r.lease, 40);
      await new Promise((resolve) => setImmediate(resolve));
      nowMs = sentMs + atMs;
      answer();
      return p;
    };
    // ttl 40: valid until 37 ms after it was sent.
    expect(await extendAnsweredAt(36)).toEqual({ kind: 'extended', validUntilMs: 37 });
    expect(r.lease.signal.aborted).toBe(false);
    expect(await extendAnsweredAt(37)).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
  });

  it('an extension with a shorter ttl brings the deadline down when it is sent: the signal fires on it while the reply is out, a refusal leaves it down; a longer one waits for the quorum', async () => {
    const clock = new ManualClock(0);
    const node = new MapNode();
    const held: Array<() => void> = [];
    const gated: LeaseNode = {
      acquire: (r, o) => node.acquire(r, o),
      release: (r, o) => node.release(r, o),
      extend: (r, o) => new Promise((resolve) => held.push(() => resolve(node.extend(r, o)))),
      raiseToken: (r, t) => node.raiseToken(r, t),
    };
    const lock = new LeaseLock({ nodes: [gated], clock, random: () => 0.5 });
    const r = await lock.acquire('short', { ttlMs: 1000 });
    if (r.kind !== 'granted') throw new Error('expected a grant');
    expect(r.lease.validUntilMs).toBe(988);
    const signal = r.lease.signal;
    // ttl 40 sent at 0: a node may hold the key for 40 ms from now on, so the lease is good until 37, not 988.
    const shorter = lock.extend(r.lease, 40);
    expect(r.lease.validUntilMs).toBe(37);
    clock.advance(36);
    expect(signal.aborted).toBe(false);
    clock.advance(1);
    expect(signal.aborted).toBe(true);
    expect((signal.reason as LeaseLostError).reason).toBe('expired');
    held.shift()!();
    expect(await shorter).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
    expect(r.lease.validUntilMs).toBe(37);

    const s = await lock.acquire('long', { ttlMs: 1000 });
    if (s.kind !== 'granted') throw new Error('expected a grant');
    expect(s.lease.validUntilMs).toBe(37 + 988);
    const longer = lock.extend(s.lease, 5000);
    // Until a quorum confirms it, the longer ttl moves nothing.
    expect(s.lease.validUntilMs).toBe(37 + 988);
    held.shift()!();
    expect(await longer).toEqual({ kind: 'extended', validUntilMs: 37 + 5000 - 52 });
    await lock.release(s.lease);
  });

  it('no counter is raised unless a grant needs it: none when a quorum is at the token, none for an acquire refused for its validity', async () => {
    const raised: number[] = [];
    const counting = (node: MapNode, i: number, delayMs: number, clock: ManualClock): LeaseNode => ({
      acquire: (r, o) => (delayMs === 0 ? node.acquire(r, o) : new Promise((resolve) => clock.schedule(clock.now() + delayMs, () => resolve(node.acquire(r, o))))),
      release: (r, o) => node.release(r, o),
      extend: (r, o) => node.extend(r, o),
      raiseToken: (r, t) => (raised.push(i), node.raiseToken(r, t)),
    });
    const nodesAt = (counters: bigint[]): MapNode[] =>
      counters.map((c) => {
        const n = new MapNode();
        n.counter = c;
        return n;
      });
    // Five nodes, three at 5: they grant 6, 6, 6, 1, 1; a quorum is at 6, so nodes 3 and 4 are left behind.
    const clock = new ManualClock(0);
    const inStep = new LeaseLock({ nodes: nodesAt([5n, 5n, 5n, 0n, 0n]).map((n, i) => counting(n, i, 0, clock)), clock, random: () => 0.5 });
    expect(await inStep.acquire('a', { ttlMs: 1000 })).toMatchObject({ kind: 'granted', lease: { token: 6n } });
    expect(raised).toEqual([]);
    // Three nodes grant 6, 1, 1 (out of step) at 37 ms, when a 40 ms lease's validity is gone: refused before any write-back.
    const late = nodesAt([5n, 0n, 0n]);
    const outOfStep = new LeaseLock({ nodes: late.map((n, i) => counting(n, i, 37, clock)), clock, random: () => 0.5 });
    const p = outOfStep.acquire('b', { ttlMs: 40 });
    await new Promise((resolve) => setImmediate(resolve));
    clock.advance(37);
    expect(await p).toEqual({ kind: 'denied', reason: 'validity-exhausted' });
    expect(raised).toEqual([]);
    expect(late.map((n) => n.counter)).toEqual([6n, 1n, 1n]);
  });

  it('the write-back raises only granting nodes behind the token, waits until as many as it needs are raised, and gives up as soon as too few are left', async () => {
    type Raise = 'fail' | 'never' | number;
    const setUp = (raises: Raise[], heldBy: number[] = []) => {
      const clock = new ManualClock(0);
      const raised: number[] = [];
      // Node 0 is at 5 (grants 6), the others at 0 (grant 1): a quorum of three needs two of them raised.
      const nodes = raises.map((how, i): LeaseNode => {
        const n = new MapNode();
        if (i === 0) n.counter = 5n;
        if (heldBy.includes(i)) n.keys.set('w', 'someone else');
        return {
          acquire: (r, o) => n.acquire(r, o),
          release: (r, o) => n.release(r, o),
          extend: (r, o) => n.extend(r, o),
          raiseToken: (r, t) => {
            raised.push(i);
            if (how === 'fail') return Promise.reject(new UnavailableError('down'));
            if (how === 'never') return new Promise(() => undefined);
            return new Promise((resolve) => clock.schedule(clock.now() + how, () => resolve(n.raiseToken(r, t))));
          },
        };
      });
      const lock = new LeaseLock({ nodes, clock, random: () => 0.5, requestTimeoutMs: 50 });
      let outcome: unknown = 'pending';
      void lock.acquire('w', { ttlMs: 1000 }).then((r) => (outcome = r));
      const turns = async (): Promise<void> => {
        for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
      };
      return { clock, raised, turns, outcome: () => outcome };
    };
    // Two fail at once, two answer at 10 and 20 ms: the grant waits for the second of those.
    const slow = setUp([0, 'fail', 'fail', 10, 20]);
    await slow.turns();
    slow.clock.advance(10);
    await slow.turns();
    expect(slow.outcome()).toBe('pending');
    slow.clock.advance(10);
    await slow.turns();
    expect(slow.outcome()).toMatchObject({ kind: 'granted', lease: { token: 6n } });
    expect(slow.raised).toEqual([1, 2, 3, 4]);
    // Three fail at once and one never answers: no quorum can be raised, decided without waiting for the silent one.
    const hopeless = setUp([0, 'fail', 'fail', 'fail', 'never']);
    await hopeless.turns();
    expect(hopeless.outcome()).toEqual({ kind: 'denied', reason: 'no-quorum' });
    // A node that said no (held by someone else) is not behind: it is not raised.
    const denying = setUp([0, 0, 0, 0, 0], [4]);
    await denying.turns();
    expect(denying.outcome()).toMatchObject({ kind: 'granted', lease: { token: 6n } });
    expect(denying.raised).toEqual([1, 2, 3]);
    // Two said no: the grant is node 0's 6 and two 1s, so both of those are raised (a no is not a node at the token).
    const twoDenying = setUp([0, 0, 0, 0, 0], [3, 4]);
    await twoDenying.turns();
    expect(twoDenying.outcome()).toMatchObject({ kind: 'granted', lease: { token: 6n } });
    expect(twoDenying.raised).toEqual([1, 2]);
  });

  it("restores in the background only a node that refused with TOKENLOST: a node refusing for another reason (a counter key of the wrong type) is not written", async () => {
    const raised: number[] = [];
    const nodes = [0, 1, 2, 3, 4].map((i): LeaseNode => {
      const n = new MapNode();
      const refusal = i === 3 ? new ServerRefusedError('schema', 'TOKENLOST', 'counter lost') : i === 4 ? new ServerRefusedError('schema', 'WRONGTYPE', 'not a counter') : null;
      return {
        acquire: (r, o) => (refusal === null ? n.acquire(r, o) : Promise.reject(refusal)),
        release: (r, o) => n.release(r, o),
        extend: (r, o) => n.extend(r, o),
        raiseToken: (r, t) => {
          raised.push(i);
          return n.raiseToken(r, t);
        },
      };
    });
    const { lock } = lockOver(nodes);
    const r = await lock.acquire('t', { ttlMs: 1000 });
    expect(r).toMatchObject({ kind: 'granted', lease: { token: 1n } });
    await lock.settled();
    expect(raised).toEqual([3]);
  });

  it('an acquire is decided once its outcome and reason are known: failures beyond a quorum deny at once (no-quorum); a denial waits for enough answers to say held', async () => {
    const clock = new ManualClock(0);
    const failing: LeaseNode = { acquire: () => Promise.reject(new UnavailableError('down')), release: () => Promise.resolve(false), extend: () => Promise.resolve(false), raiseToken: () => Promise.resolve() };
    const silent: LeaseNode = { ...failing, acquire: () => new Promise(() => undefined) };
    const heldAfter = (ms: number): LeaseNode => ({ ...failing, acquire: () => new Promise((resolve) => clock.schedule(clock.now() + ms, () => resolve(null))) });
    const outcomeOf = (nodes: LeaseNode[]) => {
      let outcome: unknown = 'pending';
      void new LeaseLock({ nodes, clock, random: () => 0.5, requestTimeoutMs: 50 }).acquire('d', { ttlMs: 1000 }).then((r) => (outcome = r));
      return () => outcome;
    };
    const turns = async (): Promise<void> => {
      for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    };
    // Two of three failed: no quorum can answer, whatever the silent one says.
    const hopeless = outcomeOf([failing, failing, silent]);
    await turns();
    expect(hopeless()).toEqual({ kind: 'denied', reason: 'no-quorum' });
    // One held and two failed of five: held or no-quorum depends on the two still to answer; they say held at 10 ms.
    const undecided = outcomeOf([heldAfter(0), failing, failing, heldAfter(10), heldAfter(10)]);
    await turns();
    expect(undecided()).toBe('pending');
    clock.advance(10);
    await turns();
    expect(undecided()).toEqual({ kind: 'denied', reason: 'held' });
    // One grant, one held, two failed: still undecided until the fifth says held.
    const split = outcomeOf([new MapNode(), heldAfter(0), failing, failing, heldAfter(10)]);
    await turns();
    expect(split()).toBe('pending');
    clock.advance(10);
    await turns();
    expect(split()).toEqual({ kind: 'denied', reason: 'held' });
  });

  it('a reply after the deadline is not counted: the round leaves the background once, at the deadline', async () => {
    const clock = new ManualClock(0);
    const slowNode = new MapNode();
    const late: LeaseNode = {
      acquire: (r, o) => new Promise((resolve) => clock.schedule(clock.now() + 60, () => resolve(slowNode.acquire(r, o)))),
      release: (r, o) => slowNode.release(r, o),
      extend: (r, o) => slowNode.extend(r, o),
      raiseToken: (r, t) => slowNode.raiseToken(r, t),
    };
    const lock = new LeaseLock({ nodes: [new MapNode(), new MapNode(), late], clock, random: () => 0.5, requestTimeoutMs: 50 });
    expect((await lock.acquire('l', { ttlMs: 1000 })).kind).toBe('granted');
    expect(lock.backgroundRounds).toBe(1);
    clock.advance(50);
    expect(lock.backgroundRounds).toBe(0);
    clock.advance(10);
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(slowNode.keys.size).toBe(1);
    expect(lock.backgroundRounds).toBe(0);
  });

  it('every round waits while its outcome is open: acquire, extend, release, and fanOut (every vote)', async () => {
    type Reply<T> = { at: number; value: T } | 'fail' | 'never';
    const clock = new ManualClock(0);
    const answer = <T,>(reply: Reply<T>): Promise<T> =>
      reply === 'fail' ? Promise.reject(new UnavailableError('down')) : reply === 'never' ? new Promise(() => undefined) : new Promise((resolve) => clock.schedule(clock.now() + reply.at, () => resolve(reply.value)));
    const node = (acquire: Reply<bigint | null>, extend: Reply<boolean> = 'never', release: Reply<boolean> = 'never'): LeaseNode => ({
      acquire: () => answer(acquire),
      extend: () => answer(extend),
      release: () => answer(release),
      raiseToken: () => Promise.resolve(),
    });
    class Exposed extends LeaseLock {
      votesOfAll(): Promise<unknown> {
        return this.fanOut(undefined, (n) => n.extend('f', 'o', 100));
      }
    }
    const lockOf = (nodes: LeaseNode[]) => new Exposed({ nodes, clock, random: () => 0.5, requestTimeoutMs: 50 });
    const watch = (p: Promise<unknown>) => {
      let outcome: unknown = 'pending';
      void p.then((r) => (outcome = r ?? 'resolved'));
      return () => outcome;
    };
    const turns = async (): Promise<void> => {
      for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    };
    const at = async (ms: number): Promise<void> => {
      clock.advance(ms - clock.now());
      await turns();
    };
    const grant = (ms: number): Reply<bigint | null> => ({ at: ms, value: 1n });
    const held = (ms: number): Reply<bigint | null> => ({ at: ms, value: null });
    const yes = (ms: number): Reply<boolean> => ({ at: ms, value: true });
    // Two grants, one held, one failed of five: the fifth decides between a grant and held.
    const open = watch(lockOf([node(grant(0)), node(grant(0)), node(held(0)), node('fail'), node(grant(10))]).acquire('a', { ttlMs: 1000 }));
    await at(0);
    expect(open()).toBe('pending');
    await at(10);
    expect(open()).toMatchObject({ kind: 'granted', lease: { token: 1n } });
    // One failed and one held of three: the third decides between held and no-quorum.
    clock.set(0);
    const reason = watch(lockOf([node('fail'), node(held(0)), node(held(10))]).acquire('a', { ttlMs: 1000 }));
    await at(0);
    expect(reason()).toBe('pending');
    await at(10);
    expect(reason()).toEqual({ kind: 'denied', reason: 'held' });
    // Extensions: a quorum of yes at 10 ms; one failed, yes at 10 and 20 ms; two failed (decided at once).
    const extendWith = async (nodes: LeaseNode[]) => {
      clock.set(0);
      const lock = lockOf(nodes);
      const granted = await lock.acquire('a', { ttlMs: 10_000 });
      if (granted.kind !== 'granted') throw new Error('expected a grant');
      return watch(lock.extend(granted.lease, 1000));
    };
    const quorumAt10 = await extendWith([node(grant(0), yes(0)), node(grant(0), yes(10)), node(grant(0))]);
    await at(0);
    expect(quorumAt10()).toBe('pending');
    await at(10);
    expect(quorumAt10()).toMatchObject({ kind: 'extended' });
    const lastDecides = await extendWith([node(grant(0), 'fail'), node(grant(0), yes(10)), node(grant(0), yes(20))]);
    await at(10);
    expect(lastDecides()).toBe('pending');
    await at(20);
    expect(lastDecides()).toMatchObject({ kind: 'extended' });
    const hopeless = await extendWith([node(grant(0), 'fail'), node(grant(0), 'fail'), node(grant(0))]);
    await at(0);
    expect(hopeless()).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
    // A release resolves once a quorum answered (two of three, the second at 10 ms).
    clock.set(0);
    const releasing = lockOf([node(grant(0), 'never', yes(0)), node(grant(0), 'never', yes(10)), node(grant(0), 'never', yes(20))]);
    const r = await releasing.acquire('a', { ttlMs: 1000 });
    if (r.kind !== 'granted') throw new Error('expected a grant');
    const released = watch(releasing.release(r.lease));
    await at(0);
    expect(released()).toBe('pending');
    await at(10);
    // Known: a quorum answered.
    expect(released()).toBe(true);
    // fanOut waits for every vote.
    clock.set(0);
    const all = watch(lockOf([node(grant(0), yes(0)), node(grant(0), yes(10))]).votesOfAll());
    await at(0);
    expect(all()).toBe('pending');
    await at(10);
    expect(all()).toEqual([{ ok: true, value: true }, { ok: true, value: true }]);
  });

  it('a typed error from a node is thrown only when too few nodes answered: with a quorum answering held, it is a denial', async () => {
    const config = new ConnectionConfigError('authentication', 'no');
    const held = [new MapNode(), new MapNode()];
    for (const n of held) n.keys.set('r', 'someone else');
    const refusing: LeaseNode = { acquire: () => Promise.reject(config), release: () => Promise.resolve(false), extend: () => Promise.resolve(false), raiseToken: () => Promise.resolve() };
    const { lock } = lockOver([...held, refusing]);
    expect(await lock.acquire('r', { ttlMs: 1000 })).toEqual({ kind: 'denied', reason: 'held' });
  });

  it('a node that throws synchronously votes against; a typed error from too many nodes is thrown, not read as no-quorum; settled() waits for the background rounds', async () => {
    const good = new MapNode();
    const throwing: LeaseNode = {
      acquire: () => {
        throw 'not an error';
      },
      release: () => Promise.resolve(true),
      extend: () => Promise.resolve(true),
      raiseToken: () => Promise.resolve(),
    };
    const { lock } = lockOver([good, throwing, new MapNode()]);
    expect((await lock.acquire('r', { ttlMs: 1000 })).kind).toBe('granted');
    const config = new ConnectionConfigError('authentication', 'no');
    const refusing: LeaseNode = { ...throwing, acquire: () => Promise.reject(config) };
    const { lock: alone } = lockOver([refusing, throwing, refusing]);
    expect(await thrown(alone.acquire('r', { ttlMs: 1000 }))).toBe(config);
    const overflow = new TokenOverflowError('r');
    const { lock: full } = lockOver([{ ...throwing, acquire: () => Promise.reject(overflow) }]);
    expect(await thrown(full.acquire('r', { ttlMs: 1000 }))).toBe(overflow);
    const refusal = new ServerRefusedError('permission', 'NOPERM', 'no');
    const { lock: denied } = lockOver([{ ...throwing, acquire: () => Promise.reject(refusal) }]);
    expect(await thrown(denied.acquire('r', { ttlMs: 1000 }))).toBe(refusal);
    const { lock: down } = lockOver([{ ...throwing, acquire: () => Promise.reject(new UnavailableError('down')) }]);
    expect(await down.acquire('r', { ttlMs: 1000 })).toEqual({ kind: 'denied', reason: 'no-quorum' });

    // A node that never answers keeps a round in the background until the deadline.
    const silent: LeaseNode = { acquire: () => new Promise(() => undefined), release: () => new Promise(() => undefined), extend: () => new Promise(() => undefined), raiseToken: () => new Promise(() => undefined) };
    const { lock: slow, clock } = lockOver([new MapNode(), new MapNode(), silent], { requestTimeoutMs: 50 });
    const lease = await slow.acquire('s', { ttlMs: 1000 });
    if (lease.kind !== 'granted') throw new Error('expected a grant');
    expect(slow.backgroundRounds).toBe(1);
    let settled = false;
    const waiting = slow.settled().then(() => (settled = true));
    await slow.release(lease.lease);
    expect(slow.backgroundRounds).toBe(2);
    clock.advance(49);
    await Promise.resolve();
    expect(settled).toBe(false);
    clock.advance(1);
    await waiting;
    expect(slow.backgroundRounds).toBe(0);
  });
});

describe('LeaseHandle', QUICK, () => {
  it("the signal's abort event fires at the deadline (less the safety margin) with nobody reading it, and moves with an extension", () => {
    const clock = new ManualClock(0);
    const lease = new LeaseHandle('r', 'o', 1n, 100, clock, 10);
    const reasons: unknown[] = [];
    lease.signal.addEventListener('abort', (e) => reasons.push((e.target as AbortSignal).reason));
    lease.extendTo(150);
    clock.advance(139);
    expect(reasons).toEqual([]);
    clock.advance(1);
    expect(reasons).toHaveLength(1);
    expect((reasons[0] as LeaseLostError).reason).toBe('expired');
  });
});

describe('Background', QUICK, () => {
  it('counts rounds and wakes every waiter when none is left', async () => {
    const b = new Background();
    await b.settled();
    b.started();
    b.started();
    expect(b.count).toBe(2);
    const woken: number[] = [];
    const one = b.settled().then(() => woken.push(1));
    const two = b.settled().then(() => woken.push(2));
    b.ended();
    await Promise.resolve();
    expect(woken).toEqual([]);
    b.ended();
    await Promise.all([one, two]);
    expect(woken).toEqual([1, 2]);
    expect(b.count).toBe(0);
  });
});

describe('using(): options and refusals', QUICK, () => {
  it('refuses an extension fraction outside [0, 1) or not a number, and a denial is a LockNotAcquiredError naming the reason', async () => {
    const node = new MapNode();
    const { lock } = lockOver([node]);
    // An object without a prototype (no toString) was a TypeError from the message's String().
    for (const [bad, said] of [[1, '1'], [-0.5, '-0.5'], [Number.NaN, 'NaN'], ['0.5', '"0.5"'], [Object.create(null) as unknown, 'an object'], [Symbol('s'), 'Symbol(s)'], [1n, '1n']] as const) {
      const e = await thrown(using(lock, 'r', { ttlMs: 100, extendAtFraction: bad as number }, async () => 1));
      expect(e).toBeInstanceOf(InvalidInputError);
      expect((e as InvalidInputError).code).toBe('invalid-config');
      expect((e as Error).message).toBe(`invalid-config: extendAtFraction must be a number in [0, 1), got ${said}`);
    }
    expect(node.keys.size).toBe(0);
    await lock.acquire('r', { ttlMs: 100 });
    const e = await thrown(using(lock, 'r', { ttlMs: 100 }, async () => 1));
    expect(e).toBeInstanceOf(LockNotAcquiredError);
    expect([(e as LockNotAcquiredError).name, (e as Error).message, (e as LockNotAcquiredError).resource, (e as LockNotAcquiredError).reason]).toEqual(['LockNotAcquiredError', "could not acquire 'r': held", 'r', 'held']);
    expect(await using(lock, 'free', { ttlMs: 100, extendAtFraction: 0 }, async (_signal, lease) => lease.resource)).toBe('free');
    expect(node.keys.has('free')).toBe(false);
  });

  it('extendAtFraction 0 plans no extension: the lease runs out at its deadline', async () => {
    const { lock, clock } = lockOver([new MapNode()]);
    let extensions = 0;
    const extend = lock.extend.bind(lock);
    lock.extend = (lease, ttlMs) => (extensions++, extend(lease, ttlMs));
    const aborted = await using(lock, 'u', { ttlMs: 100, extendAtFraction: 0 }, async (signal) => {
      clock.advance(200);
      return signal.aborted;
    });
    expect([aborted, extensions]).toEqual([true, 0]);
  });
});
