import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runLockstep } from '../conformance/index.ts';
import type { BackendUnderTest } from '../conformance/adapter.ts';
import type { RedisCluster } from '../conformance/env/redisBackend.ts';
import { realRedisBackend, startRedisCluster } from '../conformance/env/redisBackend.ts';
import { designs } from '../model/index.ts';
import type { Command } from '../model/index.ts';

/**
 * A machine that stalls the test process or a server for longer than a
 * command's real-time bound is no fault of the backend's: the run is out of
 * pace (inconclusive, tried again), never a conformance failure. Seen once at
 * load 28 as LIVE-1 (an acquire denied `no-quorum` where the model grants:
 * the command timed out, a vote against). The stall here is a real one: the
 * server is stopped (SIGSTOP) from the acquire on, so its command can only
 * end by the bound, whatever the load.
 */
let cluster: RedisCluster;
// Short, so the stalled case ends soon; long enough that the unstalled case is never held this long by a loaded machine.
const BOUND_MS = 2000;
beforeAll(async () => {
  cluster = await startRedisCluster({ nodes: 1, persistence: 'none', commandTimeoutMs: BOUND_MS });
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
});

/** The real backend, with its one server stopped once the schedule's first advance is done (and running again at the close). */
function stalledAfterFirstAdvance(): BackendUnderTest {
  const real = realRedisBackend(cluster, designs.redisSingle(), 'strict');
  const server = cluster.local!.servers[0]!;
  return {
    ...real,
    start: async (o) => {
      const instance = await real.start(o);
      return {
        ...instance,
        env: {
          ...instance.env,
          advanceTo: async (t) => {
            await instance.env.advanceTo(t);
            if (!server.paused) server.pause();
          },
        },
        close: async () => {
          if (server.paused) server.resume();
          await instance.close();
        },
      };
    },
  };
}

const schedule: Command[] = [
  { kind: 'advance', ms: 5400 },
  { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 700 },
];

describe('a stalled machine makes a run inconclusive, not a failure', () => {
  it('an acquire whose command runs out of real time on a server the model has up is out of pace (was: LIVE-1, denied no-quorum)', async () => {
    const report = await runLockstep(stalledAfterFirstAdvance(), schedule, { clients: 1, tokenBase: 0n });
    expect(report.verdict).toMatchObject({ kind: 'inconclusive', cause: 'out-of-pace' });
    expect(report.verdict.kind === 'inconclusive' && report.verdict.reason).toMatch(new RegExp(`evalsha .* failed after \\d+ ms of real time \\(bound ${BOUND_MS} ms\\): the machine stalled the run`));
  }, 30_000);

  it('the same schedule on the same servers, not stalled, is judged: it passes', async () => {
    const report = await runLockstep(realRedisBackend(cluster, designs.redisSingle(), 'strict'), schedule, { clients: 1, tokenBase: 0n });
    expect(report.verdict).toEqual({ kind: 'pass' });
    expect(report.steps.map((s) => s.actual.kind)).toEqual(['ok', 'granted']);
  }, 30_000);

  it('rejects a command bound that is not a positive integer', async () => {
    await expect(startRedisCluster({ nodes: 1, persistence: 'none', commandTimeoutMs: 0 })).rejects.toThrow(/commandTimeoutMs/);
  });
});
