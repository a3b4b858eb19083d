import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BackendUnderTest, FaultKind, RunReport } from '../conformance/index.ts';
import { MAX_ATTEMPTS, checkConformance, offeredFaults, runLockstep } from '../conformance/index.ts';
import { redisLockBackend } from '../conformance/adapters/redisLock.ts';
import { noProxyReason } from '../conformance/env/postgresLink.ts';
import { realPostgresBackend } from '../conformance/env/postgresBackend.ts';
import { PostgresServer } from '../conformance/env/postgresServer.ts';
import { USER_SERVER_CLOCK_MARGIN_MS, realRedisBackend } from '../conformance/env/redisBackend.ts';
import { RedisServer } from '../conformance/env/redisServer.ts';
import { connectPostgres } from '../conformance/env/userPostgres.ts';
import { connectRedisCluster } from '../conformance/env/userRedis.ts';
import { postgresLibraryBackend } from '../conformance/postgresLibrary.ts';
import { LeaseHandle } from '../impl/lease.ts';
import type { Command } from '../model/command.ts';
import { designs } from '../model/design.ts';

/**
 * Every fault that does not need to own the server, on the user's own
 * servers (`--redis`, `--pg`; issues 10 and 11): servers the test starts,
 * handed over as the user's (connectRedisCluster, connectPostgres), so that
 * lockcheck owns neither their processes nor their clocks. Per fault kind a
 * scripted run shows the fault applied (a late reply, a request a
 * black-holed node never received, a cut session that keeps its lock until
 * keepalive), then a few seeded runs agree with the model.
 */
const SEED = Number(process.env.LOCKCHECK_SEED ?? 20161010);
let redis: RedisServer[] = [];
let postgres: PostgresServer | undefined;
const closing: BackendUnderTest[] = [];

beforeAll(async () => {
  [redis, postgres] = await Promise.all([Promise.all([0, 1, 2].map(() => RedisServer.start({ persistence: 'none' }))), PostgresServer.start({ parentDir: '/dev/shm' })]);
}, 120_000);

afterAll(async () => {
  for (const b of closing) await b.close?.();
  await Promise.all([...redis.map((s) => s.stop()), postgres?.stop()]);
});

/** Runs a schedule; on servers with their own clocks a run out of pace is tried again, as checkConformance does (spec 7.8). */
async function paced(backend: BackendUnderTest, schedule: readonly Command[], requestTimeoutMs?: number): Promise<RunReport> {
  let report: RunReport | undefined;
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    report = await runLockstep(backend, schedule, { clients: 2, tokenBase: 0n, continueAfterViolation: true, ...(requestTimeoutMs !== undefined ? { requestTimeoutMs } : {}) });
    if (!(report.verdict.kind === 'inconclusive' && report.verdict.cause === 'out-of-pace')) return report;
  }
  return report!;
}

/** The scripted steps (without the pacing's catch-up advances): command kind, true time taken, outcome. */
function taken(report: RunReport, schedule: readonly Command[]): Array<readonly [string, number, string]> {
  const shown = JSON.stringify(report.verdict, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}` : v));
  expect(report.verdict.kind === 'pass' || report.verdict.kind === 'property-violation', shown).toBe(true);
  return report.steps
    .filter((s) => schedule.includes(s.command))
    .map((s) => [s.command.kind, s.endMs - s.startMs, s.actual.kind === 'denied' ? `denied:${s.actual.reason}` : s.actual.kind] as const);
}

/** SETs a Redis server has run: the acquire script's grants (the harness's own look at the keys only reads). */
async function grantsOn(server: RedisServer): Promise<number> {
  const r = new Redis(server.url, { lazyConnect: true, commandTimeout: 5_000, connectTimeout: 5_000, maxRetriesPerRequest: 0 });
  try {
    await r.connect();
    return Number(/^cmdstat_set:calls=(\d+)/m.exec(await r.info('commandstats'))?.[1] ?? 0);
  } finally {
    r.disconnect();
  }
}

/** Seeded runs under these fault kinds: none fails, some are judged, and the fault `applied` looks for was drawn in them. */
async function seeded(backend: BackendUnderTest, faults: readonly FaultKind[], runs: number, applied: (c: Command) => boolean): Promise<void> {
  let drawn = 0;
  const r = await checkConformance(backend, { runs, seed: SEED, faults, onRun: (_run, report) => void (drawn += report.steps.filter((s) => applied(s.command)).length) });
  expect(r.failure?.message ?? null).toBeNull();
  // Out of pace on a loaded machine a run is tried again; some must be judged to their end.
  expect(r.stoppedEarly).toBeLessThan(runs);
  expect(drawn, `no such step in ${runs} runs`).toBeGreaterThan(0);
}

const acquire = (client: number, ttlMs?: number): Command => ({ kind: 'acquire', client, resource: 'r', ...(ttlMs !== undefined ? { ttlMs } : {}) });
const isLate = (c: Command): boolean => 'latencyMs' in c && (c.latencyMs ?? 0) > 0 && c.kind !== 'acquire';
const isNodeDelay = (c: Command): boolean => c.kind === 'node-delay';
const TIMING: readonly FaultKind[] = ['advance', 'delay', 'latency', 'slow-node'];

describe('timing faults on the user’s own Redis servers', () => {
  const single = async (): Promise<BackendUnderTest> =>
    realRedisBackend(await connectRedisCluster([redis[0]!.url]), designs.redisSingle({ clockMarginMs: USER_SERVER_CLOCK_MARGIN_MS }), 'strict', { name: 'redis-single (user servers)' });
  const redlock = async (): Promise<BackendUnderTest> =>
    realRedisBackend(await connectRedisCluster(redis.map((s) => s.url)), designs.redlock({ nodes: 3, clockMarginMs: USER_SERVER_CLOCK_MARGIN_MS }), 'strict', { name: 'redlock (user servers)' });

  it('lockcheck’s client takes every fault but those that need the server’s process or clock', async () => {
    expect(await offeredFaults(await single())).toEqual(['advance', 'pause', 'partition', 'delay', 'latency', 'slow-node']);
  }, 60_000);

  it('latency: extend, write and release replies come late by their latency; in flight across a pause, an acquire is read at the resume', async () => {
    const schedule: Command[] = [
      acquire(0, 400),
      { kind: 'extend', client: 0, resource: 'r', ttlMs: 400, latencyMs: 60 },
      { kind: 'write', client: 0, resource: 'r', value: 'a', latencyMs: 30 },
      { kind: 'release', client: 0, resource: 'r', latencyMs: 20 },
      { kind: 'pause', client: 1, inFlight: { kind: 'acquire', client: 1, resource: 'r', ttlMs: 400, latencyMs: 10 } },
      acquire(0, 400),
      { kind: 'resume', client: 1 },
    ];
    const steps = taken(await paced(await single(), schedule), schedule);
    expect(steps.map(([kind, , outcome]) => `${kind}:${outcome}`)).toEqual(['acquire:granted', 'extend:extended', 'write:accepted', 'release:released', 'pause:ok', 'acquire:denied:held', 'resume:granted']);
    // Each late reply took at least its latency of true time, which on these servers is real time.
    expect(steps.slice(1, 4).map(([, ms]) => ms)).toEqual([expect.any(Number), expect.any(Number), expect.any(Number)]);
    for (const [i, latencyMs] of [[1, 60], [2, 30], [3, 20]] as const) expect(steps[i]![1]).toBeGreaterThanOrEqual(latencyMs);
  }, 60_000);

  it('slow-node: a black-holed node never receives the request and is waited out to the request timeout; a quorum goes on without it', async () => {
    const holed: Command[] = [{ kind: 'node-delay', node: 0, ms: 'never' }, acquire(0, 400), { kind: 'node-delay', node: 0, ms: 40 }, acquire(1, 400)];
    const before = await grantsOn(redis[0]!);
    const alone = taken(await paced(await single(), holed, 50), holed);
    // Black hole: denied once the 50 ms request timeout ran out. Slow by 40 ms: granted, 40 ms late.
    expect(alone.map(([kind, , outcome]) => `${kind}:${outcome}`)).toEqual(['node-delay:ok', 'acquire:denied:no-quorum', 'node-delay:ok', 'acquire:granted']);
    expect(alone[1]![1]).toBe(50);
    expect(alone[3]![1]).toBeGreaterThanOrEqual(40);
    // Only the slow acquire reached the server: one grant.
    expect(await grantsOn(redis[0]!)).toBeGreaterThan(before);

    const quorum: Command[] = [{ kind: 'node-delay', node: 1, ms: 'never' }, acquire(0, 400), { kind: 'extend', client: 0, resource: 'r', ttlMs: 400 }, { kind: 'release', client: 0, resource: 'r' }];
    const silent = await grantsOn(redis[1]!);
    const others = await Promise.all([redis[0]!, redis[2]!].map(grantsOn));
    const steps = taken(await paced(await redlock(), quorum, 50), quorum);
    expect(steps).toEqual([
      ['node-delay', 0, 'ok'],
      // Nodes 0 and 2 decide every round: node 1's silence costs no time.
      ['acquire', 0, 'granted'],
      ['extend', 0, 'extended'],
      ['release', 0, 'released'],
    ]);
    expect(await grantsOn(redis[1]!)).toBe(silent);
    const after = await Promise.all([redis[0]!, redis[2]!].map(grantsOn));
    after.forEach((n, i) => expect(n).toBeGreaterThan(others[i]!));
  }, 60_000);

  it('seeded runs with late replies or a slow node agree with the model: lockcheck’s client, and a library through the kit', async () => {
    // The matrix's timing class: late replies on every operation, a slow or black-holed node.
    await seeded(await redlock(), TIMING, 8, (c) => isLate(c) || isNodeDelay(c));
    const library = redisLockBackend({ redis: [redis[0]!.url] });
    closing.push(library);
    expect(await offeredFaults(library)).toEqual(['advance', 'pause', 'partition', 'delay', 'latency', 'slow-node']);
    await seeded(library, TIMING, 8, (c) => isLate(c) || isNodeDelay(c));
  }, 120_000);
});

describe('partitions on the user’s own PostgreSQL server, through a TCP proxy per client', () => {
  /** A library over session advisory locks, through the kit: a session per lease, written from docs/adapter.md. */
  const kitAdapter = (pgUrl: string): BackendUnderTest =>
    postgresLibraryBackend(
      {
        name: 'session-per-lease (kit)',
        contract: { deadline: 'none', clientTimeout: false, tokens: 'none', validatesInput: false },
        client: ({ url, clock, call, onClose }) => {
          const sessions = new Map<LeaseHandle, pg.Client>();
          let grants = 0;
          onClose(async () => {
            for (const s of sessions.values()) await s.end().catch(() => undefined);
          });
          return {
            async acquire(resource) {
              const session = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
              session.on('error', () => undefined);
              let reason: 'held' | 'no-quorum' = 'held';
              try {
                await call(() => session.connect());
                const r = await call(() => session.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [resource]));
                if (r.rows[0]!.ok) {
                  const lease = new LeaseHandle(resource, `c${++grants}`, 0n, null, clock);
                  // The session is the lock: when it ends, so does the lease.
                  session.once('end', () => lease.lose('connection-lost'));
                  sessions.set(lease, session);
                  return { kind: 'granted', lease };
                }
              } catch {
                // Unreachable: the session is dropped, as a client that cannot tell whether it got the lock.
                reason = 'no-quorum';
              }
              // Real I/O goes through the kit's call, or the runner could not wait for it.
              await call(() => session.end()).catch(() => undefined);
              return { kind: 'denied', reason };
            },
            async release(lease) {
              const session = sessions.get(lease as LeaseHandle);
              if (session === undefined) return;
              sessions.delete(lease as LeaseHandle);
              (lease as LeaseHandle).lose('released');
              // Unreachable: the unlock fails loudly (the session, and its lock, stay on the server until keepalive ends them).
              await call(() => session.end());
            },
          };
        },
      },
      { pg: pgUrl },
    );

  // Client 0 is cut off holding the lock: its session stays on the server (the proxy drops the bytes, nothing closes) until keepalive ends it.
  const cutOff: Command[] = [acquire(0), { kind: 'partition', client: 0, node: 0 }, acquire(1), { kind: 'advance', ms: 30 }, acquire(1), { kind: 'heal', client: 0, node: 0 }];

  it('lockcheck’s pg-session client: the cut session keeps its lock until keepalive, as the model has it', async () => {
    const backend = realPostgresBackend(await connectPostgres(postgres!.url), designs.pgSession(), 'strict');
    expect(await offeredFaults(backend)).toEqual(['advance', 'clock-drift', 'pause', 'partition', 'delay', 'latency', 'slow-node', 'kill-connection']);
    const report = await paced(backend, cutOff);
    expect(taken(report, cutOff).map(([kind, , outcome]) => `${kind}:${outcome}`)).toEqual(['acquire:granted', 'partition:ok', 'acquire:denied:held', 'advance:ok', 'acquire:granted', 'heal:ok']);
    // Client 0 still believes in its lease when client 1 gets the lock: the design's finding, not a conformance failure.
    // Cut off, lockcheck's client reads no reply and counts its lease lost: no two holders.
    expect(report.verdict).toEqual({ kind: 'pass' });
    await seeded(backend, ['advance', 'pause', 'partition'], 8, (c) => c.kind === 'partition');
  }, 120_000);

  it('a library through the kit: the same partition, on the real link', async () => {
    const library = kitAdapter(postgres!.url);
    closing.push(library);
    expect(await offeredFaults(library)).toEqual(['advance', 'clock-drift', 'pause', 'partition', 'delay', 'latency', 'slow-node', 'kill-connection']);
    const report = await paced(library, cutOff);
    expect(taken(report, cutOff).map(([kind, , outcome]) => `${kind}:${outcome}`)).toEqual(['acquire:granted', 'partition:ok', 'acquire:denied:held', 'advance:ok', 'acquire:granted', 'heal:ok']);
    await seeded(library, ['advance', 'pause', 'partition'], 8, (c) => c.kind === 'partition');
  }, 120_000);

  it('over TLS no proxy can stand in front of the server: no partition there, and the reason says why', () => {
    expect(noProxyReason('postgres://u@db.example/x')).toBeNull();
    expect(noProxyReason('postgres://u@db.example/x?sslmode=disable')).toBeNull();
    for (const tls of ['?sslmode=require', '?sslmode=verify-full', '?ssl=true', '?sslrootcert=/etc/ca.pem']) expect(noProxyReason(`postgres://u@db.example/x${tls}`)).toMatch(/TLS/);
  });
});
