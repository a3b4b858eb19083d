/**
 * PostgreSQL lock benchmark: lockcheck's PostgresSessionLock,
 * PostgresTransactionLock and fenced store against pgbench running the same
 * SQL with prepared statements, all against one throwaway PostgreSQL 15
 * cluster this script starts itself (fsync=off, full_page_writes=off, data on
 * /dev/shm) and stops in a finally (and on Ctrl-C, through PostgresServer's
 * exit handlers).
 *
 *   npm run bench:postgres [-- --seconds N]      (or: npx tsx bench/postgres.ts --seconds N)
 *
 * 1. session lock: acquire + release pairs/s, 1 client and 8 clients (each its
 *    own PostgresSessionLock, so its own connection, and its own resource),
 *    against pgbench -M prepared running (a) the minimal pair
 *    pg_advisory_lock + pg_advisory_unlock and (b) the exact statements
 *    lockcheck sends per pair (TRY_LOCK_AND_MINT, then pg_advisory_unlock);
 *    diagnostics: the same statements through raw node-postgres, unnamed (as
 *    lockcheck sends them) and as named prepared statements, and through
 *    lockcheck's own bare wire client (impl/postgres/wire, the session lock's
 *    driver);
 * 2. transaction lock: acquire (an idle connection, TRY_LOCK_AND_MINT, BEGIN
 *    and the hand-over to the transaction pipelined in one round trip) +
 *    release (COMMIT) per second, against pgbench running BEGIN / try xact
 *    lock / MINT / COMMIT over persistent connections; diagnostic:
 *    lockcheck's two round trips through raw node-postgres;
 * 3. a fenced write (postgresFencedStore(client, 'strict'), increasing
 *    tokens) against a plain UPDATE of the same table, unnamed (the target's
 *    baseline) and named, per second; and the same write through
 *    openPostgresFencedStore (its own connection, the wire client).
 *
 * Each loop-driven measurement: a short warm-up, then a fixed duration;
 * pgbench runs for -T seconds (whole seconds) and its "tps" line is parsed.
 * Every configuration runs 3 times, interleaved (rotated order), and the
 * median is reported. Client CPU per operation comes from process.cpuUsage
 * (Node client) or from the reaped pgbench process's CPU time (/proc/self/stat
 * cutime + cstime); server CPU per operation is the CPU time of the postmaster
 * and all its backends (live ones plus reaped ones) over the run. The machine
 * is noisy (2 cores shared by clients and server, and possibly by other
 * benchmarks), so the tables give ratios between configurations measured in
 * the same run. Progress goes to stderr, markdown tables to stdout.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import postgresJs from 'postgres';
import { PostgresServer, stopAllPostgresServers } from '../conformance/env/postgresServer.ts';
import { advisoryKey } from '../impl/postgres/keys.ts';
import { MINT, SCHEMA, TRY_LOCK_AND_MINT } from '../impl/postgres/schema.ts';
import { PostgresSessionLock } from '../impl/postgres/sessionLock.ts';
import type { PostgresFencedStoreConnection } from '../impl/postgres/store.ts';
import { openPostgresFencedStore, postgresFencedStore } from '../impl/postgres/store.ts';
import { PreparedStatement, WireConnection } from '../impl/postgres/wire/connection.ts';
import { systemClock } from '../impl/clock.ts';
import type { FencedStore } from '../impl/fencedStore.ts';
import type { Lease } from '../impl/lease.ts';
import type { AcquireResult } from '../impl/leaseLock.ts';
import { PostgresTransactionLock } from '../impl/postgres/xactLock.ts';
import { fmtRate, fmtRatio, log, median, out, pairedRatio, parseSeconds, targetTable } from './common.ts';

// ---------------------------------------------------------------- settings

const ROUNDS = 3;
const CLIENT_COUNTS = [1, 8] as const;
/** pgbench threads (-j) with 8 clients. */
const PGBENCH_THREADS = 2;
/** Hard bound on the operations of one loop in one run (the duration bounds it first in practice). */
const MAX_OPS_PER_LOOP = 2_000_000;
/** Bound on every statement and connect of the Node clients (lockcheck's default too). */
const STATEMENT_TIMEOUT_MS = 5_000;
/** pgbench is killed when it runs this much longer than its -T. */
const PGBENCH_GRACE_MS = 30_000;
/** Bound on waiting for the backends of a run to exit before sampling server CPU. */
const SETTLE_TIMEOUT_MS = 3_000;
/** Bound on closing all connections at the end. */
const CLOSE_TIMEOUT_MS = 10_000;
/** The statement lockcheck's PostgresSessionLock.release sends (sessionLock.ts; not exported there). */
const UNLOCK = 'SELECT pg_advisory_unlock($1::bigint)';
/** pgbench's transaction lock statement (the baseline's: the lock taken in the transaction, nothing else). */
const TRY_XACT_LOCK = 'SELECT pg_try_advisory_xact_lock($1::bigint) AS got';
/** The statement PostgresTransactionLock.acquire sends after TRY_LOCK_AND_MINT and BEGIN (xactLock.ts; not exported there). */
const HAND_OVER = 'SELECT CASE WHEN pg_try_advisory_xact_lock($1::bigint) THEN pg_advisory_unlock($1::bigint) ELSE false END AS moved';
/** The baseline for the fenced write: same table, same row width, no guard. */
const PLAIN_UPDATE = 'UPDATE lockcheck_store SET value = $1 WHERE resource = $2';
/** The same UPDATE prepared, as the fenced write is. */
const PLAIN_UPDATE_NAMED = { name: 'bench_plain_update', text: PLAIN_UPDATE } as const;
/** pgbench resources and keys are numbers (pgbench variables are numeric): these bases keep each script's apart. */
const PGBENCH_SAME_SQL_BASE = 7_100_000;
const PGBENCH_XACT_BASE = 7_200_000;

const seconds = parseSeconds('bench/postgres.ts', process.argv.slice(2), '; pgbench runs round(N) >= 1 s');
const DURATION_MS = Math.round(seconds * 1000);
const WARMUP_MS = Math.min(500, Math.round(DURATION_MS / 4));
/** Once per loop-driven configuration before its group's first round. */
const GROUP_WARMUP_MS = Math.min(1_000, DURATION_MS);
/** pgbench -T takes whole seconds. */
const PGBENCH_SECONDS = Math.max(1, Math.round(seconds));

// ---------------------------------------------------------------- helpers


const loadavg = (): string => os.loadavg().map((x) => x.toFixed(2)).join(' ');

// ---------------------------------------------------------------- CPU accounting

const CLK_TCK = (() => {
  try {
    const n = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8', timeout: 5_000 }).trim());
    return Number.isInteger(n) && n > 0 ? n : 100;
  } catch {
    return 100;
  }
})();

/** utime + stime (own) and cutime + cstime (reaped children) of a process, in µs; null when it is gone. */
function procCpuUs(pid: number | 'self'): { own: number; children: number } | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // Fields after "pid (comm) ": state is field 3, utime 14, stime 15, cutime 16, cstime 17.
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ').map(Number);
  const us = (ticks: number): number => (ticks * 1e6) / CLK_TCK;
  return { own: us(f[11]! + f[12]!), children: us(f[13]! + f[14]!) };
}

/** The postmaster's children (every backend and auxiliary process is one), zombies included, with their state. */
function clusterChildren(postmaster: number): Map<number, string> {
  const children = new Map<number, string>();
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return children;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue;
    }
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    if (Number(f[1]) === postmaster) children.set(pid, f[0]!);
  }
  return children;
}

/**
 * Waits (at most SETTLE_TIMEOUT_MS) until the cluster is quiet enough to be
 * sampled: no zombie children and, when `known` is given, no child outside
 * it, i.e. the backends a run started have exited and been reaped, so their
 * CPU time sits in the postmaster's cutime + cstime. Returns the children then.
 */
async function settle(server: PostgresServer, known?: ReadonlySet<number>): Promise<Set<number>> {
  const deadline = performance.now() + SETTLE_TIMEOUT_MS;
  for (;;) {
    const children = clusterChildren(server.pid);
    const quiet = [...children].every(([pid, state]) => state !== 'Z' && (known === undefined || known.has(pid)));
    if (quiet || performance.now() >= deadline) {
      if (!quiet) settleTimeouts++;
      return new Set(children.keys());
    }
    await sleep(5);
  }
}
let settleTimeouts = 0;

/**
 * CPU time of the whole cluster so far: the postmaster (its own time plus
 * that of the backends it reaped) and its live children. Sampled after
 * settle(), so no backend is between exit and reap.
 */
function serverCpuUs(server: PostgresServer): number {
  let sum = 0;
  for (const pid of [server.pid, ...clusterChildren(server.pid).keys()]) {
    const t = procCpuUs(pid);
    if (t !== null) sum += t.own + t.children;
  }
  return sum;
}

/** CPU time of this process's reaped children (pgbench runs), in µs. */
const reapedChildrenCpuUs = (): number => procCpuUs('self')?.children ?? Number.NaN;

// ---------------------------------------------------------------- configurations

/** One operation; resolves true on success (e.g. a granted lock released), false on a failure to count. */
type Op = () => Promise<boolean>;

interface LoopConfig {
  readonly kind: 'loops';
  readonly id: string;
  readonly label: string;
  readonly clients: number;
  /** The operation of loop `i` (each loop has its own connection(s) and resource). */
  readonly makeOp: (loop: number) => Op;
}

interface PgbenchConfig {
  readonly kind: 'pgbench';
  readonly id: string;
  readonly label: string;
  readonly clients: number;
  readonly script: string;
  /** Resources whose tokens the script mints: the run checks how many it minted. */
  readonly mintsOn?: readonly string[];
}

type Config = LoopConfig | PgbenchConfig;

interface RunResult {
  readonly rate: number;
  readonly ops: number;
  readonly failures: number;
  readonly clientCpuUs: number;
  readonly serverCpuUs: number;
  readonly minted?: number;
}

interface Measured {
  readonly rates: number[];
  /** Client CPU (Node process, or pgbench) per successful operation, in µs. */
  readonly clientCpuPerOp: number[];
  /** Server CPU (postmaster + backends) per successful operation, in µs. */
  readonly serverCpuPerOp: number[];
  failures: number;
  ops: number;
  minted: number;
}

interface Context {
  readonly server: PostgresServer;
  readonly admin: pg.Client;
  readonly tmpDir: string;
}

async function runLoops(ops: readonly Op[], durationMs: number): Promise<{ ok: number; failures: number; elapsedMs: number }> {
  let ok = 0;
  let failures = 0;
  const start = performance.now();
  const deadline = start + durationMs;
  await Promise.all(
    ops.map(async (op) => {
      for (let n = 0; n < MAX_OPS_PER_LOOP && performance.now() < deadline; n++) {
        let success = false;
        try {
          success = await op();
        } catch {
          success = false;
        }
        if (success) ok++;
        else failures++;
      }
    }),
  );
  return { ok, failures, elapsedMs: performance.now() - start };
}

async function measureLoops(ctx: Context, ops: readonly Op[]): Promise<RunResult> {
  await runLoops(ops, WARMUP_MS);
  const before = await settle(ctx.server);
  const server0 = serverCpuUs(ctx.server);
  const cpu = process.cpuUsage();
  const r = await runLoops(ops, DURATION_MS);
  const used = process.cpuUsage(cpu);
  await settle(ctx.server, before);
  const serverUs = serverCpuUs(ctx.server) - server0;
  return { rate: r.ok / (r.elapsedMs / 1000), ops: r.ok, failures: r.failures, clientCpuUs: used.user + used.system, serverCpuUs: serverUs };
}

/** The pgbench process running now, so the finally can kill it. */
let pgbenchChild: ChildProcess | null = null;
const scriptFiles = new Map<string, string>();

async function tokenSum(admin: pg.Client, resources: readonly string[]): Promise<number> {
  const r = await admin.query<{ sum: string }>('SELECT coalesce(sum(token), 0)::text AS sum FROM lockcheck_tokens WHERE resource = ANY($1::text[])', [resources]);
  return Number(r.rows[0]!.sum);
}

async function measurePgbench(ctx: Context, config: PgbenchConfig): Promise<RunResult> {
  let file = scriptFiles.get(config.id);
  if (file === undefined) {
    file = join(ctx.tmpDir, `${config.id}.sql`);
    await writeFile(file, config.script);
    scriptFiles.set(config.id, file);
  }
  const args = [
    '-h', ctx.server.host, '-p', String(ctx.server.port), '-U', ctx.server.user,
    '-n', '-M', 'prepared', '-T', String(PGBENCH_SECONDS),
    '-c', String(config.clients), '-j', String(Math.min(config.clients, PGBENCH_THREADS)),
    '-f', file,
  ];
  args.push(ctx.server.database);
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('PG')) env[k] = v;
  env['PGPASSWORD'] = ctx.server.password;

  const mintedBefore = config.mintsOn ? await tokenSum(ctx.admin, config.mintsOn) : 0;
  const before = await settle(ctx.server);
  const server0 = serverCpuUs(ctx.server);
  const children0 = reapedChildrenCpuUs();
  const result = await new Promise<{ code: number | null; output: string; killed: boolean }>((resolve, reject) => {
    const child = spawn(join(ctx.server.binDir, 'pgbench'), args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    pgbenchChild = child;
    let output = '';
    let killed = false;
    const capture = (chunk: Buffer): void => {
      output = (output + chunk.toString('utf8')).slice(-64 * 1024);
    };
    child.stdout?.on('data', capture);
    child.stderr?.on('data', capture);
    const timer = setTimeout(() => {
      killed = true;
      try {
        if (child.pid !== undefined) process.kill(child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }, PGBENCH_SECONDS * 1000 + PGBENCH_GRACE_MS);
    child.once('error', (e) => {
      clearTimeout(timer);
      pgbenchChild = null;
      reject(e);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      pgbenchChild = null;
      resolve({ code, output, killed });
    });
  });
  const clientUs = reapedChildrenCpuUs() - children0;
  await settle(ctx.server, before);
  const serverUs = serverCpuUs(ctx.server) - server0;
  const minted = config.mintsOn ? (await tokenSum(ctx.admin, config.mintsOn)) - mintedBefore : undefined;

  const tps = /tps = ([\d.]+) \((?:without initial connection time|including reconnection times)\)/.exec(result.output);
  const processed = /number of transactions actually processed: (\d+)/.exec(result.output);
  const failed = /number of failed transactions: (\d+)/.exec(result.output);
  if (tps === null || processed === null || result.code !== 0) {
    log(`  pgbench ${config.id} ${result.killed ? 'was killed (ran too long)' : `exited with ${String(result.code)}`}; output tail:\n${result.output.slice(-2000)}`);
  }
  const ops = processed ? Number(processed[1]) : 0;
  return {
    rate: tps ? Number(tps[1]) : Number.NaN,
    ops,
    failures: failed ? Number(failed[1]) : tps ? 0 : 1,
    clientCpuUs: clientUs,
    serverCpuUs: serverUs,
    ...(minted === undefined ? {} : { minted }),
  };
}

/** Runs every configuration ROUNDS times, interleaved, the order rotated each round. */
async function measureGroup(ctx: Context, title: string, configs: readonly Config[]): Promise<Map<string, Measured>> {
  const results = new Map<string, Measured>(configs.map((c) => [c.id, { rates: [], clientCpuPerOp: [], serverCpuPerOp: [], failures: 0, ops: 0, minted: 0 }]));
  const ops = new Map<string, Op[]>();
  for (const c of configs) if (c.kind === 'loops') ops.set(c.id, Array.from({ length: c.clients }, (_, i) => c.makeOp(i)));
  // Group warm-up: connections, JIT and the server's caches, so that the first configuration of round 1 is not the only cold one.
  for (const c of configs) {
    if (c.kind !== 'loops') continue;
    const r = await runLoops(ops.get(c.id)!, GROUP_WARMUP_MS);
    log(`  ${title} warm-up: ${c.label}, ${c.clients} client${c.clients === 1 ? '' : 's'}: ${r.ok} ok, ${r.failures} failed`);
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < configs.length; k++) {
      const config = configs[(k + round) % configs.length]!;
      const r = config.kind === 'loops' ? await measureLoops(ctx, ops.get(config.id)!) : await measurePgbench(ctx, config);
      const m = results.get(config.id)!;
      m.rates.push(r.rate);
      m.clientCpuPerOp.push(r.ops > 0 ? r.clientCpuUs / r.ops : Number.NaN);
      m.serverCpuPerOp.push(r.ops > 0 ? r.serverCpuUs / r.ops : Number.NaN);
      m.failures += r.failures;
      m.ops += r.ops;
      m.minted += r.minted ?? 0;
      log(
        `  ${title} round ${round + 1}/${ROUNDS}: ${config.label}, ${config.clients} client${config.clients === 1 ? '' : 's'}: ${fmtRate(r.rate)} ops/s, ` +
          `client CPU ${fmtRate(r.clientCpuUs / Math.max(1, r.ops))} µs/op, server CPU ${fmtRate(r.serverCpuUs / Math.max(1, r.ops))} µs/op` +
          `${r.failures ? ` (${r.failures} failed)` : ''} · load ${loadavg()}`,
      );
    }
  }
  return results;
}

/** Ratio of medians, with the per-round ratios (paired: measured next to each other). */
const ratio = (results: Map<string, Measured>, a: string, b: string): { value: number; text: string } => pairedRatio(results.get(a)!.rates, results.get(b)!.rates);

// ---------------------------------------------------------------- pgbench scripts

/** Replaces $1, $2, ... in one of lockcheck's statements by pgbench variables, so the text stays lockcheck's. */
function withVariables(statement: string, variables: readonly string[]): string {
  return statement.trim().replace(/\$(\d+)/g, (whole, n: string) => {
    const name = variables[Number(n) - 1];
    if (name === undefined) throw new Error(`no pgbench variable for ${whole}`);
    return `:${name}`;
  });
}

/** (a) the minimal pair; random keys, disjoint per client (client_id < 64). */
const PGBENCH_MINIMAL = `\\set key :client_id + 64 * random(1, 1000000)
SELECT pg_advisory_lock(:key);
SELECT pg_advisory_unlock(:key);
`;

/** (b) what PostgresSessionLock sends per pair: TRY_LOCK_AND_MINT, then the unlock; each client its own key and resource. */
const pgbenchSameSql = (base: number): string => `\\set key ${base} + :client_id
\\set resource ${base} + :client_id
\\set base 0
${withVariables(TRY_LOCK_AND_MINT, ['key', 'resource', 'base'])};
${withVariables(UNLOCK, ['key'])};
`;

/** A transaction lock with its token, as a pgbench user would write it: four statements, the token minted inside the lock's transaction (a rollback would reuse it; lockcheck mints before BEGIN). */
const pgbenchXact = (base: number): string => `\\set key ${base} + :client_id
\\set resource ${base} + :client_id
\\set base 0
BEGIN;
${withVariables(TRY_XACT_LOCK, ['key'])};
${withVariables(MINT, ['resource', 'base'])};
COMMIT;
`;

/** The resources (as text) a pgbench script with this base mints on, for `clients` clients. */
const pgbenchResources = (base: number, clients: number): string[] => Array.from({ length: clients }, (_, i) => String(base + i));

// ---------------------------------------------------------------- Node clients

const clients: pg.Client[] = [];
const sessionLocks: PostgresSessionLock[] = [];
const xactLocks: PostgresTransactionLock[] = [];
let connectionErrors = 0;

function clientConfig(server: PostgresServer): pg.ClientConfig {
  return {
    ...server.connection,
    keepAlive: true,
    connectionTimeoutMillis: STATEMENT_TIMEOUT_MS,
    statement_timeout: STATEMENT_TIMEOUT_MS,
    query_timeout: STATEMENT_TIMEOUT_MS,
  };
}

async function connect(server: PostgresServer, name: string, pipeline = false): Promise<pg.Client> {
  const client = new pg.Client({ ...clientConfig(server), pipeline });
  clients.push(client);
  client.on('error', (error: Error) => {
    if (++connectionErrors <= 5) log(`  [${name}] connection error: ${error.message}`);
  });
  await client.connect();
  return client;
}

function lockOptions(server: PostgresServer): { connection: pg.ClientConfig } {
  return { connection: server.connection };
}

/** What the session and the transaction lock share here: an acquire with the default options, a release. */
interface PairLock {
  acquire(resource: string): Promise<AcquireResult>;
  release(lease: Lease): Promise<void>;
}

/** One acquire + release of lockcheck's lock on `resource`; false when not granted. */
function lockPairOp(lock: PairLock, resource: string): Op {
  return async () => {
    const r = await lock.acquire(resource);
    if (r.kind !== 'granted') return false;
    await lock.release(r.lease);
    return true;
  };
}

/** lockcheck's lock in `c` loops: one lock (its own connection) per loop, made by `make`, kept in `made` (closed at the end), each on `bench-${name}-${c}-${loop}`. */
function ownLockLoops<L extends PairLock>(c: number, label: string, name: string, make: () => L, made: L[]): LoopConfig {
  return {
    kind: 'loops',
    id: `lc-${c}`,
    label,
    clients: c,
    makeOp: (i) => {
      const lock = make();
      made.push(lock);
      return lockPairOp(lock, `bench-${name}-${c}-${i}`);
    },
  };
}

/** A plain UPDATE of `resource`'s row through `client` (`statement`: unnamed or named); false unless one row changed. */
function plainUpdateOp(client: pg.Client, statement: string | pg.QueryConfig, resource: string): Op {
  return async () => (await client.query(statement, ['v', resource])).rowCount === 1;
}

/** The statements of PostgresSessionLock, through raw node-postgres; `named`: as a named (server-side prepared) statement. */
function rawSessionOp(client: pg.Client, resource: string, named: boolean): Op {
  const key = advisoryKey(resource).toString();
  const lock: pg.QueryConfig = named ? { name: 'bench_try_lock_and_mint', text: TRY_LOCK_AND_MINT, values: [key, resource, '0'] } : { text: TRY_LOCK_AND_MINT, values: [key, resource, '0'] };
  const unlock: pg.QueryConfig = named ? { name: 'bench_unlock', text: UNLOCK, values: [key] } : { text: UNLOCK, values: [key] };
  return async () => {
    const r = await client.query<{ token: string }>(lock);
    if (r.rows.length !== 1) return false;
    const u = await client.query<{ pg_advisory_unlock: boolean }>(unlock);
    return u.rows[0]?.pg_advisory_unlock === true;
  };
}

const porsagerClients: postgresJs.Sql[] = [];
const wires: WireConnection[] = [];
const wireStores: PostgresFencedStoreConnection[] = [];

const WIRE_LOCK_AND_MINT = new PreparedStatement('bench_wire_lock_and_mint', TRY_LOCK_AND_MINT);
const WIRE_UNLOCK = new PreparedStatement('bench_wire_unlock', UNLOCK);

/** One connection of lockcheck's own wire client (impl/postgres/wire), the session lock's two statements prepared. */
async function wire(server: PostgresServer): Promise<WireConnection> {
  const c = await WireConnection.connect({ ...server.connection, timeoutMs: STATEMENT_TIMEOUT_MS, clock: systemClock, parameters: { statement_timeout: String(STATEMENT_TIMEOUT_MS) } });
  wires.push(c);
  await c.prepare([WIRE_LOCK_AND_MINT, WIRE_UNLOCK]);
  return c;
}

/** The statements of PostgresSessionLock through the bare wire client: what the lock's driver costs without the lock. */
function wireSessionOp(c: WireConnection, resource: string): Op {
  const key = advisoryKey(resource).toString();
  const lockParams = [key, resource, '0'];
  const unlockParams = [key];
  return async () => {
    if ((await c.call(WIRE_LOCK_AND_MINT, lockParams)).length !== 1) return false;
    return (await c.call(WIRE_UNLOCK, unlockParams))[0]?.[0] === 't';
  };
}

/** One connection of the `postgres` driver (porsager), for the driver comparison. */
function porsager(server: PostgresServer): postgresJs.Sql {
  const c = server.connection;
  const sql = postgresJs({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database, max: 1, prepare: true, connect_timeout: STATEMENT_TIMEOUT_MS / 1000, onnotice: () => undefined });
  porsagerClients.push(sql);
  return sql;
}

/** The statements of PostgresSessionLock through the `postgres` driver (porsager), prepared as it does by default. */
function porsagerSessionOp(sql: postgresJs.Sql, resource: string): Op {
  const key = advisoryKey(resource).toString();
  return async () => {
    const r = await sql.unsafe(TRY_LOCK_AND_MINT, [key, resource, '0'], { prepare: true });
    if (r.length !== 1) return false;
    const u = await sql.unsafe(UNLOCK, [key], { prepare: true });
    return u[0]?.pg_advisory_unlock === true;
  };
}

/** PostgresTransactionLock's two round trips through raw node-postgres (a pipelined connection): TRY_LOCK_AND_MINT, BEGIN and the hand-over sent together, all named, then COMMIT. */
function rawXactOp(client: pg.Client, resource: string): Op {
  const key = advisoryKey(resource).toString();
  const lock: pg.QueryConfig = { name: 'bench_try_lock_and_mint', text: TRY_LOCK_AND_MINT, values: [key, resource, '0'] };
  const begin: pg.QueryConfig = { name: 'bench_begin', text: 'BEGIN' };
  const handOver: pg.QueryConfig = { name: 'bench_hand_over', text: HAND_OVER, values: [key] };
  return async () => {
    try {
      const [minted, , moved] = await Promise.all([client.query<{ token: string }>(lock), client.query(begin), client.query<{ moved: boolean }>(handOver)]);
      if (minted.rows.length !== 1 || moved.rows[0]?.moved !== true) {
        await client.query('ROLLBACK');
        return false;
      }
      await client.query('COMMIT');
      return true;
    } catch (e) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw e;
    }
  };
}

// ---------------------------------------------------------------- main

const ids = (base: string): Array<{ c: number; id: string }> => CLIENT_COUNTS.map((c) => ({ c, id: `${base}-${c}` }));

async function main(ctxOut: { tmpDir?: string }): Promise<void> {
  const started = performance.now();
  const loadAtStart = loadavg();
  log(`lockcheck PostgreSQL benchmark: ${seconds} s per run after a ${WARMUP_MS} ms warm-up (pgbench: -T ${PGBENCH_SECONDS}), ${ROUNDS} interleaved rounds · load average ${loadAtStart}`);
  log('starting PostgreSQL 15 on 127.0.0.1 (fsync=off, data on /dev/shm)...');
  const server = await PostgresServer.start({ parentDir: '/dev/shm' });
  log(`  port ${server.port}, initdb ${server.timings.initdbMs} ms, start ${server.timings.startMs} ms`);
  const tmpDir = await mkdtemp(join(os.tmpdir(), 'lockcheck-pgbench-'));
  ctxOut.tmpDir = tmpDir;
  const admin = await connect(server, 'admin');
  await admin.query(SCHEMA);
  const pgVersion = (await admin.query<{ server_version: string }>('SHOW server_version')).rows[0]!.server_version;
  const pgbenchVersion = execFileSync(join(server.binDir, 'pgbench'), ['--version'], { encoding: 'utf8', timeout: 5_000 }).trim();
  const settings = (await admin.query<{ name: string; setting: string }>("SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes', 'max_connections')")).rows
    .map((r) => `${r.name}=${r.setting}`)
    .join(', ');
  const ctx: Context = { server, admin, tmpDir };
  /** `c` connections of raw node-postgres, one per loop, named `${name}-${c}-${loop}`. */
  const connections = (c: number, name: string, pipeline = false): Promise<pg.Client[]> => Promise.all(Array.from({ length: c }, (_, i) => connect(server, `${name}-${c}-${i}`, pipeline)));

  // 1. session lock ---------------------------------------------------------
  log('1. session lock: acquire + release');
  const session: Config[] = [];
  for (const c of CLIENT_COUNTS) {
    const rawClients = await connections(c, 'raw-session');
    const namedClients = await connections(c, 'named-session');
    const wireClients = await Promise.all(Array.from({ length: c }, () => wire(server)));
    session.push(
      ownLockLoops(c, 'lockcheck PostgresSessionLock', 'session', () => new PostgresSessionLock(lockOptions(server)), sessionLocks),
      { kind: 'pgbench', id: `pgb-same-${c}`, label: 'pgbench same SQL', clients: c, script: pgbenchSameSql(PGBENCH_SAME_SQL_BASE), mintsOn: pgbenchResources(PGBENCH_SAME_SQL_BASE, c) },
      { kind: 'pgbench', id: `pgb-min-${c}`, label: 'pgbench minimal pair', clients: c, script: PGBENCH_MINIMAL },
      { kind: 'loops', id: `raw-${c}`, label: 'node-postgres same SQL, unnamed', clients: c, makeOp: (i) => rawSessionOp(rawClients[i]!, `bench-raw-session-${c}-${i}`, false) },
      { kind: 'loops', id: `named-${c}`, label: 'node-postgres same SQL, named', clients: c, makeOp: (i) => rawSessionOp(namedClients[i]!, `bench-named-session-${c}-${i}`, true) },
      { kind: 'loops', id: `porsager-${c}`, label: 'postgres (porsager) same SQL, prepared', clients: c, makeOp: (i) => porsagerSessionOp(porsager(server), `bench-porsager-session-${c}-${i}`) },
      { kind: 'loops', id: `wire-${c}`, label: 'own wire client same SQL, prepared', clients: c, makeOp: (i) => wireSessionOp(wireClients[i]!, `bench-wire-session-${c}-${i}`) },
    );
  }
  const r1 = await measureGroup(ctx, '[1]', session);

  // 2. transaction lock -----------------------------------------------------
  log('2. transaction lock: acquire (TRY_LOCK_AND_MINT, BEGIN, hand-over, pipelined on an idle connection) + release (COMMIT)');
  const xact: Config[] = [];
  for (const c of CLIENT_COUNTS) {
    const rawClients = await connections(c, 'raw-xact', true);
    xact.push(
      ownLockLoops(c, 'lockcheck PostgresTransactionLock', 'xact', () => new PostgresTransactionLock(lockOptions(server)), xactLocks),
      { kind: 'pgbench', id: `pgb-xact-${c}`, label: 'pgbench xact SQL', clients: c, script: pgbenchXact(PGBENCH_XACT_BASE), mintsOn: pgbenchResources(PGBENCH_XACT_BASE, c) },
      { kind: 'loops', id: `raw-${c}`, label: "node-postgres, lockcheck's xact round trips", clients: c, makeOp: (i) => rawXactOp(rawClients[i]!, `bench-raw-xact-${c}-${i}`) },
    );
  }
  const r2 = await measureGroup(ctx, '[2]', xact);

  // 3. fenced write vs plain UPDATE -------------------------------------------
  log('3. fenced write (strict) vs plain UPDATE');
  const writes: Config[] = [];
  let rejectedWrites = 0;
  /** Writes of `resource` with increasing tokens (1, 2, ...); false, and counted, when one is rejected. */
  const fencedWriteOp = (store: FencedStore, resource: string): Op => {
    let token = 0n;
    return async () => {
      token++;
      const w = await store.write(resource, token, 'v');
      if (w.kind === 'accepted') return true;
      rejectedWrites++;
      return false;
    };
  };
  for (const c of CLIENT_COUNTS) {
    const fencedClients = await connections(c, 'fenced');
    const plainClients = await connections(c, 'plain');
    const namedClients = await connections(c, 'plain-named');
    const plainResources = Array.from({ length: c }, (_, i) => `bench-plain-${c}-${i}`);
    await admin.query(
      "INSERT INTO lockcheck_store (resource, value, token, highest) SELECT r, 'v', 0, 0 FROM unnest($1::text[]) AS r ON CONFLICT (resource) DO NOTHING",
      [plainResources],
    );
    writes.push(
      {
        kind: 'loops',
        id: `fenced-${c}`,
        label: 'fenced write (strict)',
        clients: c,
        makeOp: (i) => fencedWriteOp(postgresFencedStore(fencedClients[i]!, 'strict'), `bench-fenced-${c}-${i}`),
      },
      {
        kind: 'loops',
        id: `fenced-wire-${c}`,
        label: 'fenced write (strict), own connection (wire client)',
        clients: c,
        makeOp: (i) => {
          const store = openPostgresFencedStore({ connection: server.connection, statementTimeoutMs: STATEMENT_TIMEOUT_MS }, 'strict');
          wireStores.push(store);
          return fencedWriteOp(store, `bench-fenced-wire-${c}-${i}`);
        },
      },
      {
        kind: 'loops',
        id: `plain-${c}`,
        label: 'plain UPDATE',
        clients: c,
        makeOp: (i) => plainUpdateOp(plainClients[i]!, PLAIN_UPDATE, plainResources[i]!),
      },
      {
        kind: 'loops',
        id: `plain-named-${c}`,
        label: 'plain UPDATE, named',
        clients: c,
        makeOp: (i) => plainUpdateOp(namedClients[i]!, PLAIN_UPDATE_NAMED, plainResources[i]!),
      },
    );
  }
  const r3 = await measureGroup(ctx, '[3]', writes);

  // ------------------------------------------------------------------- report
  const totalS = (performance.now() - started) / 1000;
  out('## PostgreSQL lock benchmark');
  out();
  out(
    `${new Date().toISOString()} · node ${process.version} · PostgreSQL ${pgVersion} on 127.0.0.1 (${settings}; data on /dev/shm) · ${pgbenchVersion} · ` +
      `${os.cpus().length} CPUs shared by clients and server (load average 1/5/15 min at start ${loadAtStart}, at end ${loadavg()}) · ` +
      `${seconds} s per Node run after ${WARMUP_MS} ms warm-up (plus ${GROUP_WARMUP_MS} ms per configuration before a group's first round), pgbench -T ${PGBENCH_SECONDS} (no warm-up; tps without initial connection time) · ${ROUNDS} interleaved rounds, median reported · total ${totalS.toFixed(0)} s`,
  );
  out();
  out(
    'Rates are operations per second (a pair = acquire + release). "8 clients": 8 independent loops (8 lock objects / connections, pgbench `-c 8 -j 2`), each on its own resource and key. ' +
      '"client CPU": CPU time (user + system) of the client per completed operation: the Node process (process.cpuUsage) or the pgbench process (its reaped CPU time). ' +
      '"server CPU": CPU time of the postmaster and all backends over the run, per completed operation. CPU per operation is less sensitive to machine noise than the rates. ' +
      'Ratios are ratios of medians; the per-round ratios compare runs measured next to each other. ' +
      '"CPU-cost ratio" (A / B): B\'s client + server CPU per operation divided by A\'s, i.e. the rate ratio to expect when client and server share a CPU-bound machine; it depends much less on what else runs on the machine than the rate ratio does.',
  );
  out();

  const header = (): void => {
    out('| configuration | 1 client | rounds | client CPU µs/op | server CPU µs/op | 8 clients | rounds | client CPU µs/op | server CPU µs/op |');
    out('|---|---:|---|---:|---:|---:|---|---:|---:|');
  };
  const rateRow = (results: Map<string, Measured>, label: string, base: string): string => {
    const cells = ids(base).map(({ id }) => {
      const m = results.get(id)!;
      return `${fmtRate(median(m.rates))} | ${m.rates.map(fmtRate).join(' / ')} | ${fmtRate(median(m.clientCpuPerOp))} | ${fmtRate(median(m.serverCpuPerOp))}`;
    });
    const fails = ids(base).reduce((n, { id }) => n + results.get(id)!.failures, 0);
    return `| ${label} | ${cells.join(' | ')} |${fails ? ` ${fails} failed ops` : ''}`;
  };
  const ratioHeader = (): void => {
    out('| ratio | 1 client | 8 clients | CPU-cost ratio, 1 client | CPU-cost ratio, 8 clients |');
    out('|---|---|---|---:|---:|');
  };
  /** Client + server CPU per operation (medians): the rate a CPU-bound machine would reach is inversely proportional to it. */
  const cost = (results: Map<string, Measured>, id: string): number => {
    const m = results.get(id)!;
    return median(m.clientCpuPerOp) + median(m.serverCpuPerOp);
  };
  const ratioRow = (results: Map<string, Measured>, label: string, a: string, b: string, target?: (x: number) => string): string => {
    const cells = CLIENT_COUNTS.map((c) => {
      const r = ratio(results, `${a}-${c}`, `${b}-${c}`);
      return `${r.text}${target ? ` ${target(r.value)}` : ''}`;
    });
    const costs = CLIENT_COUNTS.map((c) => fmtRatio(cost(results, `${b}-${c}`) / cost(results, `${a}-${c}`)));
    return `| ${label} | ${cells.join(' | ')} | ${costs.join(' | ')} |`;
  };
  const within20 = (x: number): string => (x >= 0.8 ? '(meets ≥ 0.80)' : '(**misses** ≥ 0.80)');
  {
    const row = (results: Map<string, Measured>, target: string, a: string, b: string, goal?: number) => ({ target, ratio: ratio(results, a, b).value, cpuRatio: cost(results, b) / cost(results, a), ...(goal === undefined ? {} : { goal }) });
    targetTable(
      [
        row(r1, 'session lock / pgbench same SQL, 1 client', 'lc-1', 'pgb-same-1', 0.9),
        row(r1, 'session lock / raw node-postgres named, same statements, 8 clients', 'lc-8', 'named-8', 0.95),
        row(r1, 'session lock / pgbench same SQL, 8 clients', 'lc-8', 'pgb-same-8'),
        row(r2, 'transaction lock / pgbench persistent, 1 client', 'lc-1', 'pgb-xact-1', 0.8),
        row(r3, 'fenced write / plain UPDATE, 1 client', 'fenced-1', 'plain-1', 0.8),
        row(r3, 'fenced write / plain UPDATE, 8 clients', 'fenced-8', 'plain-8', 0.8),
        row(r3, 'fenced write on its own connection (wire client) / plain UPDATE, 1 client', 'fenced-wire-1', 'plain-1', 0.8),
        row(r3, 'fenced write on its own connection (wire client) / plain UPDATE, 8 clients', 'fenced-wire-8', 'plain-8', 0.8),
      ],
      `1/5/15 min at start ${loadAtStart}, at end ${loadavg()}`,
    );
    out('CPU-per-op ratio here: the peer\'s client + server CPU per operation over lockcheck\'s (the rate ratio a CPU-bound machine would show).');
    out();
  }
  const mintCheck = (results: Map<string, Measured>, base: string): string =>
    ids(base)
      .map(({ c, id }) => {
        const m = results.get(id)!;
        return `${c} client${c === 1 ? '' : 's'}: ${m.minted.toLocaleString('en-US')} tokens minted for ${m.ops.toLocaleString('en-US')} transactions`;
      })
      .join('; ');

  out('### 1. Session lock: acquire + release pairs/s');
  out();
  header();
  out(rateRow(r1, 'lockcheck `PostgresSessionLock` (acquire = TRY_LOCK_AND_MINT, an INSERT … ON CONFLICT UPDATE; release = pg_advisory_unlock; 2 round trips, prepared statements, on lockcheck\'s own wire client)', 'lc'));
  out(rateRow(r1, 'pgbench `-M prepared`, the same SQL (TRY_LOCK_AND_MINT + pg_advisory_unlock)', 'pgb-same'));
  out(rateRow(r1, 'pgbench `-M prepared`, minimal pair (pg_advisory_lock + pg_advisory_unlock, no token)', 'pgb-min'));
  out(rateRow(r1, '*diagnostic:* raw node-postgres, the same SQL, unnamed statements (lockcheck sent them so before it named them)', 'raw'));
  out(rateRow(r1, '*diagnostic:* raw node-postgres, the same SQL, named (prepared) statements', 'named'));
  out(rateRow(r1, '*driver choice:* `postgres` (porsager) 3.4.9, the same SQL, prepared, one connection per client', 'porsager'));
  out(rateRow(r1, '*driver choice:* lockcheck\'s own wire client (impl/postgres/wire), bare, the same SQL, prepared', 'wire'));
  out();
  ratioHeader();
  out(ratioRow(r1, 'lockcheck / pgbench same SQL (target with 1 client: ≥ 0.90)', 'lc', 'pgb-same', within20));
  out(ratioRow(r1, 'lockcheck / pgbench minimal pair', 'lc', 'pgb-min'));
  out(ratioRow(r1, 'pgbench same SQL / pgbench minimal pair (price of minting the token in the lock statement)', 'pgb-same', 'pgb-min'));
  out(ratioRow(r1, '*diagnostic:* lockcheck / raw node-postgres unnamed', 'lc', 'raw'));
  out(ratioRow(r1, '*diagnostic:* raw node-postgres unnamed / pgbench same SQL (price of the Node driver + unnamed statements)', 'raw', 'pgb-same'));
  out(ratioRow(r1, '*diagnostic:* raw node-postgres named / unnamed (what prepared statements would gain)', 'named', 'raw'));
  out(ratioRow(r1, 'lockcheck / raw node-postgres named, config objects (price of lockcheck\'s own code; target with 8 clients: ≥ 0.95)', 'lc', 'named'));
  out(ratioRow(r1, '*driver choice:* postgres (porsager) / node-postgres named, the same statements', 'porsager', 'named'));
  out(ratioRow(r1, '*driver choice:* own wire client / node-postgres named, the same statements', 'wire', 'named'));
  out(ratioRow(r1, '*diagnostic:* lockcheck / its bare wire client, the same statements (price of lockcheck\'s own code over its driver)', 'lc', 'wire'));
  out();
  out(`pgbench same-SQL check (every pair must have been granted, so must have minted): ${mintCheck(r1, 'pgb-same')}. A transaction cut off by -T can mint without being counted.`);
  out();

  out('### 2. Transaction lock: acquire + release (COMMIT) per second');
  out();
  out(
    '`PostgresTransactionLock.acquire` takes an idle connection (keeping up to four; a new one only when none is idle), then sends TRY_LOCK_AND_MINT (the lock at session level and its token, committed on its own), BEGIN and the hand-over to the transaction (pg_try_advisory_xact_lock, then pg_advisory_unlock) pipelined in one round trip; `release` COMMITs and keeps the connection. ' +
      'pgbench runs a transaction lock with a token over persistent connections, one per client, minting inside the transaction (four round trips).',
  );
  out();
  header();
  out(rateRow(r2, 'lockcheck `PostgresTransactionLock` acquire + release (idle connections reused; 2 round trips: TRY_LOCK_AND_MINT, BEGIN, hand-over pipelined, then COMMIT)', 'lc'));
  out(rateRow(r2, 'pgbench `-M prepared`, persistent connections: BEGIN; try xact lock; MINT; COMMIT', 'pgb-xact'));
  out(rateRow(r2, "*diagnostic:* raw node-postgres, lockcheck's two round trips (the three statements named and pipelined, then COMMIT)", 'raw'));
  out();
  ratioHeader();
  out(ratioRow(r2, 'lockcheck / pgbench persistent connections', 'lc', 'pgb-xact'));
  out(ratioRow(r2, "*diagnostic:* lockcheck / raw node-postgres, the same round trips (price of lockcheck's own code)", 'lc', 'raw'));
  out(ratioRow(r2, '*diagnostic:* raw node-postgres / pgbench persistent (the Node driver against libpq, two round trips against four)', 'raw', 'pgb-xact'));
  out();
  out(`pgbench xact check: ${mintCheck(r2, 'pgb-xact')}. pgbench mints inside the lock's transaction (one connection per client); lockcheck mints before BEGIN, committed on its own (so that a rollback cannot reuse a token), and pipelines its acquire: two round trips to pgbench's four (one per statement), five statements to its four.`);
  out();

  out('### 3. Fenced write vs plain UPDATE per second');
  out();
  header();
  out(rateRow(r3, '`postgresFencedStore(client, "strict").write` (one conditional INSERT … ON CONFLICT UPDATE … WHERE token > highest, with the read-back of highest, a named prepared statement), increasing tokens', 'fenced'));
  out(rateRow(r3, 'plain `UPDATE lockcheck_store SET value = $1 WHERE resource = $2` (same table), unnamed: the target\'s baseline', 'plain'));
  out(rateRow(r3, '*diagnostic:* the same plain UPDATE, named (prepared, as the fenced write is)', 'plain-named'));
  out(rateRow(r3, '`openPostgresFencedStore({ connection }, "strict").write`: the same statement on the store\'s own connection, through the wire client', 'fenced-wire'));
  out();
  ratioHeader();
  out(ratioRow(r3, 'fenced / plain (target: ≥ 0.80)', 'fenced', 'plain', within20));
  out(ratioRow(r3, 'fenced on its own connection (wire client) / plain', 'fenced-wire', 'plain', within20));
  out(ratioRow(r3, '*diagnostic:* fenced / plain named (both prepared: the price of the guard and the read-back alone)', 'fenced', 'plain-named'));
  out();
  out(`Rejected fenced writes: ${rejectedWrites} (expected 0: every write carries a higher token). Node connection errors: ${connectionErrors}. Server CPU samples taken before the run's backends were reaped (settle timeouts): ${settleTimeouts}.`);
  out();

  const s1 = ratio(r1, 'lc-1', 'pgb-same-1').value;
  const s8 = ratio(r1, 'lc-8', 'pgb-same-8').value;
  const c1 = cost(r1, 'pgb-same-1') / cost(r1, 'lc-1');
  const c8 = cost(r1, 'pgb-same-8') / cost(r1, 'lc-8');
  out('### Notes');
  out();
  out(
    `- Target "session lock within 20 % of pgbench's prepared-statement rate on the same SQL": rate ratio 1 client ${fmtRatio(s1)}, 8 clients ${fmtRatio(s8)} (CPU-cost ratio ${fmtRatio(c1)}, ${fmtRatio(c8)}) — ` +
      `${s1 >= 0.8 && s8 >= 0.8 ? 'met' : `**not met${s1 < 0.8 && s8 < 0.8 ? '' : s1 < 0.8 ? ' with 1 client' : ' with 8 clients'}**`}. ` +
      'Where the gap comes from, by the diagnostic rows: lockcheck vs its bare wire client (same statements, same protocol) is lockcheck\'s own client code (input checks, a lease object; the advisory key is hashed once per name and remembered); ' +
      'the bare wire client vs pgbench is a Node process against libpq (client CPU µs/op: a socket write, an event-loop wakeup and a promise per statement); raw node-postgres vs the wire client is the driver lockcheck no longer uses for the session lock.',
  );
  out(
    `- Transaction lock: ${fmtRate(median(r2.get('lc-1')!.rates))} pairs/s with 1 client against ${fmtRate(median(r2.get('raw-1')!.rates))} for its round trips through raw node-postgres and ${fmtRate(median(r2.get('pgb-xact-1')!.rates))} for pgbench's four. ` +
      'It cannot mint inside the lock\'s transaction (a rollback would hand the token out again), so it mints under a session-level hold before BEGIN and hands the lock over to the transaction, all in one pipelined round trip.',
  );
  out('- The session lock\'s acquire writes (it mints a durable token: an INSERT … ON CONFLICT UPDATE, a WAL record and a commit per acquire); the minimal pair writes nothing, so lockcheck / pgbench minimal also carries the price of the token.');
  out('- Each client uses its own resource and key, so no run measures contention; pgbench\'s minimal pair draws random keys, disjoint per client.');
  out(`- fsync=off and full_page_writes=off on /dev/shm: commits cost no disk flush, so writing statements look cheaper than on a real server. synchronous_commit stays on.`);
  out(`- The machine has ${os.cpus().length} cores shared by the clients (Node or pgbench) and the server, and possibly by other processes (load average above); read the ratios, the per-round spread and the CPU µs/op, not the absolute rates.`);
}

const cleanup: { tmpDir?: string } = {};
try {
  await main(cleanup);
} catch (error) {
  process.exitCode = 1;
  log(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
} finally {
  const child = pgbenchChild as ChildProcess | null;
  if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null) {
    try {
      process.kill(child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  const closing = Promise.all([
    ...sessionLocks.map((l) => l.close().catch(() => undefined)),
    ...xactLocks.map((l) => l.close().catch(() => undefined)),
    ...clients.map((c) => c.end().catch(() => undefined)),
    ...porsagerClients.map((sql) => sql.end({ timeout: 5 }).catch(() => undefined)),
    ...wires.map((c) => c.end()),
    ...wireStores.map((st) => st.close().catch(() => undefined)),
  ]);
  const bound = new AbortController();
  const closed = await Promise.race([closing.then(() => true), sleep(CLOSE_TIMEOUT_MS, false, { signal: bound.signal }).catch(() => false)]);
  bound.abort();
  if (!closed) log(`  closing connections took over ${CLOSE_TIMEOUT_MS} ms; stopping the server anyway`);
  await stopAllPostgresServers();
  if (cleanup.tmpDir !== undefined) await rm(cleanup.tmpDir, { recursive: true, force: true });
  log('server stopped, connections closed');
}
