/**
 * Where one client's acquire + release pair spends its time, lockcheck
 * against pgbench: wall time, client CPU and server CPU per pair, one
 * connection each, interleaved in rotated order over several rounds, medians.
 * One throwaway PostgreSQL (data on /dev/shm), stopped in a finally.
 *
 *   npx tsx bench/postgresOneClient.ts [--seconds N]
 *
 * Rows: the session lock and its bare wire statements against pgbench
 * -M prepared on the same SQL, with and without the lock's statement_timeout
 * (the same server settings as lockcheck's connection; PostgreSQL 15 keeps
 * its alarm armed between statements, so the setting costs no system call
 * per statement: bench/postgresTimerAB.ts); the transaction lock against
 * pgbench's BEGIN / try xact lock / MINT / COMMIT. A pair's wall time is its
 * round trips times (server time + client wakeup + client CPU), so the three
 * figures side by side say which one a change must cut.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { PostgresServer, stopAllPostgresServers } from '../conformance/env/postgresServer.ts';
import { systemClock } from '../impl/clock.ts';
import { advisoryKey } from '../impl/postgres/keys.ts';
import { MINT, SCHEMA, TRY_LOCK_AND_MINT } from '../impl/postgres/schema.ts';
import { PostgresSessionLock } from '../impl/postgres/sessionLock.ts';
import { PreparedStatement, WireConnection } from '../impl/postgres/wire/connection.ts';
import { PostgresTransactionLock } from '../impl/postgres/xactLock.ts';
import { log, median, out, parseSeconds } from './common.ts';
import { runPgbench } from './pgbench.ts';

const ROUNDS = 5;
const TIMEOUT_MS = 5_000;
const UNLOCK = 'SELECT pg_advisory_unlock($1::bigint)';
const seconds = parseSeconds('bench/postgresOneClient.ts', process.argv.slice(2));
const DURATION_MS = Math.round(seconds * 1000);
const PGBENCH_SECONDS = Math.max(1, Math.round(seconds));

type Op = () => Promise<boolean>;
interface Config {
  readonly id: string;
  readonly label: string;
  /** A Node loop; absent: pgbench with `script` and `pgOptions`. */
  readonly op?: Op;
  readonly script?: string;
  readonly pgOptions?: string;
}
interface Result {
  readonly wallUs: number;
  readonly clientUs: number;
  readonly serverUs: number;
}

const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8', timeout: 5_000 }).trim()) || 100;
function stat(pid: number | 'self'): { own: number; children: number; ppid: number; state: string } | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const us = (i: number): number => (Number(f[i]) * 1e6) / CLK_TCK;
  return { state: f[0]!, ppid: Number(f[1]), own: us(11) + us(12), children: us(13) + us(14) };
}

/** CPU of the whole cluster so far: the postmaster with its reaped backends, and its live children; after the exited ones are reaped. */
async function serverCpuUs(postmaster: number): Promise<number> {
  for (let tries = 0; tries < 200; tries++) {
    let sum = 0;
    let zombie = false;
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      const s = stat(Number(entry));
      if (s === null) continue;
      if (Number(entry) === postmaster) sum += s.own + s.children;
      else if (s.ppid === postmaster) {
        if (s.state === 'Z') zombie = true;
        sum += s.own + s.children;
      }
    }
    if (!zombie) return sum;
    await sleep(10);
  }
  return Number.NaN;
}

async function loop(op: Op, ms: number): Promise<number> {
  let ok = 0;
  for (const deadline = performance.now() + ms; performance.now() < deadline; ) if (await op()) ok++;
  return ok;
}

async function measureNode(server: PostgresServer, op: Op): Promise<Result> {
  await loop(op, Math.min(300, DURATION_MS / 4));
  const s0 = await serverCpuUs(server.pid);
  const cpu = process.cpuUsage();
  const start = performance.now();
  const ok = await loop(op, DURATION_MS);
  const elapsed = performance.now() - start;
  const used = process.cpuUsage(cpu);
  const s1 = await serverCpuUs(server.pid);
  return { wallUs: (elapsed * 1000) / ok, clientUs: (used.user + used.system) / ok, serverUs: (s1 - s0) / ok };
}

async function measurePgbench(server: PostgresServer, script: string, pgOptions: string | undefined): Promise<Result> {
  const children0 = stat('self')!.children;
  const s0 = await serverCpuUs(server.pid);
  const { tps, processed } = await runPgbench(server, { script, seconds: PGBENCH_SECONDS, clients: 1, ...(pgOptions === undefined ? {} : { pgOptions }) });
  const s1 = await serverCpuUs(server.pid);
  const clientUs = stat('self')!.children - children0;
  return { wallUs: 1e6 / tps, clientUs: clientUs / processed, serverUs: (s1 - s0) / processed };
}

const sub = (s: string, names: string[]): string => s.trim().replace(/\$(\d+)/g, (_, n: string) => `:${names[Number(n) - 1]}`);
const sameSql = (base: number): string => `\\set key ${base}\n\\set resource ${base}\n\\set base 0\n${sub(TRY_LOCK_AND_MINT, ['key', 'resource', 'base'])};\n${sub(UNLOCK, ['key'])};\n`;
const xactSql = (base: number): string =>
  `\\set key ${base}\n\\set resource ${base}\n\\set base 0\nBEGIN;\nSELECT pg_try_advisory_xact_lock(:key) AS got;\n${sub(MINT, ['resource', 'base'])};\nCOMMIT;\n`;

const LOCK_AND_MINT = new PreparedStatement('bench_lock_and_mint', TRY_LOCK_AND_MINT);
const WIRE_UNLOCK = new PreparedStatement('bench_unlock', UNLOCK);

const closers: (() => Promise<void>)[] = [];
let tmp: string | null = null;
try {
  log(`one client: ${seconds} s per run, ${ROUNDS} interleaved rounds · load average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  const server = await PostgresServer.start({ parentDir: '/dev/shm' });
  tmp = await mkdtemp(join(os.tmpdir(), 'lockcheck-one-'));
  const same = join(tmp, 'same.sql');
  const xact = join(tmp, 'xact.sql');
  await writeFile(same, sameSql(7_400_000));
  await writeFile(xact, xactSql(7_500_000));
  const options = { connection: server.connection, statementTimeoutMs: TIMEOUT_MS };
  const session = new PostgresSessionLock(options);
  closers.push(() => session.close());
  const transaction = new PostgresTransactionLock(options);
  closers.push(() => transaction.close());
  const wire = await WireConnection.connect({ ...server.connection, timeoutMs: TIMEOUT_MS, clock: systemClock, parameters: { statement_timeout: String(TIMEOUT_MS) } });
  closers.push(() => wire.end());
  await wire.simpleQuery(SCHEMA);
  await wire.prepare([LOCK_AND_MINT, WIRE_UNLOCK]);
  const wireKey = advisoryKey('bench-one-wire').toString();
  const lockOp = (lock: PostgresSessionLock | PostgresTransactionLock, resource: string): Op => async () => {
    const r = await lock.acquire(resource);
    if (r.kind !== 'granted') return false;
    await lock.release(r.lease);
    return true;
  };
  const statementTimeout = `-c statement_timeout=${TIMEOUT_MS}`;
  const configs: Config[] = [
    { id: 'session', label: 'lockcheck PostgresSessionLock', op: lockOp(session, 'bench-one-session') },
    {
      id: 'wire',
      label: 'bare wire client, the same two statements',
      op: async () => (await wire.call(LOCK_AND_MINT, [wireKey, 'bench-one-wire', '0'])).length === 1 && (await wire.call(WIRE_UNLOCK, [wireKey]))[0]?.[0] === 't',
    },
    { id: 'pgb-same', label: 'pgbench -M prepared, the same SQL', script: same },
    { id: 'pgb-same-st', label: `pgbench -M prepared, the same SQL, ${statementTimeout}`, script: same, pgOptions: statementTimeout },
    { id: 'xact', label: 'lockcheck PostgresTransactionLock', op: lockOp(transaction, 'bench-one-xact') },
    { id: 'pgb-xact', label: 'pgbench -M prepared, BEGIN / try xact lock / MINT / COMMIT', script: xact },
    { id: 'pgb-xact-st', label: `pgbench -M prepared, BEGIN / try xact lock / MINT / COMMIT, ${statementTimeout}`, script: xact, pgOptions: statementTimeout },
  ];
  const results = new Map<string, Result[]>(configs.map((c) => [c.id, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < configs.length; k++) {
      const c = configs[(k + round) % configs.length]!;
      const r = c.op ? await measureNode(server, c.op) : await measurePgbench(server, c.script!, c.pgOptions);
      results.get(c.id)!.push(r);
      log(`  round ${round + 1}/${ROUNDS} ${c.id}: wall ${r.wallUs.toFixed(1)} µs, client ${r.clientUs.toFixed(1)} µs, server ${r.serverUs.toFixed(1)} µs per pair · load ${os.loadavg()[0]!.toFixed(2)}`);
    }
  }
  const med = (id: string, f: (r: Result) => number): number => median(results.get(id)!.map(f));
  out(`### One client, per acquire + release pair (${new Date().toISOString()}, ${ROUNDS} interleaved rounds of ${seconds} s, medians; load average at end ${os.loadavg().map((x) => x.toFixed(2)).join(' ')})`);
  out();
  out('| configuration | pairs/s | wall µs | client CPU µs | server CPU µs |');
  out('|---|---:|---:|---:|---:|');
  for (const c of configs) {
    const wall = med(c.id, (r) => r.wallUs);
    out(`| ${c.label} | ${Math.round(1e6 / wall).toLocaleString('en-US')} | ${wall.toFixed(1)} | ${med(c.id, (r) => r.clientUs).toFixed(1)} | ${med(c.id, (r) => r.serverUs).toFixed(1)} |`);
  }
  out();
  const ratio = (a: string, b: string): string => (med(b, (r) => r.wallUs) / med(a, (r) => r.wallUs)).toFixed(2);
  out(`rate ratios: session / pgbench same SQL ${ratio('session', 'pgb-same')} (with statement_timeout ${ratio('session', 'pgb-same-st')}); wire / pgbench ${ratio('wire', 'pgb-same')}; transaction / pgbench xact ${ratio('xact', 'pgb-xact')} (with statement_timeout ${ratio('xact', 'pgb-xact-st')})`);
} finally {
  for (const close of closers) await close().catch(() => undefined);
  await stopAllPostgresServers();
  if (tmp !== null) await rm(tmp, { recursive: true, force: true });
}
