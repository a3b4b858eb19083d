import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testTempDir } from './tempDirs.ts';
import type { LockcheckProcess } from './lockcheckProcess.ts';
import { lockcheckSync } from './lockcheckProcess.ts';
import { MAX_ATTEMPTS } from '../conformance/check.ts';
import { freeLoopbackPort } from '../conformance/env/processes.ts';
import { PostgresServer } from '../conformance/env/postgresServer.ts';
import { RedisServer } from '../conformance/env/redisServer.ts';

/**
 * `lockcheck --redis` and `--pg`: the user's own servers. The test starts
 * plain servers that stand for them, puts data of "the user" on them (keys,
 * a session holding an advisory lock, rows in lockcheck's own table), runs
 * the command as a user does, and checks that the runs measured something
 * and that everything of the user's is still there and nothing of lockcheck's
 * is left behind.
 */
const dir = testTempDir('lockcheck-user-servers-');
let redis: RedisServer[] = [];
let postgres: PostgresServer | undefined;
let bystander: pg.Client | undefined;
const users: Redis[] = [];

const redisUrl = (s: RedisServer): string => s.url;
/** What output may show of a URL: no password. */
const shownRedisUrl = (s: RedisServer): string => `redis://${s.host}:${s.port}`;
const pgUrl = (): string => postgres!.url;

beforeAll(async () => {
  [redis, postgres] = await Promise.all([Promise.all([0, 1, 2].map(() => RedisServer.start({ persistence: 'none' }))), PostgresServer.start({ parentDir: '/dev/shm' })]);
  for (const s of redis) {
    const r = new Redis(redisUrl(s));
    users.push(r);
    await r.set('the-users:key', 'keep me');
  }
  bystander = new pg.Client({ connectionString: pgUrl() });
  await bystander.connect();
  // The user's session holds an advisory lock, and has a row in lockcheck's store table of its own.
  await bystander.query('SELECT pg_advisory_lock(4242)');
  await bystander.query('CREATE TABLE IF NOT EXISTS lockcheck_store (resource text PRIMARY KEY, value text NOT NULL, token bigint NOT NULL, highest bigint NOT NULL)');
  await bystander.query("INSERT INTO lockcheck_store VALUES ('the-users-resource', 'v', 7, 7)");
}, 120_000);

afterAll(async () => {
  for (const r of users) r.disconnect();
  await bystander?.end().catch(() => undefined);
  await Promise.all([...redis.map((s) => s.stop()), postgres?.stop()]);
});

/** Polls `probe` until it returns a value, up to `ms`; null if it never does. */
async function until<T>(probe: () => Promise<T | null>, ms: number): Promise<T | null> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== null || Date.now() >= deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The promise's value if it settles within `ms`, else 'timed out'. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | 'timed out'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'timed out'>((resolve) => {
    timer = setTimeout(() => resolve('timed out'), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

const lockcheck = (...args: string[]): LockcheckProcess => lockcheckSync(args, { timeoutMs: 240_000 });

interface RunJson {
  readonly backend: string;
  readonly runs: number;
  readonly stoppedEarly: number;
  readonly retried: number;
  readonly failure: unknown;
  readonly findings: Record<string, number | null>;
}

describe('lockcheck on the user’s own servers', () => {
  it('rejects bad server URLs with exit code 2, and unreachable servers with exit code 3', async () => {
    for (const [args, message] of [
      [['run', '--backend', 'redis-single/strict', '--redis', 'ftp://example.com'], /the scheme must be redis:\/\/ or rediss:\/\//],
      [['run', '--backend', 'redis-single/strict', '--redis', 'redis://127.0.0.1:6379/zero'], /the path must be a database number/],
      [['run', '--backend', 'pg-session/strict', '--pg', 'mysql://h/db'], /the scheme must be postgres:\/\/ or postgresql:\/\//],
      [['run', '--backend', 'pg-session/strict', '--pg', 'not a url'], /is not a URL/],
      [['explore', '--redis', 'redis://127.0.0.1:1'], /explore runs the model alone/],
      [['run', '--backend', 'redis-single-aof/strict', '--redis', redisUrl(redis[0]!)], /redis-single-aof\/strict cannot run on the given servers: its persistence/],
      [['run', '--backend', 'redlock/strict', '--redis', redisUrl(redis[0]!)], /Redlock needs at least 3 independent nodes; --redis gave 1/],
      [['run', '--backend', 'redis-single/strict', '--redis', redisUrl(redis[0]!), '--faults', 'advance,crash-restart'], /redis-single\/strict takes no crash-restart fault here \(it takes: advance, pause, partition, delay, latency, slow-node\); crash-restart kills and restarts the server's process, lockcheck's only on servers it starts/],
      // The same URL twice is a list naming one item twice; the same server spelled two ways is found by asking the servers.
      [['run', '--backend', 'redis-single/strict', '--redis', `${redisUrl(redis[0]!)},${redisUrl(redis[0]!)}`], /--redis lists '.*' twice/],
      [['run', '--backend', 'redis-single/strict', '--redis', `${redisUrl(redis[0]!)},${redisUrl(redis[0]!)}/0`], /are the same server and database/],
    ] as const) {
      const r = lockcheck(...args);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(message);
    }
    const closed = await freeLoopbackPort();
    const noRedis = lockcheck('run', '--backend', 'redis-single/strict', '--redis', `redis://127.0.0.1:${closed}`);
    expect(noRedis.code, noRedis.stderr).toBe(3);
    expect(noRedis.stderr).toMatch(new RegExp(`cannot reach the Redis server redis://127.0.0.1:${closed}`));
    const noPg = lockcheck('run', '--backend', 'pg-session/strict', '--pg', `postgres://postgres:secret@127.0.0.1:${closed}/postgres`);
    expect(noPg.code, noPg.stderr).toBe(3);
    expect(noPg.stderr).toMatch(new RegExp(`cannot reach the PostgreSQL database postgres://127.0.0.1:${closed}/postgres`));
    expect(noPg.stderr).not.toMatch(/secret/);
    // A password in the query (ioredis and pg take it there too), and a URL that does not parse, are never echoed.
    const query = lockcheck('run', '--backend', 'redis-single/strict', '--redis', `redis://127.0.0.1:${closed}/0?password=s3cret`, '--json');
    expect(query.code, query.stderr).toBe(3);
    expect(query.stderr).toMatch(new RegExp(`cannot reach the Redis server redis://127.0.0.1:${closed}/0:`));
    const unparseable = lockcheck('run', '--backend', 'redis-single/strict', '--redis', 'redis://:s3cret@127.0.0.1:notaport');
    expect(unparseable.code, unparseable.stderr).toBe(2);
    expect(unparseable.stderr).toMatch(/'redis:\/\/<unparseable>' is not a URL/);
    const wrongPassword = lockcheck('run', '--backend', 'redis-single/strict', '--redis', `redis://:wrong@${redis[0]!.host}:${redis[0]!.port}`);
    expect(wrongPassword.code, wrongPassword.stderr).toBe(3);
    expect(wrongPassword.stderr).toMatch(/refused the credentials: WRONGPASS/);
    for (const r of [query, unparseable]) expect(r.stdout + r.stderr).not.toMatch(/s3cret/);
    // Fifteen CLI processes one after another: at a load of 25 on 2 cores each takes seconds to start.
  }, 300_000);

  it('Redis: runs paced to the servers’ clocks find what the design breaks; the user’s keys stay, lockcheck’s go', async () => {
    // Cleanup deletes the keys the run made, by name: it never SCANs the user's keyspace.
    const scans = async (): Promise<number> => Number(/cmdstat_scan:calls=(\d+)/.exec(await users[0]!.info('commandstats'))?.[1] ?? 0);
    const scansBefore = await scans();
    const unfenced = lockcheck('run', '--backend', 'redis-single/unfenced', '--redis', redisUrl(redis[0]!), '--faults', 'advance,pause', '--runs', '25', '--json');
    expect(unfenced.code, unfenced.stderr).toBe(0);
    expect(unfenced.stderr).toMatch(/paced to real time \(tolerance 100 ms, clock margin 102 ms\)/);
    const u = JSON.parse(unfenced.stdout) as RunJson;
    // How many runs this machine kept pace in: evidence of its load, not asserted (spec 7.8).
    console.info(`redis-single/unfenced: ${u.runs - u.stoppedEarly} of ${u.runs} runs judged, ${u.stoppedEarly} stopped early, ${u.retried} attempts retried`);
    expect(u.failure).toBeNull();
    expect(u.runs).toBe(25);
    // A run out of pace is tried again (bounded); some run is judged to its end, and only judged runs count as findings.
    expect(u.stoppedEarly).toBeLessThan(u.runs);
    expect(u.retried).toBeLessThanOrEqual(u.runs * (MAX_ATTEMPTS - 1));
    expect(u.findings['STORE-1']).toBeGreaterThan(0);
    expect(u.findings['STORE-1']).toBeLessThanOrEqual(u.runs - u.stoppedEarly);

    const redlock = lockcheck('run', '--backend', 'redlock/strict', '--redis', redis.map(redisUrl).join(','), '--runs', '10', '--json');
    expect(redlock.code, redlock.stderr).toBe(0);
    const r = JSON.parse(redlock.stdout) as RunJson;
    console.info(`redlock/strict: ${r.runs - r.stoppedEarly} of ${r.runs} runs judged, ${r.stoppedEarly} stopped early, ${r.retried} attempts retried`);
    expect(r.failure).toBeNull();
    expect(r.runs).toBe(10);
    expect(r.stoppedEarly).toBeLessThan(r.runs);
    // With a strict fenced store and no clock or crash faults, Redlock keeps every property.
    expect(Object.values(r.findings).every((n) => n === 0)).toBe(true);

    for (const user of users) {
      expect(await user.get('the-users:key')).toBe('keep me');
      expect(await user.keys('*')).toEqual(['the-users:key']);
    }
    expect(await scans()).toBe(scansBefore);
  }, 240_000);

  it('Redis: interrupted by SIGINT, a run deletes its keys (bounded); while it runs, every key it made carries a ttl', async () => {
    const child = spawn(process.execPath, ['cli/lockcheck.mjs', 'run', '--backend', 'redis-single/strict', '--redis', redisUrl(redis[0]!), '--faults', 'advance', '--runs', '100000'], { stdio: ['ignore', 'ignore', 'pipe'] });
    const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
    try {
      const user = users[0]!;
      // A token counter (no ttl of its own) exists and has the run's safety ttl.
      const counterTtl = await until(async () => {
        const counters = await user.keys('lockcheck-run:*lockcheck:token:*');
        if (counters.length === 0) return null;
        const ttl = await user.pttl(counters[0]!);
        return ttl > 3_600_000 ? ttl : null;
      }, 60_000);
      expect(counterTtl).toBeGreaterThan(3_600_000);
      child.kill('SIGINT');
      expect(await within(exited, 20_000)).toBe('SIGINT');
      expect(await user.keys('lockcheck-run:*')).toEqual([]);
      expect(await user.get('the-users:key')).toBe('keep me');
    } finally {
      child.kill('SIGKILL');
    }
  }, 120_000);

  it('PostgreSQL: interrupted by SIGINT, a run ends its sessions and deletes its rows (bounded)', async () => {
    const child = spawn(process.execPath, ['cli/lockcheck.mjs', 'run', '--backend', 'pg-session/strict', '--pg', pgUrl(), '--faults', 'advance', '--runs', '100000'], { stdio: ['ignore', 'ignore', 'pipe'] });
    const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
    // The tables appear with the run's first connection.
    const runRows = async (): Promise<number> =>
      (await bystander!.query<{ n: number }>("SELECT to_regclass('lockcheck_tokens') IS NOT NULL AS ok").then((r) => (r.rows[0] as unknown as { ok: boolean }).ok))
        ? (await bystander!.query<{ n: number }>("SELECT (SELECT count(*) FROM lockcheck_tokens WHERE starts_with(resource, 'lockcheck-run:')) + (SELECT count(*) FROM lockcheck_store WHERE starts_with(resource, 'lockcheck-run:'))::int AS n")).rows[0]!.n
        : 0;
    try {
      expect(await until(async () => ((await runRows()) > 0 ? true : null), 60_000)).toBe(true);
      child.kill('SIGINT');
      expect(await within(exited, 20_000)).toBe('SIGINT');
      expect(Number(await runRows())).toBe(0);
      expect((await bystander!.query('SELECT resource FROM lockcheck_store')).rows).toEqual([{ resource: 'the-users-resource' }]);
    } finally {
      child.kill('SIGKILL');
    }
  }, 120_000);

  it('PostgreSQL: only its own sessions are ended and its own rows deleted', async () => {
    const r = lockcheck('run', '--backend', 'pg-session/unfenced', '--pg', pgUrl(), '--faults', 'advance,pause,kill-connection', '--runs', '30', '--json');
    expect(r.code, r.stderr).toBe(0);
    const json = JSON.parse(r.stdout) as RunJson;
    expect(json.failure).toBeNull();
    // A killed connection drops a session lock its paused holder still believes in.
    expect(json.findings['MUTEX-1']).toBeGreaterThan(0);
    const own = await bystander!.query("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()");
    expect(own.rows[0]).toEqual({ n: 1 });
    expect((await bystander!.query('SELECT resource FROM lockcheck_store')).rows).toEqual([{ resource: 'the-users-resource' }]);
    expect((await bystander!.query('SELECT count(*)::int AS n FROM lockcheck_tokens')).rows[0]).toEqual({ n: 0 });
  }, 240_000);

  it('matrix: the rows these servers can run, the others listed; cells without their faults marked not measured', () => {
    const out = join(dir, 'docs');
    const r = lockcheck(
      'matrix',
      '--redis',
      redis.map(redisUrl).join(','),
      '--pg',
      pgUrl(),
      '--backend',
      'redis-single/unfenced,redis-single-aof/strict,pg-xact/transactional',
      '--faults',
      'client-pause,crash-restart',
      '--runs',
      '10',
      '--out',
      out,
    );
    expect(r.code, r.stderr).toBe(0);
    const md = readFileSync(join(out, 'matrix.md'), 'utf8');
    expect(md).toMatch(new RegExp(`on the Redis servers ${shownRedisUrl(redis[0]!)}.*\\(paced to their real clocks\\) and the PostgreSQL database`));
    // Runs that could not keep pace with the servers' clocks (a loaded machine) are counted in the cell with why, never judged
    // (the pattern once left out the why, so the test failed only when the machine was loaded enough for a run to stop early).
    expect(md, md.split('\n').filter((l) => l.startsWith('| redis-single/unfenced')).join('\n')).toMatch(/\| redis-single\/unfenced \| \[🔎\]\([^)]*\) STORE-1( \(\d+ of 10 runs stopped early: .*?\))? \[model to \d\] \| — \(not measured: redis-single\/unfenced takes no crash-restart fault here\) \|/);
    expect(md).toMatch(/\| pg-xact\/transactional \| all hold \[model to \d\] \| — \(not measured: pg-xact\/transactional takes no crash-restart fault here\) \|/);
    expect(md).toMatch(/Not run on these servers:\n- redis-single-aof\/strict: its persistence and restart only matter under crash-restart/);
    expect(readFileSync(join(out, 'matrix', 'index.html'), 'utf8')).toMatch(/<td class="na" data-backend="redis-single\/unfenced" data-fault="crash-restart">/);
    // The servers' passwords appear nowhere: not in the report, the page, the terminal.
    const html = readFileSync(join(out, 'matrix', 'index.html'), 'utf8');
    for (const secret of [...redis.map((s) => s.password), postgres!.password]) {
      expect(md + html + r.stdout + r.stderr).not.toContain(secret);
    }
  }, 240_000);
});
