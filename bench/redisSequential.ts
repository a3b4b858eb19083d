/**
 * Where a sequential Redis lock pair's time goes: wall time, client CPU and
 * server CPU (the redis-server processes' utime + stime from /proc) per
 * acquire + release, for lockcheck and its peers, in one process, the
 * configurations interleaved (order rotated every round); median and best
 * of the rounds. Starts its own redis-server processes and stops them.
 *
 *   npx tsx bench/redisSequential.ts [--seconds N] [--rounds N] [--nodes 1|5] [--before DIR]
 *
 * --before DIR: also the lock client of another tree, for before/after in one
 * process: DIR inside this checkout (so that it finds node_modules), made by
 * `mkdir .before && git archive <commit> impl model | tar -x -C .before`.
 * --only I --count N: only configuration I, N pairs (for strace -c -f).
 *
 * One node: lockcheck; raw ioredis (SET NX PX + EVALSHA compare-and-delete);
 * raw ioredis sending lockcheck's acquire script instead of the SET (the
 * server's Lua cost, isolated); lockcheck's node without the lock client.
 * Five nodes: lockcheck against redlock 5.0.0-beta.2, and two floors: bare ioredis calls at
 * the quorum (SET NX PX, then compare-and-delete), nothing else; and lockcheck's own acquire
 * and release scripts written on bare sockets (bench/bareResp.ts) at the quorum: what the
 * lock's scripts cost with no client library at all. And, not a floor of this protocol, the same
 * scripts sent to only a majority of the nodes: what contacting the rest only on a denial would buy.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import { RedisServer, stopAllRedisServers } from '../conformance/env/redisServer.ts';
import { createRedisLock, redisLeaseNode } from '../impl/redis/index.ts';
import { ACQUIRE, RELEASE } from '../impl/redis/scripts.ts';
import { atQuorum, bareScripts } from './bareResp.ts';
import Redlock from './redlockTyped.ts';
import { fmtRate, log, median, out } from './common.ts';

/** The --before tree's lock client and acquire script, when given. */
async function beforeTree(): Promise<{ createRedisLock: typeof createRedisLock; ACQUIRE: string } | undefined> {
  const i = process.argv.indexOf('--before');
  if (i < 0) return undefined;
  const dir = resolve(process.argv[i + 1] ?? '');
  const index = (await import(pathToFileURL(`${dir}/impl/redis/index.ts`).href)) as { createRedisLock: typeof createRedisLock };
  const scripts = (await import(pathToFileURL(`${dir}/impl/redis/scripts.ts`).href)) as { ACQUIRE: string };
  return { createRedisLock: index.createRedisLock, ACQUIRE: scripts.ACQUIRE };
}

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : fallback;
  if (!Number.isFinite(v) || v <= 0) throw new Error(`--${name} must be a positive number`);
  return v;
}

const SECONDS = arg('seconds', 1);
const ROUNDS = arg('rounds', 5);
const NODES = arg('nodes', 1);
const TTL_MS = 10_000;

/** CPU of processes in µs: the scheduler's run time in ns (/proc/<pid>/schedstat), exact where utime + stime are counted in ticks of 10 ms. */
function processCpuUs(pids: readonly number[]): number {
  let ns = 0;
  for (const pid of pids) ns += Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
  return ns / 1000;
}

type Op = () => Promise<boolean>;
interface Sample {
  readonly wallUs: number;
  readonly clientUs: number;
  /** Of clientUs, the kernel's share (system calls: the sockets' writes and reads). */
  readonly clientSysUs: number;
  readonly serverUs: number;
}

/** One acquire + release of lockcheck's lock on `resource`; false when not granted. */
function lockPair(lock: ReturnType<typeof createRedisLock>, resource: string): Op {
  return async () => {
    const r = await lock.acquire(resource, { ttlMs: TTL_MS });
    if (r.kind !== 'granted') return false;
    await lock.release(r.lease);
    return true;
  };
}

async function run(op: Op, ms: number, pids: readonly number[]): Promise<Sample> {
  let ok = 0;
  const server = processCpuUs(pids);
  const cpu = process.cpuUsage();
  const start = performance.now();
  const deadline = start + ms;
  while (performance.now() < deadline) if (await op()) ok++;
  const wall = (performance.now() - start) * 1000;
  const used = process.cpuUsage(cpu);
  return { wallUs: wall / ok, clientUs: (used.user + used.system) / ok, clientSysUs: used.system / ok, serverUs: (processCpuUs(pids) - server) / ok };
}

const RELEASE_LUA = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;
interface Raw {
  seqRelease(key: string, value: string): Promise<number>;
  seqAcquire(...keysAndArgs: Array<string | number>): Promise<string | null>;
  seqAcquireBefore(...keysAndArgs: Array<string | number>): Promise<string | null>;
}

async function main(): Promise<void> {
  const servers: RedisServer[] = [];
  try {
    for (let i = 0; i < NODES; i++) servers.push(await RedisServer.start({ persistence: 'none' }));
    const pids = servers.map((s) => s.pid);
    const connect = async (s: RedisServer): Promise<Redis> => {
      const r = new Redis({ ...s.connection, lazyConnect: true });
      r.on('error', () => undefined);
      await r.connect();
      return r;
    };
    const configs: Array<{ label: string; op: Op }> = [];
    const old = await beforeTree();
    const addBefore = async (): Promise<void> => {
      if (old === undefined) return;
      const before = old.createRedisLock({ nodes: await Promise.all(servers.map(connect)) });
      configs.push({
        label: 'lockcheck before',
        op: lockPair(before, 'seq-before'),
      });
    };
    if (NODES === 1) {
      await addBefore();
      const lock = createRedisLock({ nodes: [await connect(servers[0]!)] });
      configs.push({
        label: 'lockcheck',
        op: lockPair(lock, 'seq-lc'),
      });
      const raw = (await connect(servers[0]!)) as Redis & Raw;
      raw.defineCommand('seqRelease', { numberOfKeys: 1, lua: RELEASE_LUA });
      // Since session h13 the script takes a third key (the `minted` marker) and the first token; a tree before that, two keys.
      const withMarker = (lua: string): boolean => lua.includes('KEYS[3]');
      const acquireArgs = (lua: string, key: string, v: string): Array<string | number> => (withMarker(lua) ? [key, `${key}-t`, `${key}-m`, v, TTL_MS, '0', '1'] : [key, `${key}-t`, v, TTL_MS, '0']);
      raw.defineCommand('seqAcquire', { numberOfKeys: withMarker(ACQUIRE) ? 3 : 2, lua: ACQUIRE });
      if (old !== undefined) raw.defineCommand('seqAcquireBefore', { numberOfKeys: withMarker(old.ACQUIRE) ? 3 : 2, lua: old.ACQUIRE });
      configs.push({
        label: 'raw ioredis',
        op: async () => {
          const v = randomUUID();
          if ((await raw.set('seq-raw', v, 'PX', TTL_MS, 'NX')) !== 'OK') return false;
          return (await raw.seqRelease('seq-raw', v)) === 1;
        },
      });
      configs.push({
        label: 'raw ioredis, acquire script',
        op: async () => {
          const v = randomUUID();
          if ((await raw.seqAcquire(...acquireArgs(ACQUIRE, 'seq-rawlua', v))) === null) return false;
          return (await raw.seqRelease('seq-rawlua', v)) === 1;
        },
      });
      if (old !== undefined)
        configs.push({
          label: 'raw ioredis, acquire script before',
          op: async () => {
            const v = randomUUID();
            if ((await raw.seqAcquireBefore(...acquireArgs(old.ACQUIRE, 'seq-rawlua-b', v))) === null) return false;
            return (await raw.seqRelease('seq-rawlua-b', v)) === 1;
          },
        });
      const node = redisLeaseNode(await connect(servers[0]!));
      configs.push({
        label: 'lockcheck node alone',
        op: async () => {
          const v = randomUUID();
          if ((await node.acquire('seq-node', v, TTL_MS)) === null) return false;
          return node.release('seq-node', v);
        },
      });
    } else {
      await addBefore();
      const lock = createRedisLock({ nodes: await Promise.all(servers.map(connect)) });
      configs.push({
        label: 'lockcheck',
        op: lockPair(lock, 'seq-lc'),
      });
      // The protocol's floor in Node: the same ten calls (SET NX PX, then the compare-and-delete script, on every node), each
      // round resolved at the third reply, nothing else: no owner beyond a UUID, no token, no lease, no deadline.
      const bare = (await Promise.all(servers.map(connect))) as Array<Redis & Raw>;
      for (const r of bare) r.defineCommand('seqRelease', { numberOfKeys: 1, lua: RELEASE_LUA });
      configs.push({
        label: 'floor: bare ioredis at the quorum',
        op: async () => {
          const v = randomUUID();
          const ok = await atQuorum(bare.map((r) => r.set('seq-floor', v, 'PX', TTL_MS, 'NX')), 3, (reply) => reply === 'OK');
          const released = await atQuorum(bare.map((r) => r.seqRelease('seq-floor', v)), 3, (reply) => reply === 1);
          return ok && released;
        },
      });
      // The second floor: lockcheck's own scripts (token minted, owner compared) on bare sockets, at the quorum.
      const bareFloor = await bareScripts(servers.map((s) => s.connection), ACQUIRE, RELEASE, TTL_MS);
      configs.push({
        label: "floor: lockcheck's scripts on bare sockets at the quorum",
        op: () => bareFloor.pair('seq-bare'),
      });
      // Not a floor of lockcheck's protocol: the same scripts sent to a majority only (3 of 5, rotating). What a
      // Redlock that contacted the other nodes only on a denial would cost while all grant (docs/redis.md says why
      // lockcheck does not: a lease held on three nodes is lost to one restart without persistence, not three).
      const quorumOnly = await bareScripts(servers.map((s) => s.connection), ACQUIRE, RELEASE, TTL_MS, 'quorum');
      configs.push({
        label: "lockcheck's scripts on bare sockets, sent to a quorum only",
        op: () => quorumOnly.pair('seq-bare-q'),
      });
      const redlock = new Redlock(await Promise.all(servers.map(connect)), { retryCount: 0 });
      redlock.on('error', () => undefined);
      configs.push({
        label: 'redlock',
        op: async () => {
          try {
            const l = await redlock.acquire(['seq-rl'], TTL_MS);
            await l.release();
            return true;
          } catch {
            return false;
          }
        },
      });
    }
    const only = process.argv.indexOf('--only');
    if (only >= 0) {
      // One configuration for a fixed count of pairs, nothing else: for counting system calls (strace -c -f).
      const c = configs[Number(process.argv[only + 1])]!;
      const count = arg('count', 10_000);
      for (let i = 0; i < 1000; i++) await c.op();
      process.stderr.write('MARK start\n');
      const t0 = performance.now();
      for (let i = 0; i < count; i++) await c.op();
      out(`${c.label}: ${count} pairs, ${(((performance.now() - t0) * 1000) / count).toFixed(1)} µs per pair`);
      process.stderr.write('MARK end\n');
      await stopAllRedisServers();
      process.exit(0);
    }
    const samples = new Map(configs.map((c) => [c.label, [] as Sample[]]));
    for (let round = 0; round < ROUNDS; round++) {
      for (let k = 0; k < configs.length; k++) {
        const c = configs[(k + round) % configs.length]!;
        await run(c.op, 200, pids);
        const s = await run(c.op, SECONDS * 1000, pids);
        samples.get(c.label)!.push(s);
        log(`round ${round + 1}: ${c.label}: wall ${s.wallUs.toFixed(1)} client ${s.clientUs.toFixed(1)} server ${s.serverUs.toFixed(1)} µs/pair`);
      }
    }
    out(`${NODES} node(s), sequential, ${ROUNDS} rounds of ${SECONDS} s, load ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
    out();
    out('| per pair, µs (median / best) | wall | pairs/s | client CPU | of it system | server CPU |');
    out('|---|---:|---:|---:|---:|---:|');
    const best = (xs: number[]): number => Math.min(...xs);
    for (const [label, ss] of samples) {
      const w = ss.map((s) => s.wallUs);
      const c = ss.map((s) => s.clientUs);
      const v = ss.map((s) => s.serverUs);
      const k = ss.map((s) => s.clientSysUs);
      out(`| ${label} | ${median(w).toFixed(1)} / ${best(w).toFixed(1)} | ${fmtRate(1e6 / median(w))} | ${median(c).toFixed(1)} / ${best(c).toFixed(1)} | ${median(k).toFixed(1)} | ${median(v).toFixed(1)} / ${best(v).toFixed(1)} |`);
    }
  } finally {
    await stopAllRedisServers();
  }
  process.exit(0);
}

await main();
