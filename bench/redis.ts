/**
 * Redis lock benchmark: lockcheck's createRedisLock against raw ioredis and
 * redlock 5.0.0-beta.2, on redis-server processes this script starts itself
 * on loopback (no faketime) and stops in a finally (and on Ctrl-C, through
 * RedisServer's exit handlers).
 *
 *   npm run bench:redis [-- --seconds N]      (or: npx tsx bench/redis.ts --seconds N)
 *
 * 1. one node: acquire+release pairs/s, sequential and 50 concurrent resources:
 *    lockcheck, raw ioredis (SET NX PX + scripted compare-and-delete), raw
 *    ioredis with a fencing token minted by INCR in the acquire script, redlock;
 * 2. five nodes (Redlock): lockcheck vs redlock, sequential and 50 concurrent,
 *    redlock also on auto-pipelined connections (lockcheck's script commands
 *    do not take ioredis's auto-pipelining: its node batches its own writes),
 *    and the sequential floor: lockcheck's own scripts on bare sockets at the
 *    quorum, the cheapest client they can have (bench/bareResp.ts; it writes
 *    each command on its own, so its 50 concurrent figure is no floor);
 * 3. acquire latency p50/p99 on five nodes, healthy and with one node paused
 *    (SIGSTOP): lockcheck with requestTimeoutMs 50 vs redlock;
 * 4. the cost of fencing: acquire + fenced write (strict) + release vs
 *    acquire + plain SET + release.
 *
 * Each throughput measurement: a short warm-up, then a fixed duration; every
 * configuration runs 3 times, interleaved (rotated order), and the median is
 * reported. The machine is noisy (2 cores shared by client and servers), so
 * the tables give ratios between configurations measured in the same run.
 * Progress goes to stderr, markdown tables to stdout.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { RedisServer, stopAllRedisServers } from '../conformance/env/redisServer.ts';
import { createRedisLock, redisFencedStore, redisLeaseNode } from '../impl/redis/index.ts';
import type { LeaseLock } from '../impl/leaseLock.ts';
import type { LeaseNode } from '../impl/leaseNode.ts';
import { ACQUIRE, RELEASE } from '../impl/redis/scripts.ts';
import { bareScripts } from './bareResp.ts';
import Redlock from './redlockTyped.ts';
import { fmtRate, fmtRatio, log, median, out, pairedRatio, parseSeconds, targetTable } from './common.ts';

// ---------------------------------------------------------------- settings

const ROUNDS = 3;
const CONCURRENCY = 50;
const NODES = 5;
const TTL_MS = 10_000;
/** Hard bound on the operations of one loop in one run (the duration bounds it first in practice). */
const MAX_OPS_PER_LOOP = 2_000_000;
/**
 * Latency measurement (3): per implementation and condition, at most this many acquisitions in all rounds
 * (a p99 of 200 samples was their second slowest, which the machine's scheduling decides)...
 */
const LATENCY_MAX_ACQUISITIONS = 6000;
/** ...and at most this long in all rounds. */
const LATENCY_BUDGET_MS = 20_000;
/** One acquisition that takes longer than this is reported as hung and stops that implementation's measurement. */
const LATENCY_HANG_MS = 2_000;
const LOCKCHECK_REQUEST_TIMEOUT_MS = 50;
/** Which of the five nodes is paused in measurement 3. */
const PAUSED_NODE = 2;

const seconds = parseSeconds('bench/redis.ts', process.argv.slice(2));
const DURATION_MS = Math.round(seconds * 1000);
const WARMUP_MS = Math.min(500, Math.round(DURATION_MS / 4));

// ---------------------------------------------------------------- helpers


/** Nearest-rank percentile. */
function percentile(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

const fmtMs = (x: number): string => (Number.isFinite(x) ? x.toFixed(x < 10 ? 2 : 1) : 'n/a');

/** Owner values for the raw ioredis lock, as random as redlock's. */
const randomValue = (): string => randomBytes(16).toString('hex');

const connections: Redis[] = [];
let connectionErrors = 0;

async function connect(server: RedisServer, name: string, autoPipelining = false): Promise<Redis> {
  const redis = new Redis({ ...server.connection, lazyConnect: true, enableAutoPipelining: autoPipelining });
  connections.push(redis);
  redis.on('error', (error: Error) => {
    if (++connectionErrors <= 5) log(`  [${name}] connection error: ${error.message}`);
  });
  await redis.connect();
  return redis;
}

// ---------------------------------------------------------------- throughput

/** One operation; resolves true on success (e.g. a granted lock released), false on a failure to count. */
type Op = () => Promise<boolean>;

interface ThroughputConfig {
  readonly id: string;
  readonly label: string;
  readonly concurrency: number;
  /** The operation of loop `i` (each loop has its own resource). */
  readonly makeOp: (loop: number) => Op;
}

interface Measured {
  readonly rates: number[];
  /** Client CPU (user + system, this process) per successful operation, in µs. */
  readonly cpuPerOp: number[];
  /** The redis-server processes' CPU (user + system, from /proc) per successful operation, in µs. */
  readonly serverCpuPerOp: number[];
  failures: number;
}

/** CPU time of processes in µs (utime + stime from /proc/<pid>/stat, in clock ticks of 10 ms); NaN where /proc is not readable. */
function processCpuUs(pids: readonly number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      // The fields after the command name: utime and stime are the 12th and 13th.
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      return Number.NaN;
    }
  }
  return ticks * 10_000;
}

async function runLoops(ops: readonly Op[], durationMs: number, serverPids: readonly number[] = []): Promise<{ ok: number; failures: number; elapsedMs: number; cpuUs: number; serverCpuUs: number }> {
  let ok = 0;
  let failures = 0;
  const serverCpu = processCpuUs(serverPids);
  const cpu = process.cpuUsage();
  const start = performance.now();
  const deadline = start + durationMs;
  await Promise.all(
    ops.map(async (op) => {
      for (let n = 0; n < MAX_OPS_PER_LOOP && performance.now() < deadline; n++) {
        if (await op()) ok++;
        else failures++;
      }
    }),
  );
  const elapsedMs = performance.now() - start;
  const used = process.cpuUsage(cpu);
  return { ok, failures, elapsedMs, cpuUs: used.user + used.system, serverCpuUs: processCpuUs(serverPids) - serverCpu };
}

/** Runs every configuration ROUNDS times, interleaved, the order rotated each round; `serverPids`: the servers the group uses. */
async function measureGroup(title: string, configs: readonly ThroughputConfig[], serverPids: readonly number[]): Promise<Map<string, Measured>> {
  const results = new Map<string, Measured>(configs.map((c) => [c.id, { rates: [], cpuPerOp: [], serverCpuPerOp: [], failures: 0 }]));
  const ops = new Map(configs.map((c) => [c.id, Array.from({ length: c.concurrency }, (_, i) => c.makeOp(i))]));
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < configs.length; k++) {
      const config = configs[(k + round) % configs.length]!;
      const loops = ops.get(config.id)!;
      await runLoops(loops, WARMUP_MS);
      const r = await runLoops(loops, DURATION_MS, serverPids);
      const rate = r.ok / (r.elapsedMs / 1000);
      const m = results.get(config.id)!;
      m.rates.push(rate);
      m.cpuPerOp.push(r.ok > 0 ? r.cpuUs / r.ok : Number.NaN);
      m.serverCpuPerOp.push(r.ok > 0 ? r.serverCpuUs / r.ok : Number.NaN);
      m.failures += r.failures;
      log(`  ${title} round ${round + 1}/${ROUNDS}: ${config.label}, ${config.concurrency === 1 ? 'sequential' : `${config.concurrency} concurrent`}: ${fmtRate(rate)} ops/s, client CPU ${fmtRate(r.cpuUs / Math.max(1, r.ok))} µs/op, server CPU ${fmtRate(r.serverCpuUs / Math.max(1, r.ok))} µs/op${r.failures ? ` (${r.failures} failed)` : ''}`);
    }
  }
  return results;
}

/** Ratio of medians, with the per-round ratios (paired: measured next to each other). */
const ratio = (results: Map<string, Measured>, a: string, b: string): { value: number; text: string } => pairedRatio(results.get(a)!.rates, results.get(b)!.rates);

const roundsText = (m: Measured): string => m.rates.map(fmtRate).join(' / ');

// ---------------------------------------------------------------- lock operations

/** lockcheck acquire + release on one resource; `between` runs while the lease is held. */
function lockcheckOp(lock: LeaseLock, resource: string, between?: (token: bigint) => Promise<boolean>): Op {
  return async () => {
    const r = await lock.acquire(resource, { ttlMs: TTL_MS });
    if (r.kind !== 'granted') return false;
    const ok = between === undefined ? true : await between(r.lease.token);
    await lock.release(r.lease);
    return ok;
  };
}

/** Diagnostic: lockcheck's node scripts without LeaseLock (acquire+INCR script, release; no raiseToken). */
function leaseNodeOp(node: LeaseNode, resource: string): Op {
  return async () => {
    const owner = randomValue();
    if ((await node.acquire(resource, owner, TTL_MS)) === null) return false;
    return node.release(resource, owner);
  };
}

interface RawCommands {
  benchRelease(key: string, value: string): Promise<number>;
  benchAcquireIncr(key: string, counter: string, value: string, ttlMs: number): Promise<number | null>;
}

/** The minimal correct lock without fencing: SET NX PX, release by a compare-and-delete script (EVALSHA). */
const RAW_RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;
/** The same with a fencing token: SET NX PX and INCR of a per-resource counter in one script. */
const RAW_ACQUIRE_INCR = `if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('INCR', KEYS[2]) end
return false`;

function withRawCommands(redis: Redis): Redis & RawCommands {
  redis.defineCommand('benchRelease', { numberOfKeys: 1, lua: RAW_RELEASE });
  redis.defineCommand('benchAcquireIncr', { numberOfKeys: 2, lua: RAW_ACQUIRE_INCR });
  return redis as Redis & RawCommands;
}

function rawOp(redis: Redis & RawCommands, key: string): Op {
  return async () => {
    const value = randomValue();
    if ((await redis.set(key, value, 'PX', TTL_MS, 'NX')) !== 'OK') return false;
    return (await redis.benchRelease(key, value)) === 1;
  };
}

function rawIncrOp(redis: Redis & RawCommands, key: string, counter: string): Op {
  return async () => {
    const value = randomValue();
    if ((await redis.benchAcquireIncr(key, counter, value, TTL_MS)) === null) return false;
    return (await redis.benchRelease(key, value)) === 1;
  };
}

/** Per-node failures redlock emitted, by message (votes against; they need not fail the operation). */
const redlockErrors = new Map<string, number>();
function newRedlock(nodes: readonly Redis[]): Redlock {
  const redlock = new Redlock(nodes, { retryCount: 0 });
  // redlock emits every failed per-node call; an 'error' emit without a listener would throw.
  redlock.on('error', (error) => {
    const key = `${error.name}: ${error.message}`;
    redlockErrors.set(key, (redlockErrors.get(key) ?? 0) + 1);
  });
  return redlock;
}

function redlockOp(redlock: Redlock, key: string): Op {
  return async () => {
    let lock;
    try {
      lock = await redlock.acquire([key], TTL_MS);
    } catch {
      return false;
    }
    try {
      await lock.release();
      return true;
    } catch {
      return false;
    }
  };
}

// ---------------------------------------------------------------- latency

interface LatencyResult {
  readonly samples: number[];
  readonly outcomes: Map<string, number>;
  /** The acquisition cap or the time budget ended the measurement. */
  stoppedBy: 'count' | 'time' | 'hang';
  elapsedMs: number;
}

/** One acquisition: resolves with its outcome and, when granted, a release to run in the background. */
type Acquirer = (resource: string) => Promise<{ outcome: string; release?: () => Promise<unknown> }>;

interface LatencyConfig {
  readonly id: string;
  readonly label: string;
  readonly acquire: Acquirer;
}

function timeout(ms: number): { promise: Promise<'hung'>; cancel: () => void } {
  const ac = new AbortController();
  return {
    promise: sleep(ms, 'hung' as const, { signal: ac.signal }).catch(() => 'hung' as const),
    cancel: () => ac.abort(),
  };
}

/**
 * Sequential acquisitions, each on a fresh resource, timing acquire only
 * (releases run in the background, awaited, bounded, at the end of the
 * round). Interleaved rounds; all rounds together stay within
 * LATENCY_MAX_ACQUISITIONS and LATENCY_BUDGET_MS per configuration.
 */
async function measureLatency(title: string, configs: readonly LatencyConfig[]): Promise<Map<string, LatencyResult>> {
  const results = new Map<string, LatencyResult>(configs.map((c) => [c.id, { samples: [], outcomes: new Map(), stoppedBy: 'count', elapsedMs: 0 }]));
  const perRoundCount = Math.ceil(LATENCY_MAX_ACQUISITIONS / ROUNDS);
  const perRoundMs = LATENCY_BUDGET_MS / ROUNDS;
  let seq = 0;
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < configs.length; k++) {
      const config = configs[(k + round) % configs.length]!;
      const res = results.get(config.id)!;
      if (res.stoppedBy === 'hang') continue;
      const releases: Promise<unknown>[] = [];
      const start = performance.now();
      const deadline = start + perRoundMs;
      let n = 0;
      for (; n < perRoundCount && res.samples.length < LATENCY_MAX_ACQUISITIONS; n++) {
        if (performance.now() >= deadline) {
          res.stoppedBy = 'time';
          break;
        }
        const resource = `lat-${config.id}-${process.pid}-${seq++}`;
        const t0 = performance.now();
        const bound = timeout(LATENCY_HANG_MS);
        const r = await Promise.race([config.acquire(resource), bound.promise]);
        bound.cancel();
        const dt = performance.now() - t0;
        if (r === 'hung') {
          res.stoppedBy = 'hang';
          res.outcomes.set('hung', (res.outcomes.get('hung') ?? 0) + 1);
          break;
        }
        res.samples.push(dt);
        res.outcomes.set(r.outcome, (res.outcomes.get(r.outcome) ?? 0) + 1);
        if (r.release) releases.push(r.release().catch(() => undefined));
      }
      res.elapsedMs += performance.now() - start;
      const bound = timeout(LATENCY_HANG_MS);
      const drained = await Promise.race([Promise.all(releases).then(() => 'ok' as const), bound.promise]);
      bound.cancel();
      log(
        `  ${title} round ${round + 1}/${ROUNDS}: ${config.label}: ${n} acquisitions, p50 ${fmtMs(percentile(res.samples, 50))} ms so far` +
          `${res.stoppedBy === 'hang' ? `, an acquisition hung > ${LATENCY_HANG_MS} ms` : ''}${drained === 'hung' ? ', releases still pending' : ''}`,
      );
    }
  }
  return results;
}

function lockcheckAcquirer(lock: LeaseLock): Acquirer {
  return async (resource) => {
    const r = await lock.acquire(resource, { ttlMs: TTL_MS });
    return r.kind === 'granted' ? { outcome: 'granted', release: () => lock.release(r.lease) } : { outcome: r.kind === 'denied' ? `denied (${r.reason})` : r.kind };
  };
}

function redlockAcquirer(redlock: Redlock): Acquirer {
  return async (resource) => {
    try {
      const lock = await redlock.acquire([`bench:redlock:${resource}`], TTL_MS);
      return { outcome: 'granted', release: () => lock.release() };
    } catch (error) {
      return { outcome: `error (${error instanceof Error ? error.name : 'unknown'})` };
    }
  };
}

// ---------------------------------------------------------------- main

async function main(): Promise<void> {
  const started = performance.now();
  const loadAtStart = os.loadavg()[0]!.toFixed(2);
  log(`lockcheck Redis benchmark: ${seconds} s per run after a ${WARMUP_MS} ms warm-up, ${ROUNDS} interleaved rounds`);
  log(`starting ${NODES} redis-server processes on 127.0.0.1 (no persistence)...`);
  const servers: RedisServer[] = [];
  for (let i = 0; i < NODES; i++) servers.push(await RedisServer.start({ persistence: 'none' }));
  log(`  ports ${servers.map((s) => s.port).join(', ')}`);
  const nodes = await Promise.all(servers.map((s, i) => connect(s, `node${i}`)));
  const one = nodes[0]!;
  const redisVersion = /redis_version:(\S+)/.exec(await one.info('server'))?.[1] ?? 'unknown';

  // 1. single node -------------------------------------------------------
  log('1. single node, acquire + release');
  const raw = withRawCommands(one);
  const lock1 = createRedisLock({ nodes: [one] });
  const redlock1 = newRedlock([one]);
  const node1 = redisLeaseNode(one);
  const single: ThroughputConfig[] = [];
  for (const concurrency of [1, CONCURRENCY]) {
    const c = concurrency === 1 ? 'seq' : 'conc';
    single.push(
      { id: `lc-${c}`, label: 'lockcheck', concurrency, makeOp: (i) => lockcheckOp(lock1, `s-${c}-${i}`) },
      { id: `raw-${c}`, label: 'raw ioredis', concurrency, makeOp: (i) => rawOp(raw, `bench:raw:${c}:${i}`) },
      { id: `rawincr-${c}`, label: 'raw ioredis + INCR token', concurrency, makeOp: (i) => rawIncrOp(raw, `bench:rawincr:${c}:${i}`, `bench:rawincr-token:${c}:${i}`) },
      { id: `rl-${c}`, label: 'redlock', concurrency, makeOp: (i) => redlockOp(redlock1, `bench:redlock1:${c}:${i}`) },
      { id: `lcnode-${c}`, label: 'diagnostic: lockcheck scripts alone', concurrency, makeOp: (i) => leaseNodeOp(node1, `n-${c}-${i}`) },
    );
  }
  const r1 = await measureGroup('[1]', single, [servers[0]!.pid]);

  // 2. five nodes ----------------------------------------------------------
  log(`2. ${NODES} nodes (Redlock), acquire + release`);
  const lock5 = createRedisLock({ nodes });
  const redlock5 = newRedlock(nodes);
  // redlock over connections with ioredis auto-pipelining (commands of one event-loop turn go out in one write): its other setting.
  const piped = await Promise.all(servers.map((s, i) => connect(s, `piped-node${i}`, true)));
  const redlock5p = newRedlock(piped);
  const bare = await bareScripts(servers.map((s) => s.connection), ACQUIRE, RELEASE, TTL_MS);
  const five: ThroughputConfig[] = [];
  for (const concurrency of [1, CONCURRENCY]) {
    const c = concurrency === 1 ? 'seq' : 'conc';
    five.push(
      { id: `lc-${c}`, label: `lockcheck, ${NODES} nodes`, concurrency, makeOp: (i) => lockcheckOp(lock5, `f-${c}-${i}`) },
      { id: `rl-${c}`, label: `redlock, ${NODES} nodes`, concurrency, makeOp: (i) => redlockOp(redlock5, `bench:redlock5:${c}:${i}`) },
      { id: `rlp-${c}`, label: `redlock, ${NODES} nodes, auto-pipelined`, concurrency, makeOp: (i) => redlockOp(redlock5p, `bench:redlock5p:${c}:${i}`) },
      { id: `bare-${c}`, label: `floor: lockcheck's scripts on bare sockets, ${NODES} nodes`, concurrency, makeOp: (i) => () => bare.pair(`bench:bare:${c}:${i}`) },
    );
  }
  const r2 = await measureGroup('[2]', five, servers.map((s) => s.pid));
  bare.close();

  // 4. fencing cost (run before the pause so that measurement 3's fresh connections stay apart) ----
  log('4. cost of fencing, single node');
  const store = redisFencedStore(one, 'strict');
  let rejectedWrites = 0;
  const fence: ThroughputConfig[] = [];
  for (const concurrency of [1, CONCURRENCY]) {
    const c = concurrency === 1 ? 'seq' : 'conc';
    fence.push(
      {
        id: `fenced-${c}`,
        label: 'lockcheck + fenced write',
        concurrency,
        makeOp: (i) => {
          const resource = `w-f-${c}-${i}`;
          return lockcheckOp(lock1, resource, async (token) => {
            const w = await store.write(resource, token, 'v');
            if (w.kind === 'accepted') return true;
            rejectedWrites++;
            return false;
          });
        },
      },
      {
        id: `plain-${c}`,
        label: 'lockcheck + plain SET',
        concurrency,
        makeOp: (i) => {
          const resource = `w-p-${c}-${i}`;
          return lockcheckOp(lock1, resource, async () => (await one.set(`bench:plain:${resource}`, 'v')) === 'OK');
        },
      },
    );
  }
  const r4 = await measureGroup('[4]', fence, [servers[0]!.pid]);

  // 3. latency with a paused node --------------------------------------------
  log(`3. acquire latency on ${NODES} nodes, healthy and with node ${PAUSED_NODE} paused (SIGSTOP)`);
  // Fresh connections: commands sent to the paused node queue on them until it resumes.
  const latNodes = await Promise.all(servers.map((s, i) => connect(s, `lat-node${i}`)));
  const latLock = createRedisLock({ nodes: latNodes, requestTimeoutMs: LOCKCHECK_REQUEST_TIMEOUT_MS });
  const latRedlock = newRedlock(latNodes);
  const latConfigs: LatencyConfig[] = [
    { id: 'lc', label: `lockcheck (requestTimeoutMs ${LOCKCHECK_REQUEST_TIMEOUT_MS})`, acquire: lockcheckAcquirer(latLock) },
    { id: 'rl', label: 'redlock', acquire: redlockAcquirer(latRedlock) },
  ];
  // A short warm-up on the fresh connections (script loading, connection set-up).
  for (const config of latConfigs) {
    for (let i = 0; i < 20; i++) {
      const r = await config.acquire(`lat-warm-${config.id}-${i}`);
      await r.release?.().catch(() => undefined);
    }
  }
  const healthy = await measureLatency('[3 healthy]', latConfigs);
  let paused: Map<string, LatencyResult>;
  const pausedServer = servers[PAUSED_NODE]!;
  pausedServer.pause();
  try {
    paused = await measureLatency('[3 paused]', latConfigs);
  } finally {
    pausedServer.resume();
  }
  // Let the resumed node work off what queued up, so nothing is pending at disconnect.
  {
    const bound = timeout(10_000);
    const drained = await Promise.race([Promise.all(latNodes.map((n) => n.ping())).then(() => 'ok' as const), bound.promise]);
    bound.cancel();
    log(`  node ${PAUSED_NODE} resumed${drained === 'ok' ? ', its queued commands answered' : ', its queue did not drain within 10 s'}`);
  }

  // ------------------------------------------------------------------- report
  const totalS = (performance.now() - started) / 1000;
  out(`## Redis lock benchmark`);
  out();
  out(
    `${new Date().toISOString()} · node ${process.version} · redis-server ${redisVersion} on 127.0.0.1 (no persistence) · ${os.cpus().length} CPUs shared by client and servers (load average at start ${loadAtStart}, at end ${os.loadavg()[0]!.toFixed(2)}) · ` +
      `${seconds} s per run after ${WARMUP_MS} ms warm-up · ${ROUNDS} interleaved rounds, median reported · ttl ${TTL_MS} ms · total ${totalS.toFixed(0)} s`,
  );
  out();
  {
    // The peer's client CPU per pair over lockcheck's: above 1, lockcheck spends less.
    const cpuRatio = (results: Map<string, Measured>, a: string, b: string): number => median(results.get(b)!.cpuPerOp) / median(results.get(a)!.cpuPerOp);
    const p99 = (m: Map<string, LatencyResult>): number => percentile(m.get('lc')!.samples, 99);
    targetTable(
      [
        { target: `Redlock, ${NODES} nodes: lockcheck / redlock, sequential`, ratio: ratio(r2, 'lc-seq', 'rl-seq').value, cpuRatio: cpuRatio(r2, 'lc-seq', 'rl-seq'), goal: 1.2 },
        // What no client of these scripts can beat: the target's line read against it.
        { target: `Redlock, ${NODES} nodes: floor (lockcheck's scripts on bare sockets, no client library) / redlock, sequential`, ratio: ratio(r2, 'bare-seq', 'rl-seq').value, cpuRatio: cpuRatio(r2, 'bare-seq', 'rl-seq') },
        { target: `Redlock, ${NODES} nodes: lockcheck / redlock, ${CONCURRENCY} concurrent`, ratio: ratio(r2, 'lc-conc', 'rl-conc').value, cpuRatio: cpuRatio(r2, 'lc-conc', 'rl-conc'), goal: 1.2 },
        { target: `Redlock, ${NODES} nodes: acquire p99 with one node paused / healthy`, ratio: p99(paused) / p99(healthy), goal: 2, kind: 'at-most' },
        { target: 'Redis, one node: lockcheck / raw ioredis, sequential', ratio: ratio(r1, 'lc-seq', 'raw-seq').value, cpuRatio: cpuRatio(r1, 'lc-seq', 'raw-seq'), goal: 1.0 },
        { target: `Redis, one node: lockcheck / raw ioredis, ${CONCURRENCY} concurrent`, ratio: ratio(r1, 'lc-conc', 'raw-conc').value, cpuRatio: cpuRatio(r1, 'lc-conc', 'raw-conc'), goal: 0.95 },
      ],
      `at start ${loadAtStart}, at end ${os.loadavg()[0]!.toFixed(2)}`,
    );
  }
  out('Rates are acquire+release pairs per second (with the write in between for table 4). "50 concurrent": 50 independent loops, each on its own resource, over one connection per node. "client CPU µs/op": the client process\'s CPU time (user + system, from process.cpuUsage) per completed operation, median of the rounds; it is less sensitive to machine noise than the rates and shows client-side cost. "server CPU µs/op": the same for the redis-server processes the table uses (utime + stime from /proc, 10 ms ticks), summed over them. Ratios are ratios of medians; the per-round ratios compare runs measured next to each other.');
  out();

  const rateRow = (results: Map<string, Measured>, label: string, id: string): string => {
    const s = results.get(`${id}-seq`)!;
    const c = results.get(`${id}-conc`)!;
    const fails = s.failures + c.failures;
    return `| ${label} | ${fmtRate(median(s.rates))} | ${roundsText(s)} | ${fmtRate(median(s.cpuPerOp))} | ${fmtRate(median(s.serverCpuPerOp))} | ${fmtRate(median(c.rates))} | ${roundsText(c)} | ${fmtRate(median(c.cpuPerOp))} | ${fmtRate(median(c.serverCpuPerOp))} |${fails ? ` ${fails} failed ops` : ''}`;
  };
  const ratioRow = (results: Map<string, Measured>, label: string, a: string, b: string, target?: (x: number) => string): string => {
    const s = ratio(results, `${a}-seq`, `${b}-seq`);
    const c = ratio(results, `${a}-conc`, `${b}-conc`);
    return `| ${label} | ${s.text}${target ? ` ${target(s.value)}` : ''} | ${c.text}${target ? ` ${target(c.value)}` : ''} |`;
  };
  const within10 = (x: number): string => (x >= 0.9 ? '(within 10 %)' : '(**more than 10 % behind**)');
  const ahead = (x: number): string => (x > 1 ? '(ahead)' : '(**behind**)');

  out(`### 1. Single node: acquire + release pairs/s`);
  out();
  out(`| configuration | sequential | rounds | client CPU µs/op | server CPU µs/op | ${CONCURRENCY} concurrent | rounds | client CPU µs/op | server CPU µs/op |`);
  out(`|---|---:|---|---:|---:|---:|---|---:|---:|`);
  out(rateRow(r1, 'lockcheck `createRedisLock({ nodes: [redis] })` (2 round trips: acquire+INCR script, release; a token write-back only when a counter is behind)', 'lc'));
  out(rateRow(r1, 'raw ioredis: `SET NX PX` + EVALSHA compare-and-delete (2 round trips, no token)', 'raw'));
  out(rateRow(r1, 'raw ioredis + INCR token in the same script (2 round trips, fencing token)', 'rawincr'));
  out(rateRow(r1, 'redlock 5.0.0-beta.2, `retryCount: 0` (2 round trips, no token)', 'rl'));
  out(rateRow(r1, '*diagnostic, not a lock API:* lockcheck\'s scripts alone via `redisLeaseNode` (acquire+INCR script, release: 2 round trips; no raiseToken, no LeaseLock)', 'lcnode'));
  out();
  out(`| ratio | sequential | ${CONCURRENCY} concurrent |`);
  out(`|---|---|---|`);
  out(ratioRow(r1, 'lockcheck / raw ioredis (targets: ≥ 1.00 sequential, ≥ 0.95 concurrent; see Targets)', 'lc', 'raw', within10));
  out(ratioRow(r1, 'lockcheck / raw ioredis + INCR token (fairer baseline for a fencing lock)', 'lc', 'rawincr', within10));
  out(ratioRow(r1, 'lockcheck / redlock (target: ahead)', 'lc', 'rl', ahead));
  out(ratioRow(r1, 'raw ioredis + INCR / raw ioredis (price of minting a token in the script)', 'rawincr', 'raw'));
  out(ratioRow(r1, '*diagnostic:* lockcheck / its scripts alone (price of raiseToken + LeaseLock)', 'lc', 'lcnode'));
  out(ratioRow(r1, '*diagnostic:* lockcheck scripts alone / raw ioredis + INCR (price of the heavier scripts)', 'lcnode', 'rawincr'));
  out();

  out(`### 2. Redlock on ${NODES} nodes: acquire + release pairs/s`);
  out();
  out(`| configuration | sequential | rounds | client CPU µs/op | server CPU µs/op | ${CONCURRENCY} concurrent | rounds | client CPU µs/op | server CPU µs/op |`);
  out(`|---|---:|---|---:|---:|---:|---|---:|---:|`);
  out(rateRow(r2, `lockcheck \`createRedisLock({ nodes: five })\``, 'lc'));
  out(rateRow(r2, `redlock 5.0.0-beta.2, same ${NODES} connections`, 'rl'));
  out(rateRow(r2, `redlock 5.0.0-beta.2, ${NODES} connections with \`enableAutoPipelining: true\``, 'rlp'));
  out(rateRow(r2, `*floor:* lockcheck's acquire and release scripts on bare sockets (no lease, clock, deadline or library), at the quorum; one write per command, so concurrently unbatched`, 'bare'));
  out();
  const atLeast12 = (x: number): string => (x >= 1.2 ? '(meets ≥ 1.20)' : '(**misses** ≥ 1.20)');
  out(`| ratio | sequential | ${CONCURRENCY} concurrent |`);
  out(`|---|---|---|`);
  out(ratioRow(r2, 'lockcheck / redlock, plain connections (target ≥ 1.20)', 'lc', 'rl', atLeast12));
  out(ratioRow(r2, 'lockcheck / redlock on auto-pipelined connections', 'lc', 'rlp', atLeast12));
  out(ratioRow(r2, '*floor:* lockcheck\'s scripts on bare sockets / redlock (sequential: the most any client of these scripts could show; concurrent: unbatched, not a floor)', 'bare', 'rl', atLeast12));
  out(ratioRow(r2, '*diagnostic:* lockcheck / the floor (sequential: the price of the lease, the clock and ioredis; concurrent: what batching the writes gains)', 'lc', 'bare'));
  out();

  out(`### 3. Acquire latency on ${NODES} nodes, sequential, healthy and with node ${PAUSED_NODE} paused (SIGSTOP)`);
  out();
  out(`At most ${LATENCY_MAX_ACQUISITIONS} acquisitions or ${LATENCY_BUDGET_MS / 1000} s per row (over ${ROUNDS} interleaved rounds), each on a fresh resource; only the acquire is timed (releases run in the background). An acquisition over ${LATENCY_HANG_MS} ms would count as hung and end that row.`);
  out();
  out(`| configuration | condition | acquisitions | p50 ms | p99 ms | max ms | outcomes | ended by |`);
  out(`|---|---|---:|---:|---:|---:|---|---|`);
  for (const [condition, results] of [['healthy', healthy], [`node ${PAUSED_NODE} paused`, paused]] as const) {
    for (const config of latConfigs) {
      const r = results.get(config.id)!;
      const outcomes = [...r.outcomes].map(([k, v]) => `${k} ${v}`).join(', ');
      const ended = r.stoppedBy === 'count' ? `count (${(r.elapsedMs / 1000).toFixed(1)} s)` : r.stoppedBy === 'time' ? `**time budget** (${(r.elapsedMs / 1000).toFixed(1)} s)` : '**hung acquisition**';
      out(`| ${config.label} | ${condition} | ${r.samples.length} | ${fmtMs(percentile(r.samples, 50))} | ${fmtMs(percentile(r.samples, 99))} | ${fmtMs(Math.max(...r.samples))} | ${outcomes} | ${ended} |`);
    }
  }
  out();
  for (const config of latConfigs) {
    const p99 = (m: Map<string, LatencyResult>): number => percentile(m.get(config.id)!.samples, 99);
    const p50 = (m: Map<string, LatencyResult>): number => percentile(m.get(config.id)!.samples, 50);
    const x = p99(paused) / p99(healthy);
    out(`- ${config.label}: paused / healthy p99 **${fmtRatio(x)}**${config.id === 'lc' ? ` (target ≤ 2: ${x <= 2 ? 'meets' : '**misses**'})` : ''}, p50 ${fmtRatio(p50(paused) / p50(healthy))}`);
  }
  out();

  out(`### 4. The cost of fencing, single node: acquire + write + release per second`);
  out();
  out(`| configuration | sequential | rounds | client CPU µs/op | server CPU µs/op | ${CONCURRENCY} concurrent | rounds | client CPU µs/op | server CPU µs/op |`);
  out(`|---|---:|---|---:|---:|---:|---|---:|---:|`);
  out(rateRow(r4, 'lockcheck acquire + fenced write (`redisFencedStore(redis, "strict")`, one script) + release', 'fenced'));
  out(rateRow(r4, 'lockcheck acquire + plain `SET` + release', 'plain'));
  out();
  out(`| ratio | sequential | ${CONCURRENCY} concurrent |`);
  out(`|---|---|---|`);
  out(ratioRow(r4, 'fenced / plain', 'fenced', 'plain'));
  out();
  out(`Rejected fenced writes: ${rejectedWrites} (expected 0: every grant mints a higher token). redlock per-node errors emitted: ${redlockErrors.size === 0 ? 'none' : [...redlockErrors].map(([k, v]) => `${v}× ${k}`).join('; ')}. Connection errors: ${connectionErrors}.`);
  out();

  // Notes that depend on what was measured.
  const lcRaw = ratio(r1, 'lc-seq', 'raw-seq').value;
  const lcRawC = ratio(r1, 'lc-conc', 'raw-conc').value;
  const lcRl = ratio(r1, 'lc-seq', 'rl-seq').value;
  const lcRlC = ratio(r1, 'lc-conc', 'rl-conc').value;
  out(`### Notes`);
  out();
  out(
    `- Targets against raw ioredis (≥ 1.00 sequential, ≥ 0.95 with ${CONCURRENCY} concurrent): sequential ${fmtRatio(lcRaw)}, ${CONCURRENCY} concurrent ${fmtRatio(lcRawC)} — ${lcRaw >= 1 && lcRawC >= 0.95 ? 'met' : `**not met${lcRaw < 1 && lcRawC < 0.95 ? '' : lcRaw < 1 ? ' sequentially' : ' under concurrency'}**`}. ` +
      `How the two differ: lockcheck's single-node acquire runs SET NX PX + INCR + GET in one script (heavier than a bare SET: compare the server CPU columns) and writes the token back only to nodes whose counter is behind (never, with one node), so an acquire+release costs 2 round trips like raw's. A lockcheck script call is one ioredis command and its one promise (the reply converted inside it, \`impl/redis/commands.ts\`), and its node writes the commands a tick sends on one connection in one write (the socket corked until the tick ends, \`impl/redis/tickWrites.ts\`); raw ioredis and redlock make a write system call per command. ` +
      `Under 50 concurrent loops client and servers share the 2 cores, so the CPU per pair (client plus server columns) decides the rate; sequentially each pair waits for its round trips, and the scheduler decides much of the rate.`,
  );
  out(
    `- On ${NODES} nodes lockcheck, like redlock, resolves every round (acquire, extend, release) as soon as its outcome is decided by a quorum, counting the replies that arrive in the same event-loop turn; it writes the token back only to granting nodes whose counter is behind (none while the counters agree); the slow nodes' replies are awaited in the background, bounded by requestTimeoutMs.`,
  );
  out(`- Target "ahead of redlock": single node sequential ${fmtRatio(lcRl)}, ${CONCURRENCY} concurrent ${fmtRatio(lcRlC)}; ${NODES} nodes sequential ${fmtRatio(ratio(r2, 'lc-seq', 'rl-seq').value)}, ${CONCURRENCY} concurrent ${fmtRatio(ratio(r2, 'lc-conc', 'rl-conc').value)}.`);
  out(`- redlock and raw ioredis mint no fencing token; "raw ioredis + INCR" is the fairer baseline for a fencing lock.`);
  out(
    `- Latency with a paused node: both resolve at the quorum, so one paused node costs an acquire nothing. redlock 5.0.0-beta.2 sets no per-node timeout (with a majority paused it would wait forever, and its requests to the paused node queue up unbounded); lockcheck bounds each node's vote by requestTimeoutMs (${LOCKCHECK_REQUEST_TIMEOUT_MS} ms) and tracks the late replies until then.`,
  );
  out(`- The machine has 2 cores shared by the Node client and the redis-server processes; run-to-run noise of 15-25 % is usual, so read the ratios and the per-round spread, not the absolute rates.`);
}

try {
  await main();
} catch (error) {
  process.exitCode = 1;
  log(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
} finally {
  for (const redis of connections) redis.disconnect();
  await stopAllRedisServers();
  log('servers stopped, connections closed');
}
