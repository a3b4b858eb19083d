/**
 * Driver measurement for the session lock's two statements: lockcheck's own
 * wire-protocol frontend (impl/postgres/wire) against node-postgres and
 * pgbench (libpq) on the same SQL (TRY_LOCK_AND_MINT, then
 * pg_advisory_unlock), named/prepared everywhere, with 1 and 8 clients (a
 * connection each, its own key and resource). One process, one throwaway
 * PostgreSQL (data on /dev/shm, stopped in a finally), the configurations
 * interleaved in rotated order over several rounds; medians reported.
 *
 *   npx tsx bench/postgresWire.ts [--seconds N]
 *
 * The figure that decides is client CPU per pair: process.cpuUsage of this
 * process (Node clients) or the reaped pgbench process's CPU time
 * (/proc/self/stat cutime + cstime); rates are printed beside it.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { PostgresServer, stopAllPostgresServers } from '../conformance/env/postgresServer.ts';
import { systemClock } from '../impl/clock.ts';
import { advisoryKey } from '../impl/postgres/keys.ts';
import { SCHEMA, TRY_LOCK_AND_MINT } from '../impl/postgres/schema.ts';
import { PreparedStatement, WireConnection } from '../impl/postgres/wire/connection.ts';
import { fmtRate, fmtRatio, log, median, out, parseSeconds } from './common.ts';
import { runPgbench } from './pgbench.ts';

const ROUNDS = 5;
const CLIENT_COUNTS = [1, 8] as const;
const TIMEOUT_MS = 5_000;
const UNLOCK = 'SELECT pg_advisory_unlock($1::bigint)';
const seconds = parseSeconds('bench/postgresWire.ts', process.argv.slice(2));
const DURATION_MS = Math.round(seconds * 1000);
const PGBENCH_SECONDS = Math.max(1, Math.round(seconds));
const PGBENCH_BASE = 7_300_000;

type Op = () => Promise<boolean>;
interface Config {
  readonly id: string;
  readonly label: string;
  readonly clients: number;
  /** A Node loop per client; absent: pgbench. */
  readonly ops?: readonly Op[];
}
interface Result {
  readonly rate: number;
  readonly cpuPerOp: number;
}

const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8', timeout: 5_000 }).trim()) || 100;
function reapedChildrenUs(): number {
  const f = readFileSync('/proc/self/stat', 'utf8');
  const fields = f.slice(f.lastIndexOf(')') + 2).split(' ').map(Number);
  return ((fields[13]! + fields[14]!) * 1e6) / CLK_TCK;
}

async function loops(ops: readonly Op[], ms: number): Promise<number> {
  let ok = 0;
  const deadline = performance.now() + ms;
  await Promise.all(
    ops.map(async (op) => {
      while (performance.now() < deadline) if (await op()) ok++;
    }),
  );
  return ok;
}

async function measureNode(ops: readonly Op[]): Promise<Result> {
  await loops(ops, Math.min(300, DURATION_MS / 4));
  const cpu = process.cpuUsage();
  const start = performance.now();
  const ok = await loops(ops, DURATION_MS);
  const elapsed = performance.now() - start;
  const used = process.cpuUsage(cpu);
  return { rate: ok / (elapsed / 1000), cpuPerOp: (used.user + used.system) / ok };
}

async function measurePgbench(server: PostgresServer, script: string, clients: number): Promise<Result> {
  const before = reapedChildrenUs();
  const { tps, processed } = await runPgbench(server, { script, seconds: PGBENCH_SECONDS, clients, threads: Math.min(clients, 2) });
  const used = reapedChildrenUs() - before;
  return { rate: tps, cpuPerOp: used / processed };
}

const LOCK_AND_MINT = new PreparedStatement('bench_wire_lock_and_mint', TRY_LOCK_AND_MINT);
const WIRE_UNLOCK = new PreparedStatement('bench_wire_unlock', UNLOCK);

function wireOp(c: WireConnection, resource: string): Op {
  const key = advisoryKey(resource).toString();
  const lockParams = [key, resource, '0'];
  const unlockParams = [key];
  return async () => {
    const r = await c.call(LOCK_AND_MINT, lockParams);
    if (r.length !== 1) return false;
    const u = await c.call(WIRE_UNLOCK, unlockParams);
    return u[0]?.[0] === 't';
  };
}

function nodePostgresOp(client: pg.Client, resource: string): Op {
  const key = advisoryKey(resource).toString();
  const lock: pg.QueryConfig = { name: 'bench_lock_and_mint', text: TRY_LOCK_AND_MINT, values: [key, resource, '0'] };
  const unlock: pg.QueryConfig = { name: 'bench_unlock', text: UNLOCK, values: [key] };
  return async () => {
    const r = await client.query(lock);
    if (r.rows.length !== 1) return false;
    const u = await client.query<{ pg_advisory_unlock: boolean }>(unlock);
    return u.rows[0]?.pg_advisory_unlock === true;
  };
}

const pgbenchScript = (base: number): string => {
  const sub = (s: string, names: string[]): string => s.trim().replace(/\$(\d+)/g, (_, n: string) => `:${names[Number(n) - 1]}`);
  return `\\set key ${base} + :client_id\n\\set resource ${base} + :client_id\n\\set base 0\n${sub(TRY_LOCK_AND_MINT, ['key', 'resource', 'base'])};\n${sub(UNLOCK, ['key'])};\n`;
};

const wires: WireConnection[] = [];
const clients: pg.Client[] = [];
let tmp: string | null = null;
try {
  log(`driver measurement: ${seconds} s per run, ${ROUNDS} interleaved rounds · load average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  const server = await PostgresServer.start({ parentDir: '/dev/shm' });
  tmp = await mkdtemp(join(os.tmpdir(), 'lockcheck-wire-'));
  const script = join(tmp, 'same.sql');
  await writeFile(script, pgbenchScript(PGBENCH_BASE));
  const connectWire = async (): Promise<WireConnection> => {
    const c = await WireConnection.connect({ ...server.connection, timeoutMs: TIMEOUT_MS, clock: systemClock, parameters: { statement_timeout: String(TIMEOUT_MS) } });
    wires.push(c);
    await c.simpleQuery(SCHEMA);
    await c.prepare([LOCK_AND_MINT, WIRE_UNLOCK]);
    return c;
  };
  const connectPg = async (): Promise<pg.Client> => {
    const c = new pg.Client({ ...server.connection, keepAlive: true, statement_timeout: TIMEOUT_MS });
    clients.push(c);
    await c.connect();
    await c.query(SCHEMA);
    return c;
  };
  const configs: Config[] = [];
  for (const n of CLIENT_COUNTS) {
    const w = await Promise.all(Array.from({ length: n }, connectWire));
    const p = await Promise.all(Array.from({ length: n }, connectPg));
    configs.push(
      { id: `wire-${n}`, label: 'own wire frontend', clients: n, ops: w.map((c, i) => wireOp(c, `bench-wire-${n}-${i}`)) },
      { id: `pg-${n}`, label: 'node-postgres, named', clients: n, ops: p.map((c, i) => nodePostgresOp(c, `bench-pg-${n}-${i}`)) },
      { id: `pgbench-${n}`, label: 'pgbench -M prepared', clients: n },
    );
  }
  const results = new Map<string, Result[]>(configs.map((c) => [c.id, []]));
  for (const c of configs) if (c.ops) await loops(c.ops, 500);
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < configs.length; k++) {
      const c = configs[(k + round) % configs.length]!;
      const r = c.ops ? await measureNode(c.ops) : await measurePgbench(server, script, c.clients);
      results.get(c.id)!.push(r);
      log(`  round ${round + 1}/${ROUNDS}: ${c.label}, ${c.clients} client(s): ${fmtRate(r.rate)} pairs/s, client CPU ${r.cpuPerOp.toFixed(1)} µs/pair · load ${os.loadavg()[0]!.toFixed(2)}`);
    }
  }
  const med = (id: string, f: (r: Result) => number): number => median(results.get(id)!.map(f));
  out(`### Session lock statements by driver (${new Date().toISOString()}, ${ROUNDS} interleaved rounds of ${seconds} s, medians; load average at end ${os.loadavg().map((x) => x.toFixed(2)).join(' ')})`);
  out();
  out('| driver | 1 client: pairs/s | client CPU µs/pair | 8 clients: pairs/s | client CPU µs/pair |');
  out('|---|---:|---:|---:|---:|');
  for (const base of ['wire', 'pg', 'pgbench']) {
    const label = configs.find((c) => c.id === `${base}-1`)!.label;
    out(`| ${label} | ${fmtRate(med(`${base}-1`, (r) => r.rate))} | ${med(`${base}-1`, (r) => r.cpuPerOp).toFixed(1)} | ${fmtRate(med(`${base}-8`, (r) => r.rate))} | ${med(`${base}-8`, (r) => r.cpuPerOp).toFixed(1)} |`);
  }
  out();
  for (const n of CLIENT_COUNTS) {
    out(
      `${n} client(s): client CPU node-postgres / own wire ${fmtRatio(med(`pg-${n}`, (r) => r.cpuPerOp) / med(`wire-${n}`, (r) => r.cpuPerOp))}, own wire / pgbench ${fmtRatio(med(`wire-${n}`, (r) => r.cpuPerOp) / med(`pgbench-${n}`, (r) => r.cpuPerOp))}; ` +
        `rate own wire / node-postgres ${fmtRatio(med(`wire-${n}`, (r) => r.rate) / med(`pg-${n}`, (r) => r.rate))}, own wire / pgbench ${fmtRatio(med(`wire-${n}`, (r) => r.rate) / med(`pgbench-${n}`, (r) => r.rate))}`,
    );
  }
} finally {
  for (const w of wires) w.destroy();
  await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
  await stopAllPostgresServers();
  if (tmp !== null) await rm(tmp, { recursive: true, force: true });
}
