import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runLockstep, textTimeline, verdictProperties } from '../conformance/index.ts';
import type { BackendUnderTest, RunReport } from '../conformance/index.ts';
import type { RedisCluster } from '../conformance/env/redisBackend.ts';
import { startRedisCluster } from '../conformance/env/redisBackend.ts';
import { redlockBackend } from '../conformance/adapters/redlock.ts';
import { redlock4Backend } from '../conformance/adapters/redlock4.ts';
import { redisSemaphoreMutexBackend, redisSemaphoreRedlockMutexBackend } from '../conformance/adapters/redisSemaphore.ts';
import type { Command } from '../model/index.ts';
import { createHash } from 'node:crypto';
import { setNxLock } from './fixtures/setNxLock.ts';

/**
 * A script a library sends as EVALSHA and, on NOSCRIPT (every run starts
 * with cold script caches), again as EVAL is one request of the library's,
 * one round trip of the model's (conformance/scriptFallback.ts). Put
 * through the faults as two, it read as findings of the library's: redlock
 * 4 "a grant the model refuses" (unsafe), redlock 5 "a key of another owner
 * changed" (unsafe), redis-semaphore "a released key stays until its ttl"
 * and "an extension refused that the model grants". The saved
 * counterexamples of those cells, scripted: each agrees now. A real defect
 * on the same script path is still reported.
 */
let cluster: RedisCluster | undefined;
beforeAll(async () => {
  cluster = await startRedisCluster({ nodes: 5, persistence: 'none' });
}, 120_000);
afterAll(async () => {
  await cluster?.stop();
}, 60_000);

const run = (backend: BackendUnderTest, commands: readonly Command[]): Promise<RunReport> => runLockstep(backend, commands, { clients: 2, tokenBase: 0n, continueAfterViolation: true });

/** The library did what the model of its contract allows at every step (what that contract costs, a property violation, may show). */
const agrees = (report: RunReport): void => {
  expect(report.verdict.kind, textTimeline(report)).not.toBe('conformance-failure');
  expect(report.verdict.kind, textTimeline(report)).not.toBe('inconclusive');
  expect(report.deviations ?? [], textTimeline(report)).toEqual([]);
};

describe('EVALSHA, NOSCRIPT, EVAL: one round trip', () => {
  it("redlock 4: an acquire sent before a pause sets its keys before the pause, as the model's does; the next client is refused (was: 'a grant the model refuses', unsafe)", async () => {
    const report = await run(redlock4Backend({ cluster: cluster! }), [
      { kind: 'pause', client: 0, inFlight: { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 5 } },
      { kind: 'acquire', client: 1, resource: 'r0', ttlMs: 5 },
    ]);
    agrees(report);
    expect(report.steps[1]!.actual).toEqual({ kind: 'denied', reason: 'held' });
  }, 60_000);

  it("redlock 5: a slow node gets its key one slow round trip after the request, as the model has it (was: 'a key of another owner changed', unsafe)", async () => {
    agrees(
      await run(redlockBackend({ cluster: cluster! }), [
        { kind: 'node-delay', node: 0, ms: 1 },
        { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 5 },
      ]),
    );
  }, 60_000);

  it("redis-semaphore Mutex: a release sent before a pause deletes the key before the pause (was: 'a released key stays until its ttl', liveness)", async () => {
    agrees(
      await run(redisSemaphoreMutexBackend({ cluster: cluster! }), [
        { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 5 },
        { kind: 'pause', client: 0, inFlight: { kind: 'release', client: 0, resource: 'r0' } },
      ]),
    );
  }, 60_000);

  for (const [name, backend] of [
    ['Mutex', () => redisSemaphoreMutexBackend({ cluster: cluster! })],
    ['RedlockMutex', () => redisSemaphoreRedlockMutexBackend({ cluster: cluster! })],
  ] as const) {
    it(`redis-semaphore ${name}: a refresh sent before a pause re-arms the key before the pause; the refresh holds (was: 'an extension refused that the model grants')`, async () => {
      const report = await run(backend(), [
        { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 5 },
        { kind: 'pause', client: 0, inFlight: { kind: 'extend', client: 0, resource: 'r0', ttlMs: 5 } },
        { kind: 'advance', ms: 1 },
        { kind: 'acquire', client: 1, resource: 'r0', ttlMs: 5, retries: 1, retryDelayMs: 5 },
        { kind: 'resume', client: 0 },
      ]);
      agrees(report);
      expect(report.steps.map((s) => s.actual.kind)).toEqual(['granted', 'ok', 'ok', 'granted', 'extended']);
    }, 60_000);
  }

  it("what a contract costs is still shown on the script path: redis-semaphore Mutex keeps its lock after a refresh on a cut link ('dropped-if-denied', as the library does), and once the key expires another client gets the lock while it still believes it holds (MUTEX-1, under its contract)", async () => {
    const report = await run(redisSemaphoreMutexBackend({ cluster: cluster! }), [
      { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 5 },
      { kind: 'partition', client: 0, node: 0 },
      { kind: 'extend', client: 0, resource: 'r0', ttlMs: 5 },
      { kind: 'advance', ms: 6 },
      { kind: 'acquire', client: 1, resource: 'r0', ttlMs: 5 },
    ]);
    agrees(report);
    expect(report.steps.map((s) => s.actual.kind), textTimeline(report)).toEqual(['granted', 'ok', 'not-extended', 'ok', 'granted']);
    // The run goes on past violations (continueAfterViolation): the model's MUTEX-1 at the second grant is a finding.
    expect(report.findings.flatMap((f) => verdictProperties(f)), textTimeline(report)).toEqual(['MUTEX-1']);
  }, 60_000);
});

/**
 * A lock of the test's own on the kit: SET NX PX to acquire, a
 * compare-and-delete script sent as EVALSHA to release. On NOSCRIPT it
 * falls back to EVAL of the same script (one round trip with the EVALSHA),
 * or, a defect, to a plain DEL: a request of its own, which deletes
 * whoever's key is there.
 */
const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
const RELEASE_SHA = createHash('sha1').update(RELEASE).digest('hex');
function scriptLock(fallback: 'eval' | 'del'): BackendUnderTest {
  return setNxLock(
    {
      name: `script lock, ${fallback} on NOSCRIPT`,
      release: async (redis, key, lease) => {
        try {
          await redis.evalsha(RELEASE_SHA, 1, key, lease.owner);
        } catch (e) {
          if (!(e instanceof Error) || !e.message.startsWith('NOSCRIPT')) throw e;
          await (fallback === 'eval' ? redis.eval(RELEASE, 1, key, lease.owner) : redis.del(key));
        }
      },
    },
    cluster!,
  );
}

describe("a library's own fallback on NOSCRIPT", () => {
  const expired: Command[] = [
    { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 5 },
    { kind: 'advance', ms: 6 },
    { kind: 'acquire', client: 1, resource: 'r0', ttlMs: 5 },
    { kind: 'release', client: 0, resource: 'r0' },
  ];

  it('EVAL of the same script: a release in flight across a pause and a release after the key passed to another both agree', async () => {
    agrees(await run(scriptLock('eval'), [{ kind: 'acquire', client: 0, resource: 'r0', ttlMs: 5 }, { kind: 'pause', client: 0, inFlight: { kind: 'release', client: 0, resource: 'r0' } }]));
    agrees(await run(scriptLock('eval'), expired));
  }, 60_000);

  it("a plain DEL is no part of the EVALSHA's round trip, and deleting the next holder's key is still reported (OWN-1, unsafe)", async () => {
    const report = await run(scriptLock('del'), expired);
    expect(report.verdict.kind, textTimeline(report)).toBe('conformance-failure');
    expect(report.verdict).toMatchObject({ property: 'OWN-1', consequence: { kind: 'unsafe' } });
  }, 60_000);
});
