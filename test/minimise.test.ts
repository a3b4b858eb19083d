import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Command } from '../model/command.ts';
import type { RedisCluster } from '../conformance/env/redisBackend.ts';
import { startRedisCluster } from '../conformance/env/redisBackend.ts';
import { redisLockBackend } from '../conformance/adapters/redisLock.ts';
import type { BackendUnderTest } from '../conformance/adapter.ts';
import { setNxLock } from './fixtures/setNxLock.ts';
import { checkConformance } from '../conformance/check.ts';
import { runLockstep } from '../conformance/lockstep.ts';
import { failureSignature, minimise, type Schedule } from '../conformance/minimise.ts';
import type { ConformanceFailure, RunReport } from '../conformance/verdict.ts';
import { simLeaseBackend } from '../conformance/sim/backend.ts';
import { designs } from '../model/design.ts';

/**
 * The minimising pass after fast-check's shrink (conformance/minimise.ts):
 * on a real server it removes the steps that play no part and the result
 * replays to the same failure; and it never takes a candidate that fails
 * another way, nor spends more than its budget.
 */
const AUDIT = { consequences: ['unsafe', 'liveness'] as const };

let cluster: RedisCluster | undefined;
beforeAll(async () => {
  cluster = await startRedisCluster({ nodes: 1, persistence: 'none' });
}, 120_000);
afterAll(async () => {
  await cluster?.stop();
}, 60_000);

/** redis-lock's defect (docs/adapter.md): its release DELs the next holder's key when the node's clock ran ahead. */
const core: Command[] = [
  { kind: 'acquire', client: 1, resource: 'r0', ttlMs: 5 },
  { kind: 'clock-step', node: 0, deltaMs: 6 },
  { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 5 },
  { kind: 'release', client: 1, resource: 'r0' },
];

/** The same failure with steps that play no part around it: a contender refused, writes, reads, a millisecond, retries. */
const padded: Command[] = [
  { kind: 'acquire', client: 1, resource: 'r0', ttlMs: 5 },
  { kind: 'write', client: 1, resource: 'r0', value: 'a' },
  { kind: 'read', client: 0, resource: 'r0' },
  { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 5 },
  { kind: 'clock-step', node: 0, deltaMs: 6 },
  { kind: 'read', client: 1, resource: 'r0' },
  { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 5, retries: 2, retryDelayMs: 1 },
  { kind: 'write', client: 0, resource: 'r0', value: 'b' },
  { kind: 'release', client: 1, resource: 'r0' },
];

/** A lock whose release takes two round trips, GET and then DEL if the key is its own: a pause between them holds the DEL. */
function twoTripRelease(): BackendUnderTest {
  return setNxLock(
    {
      name: 'release in two round trips',
      release: async (redis, key, lease) => {
        if ((await redis.get(key)) === lease.owner) await redis.del(key);
      },
    },
    cluster!,
  );
}

describe('the minimising pass on a real Redis server', () => {
  it("removes the steps that play no part and simplifies the rest (redis-lock's release of the next holder's key: 9 steps to its 4), and the result replays to the same failure", async () => {
    const backend = redisLockBackend({ cluster: cluster! });
    const replay = async (s: Schedule): Promise<RunReport | null> => {
      const r = await runLockstep(backend, s.commands, { clients: 2, tokenBase: s.tokenBase, continueAfterViolation: true });
      return r.verdict.kind === 'conformance-failure' ? r : null;
    };
    const start = await replay({ commands: padded, tokenBase: 0n });
    expect(start, 'the padded schedule fails').not.toBeNull();
    expect(failureSignature(start!.verdict)).toBe('conformance-failure/unsafe:OWN-1');
    const progress: number[] = [];
    const m = await minimise({ commands: padded, tokenBase: 0n }, start!, replay, { budget: { maxReplays: 60, limitMs: 60_000 }, limits: { ttlFloorMs: 5, ttlGrainMs: 1 }, clock: () => performance.now(), progress: (n) => progress.push(n) });
    expect(m.schedule.commands).toEqual(core);
    expect(failureSignature(m.report.verdict)).toBe(failureSignature(start!.verdict));
    expect(m.replays).toBe(progress.length);
    expect(m.cut).toBe(false);
    // Replayed as it is (what `lockcheck replay` does with the counterexample file's schedule): the same failure at the same step.
    const replayed = await checkConformance(backend, { schedule: m.schedule, failOn: AUDIT });
    expect(replayed.failure?.report.steps.map((s) => s.command)).toEqual(core);
    expect(failureSignature(replayed.failure!.report.verdict)).toBe(failureSignature(start!.verdict));
  }, 120_000);

  it("runs after fast-check's shrink in every check: a release in two round trips (GET, then DEL if its own) paused between them keeps the key (client-pause) goes from fast-check's 3 steps to 2, and checkConformance({ schedule }) replays it", async () => {
    // redis-semaphore's released key was the example here: its EVALSHA, NOSCRIPT, EVAL is one round trip now (conformance/scriptFallback.ts).
    const backend = twoTripRelease();
    const r = await checkConformance(backend, { runs: 30, seed: 3, faults: ['advance', 'pause'], modelSeeds: true, failOn: AUDIT });
    const f = r.failure!;
    expect(f, 'the audit finds the released key').not.toBeNull();
    expect(failureSignature(f.report.verdict)).toBe('conformance-failure/liveness:OWN-1');
    expect([f.fastCheckLength, f.shrunkLength]).toEqual([3, 2]);
    expect(f.message).toMatch(/shrunk from \d+ to 3 steps, minimised to 2 \(\d+ replays, [\d.]+ s\)/);
    // The time fast-check left in: gone.
    expect(f.schedule.commands.map((c) => c.kind)).toEqual(['acquire', 'pause']);
    const replayed = await checkConformance(backend, { schedule: f.schedule, failOn: AUDIT });
    expect(replayed.failure?.report.steps.map((s) => s.command)).toEqual(f.schedule.commands);
    expect(failureSignature(replayed.failure!.report.verdict)).toBe(failureSignature(f.report.verdict));
  }, 120_000);
});

/** A run's report from a rule (no backend): a failure of `property` at the last step, or none. */
function reportOf(commands: readonly Command[], failure: { property: 'OWN-1' | 'MUTEX-1'; kind: 'unsafe' | 'liveness' } | null): RunReport | null {
  if (failure === null) return null;
  const steps = commands.map((command, index) => ({ index, command, startMs: 0, endMs: 0, actual: { kind: 'ok' as const }, allowed: [], violations: [], leases: [], nodes: [] }));
  const verdict: ConformanceFailure = { kind: 'conformance-failure', property: failure.property, consequence: { kind: failure.kind, what: 'x' }, message: 'x', step: steps[steps.length - 1]! };
  return { backend: 'rule', verdict, steps, findings: [], clients: 2, nodes: 1 };
}

describe("the minimising pass's rules", () => {
  const a = (client: number): Command => ({ kind: 'acquire', client, resource: 'r0', ttlMs: 20 });
  const start: Command[] = [a(0), { kind: 'advance', ms: 30 }, a(1), { kind: 'read', client: 0, resource: 'r0' }, { kind: 'release', client: 0, resource: 'r0' }];
  // The failure: an unsafe OWN-1 when client 1 acquired before the release; without client 0's acquire the
  // same release fails another way (a liveness MUTEX-1): shorter, but not the failure that was found.
  const rule = async (s: Schedule): Promise<RunReport | null> => {
    const kinds = s.commands.map((c) => (c.kind === 'acquire' ? `acquire${c.client}` : c.kind));
    if (kinds[kinds.length - 1] !== 'release' || !kinds.includes('acquire1')) return null;
    return reportOf(s.commands, kinds.includes('acquire0') ? { property: 'OWN-1', kind: 'unsafe' } : { property: 'MUTEX-1', kind: 'liveness' });
  };
  const budget = { maxReplays: 100, limitMs: 60_000 };
  const limits = { ttlFloorMs: 5, ttlGrainMs: 1 };

  it('never turns the failure into another one: a shorter schedule that fails another way is not taken', async () => {
    const m = await minimise({ commands: start, tokenBase: 7n }, (await rule({ commands: start, tokenBase: 7n }))!, rule, { budget, limits, clock: () => 0 });
    expect(failureSignature(m.report.verdict)).toBe('conformance-failure/unsafe:OWN-1');
    // Client 0's acquire stays (without it the failure is another); the read and the advance go, the ttls and the token base shrink.
    expect(m.schedule.commands).toEqual([{ ...a(0), ttlMs: 5 }, { ...a(1), ttlMs: 5 }, { kind: 'release', client: 0, resource: 'r0' }]);
    expect(m.schedule.tokenBase).toBe(0n);
  });

  it('spends no more than its budget, says so, and keeps the smallest failure found by then', async () => {
    let clock = 0;
    const m = await minimise({ commands: start, tokenBase: 0n }, (await rule({ commands: start, tokenBase: 0n }))!, rule, { budget: { maxReplays: 2, limitMs: 60_000 }, limits, clock: () => clock++ });
    expect(m.replays).toBe(2);
    expect(m.cut).toBe(true);
    expect((await rule(m.schedule))?.verdict).toEqual(m.report.verdict);
    const timed = await minimise({ commands: start, tokenBase: 0n }, (await rule({ commands: start, tokenBase: 0n }))!, rule, { budget: { maxReplays: 100, limitMs: 3 }, limits, clock: () => clock++ });
    expect(timed.cut).toBe(true);
    expect(timed.replays).toBeLessThan(3);
  });

  it("confirms its result with one more replay: a schedule that failed only once (a server's timing) is not the counterexample", async () => {
    const seen = new Set<string>();
    // Every schedule shorter than the start fails the first time it is run, never again.
    const once = async (s: Schedule): Promise<RunReport | null> => {
      const key = JSON.stringify(s.commands) + s.tokenBase;
      if (s.commands.length < start.length && seen.has(key)) return null;
      seen.add(key);
      return rule(s);
    };
    const m = await minimise({ commands: start, tokenBase: 7n }, (await rule({ commands: start, tokenBase: 7n }))!, once, { budget, limits, clock: () => 0 });
    expect(m.schedule).toEqual({ commands: start, tokenBase: 7n });
    expect(m.report.steps).toHaveLength(start.length);
  });

  it('is deterministic: the same start gives the same schedule', async () => {
    const run = async (): Promise<Schedule> => (await minimise({ commands: start, tokenBase: 7n }, (await rule({ commands: start, tokenBase: 7n }))!, rule, { budget, limits, clock: () => 0 })).schedule;
    const first = await run();
    expect(first.commands.length).toBeLessThan(start.length);
    expect(await run()).toEqual(first);
  });
});

describe("fast-check's shrink", () => {
  it('keeps the failure it found: a smaller schedule that fails another way is not taken (seed 6: the first failure is STORE-1; fast-check alone shrank it to a 3-step DUR-1)', async () => {
    let first: RunReport | null = null;
    const r = await checkConformance(simLeaseBackend(designs.redisSingle(), 'unfenced'), {
      runs: 100,
      seed: 6,
      faults: ['advance', 'pause', 'crash-restart', 'clock-step', 'partition'],
      failOn: 'any',
      minimise: false,
      onRun: (_run, report) => {
        if (first === null && (report.verdict.kind === 'property-violation' || report.verdict.kind === 'conformance-failure')) first = report;
      },
    });
    expect(first).not.toBeNull();
    expect(failureSignature(r.failure!.report.verdict)).toBe(failureSignature(first!.verdict));
    expect(failureSignature(r.failure!.report.verdict)).toBe('property-violation:STORE-1');
    expect(r.failure!.shrunkLength).toBeLessThan(r.failure!.originalLength);
  });
});
