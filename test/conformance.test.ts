import { existsSync, readFileSync } from 'node:fs';

import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_ATTEMPTS, checkConformance, checkMisconfigurations, runLockstep, simLeaseBackend } from '../conformance/index.ts';
import type { LockParts } from '../conformance/index.ts';
import type { Lease } from '../impl/lease.ts';
import { LeaseLock } from '../impl/leaseLock.ts';
import { InvalidInputError } from '../model/errors.ts';
import { designs } from '../model/index.ts';
import type { Command, Design, StorePolicy } from '../model/index.ts';
import { BROKEN } from './fixtures/broken.ts';
import { usingClient, usingMisconfigurations } from '../conformance/sim/usingClient.ts';
import { using } from '../impl/using.ts';
import { simSessionBackend } from '../conformance/sim/sessionBackend.ts';
import { TimingError } from '../conformance/sim/time.ts';
import { testTempDir } from './tempDirs.ts';

const SEED = Number(process.env.LOCKCHECK_SEED ?? 20161010);
/** Schedules per correct in-memory backend (mutation testing runs fewer). */
const SIM_RUNS = Number(process.env.LOCKCHECK_SIM_RUNS ?? 200);
/** Schedules per design-finding check (mutation testing runs fewer). */
const FINDING_RUNS = Number(process.env.LOCKCHECK_FINDING_RUNS ?? 150);
const dir = testTempDir('lockcheck-test-');

describe('in-memory backends built on the model pass every run', () => {
  const throughUsing = (extendAtFraction: number) => simLeaseBackend(designs.redlock({ nodes: 3 }), 'strict', { client: (lock) => usingClient(lock, using, extendAtFraction) }, 'memory redlock(3) through using() / strict');
  const cases: ReadonlyArray<readonly [Design, StorePolicy]> = [
    [designs.redisSingle(), 'strict'],
    [designs.redisSingle({ persistence: 'aof-always' }), 'unfenced'],
    [designs.redlock({ nodes: 5 }), 'monotonic'],
    [designs.redlock({ nodes: 3, persistence: 'aof-always', restartDelayMs: 30 }), 'strict'],
  ];
  const backends = [
    ...cases.map(([design, store]) => simLeaseBackend(design, store)),
    // Every lease taken through using(), as application code takes it.
    { ...throughUsing(0), misconfigurations: [...throughUsing(0).misconfigurations!, ...usingMisconfigurations(throughUsing)] },
    // Session-bound, in memory: lost sessions and signals without a deadline.
    simSessionBackend('strict'),
  ];
  for (const backend of backends) {
    it(`${backend.name}: no conformance failure in ${SIM_RUNS} schedules with every fault`, async () => {
      const result = await checkConformance(backend, { runs: SIM_RUNS, seed: SEED, clients: 3, resources: 2, maxCommands: 50 });
      expect(result.failure?.message ?? null).toBeNull();
      expect(result.runs).toBe(SIM_RUNS);
    });
  }

  it('refuse invalid configurations with InvalidInputError naming the option', async () => {
    const problems = (await Promise.all(backends.map(checkMisconfigurations))).flat();
    expect(problems).toEqual([]);
    // Each lease lock is tried with every bad option; the using() one with bad extension fractions too.
    expect(backends.map((b) => b.misconfigurations?.length ?? 0)).toEqual([10, 10, 10, 10, 13, 0]);
  });

  it('reports a lock that takes a bad option instead of refusing it, and an error that does not name the option', async () => {
    // Clamps driftFactor into range; words its refusal of a negative safety margin vaguely; gives a large clock margin the wrong code.
    const lax = simLeaseBackend(designs.redisSingle(), 'strict', {
      lock: (p) => {
        const o = p as LockParts & { safetyMarginMs?: number };
        if ((o.safetyMarginMs ?? 0) < 0) throw new InvalidInputError('invalid-config', 'bad option');
        if (o.clockMarginMs > 1000) throw new InvalidInputError('precondition', 'clockMarginMs too large');
        return new LeaseLock({ ...o, driftFactor: Math.min(Math.max(Number.isNaN(o.driftFactor) ? 0.01 : o.driftFactor, 0), 0.99) });
      },
    });
    expect(await checkMisconfigurations(lax)).toEqual([
      `${lax.name}: a lock with driftFactor -0.01 was accepted`,
      `${lax.name}: a lock with driftFactor 1 was accepted`,
      `${lax.name}: a lock with driftFactor NaN was accepted`,
      `${lax.name}: a lock with clockMarginMs 1001 was refused with code precondition, not invalid-config`,
      `${lax.name}: a lock with safetyMarginMs -1 was refused with "invalid-config: bad option", which does not name safetyMarginMs`,
    ]);
  });

  it('using() extends its lease in the background on virtual time while the task runs, and stops and releases when it ends', async () => {
    // The runner's using() client has no background extension (the model has none it did not ask for): this drives it directly.
    const locks: LeaseLock[] = [];
    const backend = simLeaseBackend(designs.redlock({ nodes: 3 }), 'strict', { client: (lock) => (locks.push(lock), usingClient(lock)) });
    const { env } = await backend.start({ clients: 1, tokenBase: 0n });
    let lease: Lease | undefined;
    let finish = (): void => undefined;
    const task = using(locks[0]!, 'r', { ttlMs: 100, extendAtFraction: 0.5 }, (signal, l) => {
      lease = l;
      return new Promise<boolean>((done) => (finish = () => done(signal.aborted)));
    });
    const holders = async (): Promise<number> => (await env.inspect!('r')).filter((o) => o === lease!.owner).length;
    await env.advanceTo(0);
    // Valid until ttl - (ceil(0.01 * ttl) + 2) = 97; each extension, at half the ttl before the deadline, adds 47 ms.
    expect(lease!.validUntilMs).toBe(97);
    for (let t = 10; t <= 350; t += 10) await env.advanceTo(t);
    expect(lease!.validUntilMs).toBe(97 + 7 * 47);
    expect(await holders()).toBe(3);
    finish();
    expect(await task).toBe(false);
    expect(lease!.signal.aborted).toBe(true);
    expect(await holders()).toBe(0);
    // No extension after the task ended: the deadline stays where it was.
    await env.advanceTo(1000);
    expect(lease!.validUntilMs).toBe(97 + 7 * 47);
  });

  it('reports the design findings the model predicts, and only as findings', async () => {
    const unfenced = await checkConformance(simLeaseBackend(designs.redisSingle({ persistence: 'aof-always' }), 'unfenced'), { runs: FINDING_RUNS, seed: SEED, faults: ['advance', 'pause'] });
    expect(unfenced.failure).toBeNull();
    expect(unfenced.findings['STORE-1']).toBeGreaterThan(0);
    const fenced = await checkConformance(simLeaseBackend(designs.redisSingle({ persistence: 'aof-always' }), 'strict'), { runs: FINDING_RUNS, seed: SEED, faults: ['advance', 'pause'] });
    expect(fenced.failure).toBeNull();
    expect(fenced.findings['STORE-1']).toBe(0);
    // With failOn 'any', the same finding fails the check and shrinks like a bug would.
    const strictRun = await checkConformance(simLeaseBackend(designs.redisSingle({ persistence: 'aof-always' }), 'unfenced'), { runs: FINDING_RUNS, seed: SEED, faults: ['advance', 'pause'], failOn: 'any' });
    expect(strictRun.failure?.report.verdict.kind).toBe('property-violation');
    expect(strictRun.failure?.properties).toContain('STORE-1');
    expect(strictRun.failure?.shrinkCut).toBe(false);
  });

  it('stops shrinking at shrinkLimitMs and says so: the first failure is the counterexample, still replayable', async () => {
    let now = 0;
    // Without persistence a restart loses the key: a 14-step first failure at this seed, shrunk to 3.
    const backend = simLeaseBackend(designs.redisSingle(), 'unfenced');
    const options = { runs: FINDING_RUNS, seed: 20161010, faults: ['advance', 'pause', 'crash-restart'] as const, failOn: 'any' as const };
    const full = await checkConformance(backend, options);
    // Each read of the clock moves it 1 ms: past a 0 ms limit as soon as the first failure is found.
    const cut = await checkConformance(backend, { ...options, clock: () => now++, shrinkLimitMs: 0 });
    expect(full.failure?.shrunkLength).toBeLessThan(full.failure?.originalLength ?? 0);
    expect(cut.failure?.shrinkCut).toBe(true);
    expect(cut.failure?.shrunkLength).toBe(cut.failure?.originalLength);
    expect(cut.failure?.message).toMatch(/shrinking stopped after 0 s: a smaller counterexample may exist/);
    // The replay line runs that very counterexample first (and shrinks on from it, without a limit).
    const replayed = await checkConformance(backend, { ...options, seed: cut.failure!.seed, path: cut.failure!.path });
    expect(replayed.failure?.originalLength).toBe(cut.failure?.shrunkLength);
    expect(replayed.failure?.shrunkLength).toBe(full.failure?.shrunkLength);
  });
});

describe('a path names one case', () => {
  it('a case that passes is the only one run (fast-check would go on with the next runs, or the next shrinks, and count them)', async () => {
    const backend = simLeaseBackend(designs.redisSingle(), 'strict');
    for (const path of ['6', '6:0:3']) {
      const r = await checkConformance(backend, { runs: 100, seed: 20161010, path, faults: ['advance', 'pause'] });
      expect(r.failure).toBeNull();
      expect(r.runs, path).toBe(1);
    }
  });
});

describe('the catalogue of broken backends', () => {
  it('has at least 28 distinct bug classes, and one or more for each blind spot of issue 11', () => {
    expect(new Set(BROKEN.map((b) => b.id)).size).toBeGreaterThanOrEqual(28);
    expect(new Set(BROKEN.flatMap((b) => (b.blindSpot ? [b.blindSpot] : [])))).toEqual(new Set(['generator-ranges', 'timing', 'observation', 'coverage', 'reporting']));
  });

  for (const broken of BROKEN) {
    it(`catches ${broken.id} (${broken.bug}) naming ${broken.property}, with a shrunk, replayable schedule`, async () => {
      const timelineFile = join(dir, `${broken.id}.html`);
      const result = await checkConformance(broken.backend, { runs: 500, seed: SEED, faults: broken.faults, resources: broken.resources ?? 1, timelineFile });
      const failure = result.failure;
      expect(failure, `${broken.id} was not caught in 500 runs`).not.toBeNull();
      expect(failure!.report.verdict.kind).toBe('conformance-failure');
      expect(failure!.properties).toEqual([broken.property]);
      expect(failure!.shrunkLength).toBeLessThanOrEqual(15);
      // Shrinking never grows a counterexample.
      expect(failure!.shrunkLength).toBeLessThanOrEqual(failure!.originalLength);
      expect(failure!.message).toContain(`LOCKCHECK_SEED=${failure!.seed} LOCKCHECK_PATH=${failure!.path}`);
      expect(readFileSync(timelineFile, 'utf8')).toContain('<svg');
      expect(existsSync(timelineFile.replace(/\.html$/, '.txt'))).toBe(true);
      // Replaying seed and path runs exactly the shrunk case again.
      const replay = await checkConformance(broken.backend, { runs: 500, seed: failure!.seed, path: failure!.path, faults: broken.faults, resources: broken.resources ?? 1 });
      expect(replay.failure?.report.steps.map((s) => s.command)).toEqual(failure!.report.steps.map((s) => s.command));
    });
  }
});

describe('the lockstep runner', () => {
  const backend = simLeaseBackend(designs.redisSingle(), 'strict');
  const acquire = (client: number, extra: Partial<Extract<Command, { kind: 'acquire' }>> = {}): Command => ({ kind: 'acquire', client, resource: 'r', ttlMs: 10, ...extra });

  it('follows an ambiguous timeout until a later outcome tells the branches apart', async () => {
    // The reply comes exactly at the ttl: timed out, and the node may or may not hold client 0's key: never set,
    // set and kept (a step back of the node's clock keeps it alive), or set and deleted by the release the client
    // sends as it gives up (spec 4.2). Client 1's grant with token 2 says the request took effect and was released.
    const schedule: Command[] = [acquire(0, { latencyMs: 10 }), { kind: 'clock-step', node: 0, deltaMs: -5 }, acquire(1), { kind: 'advance', ms: 20 }, acquire(1)];
    const report = await runLockstep(backend, schedule, { clients: 2, tokenBase: 0n });
    expect(report.verdict).toEqual({ kind: 'pass' });
    expect(report.steps.map((s) => s.actual.kind)).toEqual(['timed-out', 'ok', 'granted', 'ok', 'granted']);
    expect(report.steps[0]!.allowed.map((o) => o.kind)).toEqual(['timed-out', 'timed-out', 'timed-out', 'denied']);
    expect(report.steps[2]!.allowed.map((o) => (o.kind === 'granted' ? o.token : o.kind))).toEqual([1n, 'denied', 2n]);
    expect(report.steps[2]!.actual).toMatchObject({ token: 2n });
    expect(report.steps[4]!.actual).toMatchObject({ token: 3n });
  });

  it('keeps a design finding (property violation) apart from a conformance failure', async () => {
    const clockJump: Command[] = [acquire(0), { kind: 'clock-step', node: 0, deltaMs: 11 }, acquire(1)];
    const finding = await runLockstep(backend, clockJump, { clients: 2, tokenBase: 0n });
    expect(finding.verdict.kind).toBe('property-violation');
    const kept = await runLockstep(backend, clockJump, { clients: 2, tokenBase: 0n, continueAfterViolation: true });
    expect(kept.verdict.kind).toBe('pass');
    expect(kept.findings.map((f) => f.violations.map((v) => v.property))).toEqual([['MUTEX-1']]);
    const bug = BROKEN.find((b) => b.id === 'drift-added')!;
    const failure = await runLockstep(bug.backend, [acquire(0)], { clients: 2, tokenBase: 0n });
    expect(failure.verdict).toMatchObject({ kind: 'conformance-failure', property: 'MUTEX-1' });
  });

  it('holds a delayed write until its deliver step: it lands after the next holder\'s, a finding unfenced, rejected fenced', async () => {
    const late: Command[] = [
      acquire(0),
      { kind: 'write', client: 0, resource: 'r', value: 'late', delayed: true },
      { kind: 'advance', ms: 12 },
      acquire(1),
      { kind: 'write', client: 1, resource: 'r', value: 'new' },
      { kind: 'deliver', client: 0 },
      { kind: 'read', client: 1, resource: 'r' },
    ];
    const unfenced = await runLockstep(simLeaseBackend(designs.redisSingle(), 'unfenced'), late, { clients: 2, tokenBase: 0n, continueAfterViolation: true });
    expect(unfenced.verdict).toEqual({ kind: 'pass' });
    expect(unfenced.findings.map((f) => f.violations.map((v) => v.property))).toEqual([['STORE-1']]);
    expect(unfenced.steps.map((s) => s.actual.kind)).toEqual(['granted', 'ok', 'ok', 'granted', 'accepted', 'accepted', 'value']);
    expect(unfenced.steps[6]!.actual).toMatchObject({ value: 'late' });
    const fenced = await runLockstep(backend, late, { clients: 2, tokenBase: 0n });
    expect(fenced.verdict).toEqual({ kind: 'pass' });
    expect(fenced.steps.map((s) => s.actual.kind)).toEqual(['granted', 'ok', 'ok', 'granted', 'accepted', 'rejected', 'value']);
    expect(fenced.steps[6]!.actual).toMatchObject({ value: 'new' });
  });

  it('calls a run that stops early inconclusive, never a pass', async () => {
    const late: typeof backend = {
      ...backend,
      start: async (o) => {
        const instance = await backend.start(o);
        let moved = false;
        return {
          ...instance,
          env: {
            ...instance.env,
            advanceTo: async () => {
              if (!moved) attempts++;
              moved = true;
              return Promise.reject(new TimingError('real time ran ahead'));
            },
          },
        };
      },
    };
    let attempts = 0;
    const report = await runLockstep(late, [acquire(0), { kind: 'advance', ms: 5 }, acquire(1)], { clients: 2, tokenBase: 0n });
    expect(report.verdict).toEqual({ kind: 'inconclusive', cause: 'out-of-pace', reason: 'real time ran ahead' });
    // Out of pace in every attempt: each run (but an empty schedule, which never moves time) is tried MAX_ATTEMPTS times,
    // then counted as stopped early; nothing is judged.
    attempts = 0;
    const result = await checkConformance(late, { runs: 5, seed: SEED });
    expect(result.failure).toBeNull();
    expect(result.stoppedEarly).toBeGreaterThan(0);
    expect(attempts).toBe(result.stoppedEarly * MAX_ATTEMPTS);
    expect(result).toMatchObject({ runs: 5, retried: result.stoppedEarly * (MAX_ATTEMPTS - 1), findings: {}, deviations: null });
    expect(result.stoppedEarlyBy).toEqual({ 'out-of-pace': result.stoppedEarly });
  });

  it('tries a run out of pace again with the same schedule, and judges the attempt that kept pace (spec 7.8)', async () => {
    // Every other instance that moves time falls out of pace at once: each run's first attempt, then its second keeps pace.
    let moving = 0;
    const clockJumps = simLeaseBackend(designs.redisSingle(), 'unfenced');
    const firstLate: typeof backend = {
      ...clockJumps,
      start: async (o) => {
        const instance = await clockJumps.start(o);
        let late: boolean | null = null;
        return {
          ...instance,
          env: {
            ...instance.env,
            advanceTo: async (ms: number) => {
              late ??= moving++ % 2 === 0;
              return late ? Promise.reject(new TimingError('real time ran ahead')) : instance.env.advanceTo(ms);
            },
          },
        };
      },
    };
    const retried = await checkConformance(firstLate, { runs: 10, seed: SEED });
    const plain = await checkConformance(clockJumps, { runs: 10, seed: SEED });
    // Each run that moves time at all (an empty schedule does not) took two attempts.
    expect(moving).toBeGreaterThan(10);
    expect(retried).toMatchObject({ failure: null, runs: 10, stoppedEarly: 0, retried: moving / 2, findings: plain.findings });
    // The unfenced store under pauses breaks STORE-1: the judged attempts are the whole evidence, and it is there.
    expect(plain.findings['STORE-1'] ?? 0).toBeGreaterThan(0);
  });

  it('carries tokens exactly up to 2^63-1', async () => {
    const base = 2n ** 63n - 3n;
    const report = await runLockstep(backend, [acquire(0), { kind: 'release', client: 0, resource: 'r' }, acquire(1), { kind: 'write', client: 1, resource: 'r', value: 'x' }, { kind: 'read', client: 0, resource: 'r' }], { clients: 2, tokenBase: base });
    expect(report.verdict).toEqual({ kind: 'pass' });
    expect(report.steps.at(-1)!.actual).toEqual({ kind: 'value', value: 'x', token: 2n ** 63n - 1n });
  });
});
