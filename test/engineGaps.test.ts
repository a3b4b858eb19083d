import { describe, expect, it } from 'vitest';
import type { BackendUnderTest, LockClient } from '../conformance/adapter.ts';
import { checkConformance, MAX_ATTEMPTS, runLockstep } from '../conformance/index.ts';
import type { RunReport } from '../conformance/index.ts';
import { simLeaseBackend } from '../conformance/sim/backend.ts';
import { SimNetwork } from '../conformance/sim/network.ts';
import { SimRedisNode } from '../conformance/sim/redisNode.ts';
import { simSessionBackend } from '../conformance/sim/sessionBackend.ts';
import { TimingError, VirtualTime } from '../conformance/sim/time.ts';
import { withTimeout } from '../impl/errors.ts';
import { LeaseLock } from '../impl/leaseLock.ts';
import { clockAt, read } from '../model/clock.ts';
import { MAX_TOKEN } from '../model/errors.ts';
import type { Command } from '../model/index.ts';
import { designs } from '../model/index.ts';

/**
 * The conformance engine where hand mutants of it survived every other test
 * (docs/mutation.md, "The conformance engine by hand", the rows marked gap
 * by session h11): each test builds the exact situation the row describes.
 */

/** The sim backend with each client wrapped by `wrap(the real client, its index)`. */
function wrapped(base: BackendUnderTest, wrap: (real: LockClient, client: number) => LockClient, name = `${base.name} (wrapped)`): BackendUnderTest {
  return {
    ...base,
    name,
    start: async (o) => {
      const instance = await base.start(o);
      return { ...instance, clients: instance.clients.map((c, i) => wrap(c, i)) };
    },
  };
}

/** A client's calls, bound (a LockClient spread loses its methods' `this`). */
function bound(c: LockClient): LockClient {
  return { acquire: c.acquire.bind(c), ...(c.extend ? { extend: c.extend.bind(c) } : {}), release: c.release.bind(c), store: c.store, clock: c.clock };
}

/** Waits `ms` on the client's own (virtual) clock. */
const sleepOn = (c: LockClient, ms: number) => new Promise<void>((resolve) => c.clock.schedule(c.clock.now() + ms, resolve));

describe('L1: an answer between two branches\' times (an ambiguous timeout)', () => {
  // A reply 49 ms late on a 27 ms ttl: the client gives up at its own timeout (t=27), or the late reply itself says
  // timed-out (t=49); both are `timed-out`, at two times.
  const slow: Command = { kind: 'acquire', client: 0, resource: 'r', ttlMs: 27, latencyMs: 49 };

  it('the model has the same answer at two times', async () => {
    const report = await runLockstep(simLeaseBackend(designs.redisSingle(), 'strict'), [slow], { clients: 2, tokenBase: 0n });
    expect(report.verdict).toEqual({ kind: 'pass' });
    expect(report.steps[0]!.allowed.every((o) => o.kind === 'timed-out')).toBe(true);
    expect(report.steps[0]!.endMs).toBe(27);
  });

  it('a backend that gives up at t=35, after the first and before the second, is the later branch (the runner moves on to it), not the engine\'s crash', async () => {
    const giveUp = wrapped(simLeaseBackend(designs.redisSingle(), 'strict'), (c) => ({
      ...bound(c),
      // The schedule's acquire only (the probes' calls go to the real client).
      acquire: async (resource, options) => {
        if (options.ttlMs !== 27) return c.acquire(resource, options);
        await sleepOn(c, 35);
        return { kind: 'timed-out' };
      },
    }));
    const report = await runLockstep(giveUp, [slow, { kind: 'advance', ms: 1 }], { clients: 2, tokenBase: 0n });
    expect(report.verdict).toEqual({ kind: 'pass' });
    // Time stood at the later branch's t=49 after the step.
    expect(report.steps.map((s) => s.endMs)).toEqual([49, 50]);
  });
});

describe('L1: an answer the model gives, but later than its time', () => {
  it('is a deviation whose message says when (a grant handed over 1 ms late: less validity, LIVE-1)', async () => {
    // Client 0's key, extended in flight to t=59, reaches its expiry there; a node that drops keys at their exact expiry
    // grants client 1's retry at t=59 (deadline 61), as one of the model's two states has it; the other grants at t=61 (63).
    const base = simLeaseBackend(designs.redisSingle(), 'strict', { nodeServer: (time, persistent, restartDelayMs, tokenBase) => new GoneAtExpiry(time, persistent, restartDelayMs, tokenBase) });
    const schedule: Command[] = [
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 41 },
      { kind: 'pause', client: 0, inFlight: { kind: 'extend', client: 0, resource: 'r', ttlMs: 59 } },
      { kind: 'advance', ms: 57 },
      { kind: 'acquire', client: 1, resource: 'r', ttlMs: 5, retries: 2, retryDelayMs: 2 },
    ];
    expect((await runLockstep(base, schedule, { clients: 2, tokenBase: 0n })).verdict).toEqual({ kind: 'pass' });
    // The grant of t=59 handed to the caller 1 ms later.
    const late = wrapped(base, (c, i) => ({
      ...bound(c),
      acquire: async (resource, options) => {
        const r = await c.acquire(resource, options);
        if (i === 1 && r.kind === 'granted') await sleepOn(c, 1);
        return r;
      },
    }));
    const report = await runLockstep(late, schedule, { clients: 2, tokenBase: 0n });
    expect(report.verdict).toMatchObject({
      kind: 'conformance-failure',
      property: 'LIVE-1',
      consequence: { kind: 'safe', what: 'validity shorter than allowed' },
      message: 'the backend answered {kind:granted,token:2n,validUntilMs:61} at t=60 ms (the model has that answer at t=59 ms); the model allows {kind:granted,token:2n,validUntilMs:63} or {kind:granted,token:2n,validUntilMs:61}',
    });
  });
});

describe('T2: timers of one clock due at the same instant', () => {
  it('fire in the order they were set (a sleep set first wakes first)', async () => {
    const time = new VirtualTime();
    const fired: string[] = [];
    time.at(5, () => fired.push('first'));
    time.at(5, () => fired.push('second'));
    time.at(4, () => fired.push('earlier'));
    time.at(5, () => fired.push('third'));
    await time.advanceTo(10);
    expect(fired).toEqual(['earlier', 'first', 'second', 'third']);
  });
});

describe('N3: at a resume, a paused client\'s due timers fire before the replies it missed arrive', () => {
  it('a timer\'s work runs before the missed reply\'s, as in a process that stopped (faults.ts: "its due timers fire before its replies arrive")', async () => {
    const time = new VirtualTime();
    const network = new SimNetwork(time, () => ({ reachable: () => true }));
    const clock = network.pausable(0, time.clockOf(() => clockAt()));
    const seen: string[] = [];
    network.hold(0);
    // Due during the pause: a sleep whose waiter takes two turns (an await in an async function, then its own work).
    const slept = new Promise<void>((resolve) => clock.schedule(5, resolve));
    void (async () => {
      await slept;
      await Promise.resolve();
      seen.push('timer');
    })();
    // A reply that came in during the pause.
    void network.call(0, 0, () => 'pong').then(() => seen.push('reply'));
    await time.advanceTo(10);
    expect(seen).toEqual([]);
    network.release(0);
    await time.advanceTo(10);
    expect(seen).toEqual(['timer', 'reply']);
  });
});

describe('N4: the wait for real replies is bounded', () => {
  it('a real request that never answers, from a client whose only timeout is on the virtual clock, stalls the run instead of hanging it', async () => {
    const settle: { network?: SimNetwork } = {};
    const time = new VirtualTime({ settle: () => settle.network!.settled() });
    const network = new SimNetwork(time, () => ({ reachable: () => true }), { realReplyBoundMs: 50 });
    settle.network = network;
    const clock = time.clockOf(() => clockAt());
    // The client's timeout fires only when virtual time moves, and time waits for the reply first.
    const work = withTimeout(clock, 1000, 'request', network.call(0, 0, () => new Promise<never>(() => undefined)));
    work.catch(() => undefined);
    const stopped = time.runUntil(work, 0);
    await expect(stopped).rejects.toThrow(TimingError);
    await expect(stopped).rejects.toThrow(/a real request had no reply after 50 ms of real time: the machine stalled the run/);
    // Time moves again afterwards: nothing is waited on any more, and the client's own timeout can fire.
    await time.runUntil(work, 2000).catch(() => undefined);
    await expect(work).rejects.toThrow('request timed out after 1000 ms');
  }, 10_000);

  it('refuses a bound that is not a positive integer of ms', () => {
    const time = new VirtualTime();
    for (const bad of [0, -1, 1.5, Number.NaN, 2 ** 31]) expect(() => new SimNetwork(time, () => ({ reachable: () => true }), { realReplyBoundMs: bad })).toThrow(/realReplyBoundMs must be an integer number of ms/);
    expect(() => new SimNetwork(time, () => ({ reachable: () => true }), null as never)).toThrow(/options must be an object/);
  });
});

describe('C13: the store write with token 2^63 is probed', () => {
  it('a store that refuses -1 but takes a token above 2^63-1 is FENCE-2 at that probe', async () => {
    const open = wrapped(simLeaseBackend(designs.redisSingle(), 'strict'), (c) => ({
      ...bound(c),
      store: {
        read: c.store.read.bind(c.store),
        // The upper bound forgotten: a token past 2^63-1 is written as if it fitted.
        write: async (resource, token, value) => (token > MAX_TOKEN ? { kind: 'accepted' } : c.store.write(resource, token, value)),
      },
    }));
    // One probe per agreed operation, in turn; the eighth (step index 7, client 0 holding no lease) is the write with 2^63.
    const reads: Command[] = Array.from({ length: 8 }, () => ({ kind: 'read', client: 0, resource: 'r' }));
    const report = await runLockstep(open, reads, { clients: 2, tokenBase: 0n });
    expect(report.verdict).toMatchObject({ kind: 'conformance-failure', property: 'FENCE-2', message: 'invalid input (write with token 2^63) was accepted, not with InvalidInputError', step: { index: 7 } });
  });
});

/** Claims 1 ms less validity than it has: a deviation in the safe direction, which a library audit goes past. */
class ShortValidity extends LeaseLock {
  protected override driftMarginMs(ttlMs: number): number {
    return super.driftMarginMs(ttlMs) + 1;
  }
}
const shortLibrary: BackendUnderTest = { ...simLeaseBackend(designs.redisSingle(), 'strict', { lock: (p) => new ShortValidity(p) }, 'short validity'), contract: {} };
const PAUSES = ['advance', 'pause'] as const;

describe('K4: outside an audit, a deviation a library audit went past fails the check', () => {
  it('a library backend (a contract) under the default failOn fails on its first safe deviation, though the run went on past it', async () => {
    const reports: RunReport[] = [];
    const result = await checkConformance(shortLibrary, { runs: 20, seed: 3, faults: PAUSES, onRun: (_r, report) => reports.push(report) });
    expect(result.failure).not.toBeNull();
    const verdict = result.failure!.report.verdict;
    expect(verdict).toMatchObject({ kind: 'conformance-failure', property: 'LIVE-1', consequence: { kind: 'safe', what: 'validity shorter than allowed' } });
    // The run that failed went on past the deviation (an audit does): the check, not the run, stops at it.
    expect(reports[result.failure!.failedAtRun - 1]!.deviations?.length ?? 0).toBeGreaterThan(0);
  });
});

describe('K3: a run stopped out of pace after it showed what the check fails on', () => {
  it('fails the check with that deviation, not counted as stopped early', async () => {
    // Out of pace from the step after the first grant on: every run deviates (a safe deviation, gone past) and then stops.
    const stopping: BackendUnderTest = {
      ...shortLibrary,
      start: async (o) => {
        const instance = await shortLibrary.start(o);
        let granted = false;
        let grantedBefore = false;
        return {
          ...instance,
          clients: instance.clients.map((c) => ({
            ...bound(c),
            acquire: async (resource, options) => {
              const r = await c.acquire(resource, options);
              if (r.kind === 'granted') granted = true;
              return r;
            },
          })),
          env: {
            ...instance.env,
            advanceTo: async (ms: number) => {
              if (grantedBefore) throw new TimingError('real time ran ahead');
              grantedBefore = granted;
              return instance.env.advanceTo(ms);
            },
          },
        };
      },
    };
    const reports: RunReport[] = [];
    const result = await checkConformance(stopping, { runs: 20, seed: 3, faults: PAUSES, onRun: (_r, report) => reports.push(report) });
    expect(result.failure).not.toBeNull();
    expect(result.failure!.report.verdict).toMatchObject({ kind: 'conformance-failure', property: 'LIVE-1', consequence: { kind: 'safe' } });
    // The run the check failed on had stopped out of pace after the deviation.
    expect(reports[result.failure!.failedAtRun - 1]!.verdict).toMatchObject({ kind: 'inconclusive', cause: 'out-of-pace' });
  });
});

describe('K7, K8, K9: what a failed check counts is what the runs before the failure showed, not its shrinking', () => {
  it('findings, runs stopped early and attempts retried come from the runs before the first failure only', async () => {
    // Unfenced (findings under pauses), out of pace in every attempt once client 1 read the store (stopped early after
    // MAX_ATTEMPTS), and a conformance failure where client 1 extends (its extend throws): shrinking meets all three.
    const base = simLeaseBackend(designs.redisSingle(), 'unfenced');
    let starts = 0;
    const mixed: BackendUnderTest = {
      ...base,
      name: 'unfenced, out of pace after a read by client 1, failing at its extend',
      start: async (o) => {
        starts++;
        const instance = await base.start(o);
        let read = false;
        return {
          ...instance,
          clients: instance.clients.map((c, i) => ({
            ...bound(c),
            ...(i === 1 ? { extend: async () => Promise.reject(new Error('boom')) } : {}),
            store: {
              write: c.store.write.bind(c.store),
              read: async (resource: string) => {
                if (i === 1) read = true;
                return c.store.read(resource);
              },
            },
          })),
          env: {
            ...instance.env,
            advanceTo: async (ms: number) => (read ? Promise.reject(new TimingError('real time ran ahead')) : instance.env.advanceTo(ms)),
          },
        };
      },
    };
    const runs: Array<{ report: RunReport; attempts: number }> = [];
    // The check starts one instance before its runs, to read the faults the backend offers.
    let counted = 1;
    const result = await checkConformance(mixed, {
      runs: 40,
      seed: 5,
      faults: PAUSES,
      onRun: (_r, report) => {
        runs.push({ report, attempts: starts - counted });
        counted = starts;
      },
    });
    expect(result.failure).not.toBeNull();
    const before = runs.slice(0, result.failure!.failedAtRun - 1);
    const shrinking = runs.slice(result.failure!.failedAtRun);
    const stopped = (r: RunReport) => r.verdict.kind === 'inconclusive';
    const findingsOf = (rs: typeof runs) => {
      const counts: Record<string, number> = {};
      for (const { report } of rs.filter((r) => !stopped(r.report))) for (const p of new Set(report.findings.flatMap((f) => f.violations.map((v) => v.property)))) counts[p] = (counts[p] ?? 0) + 1;
      return counts;
    };
    const retriedOf = (rs: typeof runs) => rs.reduce((n, r) => n + r.attempts - 1, 0);
    // Shrinking met findings, runs out of pace and retries: counting them too would change every figure.
    expect(Object.keys(findingsOf(shrinking)).length).toBeGreaterThan(0);
    expect(shrinking.filter((r) => stopped(r.report)).length).toBeGreaterThan(0);
    expect(retriedOf(shrinking)).toBeGreaterThan(0);
    expect(Object.fromEntries(Object.entries(result.findings).filter(([, n]) => n !== 0))).toEqual(findingsOf(before));
    expect(result.stoppedEarly).toBe(before.filter((r) => stopped(r.report)).length);
    expect(result.stoppedEarlyBy).toEqual({ 'out-of-pace': result.stoppedEarly });
    expect(result.retried).toBe(retriedOf(before));
    expect(before.filter((r) => stopped(r.report)).every((r) => r.attempts === MAX_ATTEMPTS)).toBe(true);
  });
});

/**
 * A Redis node whose keys are gone at their exact expiry (Redis keeps them
 * while now <= expiry; the model allows either at that instant): every
 * script and the white-box look see a key due now as gone.
 */
class GoneAtExpiry extends SimRedisNode {
  readonly #expiry = new Map<string, number>();
  constructor(
    private readonly clock: VirtualTime,
    persistent: boolean,
    restartDelayMs: number,
    tokenBase: bigint,
  ) {
    super(clock, persistent, restartDelayMs, tokenBase);
  }
  #drop(resource: string): void {
    const due = this.#expiry.get(resource);
    if (due !== undefined && read(this.wall, this.clock.nowMs()) >= due) {
      this.del(resource);
      this.#expiry.delete(resource);
    }
  }
  #expires(resource: string, ttlMs: number): void {
    this.#expiry.set(resource, read(this.wall, this.clock.nowMs()) + ttlMs);
  }
  override acquire(resource: string, owner: string, ttlMs: number): bigint | null {
    this.#drop(resource);
    const token = super.acquire(resource, owner, ttlMs);
    if (token !== null) this.#expires(resource, ttlMs);
    return token;
  }
  override extend(resource: string, owner: string, ttlMs: number): boolean {
    this.#drop(resource);
    const extended = super.extend(resource, owner, ttlMs);
    if (extended) this.#expires(resource, ttlMs);
    return extended;
  }
  override get(resource: string): string | null {
    this.#drop(resource);
    return super.get(resource);
  }
}

describe('L17: a holder\'s key is required only where it is live for sure', () => {
  it('a node that dropped a key at its exact expiry (the model: maybe live) while its client still holds the lease is no OWN-1', async () => {
    const backend = simLeaseBackend(designs.redisSingle(), 'strict', { nodeServer: (time, persistent, restartDelayMs, tokenBase) => new GoneAtExpiry(time, persistent, restartDelayMs, tokenBase) }, 'memory redis-single, keys gone at their exact expiry');
    // Client 1's key (ttl 14) reaches its expiry on the node's clock at once, stepped 14 ms ahead; the client's own
    // deadline (its clock not stepped) lies ahead, so the client holds the lease.
    const schedule: Command[] = [
      { kind: 'acquire', client: 1, resource: 'r', ttlMs: 14 },
      { kind: 'clock-step', node: 0, deltaMs: 14 },
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 20 },
    ];
    const report = await runLockstep(backend, schedule, { clients: 2, tokenBase: 0n, continueAfterViolation: true });
    expect(report.verdict).toEqual({ kind: 'pass' });
    // The node's key was gone: client 0 got the lock while client 1 still held its lease (the design's finding, not a deviation).
    expect(report.steps[2]!.actual).toMatchObject({ kind: 'granted' });
    expect(report.findings.flatMap((f) => f.violations.map((v) => v.property))).toContain('MUTEX-1');
  });
});

describe('C7: a fired signal is an early loss only when every candidate state holds the lease valid', () => {
  it('a session lock whose session keepalive ended during a cut (the model: maybe ended) signals the loss at the heal: no LIVE-1', async () => {
    // Client 0's link to the server is cut for 46 ms: the server may have ended its session by keepalive, or not yet.
    // This backend's keepalive (20 ms of cut time) ended it: at the heal the client learns, and its signal fires.
    const schedule: Command[] = [
      { kind: 'acquire', client: 0, resource: 'r' },
      { kind: 'partition', client: 0, node: 0 },
      { kind: 'advance', ms: 46 },
      { kind: 'heal', client: 0, node: 0 },
      { kind: 'acquire', client: 1, resource: 'r' },
    ];
    // Without a white-box look at the server (inspect() is optional), the candidate states stay apart until client 1 acquires.
    const session = simSessionBackend('strict');
    const blind: BackendUnderTest = {
      ...session,
      start: async (o) => {
        const instance = await session.start(o);
        const env = { ...instance.env };
        delete env.inspect;
        return { ...instance, env };
      },
    };
    const report = await runLockstep(blind, schedule, { clients: 2, tokenBase: 0n });
    expect(report.verdict).toEqual({ kind: 'pass' });
    // The session was gone: client 1 was granted the lock.
    expect(report.steps[4]!.actual).toMatchObject({ kind: 'granted' });
  });
});

describe('L2: OWN-1 is blamed only when the backend\'s keys are wrong in every allowed state', () => {
  it('a grant with 1 ms more validity than allowed, its keys right in one of two allowed states, is MUTEX-1 (longer than allowed), not OWN-1', async () => {
    // Redlock on 3 nodes: client 1's key (ttl 14) is past its expiry on nodes 0 and 1 and at its exact expiry on node 2.
    // Client 0's grant then holds node 2 too (the key gone) or only nodes 0 and 1 (the key alive): the same answer,
    // two states of the keys. The backend kept client 1's key on node 2 (right in the second state only).
    const schedule: Command[] = [
      { kind: 'acquire', client: 1, resource: 'r', ttlMs: 14 },
      { kind: 'clock-step', node: 0, deltaMs: 20 },
      { kind: 'clock-step', node: 1, deltaMs: 20 },
      { kind: 'clock-step', node: 2, deltaMs: 14 },
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 20 },
    ];
    const redlock = simLeaseBackend(designs.redlock({ nodes: 3 }), 'strict');
    const plain = await runLockstep(redlock, schedule, { clients: 2, tokenBase: 0n, continueAfterViolation: true });
    expect(plain.verdict).toEqual({ kind: 'pass' });
    expect(plain.steps[4]!.allowed).toEqual([
      { kind: 'granted', token: 2n, validUntilMs: 17 },
      { kind: 'granted', token: 2n, validUntilMs: 17 },
    ]);
    // The same backend, but client 0's grant of ttl 20 claims 1 ms more.
    const longer = wrapped(redlock, (c, i) => ({
      ...bound(c),
      acquire: async (resource, options) => {
        const r = await c.acquire(resource, options);
        if (i !== 0 || r.kind !== 'granted' || options.ttlMs !== 20) return r;
        const l = r.lease;
        return { kind: 'granted', lease: { resource: l.resource, owner: l.owner, token: l.token, validUntilMs: l.validUntilMs! + 1, get signal() { return l.signal; } } };
      },
    }));
    const report = await runLockstep(longer, schedule, { clients: 2, tokenBase: 0n, continueAfterViolation: true });
    expect(report.verdict).toMatchObject({
      kind: 'conformance-failure',
      property: 'MUTEX-1',
      message: 'the backend answered {kind:granted,token:2n,validUntilMs:18}; the model allows {kind:granted,token:2n,validUntilMs:17}',
      step: { index: 4 },
    });
  });
});

describe('L4: a finding is reported only when every candidate state shows it', () => {
  it('a key that may or may not have been set (a timed-out acquire), kept alive past its bound by a clock stepped back: no certain LIVE-1', async () => {
    // The acquire's reply comes 49 ms late on a 27 ms ttl: timed out, its key set or not (unknown), and a key set kept or
    // deleted by the release the client sends as it gives up (spec 4.2). Node 0's clock then goes back 100 ms, so a key
    // kept would outlive its bound (29 ms): LIVE-1 in the state with the key, not in the others.
    const schedule: Command[] = [
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 27, latencyMs: 49 },
      { kind: 'clock-step', node: 0, deltaMs: -100 },
      { kind: 'advance', ms: 40 },
    ];
    const report = await runLockstep(simLeaseBackend(designs.redisSingle(), 'strict'), schedule, { clients: 2, tokenBase: 0n, continueAfterViolation: true });
    expect(report.verdict).toEqual({ kind: 'pass' });
    expect(report.steps[2]!.allowed).toHaveLength(3);
    expect(report.findings).toEqual([]);
  });
});
