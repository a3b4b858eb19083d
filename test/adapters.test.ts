import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkConformance, runLockstep, textTimeline, verdictProperties } from '../conformance/index.ts';
import type { BackendUnderTest, CheckResult, ConformanceFailure, ExecutedStep, FaultKind, RunReport } from '../conformance/index.ts';
import type { RedisCluster } from '../conformance/env/redisBackend.ts';
import { startRedisCluster } from '../conformance/env/redisBackend.ts';
import type { PostgresTarget } from '../conformance/env/postgresBackend.ts';
import { targetOf } from '../conformance/env/postgresBackend.ts';
import { PostgresServer } from '../conformance/env/postgresServer.ts';
import { redlockBackend } from '../conformance/adapters/redlock.ts';
import type { RedlockAdapterOptions } from '../conformance/adapters/redlock.ts';
import { sesamecareRedlockBackend } from '../conformance/adapters/sesamecareRedlock.ts';
import { advisoryLockBackend } from '../conformance/adapters/advisoryLock.ts';
import { redisSemaphoreMutexBackend, redisSemaphoreRedlockMutexBackend } from '../conformance/adapters/redisSemaphore.ts';
import { redlock4Backend } from '../conformance/adapters/redlock4.ts';
import { ioredisLockBackend } from '../conformance/adapters/ioredisLock.ts';
import { redisLockBackend } from '../conformance/adapters/redisLock.ts';
import type { Command, Outcome } from '../model/index.ts';
import { driftMarginMs } from '../model/index.ts';
import { judgedDesign } from '../conformance/consequence.ts';
import { describeDesign } from '../model/design.ts';
import type { LibraryId } from '../cli/backends.ts';
import { LIBRARY_AUDITS } from '../cli/backends.ts';
import { predictionDesign } from '../cli/matrix.ts';

/**
 * Adapters for lock libraries from npm (conformance/adapters/), each checked
 * against lockcheck's model on real servers. Each test states what the audit
 * of that library finds with seed 1 and 30 schedules: the verdict kind, the
 * property, and the deviation itself. The findings are the libraries'; see
 * conformance/adapters/README.md for the shrunk schedules.
 */
const RUNS = 30;
const SEED = 1;

let cluster: RedisCluster | undefined;
let postgres: PostgresServer | undefined;
beforeAll(async () => {
  const [redis, pg] = await Promise.allSettled([startRedisCluster({ nodes: 5, persistence: 'none' }), PostgresServer.start({ parentDir: '/dev/shm' })]);
  if (redis.status === 'fulfilled') cluster = redis.value;
  if (pg.status === 'fulfilled') postgres = pg.value;
  // Whatever started is stopped in afterAll, even when the other failed.
  for (const r of [redis, pg]) if (r.status === 'rejected') throw r.reason;
}, 120_000);
afterAll(async () => {
  await Promise.allSettled([cluster?.stop(), postgres?.stop()]);
}, 60_000);

const target = (): PostgresTarget => {
  const s = postgres!;
  return targetOf(s);
};

/** The conformance failure a check found (fails the test if it found none). */
function conformanceFailure(r: CheckResult): { verdict: ConformanceFailure; steps: readonly ExecutedStep[] } {
  expect(r.failure, 'the check should find a conformance failure').not.toBeNull();
  const verdict = r.failure!.report.verdict;
  expect(verdict.kind, r.failure!.message).toBe('conformance-failure');
  return { verdict: verdict as ConformanceFailure, steps: r.failure!.report.steps };
}

/** The conformance failure one scripted schedule shows (fails the test, printing the run, if it does not). */
function scriptedFailure(report: RunReport): ConformanceFailure {
  expect(report.verdict.kind, textTimeline(report)).toBe('conformance-failure');
  return report.verdict as ConformanceFailure;
}

type Granted = Extract<Outcome, { kind: 'granted' }>;

/** One acquire on 'r0' whose reply arrives `latencyMs` after the nodes granted it. */
const slowAcquire = (backend: BackendUnderTest, ttlMs: number, latencyMs: number): Promise<RunReport> =>
  runLockstep(backend, [{ kind: 'acquire', client: 0, resource: 'r0', ttlMs, latencyMs }], { clients: 2, tokenBase: 0n });

const WITHOUT_DELAY: readonly FaultKind[] = ['advance', 'clock-step', 'clock-drift', 'pause', 'crash-restart', 'partition'];

const libraries = [
  { library: 'redlock@5.0.0-beta.2', backend: (o: RedlockAdapterOptions = {}) => redlockBackend({ cluster: cluster! }, o) },
  { library: '@sesamecare-oss/redlock@1.4.0', backend: (o: RedlockAdapterOptions = {}) => sesamecareRedlockBackend({ cluster: cluster! }, o) },
];

for (const { library, backend } of libraries) {
  describe(`${library}, 5 nodes, against the redlock model`, () => {
    it('declares its drift allowance, Math.round(0.01 * ttl) + 2 (not ceil): judged by it, its grants and deadlines agree with the model under time alone', async () => {
      const b = backend();
      expect(b.contract?.driftMargin).toEqual({ factor: 0.01, fixedMs: 2, rounding: 'round' });
      // Below 50 ms, Math.round(0.01 * ttl) is 0 where Math.ceil is 1: the contract's model grants 1 ms more than Redlock's description.
      expect(driftMarginMs(judgedDesign(b), 40)).toBe(2);
      expect(driftMarginMs(b.design, 40)).toBe(3);
      const r = await checkConformance(b, { runs: RUNS, seed: SEED, faults: ['advance'] });
      expect(r.failure?.message ?? null).toBeNull();
    }, 300_000);

    // Scripted: the generator draws a time scale per schedule and leaves latencies (1-70 ms) unscaled, so only
    // scale-1 schedules can bring a reply after ttl - 2 ms, and seed 1's 30 schedules draw none (the matrix's audit does).
    it('with driftFactor 0 (the margins agree): no validity check after the quorum, so a reply after ttl - 2 ms yields a lease already expired (MUTEX-1 conformance failure, unsafe)', async () => {
      const b = backend({ driftFactor: 0 });
      // 1 ms of validity left (ttl 5, drift 0 + 2, reply after 2 ms): the library and the model both grant.
      const inTime = await slowAcquire(b, 5, 2);
      expect(inTime.verdict.kind, textTimeline(inTime)).toBe('pass');
      expect(inTime.steps[0]!.actual.kind).toBe('granted');
      // None left, at ttls of ms and of seconds: acquire returns new Lock(..., start + duration - drift) unchecked.
      for (const [ttlMs, latencyMs] of [[5, 3], [5000, 4998]] as const) {
        const report = await slowAcquire(b, ttlMs, latencyMs);
        const verdict = scriptedFailure(report);
        expect(verdictProperties(verdict)).toEqual(['MUTEX-1']);
        expect(verdict.consequence.kind).toBe('unsafe');
        const step = verdict.step;
        expect(step.command).toMatchObject({ kind: 'acquire', ttlMs, latencyMs });
        // The reply came after ttl - 2 ms: Redlock's step 3 says the lock is not held.
        expect(step.allowed.some((o) => o.kind === 'granted')).toBe(false);
        expect(step.allowed).toContainEqual({ kind: 'denied', reason: 'validity-exhausted' });
        expect(step.actual.kind).toBe('granted');
        // Granted with a deadline that has passed by the time the client reads the reply.
        expect((step.actual as Granted).validUntilMs!).toBe(ttlMs - 2);
        expect((step.actual as Granted).validUntilMs!).toBeLessThanOrEqual(step.endMs);
      }
    }, 300_000);

    // The contract's failedExtend { lease: 'unchanged' }: the caller's Lock keeps its expiration. What that costs is judged
    // by its consequence (a second holder), never by lockcheck's own lowered bound (spec 4.1, which the model applied to
    // the library until h38 and read as 'the client may act on a lease longer than allowed' where no one else could lock).
    it("a refused extend to a shorter duration re-arms the nodes it reaches to it, and the caller's Lock keeps its old expiration: another client locks while it is valid (MUTEX-1, the contract's finding)", async () => {
      const b = backend();
      // Granted on nodes 0, 1 and 2 for 200 ms (valid until 196); the extend to 20 ms reaches 0 and 1 only and is refused.
      const schedule: Command[] = [
        { kind: 'partition', client: 0, node: 3 },
        { kind: 'partition', client: 0, node: 4 },
        { kind: 'acquire', client: 0, resource: 'r', ttlMs: 200 },
        { kind: 'partition', client: 0, node: 2 },
        { kind: 'extend', client: 0, resource: 'r', ttlMs: 20 },
        { kind: 'advance', ms: 30 },
        { kind: 'acquire', client: 1, resource: 'r', ttlMs: 200 },
      ];
      const report = await runLockstep(b, schedule, { clients: 2, tokenBase: 0n });
      expect(report.steps[4]!.actual, textTimeline(report)).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
      // Nodes 0 and 1 dropped the key at 20 ms, so only node 2 holds it: client 1 locks 0, 1, 3 and 4 while client 0's Lock runs to 196.
      expect(report.steps[6]!.actual.kind).toBe('granted');
      expect(report.verdict.kind === 'property-violation' && report.verdict.violations.map((v) => v.property), textTimeline(report)).toEqual(['MUTEX-1']);
    }, 120_000);

    it('a refused extend to a shorter duration that leaves a quorum holding the old key: the old expiration is safe, and agrees (was: MUTEX-1, longer than allowed, at the clock-step and crash-restart cells)', async () => {
      const b = backend();
      // Granted on all five nodes for 200 ms; the extend to 20 ms reaches 0 and 1 only: nodes 2, 3 and 4 hold the key to 200 ms.
      const schedule: Command[] = [
        { kind: 'acquire', client: 0, resource: 'r', ttlMs: 200 },
        { kind: 'partition', client: 0, node: 2 },
        { kind: 'partition', client: 0, node: 3 },
        { kind: 'partition', client: 0, node: 4 },
        { kind: 'extend', client: 0, resource: 'r', ttlMs: 20 },
        { kind: 'advance', ms: 30 },
        { kind: 'acquire', client: 1, resource: 'r', ttlMs: 200 },
      ];
      const report = await runLockstep(b, schedule, { clients: 2, tokenBase: 0n });
      expect(report.verdict.kind, textTimeline(report)).toBe('pass');
      expect(report.steps[4]!.actual).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
      expect(report.steps[6]!.actual.kind).toBe('denied');
    }, 120_000);

    // The timing cell's last inconclusive run: an extend whose replies come after the ttl. The library has no client-side
    // timeout (declared) and waits for them; the model's client gave up at the ttl, so the call was 'not returned'.
    it('an extend whose replies come after the ttl is judged when the library reads them: extended with its expiration past (MUTEX-1, unsafe; was: inconclusive)', async () => {
      const schedule: Command[] = [
        { kind: 'acquire', client: 0, resource: 'r', ttlMs: 200 },
        { kind: 'extend', client: 0, resource: 'r', ttlMs: 20, latencyMs: 40 },
      ];
      const report = await runLockstep(backend(), schedule, { clients: 2, tokenBase: 0n });
      const verdict = scriptedFailure(report);
      expect([verdict.property, verdict.consequence, verdict.step.command.kind]).toEqual(['MUTEX-1', { kind: 'unsafe', what: 'the client may act on a lease longer than allowed' }, 'extend']);
      expect(verdict.step.allowed).toEqual([{ kind: 'not-extended', reason: 'no-quorum' }]);
      // Read at 40 ms, as the library read them; 20 - 2 ms is long past.
      expect(verdict.step.endMs).toBe(40);
      expect(verdict.step.actual).toMatchObject({ kind: 'extended', validUntilMs: 18 });
    }, 120_000);

    // The timing cell's inconclusive runs (7 of 30 at seed 20161010): the library rejects once a quorum voted against, and
    // the adapter waited for its vote counts (ExecutionError.attempts), which settle only when the slow node answers.
    it('a refusal with a slow node is judged when the library gives it, not when the slow node answers (was: inconclusive, a call not returned)', async () => {
      const report = await runLockstep(
        backend(),
        [
          { kind: 'node-delay', node: 0, ms: 40 },
          { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 200 },
          { kind: 'acquire', client: 1, resource: 'r0', ttlMs: 200 },
        ],
        { clients: 2, tokenBase: 0n },
      );
      expect(report.verdict.kind, textTimeline(report)).toBe('pass');
      expect(report.steps[2]!.actual.kind).toBe('denied');
      // Decided by the four nodes that answer at once; node 0's reply comes 40 ms later.
      expect(report.steps[2]!.endMs).toBe(0);
    }, 120_000);

    // No client-side timeout (declared): the library reads the replies the model's client gives up on at the ttl. A refusal
    // read in them was judged 'the lock was not there when the model has it' (LIVE-1, liveness; 2 of 30 timing runs).
    it('a refusal read in replies later than the ttl (a pause, a late reply) agrees with the model, whose client gave up holding nothing', async () => {
      const later: Command[] = [
        { kind: 'advance', ms: 500 },
        { kind: 'acquire', client: 1, resource: 'r0', ttlMs: 10 },
      ];
      for (const late of [
        [{ kind: 'pause', client: 1, inFlight: { kind: 'acquire', client: 1, resource: 'r0', ttlMs: 10 } }, { kind: 'advance', ms: 20 }, { kind: 'resume', client: 1 }],
        [{ kind: 'acquire', client: 1, resource: 'r0', ttlMs: 10, latencyMs: 20 }],
      ] as Command[][]) {
        const report = await runLockstep(backend(), [{ kind: 'acquire', client: 0, resource: 'r0', ttlMs: 500 }, ...late, ...later], { clients: 2, tokenBase: 0n });
        expect(report.verdict.kind, textTimeline(report)).toBe('pass');
        expect(report.steps.at(-3)!.actual.kind).toBe('denied');
        // Nothing of client 1's was left behind: the lock is its own once client 0's key expired.
        expect(report.steps.at(-1)!.actual.kind).toBe('granted');
      }
    }, 120_000);

    // redlock 5's release is EVALSHA, then EVAL on NOSCRIPT: one round trip of the model's (the kit's scriptFallback.ts).
    // Before, a release sent before a pause on a cold script cache landed after the resume (OWN-1, liveness), the kit's count.
    it('with driftFactor 0 and no delay: agrees with the model step by step; the design findings show (two holders, a stale write taken)', async () => {
      const r = await checkConformance(backend({ driftFactor: 0 }), { runs: RUNS, seed: SEED, faults: WITHOUT_DELAY });
      expect(r.failure?.message ?? null).toBeNull();
      expect(r.runs).toBe(RUNS);
      // Property violations are the Redlock design's (clock steps, crash-restarts without persistence, an unfenced store).
      expect(r.findings['MUTEX-1']).toBeGreaterThan(0);
      expect(r.findings['STORE-1']).toBeGreaterThan(0);
    }, 300_000);
  });
}

describe('redis-semaphore@5.8.0 Mutex against the redis-single model', () => {
  it('declares no deadline, no tokens and a refresh of its fixed lockTimeout; its release, EVALSHA then EVAL on NOSCRIPT, is one round trip: under pauses it agrees with the model step by step, and what its contract costs shows (two holders)', async () => {
    const b = redisSemaphoreMutexBackend({ cluster: cluster! });
    expect(b.contract).toMatchObject({ deadline: 'none', tokens: 'none', refreshTtl: 'acquired' });
    // Was: OWN-1 liveness, "node 0 still holds client 0's released key": the cold script cache's second round trip, the kit's count.
    const r = await checkConformance(b, { runs: RUNS, seed: SEED, faults: ['advance', 'pause'], failOn: { consequences: ['unsafe', 'liveness'] } });
    expect(r.failure?.message ?? null).toBeNull();
    expect(r.findings['MUTEX-1']).toBeGreaterThan(0);
  }, 300_000);
});

describe('redlock@4.2.0 (npm latest) against the redlock model', () => {
  it("a failed extend unlocks every node it reaches while the caller's Lock keeps its expiration: declared, the model shows the consequence, another client gets the lock (MUTEX-1); undeclared, its own keys gone read as OWN-1", async () => {
    const b = redlock4Backend({ cluster: cluster! });
    expect(b.contract?.failedExtend).toEqual({ lease: 'unchanged', keys: 'deleted' });
    // Granted on nodes 2, 3 and 4; the extend reaches 3 and 4 only, fails, and the library unlocks them: nodes 0, 1, 3 and 4 are free for client 1.
    const schedule: Command[] = [
      { kind: 'partition', client: 0, node: 0 },
      { kind: 'partition', client: 0, node: 1 },
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 200 },
      { kind: 'partition', client: 0, node: 2 },
      { kind: 'extend', client: 0, resource: 'r', ttlMs: 200 },
      { kind: 'acquire', client: 1, resource: 'r', ttlMs: 200 },
    ];
    const r = await runLockstep(b, schedule, { clients: 2, tokenBase: 0n });
    expect(r.deviations).toBeUndefined();
    expect(r.steps[4]!.actual).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
    expect(r.steps[5]!.actual.kind).toBe('granted');
    expect(r.verdict.kind === 'property-violation' && r.verdict.violations.map((v) => v.property)).toEqual(['MUTEX-1']);
    const undeclared = await runLockstep({ ...b, contract: { ...b.contract, failedExtend: undefined } } as BackendUnderTest, schedule, { clients: 2, tokenBase: 0n });
    expect(undeclared.verdict.kind === 'conformance-failure' && [undeclared.verdict.property, undeclared.verdict.consequence.kind]).toEqual(['OWN-1', 'unsafe']);
  }, 120_000);
});

describe('redlock@4.2.0 with a slow node: it decides on every reply (contract decidesAt)', () => {
  it("a grant, a refusal and a release wait for the slow node's reply (and a refusal for its undo round's), and each is judged then (was: inconclusive, 'a call had not returned when the model had it done')", async () => {
    const b = redlock4Backend({ cluster: cluster! });
    expect(b.contract?.decidesAt).toBe('every-reply');
    const schedule: Command[] = [
      { kind: 'node-delay', node: 4, ms: 40 },
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 1000 },
      { kind: 'acquire', client: 1, resource: 'r', ttlMs: 1000 },
      { kind: 'release', client: 0, resource: 'r' },
      { kind: 'acquire', client: 1, resource: 'r', ttlMs: 1000 },
    ];
    const r = await runLockstep(b, schedule, { clients: 2, tokenBase: 0n });
    expect(r.verdict, textTimeline(r)).toEqual({ kind: 'pass' });
    expect(r.deviations).toBeUndefined();
    expect(r.steps.map((s) => s.actual.kind)).toEqual(['ok', 'granted', 'denied', 'released', 'granted']);
    // The grant at the slow reply; the refusal after its own round and the undo round; the release at the slow reply.
    expect(r.steps.slice(1).map((s) => s.endMs - s.startMs)).toEqual([40, 80, 40, 40]);
  }, 120_000);

  it('replies later than the ttl: it has no timeout, reads them, finds the validity spent and answers after its undo round, judged then (was: inconclusive, the model had given up at the ttl)', async () => {
    const b = redlock4Backend({ cluster: cluster! });
    const r = await runLockstep(b, [{ kind: 'node-delay', node: 2, ms: 55 }, { kind: 'acquire', client: 1, resource: 'r', ttlMs: 60, latencyMs: 25 }], { clients: 2, tokenBase: 0n });
    expect(r.verdict, textTimeline(r)).toEqual({ kind: 'pass' });
    // Every reply by 80 ms, the undo round's slow one 55 ms later.
    expect([r.steps[1]!.actual.kind, r.steps[1]!.endMs]).toEqual(['denied', 135]);
  }, 120_000);
});

describe('redis-semaphore@5.8.0 RedlockMutex with a slow node: it decides on every reply (contract decidesAt)', () => {
  it("its acquire awaits every node (Promise.all), past the ttl too: granted at the slow node's reply and judged then (was: inconclusive)", async () => {
    const b = redisSemaphoreRedlockMutexBackend({ cluster: cluster! });
    expect(b.contract?.decidesAt).toBe('every-reply');
    const r = await runLockstep(b, [{ kind: 'node-delay', node: 2, ms: 55 }, { kind: 'acquire', client: 1, resource: 'r', ttlMs: 40 }], { clients: 2, tokenBase: 0n });
    expect(r.verdict, textTimeline(r)).toEqual({ kind: 'pass' });
    expect([r.steps[1]!.actual.kind, r.steps[1]!.endMs]).toEqual(['granted', 55]);
  }, 120_000);
});

describe('redis-semaphore@5.8.0 RedlockMutex and @microfleet/ioredis-lock@6.0.1: no deadline', () => {
  for (const [name, make] of [
    ['RedlockMutex', redisSemaphoreRedlockMutexBackend],
    ['@microfleet/ioredis-lock', ioredisLockBackend],
  ] as const) {
    it(`${name}: judged by consequence, a client paused past the lock's timeout still holds it when another client gets it (MUTEX-1), and its write lands after the new holder's (STORE-1)`, async () => {
      const b = make({ cluster: cluster! });
      expect(b.contract).toMatchObject({ deadline: 'none', tokens: 'none' });
      const schedule: Command[] = [
        { kind: 'acquire', client: 0, resource: 'r', ttlMs: 20 },
        { kind: 'pause', client: 0, pendingWrite: { resource: 'r', value: 'old' } },
        { kind: 'advance', ms: 30 },
        { kind: 'acquire', client: 1, resource: 'r', ttlMs: 20 },
        { kind: 'write', client: 1, resource: 'r', value: 'new' },
        { kind: 'resume', client: 0 },
      ];
      const r = await runLockstep(b, schedule, { clients: 2, tokenBase: 0n, continueAfterViolation: true });
      // Nothing it declared reads as a deviation: it agrees with the model of its contract at every step.
      expect(r.verdict).toEqual({ kind: 'pass' });
      expect(r.deviations).toBeUndefined();
      expect([...new Set(r.findings.flatMap((f) => f.violations.map((v) => v.property)))]).toEqual(['MUTEX-1', 'STORE-1']);
    }, 120_000);
  }
});

describe("@microfleet/ioredis-lock@6.0.1 and redis-semaphore@5.8.0 Mutex: a failed extend drops the lock only when the node answered that the key is gone ('dropped-if-denied')", () => {
  for (const [name, make] of [
    ['@microfleet/ioredis-lock', ioredisLockBackend],
    ['redis-semaphore Mutex', redisSemaphoreMutexBackend],
  ] as const) {
    it(`${name}: an extend on a cut link keeps the lock, as the library does (was: MUTEX-1, "the client may act on a lease longer than allowed", the partition-delay cell); one that finds the key gone drops it`, async () => {
      const b = make({ cluster: cluster! });
      expect(b.contract?.failedExtend).toEqual({ lease: 'dropped-if-denied', keys: 'kept' });
      const schedule: Command[] = [
        { kind: 'acquire', client: 0, resource: 'r', ttlMs: 200 },
        { kind: 'partition', client: 0, node: 0 },
        // A Redis error: ioredis-lock rethrows it with _locked still true, redis-semaphore's refresh rejects with _acquired still true.
        { kind: 'extend', client: 0, resource: 'r', ttlMs: 200 },
        { kind: 'heal', client: 0, node: 0 },
        { kind: 'advance', ms: 250 },
        { kind: 'acquire', client: 1, resource: 'r', ttlMs: 200 },
        // The node answers that the key is not client 0's: now the library drops the lock.
        { kind: 'extend', client: 0, resource: 'r', ttlMs: 200 },
        { kind: 'release', client: 0, resource: 'r' },
      ];
      const r = await runLockstep(b, schedule, { clients: 2, tokenBase: 0n, continueAfterViolation: true });
      expect(r.verdict, textTimeline(r)).toEqual({ kind: 'pass' });
      expect(r.deviations).toBeUndefined();
      expect(r.steps.map((s) => s.actual.kind)).toEqual(['granted', 'ok', 'not-extended', 'ok', 'ok', 'granted', 'not-extended', 'not-held']);
      // What keeping the lock costs, the contract's: client 1 holds it while client 0 still does.
      expect([...new Set(r.findings.flatMap((f) => f.violations.map((v) => v.property)))]).toEqual(['MUTEX-1']);
    }, 120_000);
  }
});

describe('redis-lock@1.0.0 against the redis-single model (written from docs/adapter.md and the kit)', () => {
  // Shrunk by `lockcheck run --backend ./conformance/adapters/redisLock.ts --runs 300` (run 31 of 300, from 9 steps to 4).
  const expiredEarly = (deltaMs: number): Command[] => [
    { kind: 'acquire', client: 1, resource: 'a', ttlMs: 5 },
    // Node 0's clock jumps: client 1's key expires there, while client 1's own clock says 5 ms are left.
    deltaMs > 0 ? { kind: 'clock-step', node: 0, deltaMs } : { kind: 'advance', ms: 6 },
    { kind: 'acquire', client: 0, resource: 'a', ttlMs: 5 },
    { kind: 'release', client: 1, resource: 'a' },
  ];

  it("done() DELs the key whoever holds it, when the releasing client's own clock says its lock has not run out: a holder whose key expired early on the server deletes the next holder's (OWN-1, unsafe)", async () => {
    const b = redisLockBackend({ cluster: cluster! });
    expect(b.contract).toMatchObject({ deadline: 'none', tokens: 'none', clientTimeout: false });
    const verdict = scriptedFailure(await runLockstep(b, expiredEarly(6), { clients: 2, tokenBase: 0n, continueAfterViolation: true }));
    expect(verdictProperties(verdict)).toEqual(['OWN-1']);
    expect(verdict.consequence.kind).toBe('unsafe');
    expect(verdict.step.command).toEqual({ kind: 'release', client: 1, resource: 'a' });
    expect(verdict.message).toMatch(/node 0 should hold client 0's key on 'a'.* but holds nothing/);
  }, 60_000);

  it("the same schedule with the key run out on the client's clock too (6 ms pass): done() sees its time is up and deletes nothing, as the model has it", async () => {
    const report = await runLockstep(redisLockBackend({ cluster: cluster! }), expiredEarly(0), { clients: 2, tokenBase: 0n, continueAfterViolation: true });
    expect(report.verdict.kind === 'conformance-failure' ? textTimeline(report) : 'no conformance failure').toBe('no conformance failure');
    expect(report.steps.map((s) => s.actual.kind)).toEqual(['granted', 'ok', 'granted', 'released']);
  }, 60_000);
});

describe('advisory-lock@2.0.0 against the pg-session model', () => {
  it("declares itself not reentrant (a session per call): judged by that contract, it agrees with the model step by step", async () => {
    const b = advisoryLockBackend(target());
    expect(b.capabilities.reentrant).toBe(false);
    expect(judgedDesign(b)).toEqual({ kind: 'pg-session', reentrant: false });
    // The faults that leave its sessions alone (those that end one: test/kit.test.ts and the matrix row).
    const r = await checkConformance(b, { runs: RUNS, seed: SEED, faults: ['advance', 'pause', 'delay', 'clock-drift'] });
    expect(r.failure?.message ?? null).toBeNull();
    expect(r.runs).toBe(RUNS);
  }, 300_000);

  it("the model of PostgreSQL's own session lock stacks a holder's acquire: declared reentrant, the library's refusal is a LIVE-1 deviation (liveness)", async () => {
    const declared = advisoryLockBackend(target());
    const b = { ...declared, capabilities: { ...declared.capabilities, reentrant: true } };
    const r = await checkConformance(b, { runs: RUNS, seed: SEED, faults: ['advance', 'pause', 'delay', 'clock-drift'] });
    const { verdict } = conformanceFailure(r);
    expect(r.failure!.properties).toEqual(['LIVE-1']);
    expect(verdict.consequence.kind).toBe('liveness');
    expect(verdict.step.actual).toEqual({ kind: 'denied', reason: 'held' });
    expect(verdict.step.allowed.map((o) => o.kind)).toEqual(['granted']);
  }, 300_000);

  it('a session ended by the server (pg_terminate_backend) kills the process: its pg.Client has no error listener', async () => {
    const s = postgres!;
    const script = fileURLToPath(new URL('../conformance/adapters/advisoryLockConnectionLoss.ts', import.meta.url));
    const child = await runChild(script, { ...process.env, LOCKCHECK_PG_URL: s.url }, 30_000);
    expect(child.stdout).toContain('granted');
    expect(child.stdout).not.toContain('survived');
    expect(child.code).toBe(1);
    expect(child.stderr).toContain('terminating connection due to administrator command');
  }, 60_000);
});

describe("the matrix's lib: rows", () => {
  const adapters: Record<LibraryId, () => BackendUnderTest> = {
    redlock: () => redlockBackend({ cluster: cluster! }),
    'sesamecare-redlock': () => sesamecareRedlockBackend({ cluster: cluster! }),
    redlock4: () => redlock4Backend({ cluster: cluster! }),
    'advisory-lock': () => advisoryLockBackend(target()),
    'redis-semaphore-mutex': () => redisSemaphoreMutexBackend({ cluster: cluster! }),
    'redis-semaphore-redlock-mutex': () => redisSemaphoreRedlockMutexBackend({ cluster: cluster! }),
    'ioredis-lock': () => ioredisLockBackend({ cluster: cluster! }),
    'redis-lock': () => redisLockBackend({ cluster: cluster! }),
  };
  it.each(LIBRARY_AUDITS.map((row) => [row.name, row] as const))('%s is predicted and seeded by the model of the contract its adapter declares, never by the bare design', (_name, row) => {
    const backend = adapters[row.library!]();
    expect(describeDesign(row.design)).toBe(describeDesign(judgedDesign(backend)));
    expect(predictionDesign(row, backend)).toEqual(row.design);
    // The row's prediction taken from lockcheck's own client instead (the design the adapter names): refused.
    expect(() => predictionDesign({ ...row, design: backend.design }, backend)).toThrow(/judged by .* predicted by/);
  });
});

/** Runs a TypeScript file in a child node (tsx), killed after `timeoutMs`. */
function runChild(file: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', file], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}
