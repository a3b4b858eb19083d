import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runLockstep } from '../conformance/index.ts';
import type { BackendUnderTest } from '../conformance/adapter.ts';
import type { RedisCluster } from '../conformance/env/redisBackend.ts';
import { realRedisBackend, startRedisCluster } from '../conformance/env/redisBackend.ts';
import { realPostgresBackend, targetOf } from '../conformance/env/postgresBackend.ts';
import { PostgresServer } from '../conformance/env/postgresServer.ts';
import { designs } from '../model/index.ts';
import type { Command } from '../model/index.ts';
import { inPace } from './probes.ts';

/**
 * A machine that stalls the test process or a server for longer than a
 * command's real-time bound is no fault of the backend's: the run is out of
 * pace (inconclusive, tried again), never a conformance failure. Seen once at
 * load 28 as LIVE-1 (an acquire denied `no-quorum` where the model grants:
 * the command timed out, a vote against), and once on pg-xact in a matrix run
 * beside the test suite (the lock's connect timed out). The stall here is a
 * real one: the server is stopped (SIGSTOP) from the acquire on, so its
 * request can only end by the bound, whatever the load. A client whose timers
 * are on the run's virtual clock (pg-session's wire client) would otherwise
 * wait for ever: the harness's bound ends that wait too.
 */
let cluster: RedisCluster;
let pgServer: PostgresServer;
// Short, so the stalled case ends soon; long enough that the unstalled case is never held this long by a loaded machine.
const BOUND_MS = 2000;
beforeAll(async () => {
  [cluster, pgServer] = await Promise.all([startRedisCluster({ nodes: 1, persistence: 'none', commandTimeoutMs: BOUND_MS }), PostgresServer.start({ parentDir: '/dev/shm' })]);
}, 120_000);
afterAll(async () => {
  await Promise.allSettled([cluster?.stop(), pgServer?.stop()]);
});

/** A server the test can stop (SIGSTOP) and start again. */
interface Pausable {
  readonly paused: boolean;
  pause(): void;
  resume(): void;
}

/** The real backend, with its server stopped once the schedule's first advance is done (and running again at the close). */
function stalledAfterFirstAdvance(real: BackendUnderTest, server: Pausable): BackendUnderTest {
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
    const report = await runLockstep(stalledAfterFirstAdvance(realRedisBackend(cluster, designs.redisSingle(), 'strict'), cluster.local!.servers[0]!), schedule, { clients: 1, tokenBase: 0n });
    expect(report.verdict).toMatchObject({ kind: 'inconclusive', cause: 'out-of-pace' });
    expect(report.verdict.kind === 'inconclusive' && report.verdict.reason).toMatch(new RegExp(`evalsha .* failed after \\d+ ms of real time \\(bound ${BOUND_MS} ms\\): the machine stalled the run`));
  }, 30_000);

  // A loaded machine may still hold an unstalled command past the bound: that run is out of pace too, and tried again.
  it('the same schedule on the same servers, not stalled, is judged: it passes', async ({ skip }) => {
    const report = await inPace(skip, () => runLockstep(realRedisBackend(cluster, designs.redisSingle(), 'strict'), schedule, { clients: 1, tokenBase: 0n }));
    expect(report.verdict).toEqual({ kind: 'pass' });
    expect(report.steps.map((s) => s.actual.kind)).toEqual(['ok', 'granted']);
  }, 30_000);

  // PostgreSQL's lock clients bound their connect and statements by real-time timers of statementTimeoutMs (node-postgres's).
  // Seen once in a matrix beside the tests: pg-xact x client-pause, LIVE-1 at step 1, an acquire denied no-quorum.
  const pgSchedule: Command[] = [
    { kind: 'advance', ms: 10 },
    { kind: 'acquire', client: 0, resource: 'r0' },
  ];
  for (const [design, store] of [
    [designs.pgXact({ statementTimeoutMs: BOUND_MS }), 'transactional'],
    [designs.pgSession({ statementTimeoutMs: BOUND_MS }), 'strict'],
  ] as const) {
    it(`${design.kind}: an acquire whose connect runs out of real time on a server the model has up is out of pace`, async () => {
      const report = await runLockstep(stalledAfterFirstAdvance(realPostgresBackend(targetOf(pgServer), design, store), pgServer), pgSchedule, { clients: 1, tokenBase: 0n });
      expect(report.verdict).toMatchObject({ kind: 'inconclusive', cause: 'out-of-pace' });
      expect(report.verdict.kind === 'inconclusive' && report.verdict.reason).toMatch(new RegExp(`client 0's lock statement failed after \\d+ ms of real time \\(bound ${BOUND_MS} ms\\): the machine stalled the run`));
    }, 30_000);

    it(`${design.kind}: the same schedule on the same server, not stalled, is judged: it passes`, async ({ skip }) => {
      const report = await inPace(skip, () => runLockstep(realPostgresBackend(targetOf(pgServer), design, store), pgSchedule, { clients: 1, tokenBase: 0n }));
      expect(report.verdict).toEqual({ kind: 'pass' });
      expect(report.steps.map((s) => s.actual.kind)).toEqual(['ok', 'granted']);
    }, 30_000);
  }

  it('rejects a command bound that is not a positive integer', async () => {
    await expect(startRedisCluster({ nodes: 1, persistence: 'none', commandTimeoutMs: 0 })).rejects.toThrow(/commandTimeoutMs/);
  });
});
