/**
 * Does the lock connection's statement_timeout cost the server anything per
 * statement? The same two statements (TRY_LOCK_AND_MINT, unlock) on two bare
 * wire connections of one server, one started with statement_timeout and the
 * other with lock_timeout (armed only while a statement waits for a lock),
 * measured interleaved in rotated order: wall, client CPU and the backend's
 * own CPU per pair (from /proc of its pid), medians. Then, where strace is
 * installed, the timer system calls (setitimer, timer_settime) each backend
 * makes over 2,000 pairs: PostgreSQL 14 and later leave the alarm armed when
 * a statement ends and re-arm only when it fires, so a statement_timeout
 * costs no system call per statement.
 *
 *   npx tsx bench/postgresTimerAB.ts [--seconds N] [--rounds N]
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { execFileSync, spawn } from 'node:child_process';
import { PostgresServer, stopAllPostgresServers } from '../conformance/env/postgresServer.ts';
import { systemClock } from '../impl/clock.ts';
import { advisoryKey } from '../impl/postgres/keys.ts';
import { SCHEMA, TRY_LOCK_AND_MINT } from '../impl/postgres/schema.ts';
import { PreparedStatement, WireConnection } from '../impl/postgres/wire/connection.ts';
import { log, median, out, parseSeconds } from './common.ts';

const TIMEOUT_MS = 5_000;
const args = process.argv.slice(2);
const roundsAt = args.indexOf('--rounds');
const ROUNDS = roundsAt >= 0 ? Number(args.splice(roundsAt, 2)[1]) : 10;
const seconds = parseSeconds('bench/postgresTimerAB.ts', args);
const DURATION_MS = Math.round(seconds * 1000);
const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8', timeout: 5_000 }).trim()) || 100;

/** A process's user + system CPU so far, µs. */
function cpuUs(pid: number): number {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1e6) / CLK_TCK;
}

const LOCK_AND_MINT = new PreparedStatement('ab_lock_and_mint', TRY_LOCK_AND_MINT);
const UNLOCK = new PreparedStatement('ab_unlock', 'SELECT pg_advisory_unlock($1::bigint)');

interface Side {
  readonly id: string;
  readonly wire: WireConnection;
  readonly key: string;
  readonly resource: string;
}
interface Result {
  readonly wallUs: number;
  readonly clientUs: number;
  readonly serverUs: number;
}

async function pair(s: Side): Promise<boolean> {
  return (await s.wire.call(LOCK_AND_MINT, [s.key, s.resource, '0'])).length === 1 && (await s.wire.call(UNLOCK, [s.key]))[0]?.[0] === 't';
}

async function measure(s: Side, ms: number): Promise<Result> {
  for (const warm = performance.now() + Math.min(200, ms / 4); performance.now() < warm; ) await pair(s);
  const s0 = cpuUs(s.wire.processId);
  const c0 = process.cpuUsage();
  const start = performance.now();
  let ok = 0;
  for (const deadline = start + ms; performance.now() < deadline; ) if (await pair(s)) ok++;
  const elapsed = performance.now() - start;
  const c = process.cpuUsage(c0);
  const s1 = cpuUs(s.wire.processId);
  return { wallUs: (elapsed * 1000) / ok, clientUs: (c.user + c.system) / ok, serverUs: (s1 - s0) / ok };
}

/** setitimer and timer_settime calls of the side's backend over 2,000 pairs, counted by strace (bounded: killed after 60 s). */
async function timerSyscalls(s: Side): Promise<string> {
  const trace = spawn('strace', ['-f', '-e', 'trace=setitimer,timer_settime', '-p', String(s.wire.processId)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let text = '';
  trace.stderr.on('data', (c: Buffer) => (text += c.toString()));
  const exited = new Promise<void>((resolve) => trace.once('close', () => resolve()));
  const spawnFailed = await new Promise<boolean>((resolve) => {
    trace.once('error', () => resolve(true));
    // strace that cannot attach (no permission) exits without tracing.
    void exited.then(() => resolve(true));
    // strace reports 'attached' once it traces; the pairs must not start before.
    const attached = (): void => {
      if (text.includes('attached')) resolve(false);
      else trace.stderr.once('data', attached);
    };
    trace.stderr.once('data', attached);
  });
  if (spawnFailed) return `strace did not attach (${text.trim().split('\n')[0] ?? 'not installed'})`;
  const kill = setTimeout(() => trace.kill('SIGKILL'), 60_000);
  try {
    for (let i = 0; i < 2_000; i++) await pair(s);
  } finally {
    trace.kill('SIGINT');
    await exited;
    clearTimeout(kill);
  }
  return String(text.split('\n').filter((l) => /setitimer|timer_settime/.test(l)).length);
}

const closers: (() => Promise<void>)[] = [];
try {
  log(`statement_timeout against lock_timeout: ${ROUNDS} rounds of ${seconds} s · load average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  const server = await PostgresServer.start({ parentDir: '/dev/shm' });
  const open = async (id: string, parameters: Record<string, string>): Promise<Side> => {
    const wire = await WireConnection.connect({ ...server.connection, timeoutMs: TIMEOUT_MS, clock: systemClock, parameters });
    closers.push(() => wire.end());
    await wire.simpleQuery(SCHEMA);
    await wire.prepare([LOCK_AND_MINT, UNLOCK]);
    return { id, wire, key: advisoryKey(`ab-${id}`).toString(), resource: `ab-${id}` };
  };
  const sides = [await open('statement_timeout', { statement_timeout: String(TIMEOUT_MS) }), await open('lock_timeout', { lock_timeout: String(TIMEOUT_MS) })];
  const results = new Map<string, Result[]>(sides.map((s) => [s.id, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < sides.length; k++) {
      const s = sides[(k + round) % sides.length]!;
      const r = await measure(s, DURATION_MS);
      results.get(s.id)!.push(r);
      log(`  round ${round + 1}/${ROUNDS} ${s.id}: wall ${r.wallUs.toFixed(1)} µs, client ${r.clientUs.toFixed(1)} µs, backend ${r.serverUs.toFixed(1)} µs per pair · load ${os.loadavg()[0]!.toFixed(2)}`);
    }
  }
  const med = (id: string, f: (r: Result) => number): number => median(results.get(id)!.map(f));
  out(`| connection started with (${new Date().toISOString()}, ${ROUNDS} rounds of ${seconds} s, medians; load at end ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}) | pairs/s | wall µs | client CPU µs | backend CPU µs |`);
  out('|---|---:|---:|---:|---:|');
  for (const s of sides) {
    const wall = med(s.id, (r) => r.wallUs);
    out(`| ${s.id} | ${Math.round(1e6 / wall).toLocaleString('en-US')} | ${wall.toFixed(1)} | ${med(s.id, (r) => r.clientUs).toFixed(1)} | ${med(s.id, (r) => r.serverUs).toFixed(1)} |`);
  }
  out();
  for (const s of sides) out(`timer system calls of the ${s.id} backend over 2,000 pairs: ${await timerSyscalls(s)}`);
} finally {
  for (const close of closers) await close().catch(() => undefined);
  await stopAllPostgresServers();
}
