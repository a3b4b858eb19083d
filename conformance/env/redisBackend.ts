import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import type { Clock } from '../../model/clock.ts';
import { clockAt, read, setDrift, step } from '../../model/clock.ts';
import type { Design, StorePolicy } from '../../model/design.ts';
import { clockMarginMs, describeDesign, driftFactor, nodeCount, persists, restartDelayMs } from '../../model/design.ts';
import type { MonotonicClock } from '../../impl/clock.ts';
import type { LeaseNode } from '../../impl/leaseNode.ts';
import { LeaseLock } from '../../impl/leaseLock.ts';
import { keysFor } from '../../impl/redis/keys.ts';
import { redisLeaseNode } from '../../impl/redis/node.ts';
import { redisFencedStore } from '../../impl/redis/store.ts';
import type { BackendInstance, BackendUnderTest, Environment, LockClient } from '../adapter.ts';
import type { FaultInjectors } from '../faults.ts';
import { offClientClock } from '../libraryClock.ts';
import type { Endpoint, Server } from '../sim/network.ts';
import { SimNetwork } from '../sim/network.ts';
import { VirtualTime } from '../sim/time.ts';
import { FakeClockFile } from './faketime.ts';
import { onInterrupt } from './processes.ts';
import { lookWithoutExpiring } from './redisLook.ts';
import { RedisServer } from './redisServer.ts';
import { checkObject, checkOptionalFunction, knownOptions, refuse } from '../../impl/options.ts';
import { integerIn } from '../options.ts';
import { InvalidInputError } from '../../model/errors.ts';
import { checkDesignOf, checkRedisCluster, checkStorePolicy } from '../kitInput.ts';
import { redactUrl } from './redact.ts';
import { failsTheRun } from './runEnvironment.ts';
import { slotOf } from './runSlot.ts';
import { counted } from '../counted.ts';
import { guardedTempDir } from './tempDir.ts';
import { stallsFail } from './stalls.ts';

/**
 * Redis backends on real redis-server processes. Each lock node runs under
 * libfaketime with a clock file the runner writes: its wall clock is the
 * model's clock for that node, moved only by the runner (advance, step,
 * drift). Clients are in process on virtual time; their links to the nodes
 * go through the same network layer as the in-memory backends (cut, delay,
 * hold while paused), and crashes are real SIGKILLs and restarts.
 *
 * The servers are started once (startRedisCluster) and reset before every
 * run: all up, flushed, clocks back to the start.
 *
 * On servers lockcheck did not start (connectRedisCluster: the user's own),
 * nothing is flushed or restarted: every run works under a key prefix of its
 * own and deletes its keys at the end; the nodes keep real time, so the run
 * is paced to it within REAL_TIME_TOLERANCE_MS, and the faults that need the
 * process or the clock (crash-restart, clock-step, clock-drift) are not
 * available. Every other fault acts in the network layer between the
 * clients and the servers (partition, delay, latency, a slow or black-holed
 * node, a paused client), so it is the same on either.
 */

/** One Redis server (and database) a run connects to. */
export interface RedisTarget {
  /** redis:// or rediss:// URL, with the database number if not 0. */
  readonly url: string;
}

/** Redis servers a run works on: lockcheck's own (startRedisCluster) or the user's (connectRedisCluster). */
export interface RedisCluster {
  /** The lock nodes. */
  readonly nodes: readonly RedisTarget[];
  /** The store: a plain server (no faked clock), or the first node on the user's servers. */
  readonly store: RedisTarget;
  /** 'unknown' on servers lockcheck did not start (crash faults are unavailable there, so it does not matter). */
  readonly persistence: 'none' | 'aof-always' | 'unknown';
  /** Servers lockcheck started: their processes and clocks are the runner's. Absent on the user's servers. */
  readonly local?: {
    /** The lock nodes' processes, then the store's. */
    readonly servers: readonly RedisServer[];
    /** Each lock node's libfaketime clock file, which the runner writes. */
    readonly clockFiles: readonly FakeClockFile[];
    /** The real-time bound on every command of a run (default COMMAND_TIMEOUT_MS); one that runs out stalls the run. */
    readonly commandTimeoutMs?: number;
  };
  /** Stops what was started for the cluster (nothing on the user's servers). */
  stop(): Promise<void>;
}

/**
 * How closely a run follows the real clock of a server it does not drive, in
 * ms. Sized for a busy machine: a process waiting for a CPU sees replies tens
 * of ms late (spec 7.8).
 */
export const REAL_TIME_TOLERANCE_MS = 100;
/**
 * The clock margin a design needs on such servers: a key may expire up to
 * the tolerance early as the server sees time, and the lease must end first.
 */
export const USER_SERVER_CLOCK_MARGIN_MS = REAL_TIME_TOLERANCE_MS + 2;

/** The wall-clock instant a node's clock reads 0 at: far from the machine's own time on purpose. */
const EPOCH_MS = Date.UTC(2030, 0, 1);

const checkClusterKeys = knownOptions('startRedisCluster options', ['nodes', 'persistence', 'commandTimeoutMs']);
const checkRunKeys = knownOptions('startRedisRun options', ['clients', 'lockKey']);
const checkBackendKeys = knownOptions('realRedisBackend options', ['name', 'node']);

/**
 * Starts `nodes` redis-server processes (1..15) as lock nodes, each under
 * libfaketime on a clock the runner writes, with the given persistence, and
 * one plain server for the store. The caller stops them (`stop()`; also on
 * process exit). Rejects with InvalidInputError('invalid-config') for bad
 * options and EnvironmentError when redis-server or libfaketime is missing.
 */
export async function startRedisCluster(options: { readonly nodes: number; readonly persistence: 'none' | 'aof-always'; readonly commandTimeoutMs?: number }): Promise<RedisCluster> {
  checkObject(options, 'startRedisCluster options');
  checkClusterKeys(options);
  integerIn(options, 'nodes', 1, 15, true);
  if (options.persistence !== 'none' && options.persistence !== 'aof-always') refuse('persistence', "'none' or 'aof-always'", options.persistence);
  const { commandTimeoutMs } = options;
  if (commandTimeoutMs !== undefined && !(Number.isInteger(commandTimeoutMs) && commandTimeoutMs > 0)) throw new InvalidInputError('invalid-config', `commandTimeoutMs must be a positive integer, got ${String(commandTimeoutMs)}`);
  // Also when the process is killed: the servers have their own clean-up, the clock files need this one.
  const { dir, remove } = guardedTempDir('lockcheck-clocks-');
  const started: RedisServer[] = [];
  try {
    // Inside the try: a clock file that cannot be written removes the directory too.
    const clockFiles = Array.from({ length: options.nodes }, (_v, i) => {
      const f = new FakeClockFile(dir, `node${i}.clock`);
      f.set(EPOCH_MS);
      return f;
    });
    for (const clockFile of clockFiles) started.push(await RedisServer.start({ persistence: options.persistence, clockFile }));
    const store = await RedisServer.start({ persistence: 'none' });
    started.push(store);
    const servers = started.slice(0, options.nodes);
    return {
      nodes: servers.map(targetOf),
      store: targetOf(store),
      local: { servers, clockFiles, ...(commandTimeoutMs !== undefined ? { commandTimeoutMs } : {}) },
      persistence: options.persistence,
      stop: async () => {
        await Promise.all(started.map((s) => s.stop()));
        remove();
      },
    };
  } catch (e) {
    await Promise.all(started.map((s) => s.stop()));
    remove();
    throw e;
  }
}

function targetOf(server: RedisServer): RedisTarget {
  return { url: server.url };
}

/** Replaces one part of the real backend: how a client talks to one node. Used to build broken variants. */
export type RedisNodeFactory = (redis: Redis, options: { readonly tokenBase: bigint }) => LeaseNode;

/** The run's timing tolerance on this cluster, as Capabilities.expiryToleranceMs wants it. */
export function toleranceOn(cluster: RedisCluster): { readonly expiryToleranceMs?: number } {
  checkRedisCluster(cluster);
  return cluster.local !== undefined ? {} : { expiryToleranceMs: REAL_TIME_TOLERANCE_MS };
}

/** Real commands are bounded in real time too: a hung server fails the call instead of the run. */
const COMMAND_TIMEOUT_MS = 5_000;
const READY_TIMEOUT_MS = 10_000;

/**
 * lockcheck's own Redis lock (createRedisLock's LeaseLock over redisLeaseNode)
 * on `cluster` as a backend for `design` (redis-single or redlock), writing
 * through a store with `store`'s policy; `options.node` swaps how a client
 * talks to a node (broken variants). Throws InvalidInputError for bad
 * arguments, and an Error when the cluster has too few nodes, the wrong
 * persistence, or (the user's servers) the design's clockMarginMs is under
 * USER_SERVER_CLOCK_MARGIN_MS. Stopping the cluster is the caller's.
 */
export function realRedisBackend(
  cluster: RedisCluster,
  design: Design,
  store: StorePolicy,
  options: { readonly name?: string; readonly node?: RedisNodeFactory } = {},
): BackendUnderTest {
  checkBackendKeys(checkObject(options, 'realRedisBackend options'));
  if (options.name !== undefined && typeof options.name !== 'string') refuse('name', 'a string', options.name);
  checkOptionalFunction(options.node, 'node');
  checkRedisCluster(cluster);
  checkDesignOf(design, ['redis-single', 'redlock'], 'realRedisBackend');
  checkStorePolicy(store);
  if (nodeCount(design) > cluster.nodes.length) throw new Error(`${describeDesign(design)} needs ${counted(nodeCount(design), 'node')}; the cluster has ${cluster.nodes.length}`);
  if (cluster.local === undefined && clockMarginMs(design) < USER_SERVER_CLOCK_MARGIN_MS) {
    throw new Error(
      `${describeDesign(design)} on servers with their own clocks needs clockMarginMs >= ${USER_SERVER_CLOCK_MARGIN_MS} (the run follows their time to ${REAL_TIME_TOLERANCE_MS} ms; a smaller margin would report the pacing's own skew as findings)`,
    );
  }
  if (cluster.persistence !== 'unknown' && persists(design) !== (cluster.persistence === 'aof-always')) {
    throw new Error(`${describeDesign(design)} does not match the cluster's persistence (${cluster.persistence})`);
  }
  return {
    name: options.name ?? `redis ${describeDesign(design)} / ${store}`,
    design,
    capabilities: { store, ttl: true, sessionBound: false, reentrant: false, ...toleranceOn(cluster) },
    start: (o) => startInstance(cluster, design, store, options.node ?? ((redis, x) => redisLeaseNode(redis, { tokenBase: x.tokenBase })), o.clients, o.tokenBase, o.requestTimeoutMs),
  };
}

function connect(target: RedisTarget, keyPrefix = '', commandTimeoutMs = COMMAND_TIMEOUT_MS): Redis {
  const redis = new Redis(target.url, {
    keyPrefix,
    // Fail at once while disconnected (the model's node is down or the link cut), never queue.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: commandTimeoutMs,
    connectTimeout: COMMAND_TIMEOUT_MS,
    retryStrategy: () => 20,
    lazyConnect: true,
  });
  // Errors reach the commands that fail; the connection's own reconnect attempts need no report.
  redis.on('error', () => undefined);
  return redis;
}

/** Waits for a connection to be ready, bounded. */
function ready(redis: Redis): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      redis.off('ready', onReady);
      reject(new Error(`redis ${redis.options.host}:${redis.options.port}: not ready within ${READY_TIMEOUT_MS} ms`));
    }, READY_TIMEOUT_MS);
    const onReady = (): void => {
      clearTimeout(timer);
      resolve();
    };
    redis.once('ready', onReady);
    if (redis.status === 'wait') redis.connect().catch(() => undefined);
  });
}

/**
 * One run's environment on the cluster, with no lock client yet: the nodes
 * reset, virtual time, the network layer, each client's clock and its own
 * connections (one to every node, one to the store), and the Environment the
 * runner drives. lockcheck's own backend builds its lock clients on it;
 * adapters of other Redis lock libraries (conformance/adapters/) build theirs.
 * Every real request a client makes must go through
 * `network.call(client, node | 'store', request)`: that is where faults apply
 * and how virtual time waits for real I/O.
 */
export interface RedisRun {
  /** The run's virtual time, which the runner drives. */
  readonly time: VirtualTime;
  /** The network layer every request of the run's clients goes through (`network.call`). */
  readonly network: SimNetwork;
  /** Per client: a connection to each node and one to the store. */
  readonly connections: ReadonlyArray<{ readonly nodes: readonly Redis[]; readonly store: Redis }>;
  /** Per client: its monotonic clock (drift faults apply to it). */
  readonly clocks: readonly MonotonicClock[];
  /** The harness's own connection to each node (outside the network layer). */
  readonly admin: readonly Redis[];
  /** Whether the servers are the user's own (shared): then leave their script cache and other keys alone. */
  readonly shared: boolean;
  /** The run's key prefix on shared servers (every connection of the run applies it: the library never sees it); '' on lockcheck's own. */
  readonly keyPrefix: string;
  /** The Environment the runner drives: time control, the faults the cluster takes, inspect. */
  readonly env: Environment;
  /** Disconnects every connection of the run (and on shared servers deletes the run's keys first). */
  close(): Promise<void>;
}

/** What startRedisRun opens a run for. */
export interface RedisRunOptions {
  /** Simulated clients, 1..16. */
  readonly clients: number;
  /** The key a lock on `resource` lives under (for inspect). Default: lockcheck's own. */
  readonly lockKey?: (resource: string) => string;
}

/**
 * Opens one run on `cluster` for `design` (see RedisRun): on lockcheck's
 * servers resets them (one run at a time per cluster, waiting for the
 * previous one to close), on the user's takes a fresh key prefix. The caller
 * closes the run. Rejects with InvalidInputError for bad arguments, and an
 * Error when the cluster has too few nodes for the design.
 */
export async function startRedisRun(cluster: RedisCluster, design: Design, options: RedisRunOptions): Promise<RedisRun> {
  checkObject(options, 'startRedisRun options');
  checkRunKeys(options);
  integerIn(options, 'clients', 1, 16, true);
  checkOptionalFunction(options.lockKey, 'lockKey');
  checkRedisCluster(cluster);
  checkDesignOf(design, ['redis-single', 'redlock'], 'startRedisRun');
  const lockKey = options.lockKey ?? ((resource: string) => keysFor(resource).lock);
  const n = nodeCount(design);
  if (n > cluster.nodes.length) throw new Error(`${describeDesign(design)} needs ${counted(n, 'node')}; the cluster has ${cluster.nodes.length}`);
  const targets = cluster.nodes.slice(0, n);
  const local = cluster.local === undefined ? null : { servers: cluster.local.servers.slice(0, n), clockFiles: cluster.local.clockFiles, commandTimeoutMs: cluster.local.commandTimeoutMs ?? COMMAND_TIMEOUT_MS };
  // The reset below would wipe any other run open on these servers: one run at a time (runSlot.ts). The user's servers need none: each run has its own prefix.
  // Each cluster lockcheck started has one slot, shared by every design run on it (they share node 0 at least).
  const leave = cluster.local === undefined ? () => undefined : await slotOf(cluster.local, 'redis conformance run').enter();
  try {
    return await openRun(cluster, design, targets, local, lockKey, options.clients, leave);
  } catch (e) {
    leave();
    throw e;
  }
}


async function openRun(
  cluster: RedisCluster,
  design: Design,
  targets: readonly RedisTarget[],
  local: { readonly servers: readonly RedisServer[]; readonly clockFiles: readonly FakeClockFile[]; readonly commandTimeoutMs: number } | null,
  lockKey: (resource: string) => string,
  clients: number,
  leave: () => void,
): Promise<RedisRun> {
  // Reset: every node up, empty, its clock at the start. On shared servers a fresh key prefix is the reset.
  if (local !== null) for (const s of local.servers) if (!s.running) await failsTheRun('the reset (restarting a node a run left down)', () => s.restart());
  const prefix = local === null ? `lockcheck-run:${randomUUID()}:` : '';
  const walls: Clock[] = targets.map(() => clockAt());
  const up = targets.map(() => true);
  const availableFrom = targets.map(() => 0);
  let time: VirtualTime;
  // Until the run's time exists a stall fails the start (failsTheRun below), not a step.
  let stalled = (_what: string): void => undefined;
  const writeClocks = (): void => {
    if (local !== null) targets.forEach((_s, i) => local.clockFiles[i]!.set(EPOCH_MS + read(walls[i]!, time.nowMs())));
  };
  const all: Redis[] = [];
  // On shared servers every key the run's connections touch is recorded: the run deletes exactly those.
  const made = local === null ? new RunKeys([...targets, cluster.store]) : null;
  const open = (target: RedisTarget): Redis => {
    const redis = connect(target, prefix, local?.commandTimeoutMs);
    made?.watch(target, redis);
    // The driver's own timers (its command timeout) stay on the real clock, also inside a library's call on a client's clock.
    const send = redis.sendCommand.bind(redis);
    redis.sendCommand = ((command: Parameters<Redis['sendCommand']>[0], stream?: unknown) => {
      const sentMs = performance.now();
      const reply = offClientClock(() => send(command, stream as never));
      if (local !== null) stallsFail(reply as Promise<unknown>, sentMs, local.commandTimeoutMs, () => `${command.name} to ${redactUrl(target.url)}`, (what) => stalled(what));
      return reply;
    }) as Redis['sendCommand'];
    all.push(redis);
    return redis;
  };
  const stopInterrupt = made === null ? () => false : onInterrupt(() => made.halt());
  const close = async (): Promise<void> => {
    // The run's connections go first, so that no late command of theirs (a reply held by the network layer) makes a key after the delete.
    for (const r of all) r.disconnect();
    try {
      await made?.delete();
    } finally {
      stopInterrupt();
      made?.stop();
      leave();
    }
  };
  try {
    const admin = [...targets.map(open), open(cluster.store)];
    // On lockcheck's servers a reset or connect that a starved machine holds past its bound fails this run only.
    const bounded = local === null ? <T>(_what: string, work: () => Promise<T>) => work() : failsTheRun;
    await bounded('the reset', async () => {
      await Promise.all(admin.map(ready));
      if (local !== null) await Promise.all(admin.map((r) => r.flushall()));
    });
    const endpoints: Server[] = targets.map((_s, i) => ({ reachable: () => up[i]! && time.nowMs() >= availableFrom[i]! }));
    const network: SimNetwork = new SimNetwork(
      (time = new VirtualTime({
        settle: () => network.settled(),
        ...(local !== null ? { onTick: writeClocks } : { realTime: { toleranceMs: REAL_TIME_TOLERANCE_MS } }),
      })),
      (e: Endpoint) => (e === 'store' ? { reachable: () => true } : endpoints[e]!),
    );
    writeClocks();
    stalled = (what) => time.stalled(what);
    const clientClocks: Clock[] = Array.from({ length: clients }, () => clockAt());
    const connections = Array.from({ length: clients }, () => ({ nodes: targets.map(open), store: open(cluster.store) }));
    await bounded("the run's connections", () => Promise.all(connections.flatMap((c) => [...c.nodes, c.store]).map(ready)));
    const clocks = clientClocks.map((_c, client) => time.clockOf(() => clientClocks[client]!));
    const nodeConnections = (i: number): Redis[] => [admin[i]!, ...connections.map((c) => c.nodes[i]!)];
    // Servers lockcheck started: every fault on them. The user's: no process or clock of theirs is the runner's.
    const owned: FaultInjectors =
      local === null
        ? {}
        : {
            clockStep: async (node, deltaMs) => {
              walls[node] = step(walls[node]!, time.nowMs(), deltaMs);
              writeClocks();
            },
            clockDrift: async (target, driftPpm) => {
              if ('node' in target) walls[target.node] = setDrift(walls[target.node]!, time.nowMs(), driftPpm);
              else clientClocks[target.client] = setDrift(clientClocks[target.client]!, time.nowMs(), driftPpm);
            },
            crash: {
              crash: async (node) => {
                up[node] = false;
                await local.servers[node]!.crash();
              },
              restart: async (node) => {
                // A restart that does not come back within its bound (a starved machine) fails this run only: inconclusive, the next run resets.
                await failsTheRun(`the restart of node ${node}`, async () => {
                  await local.servers[node]!.restart();
                  // Every client reconnects before the node counts as up again: the model's restart is instantaneous.
                  await Promise.all(nodeConnections(node).map(ready));
                });
                up[node] = true;
                availableFrom[node] = time.nowMs() + restartDelayMs(design);
              },
            },
          };
    // On the user's servers a plain GET: a pause would hold up their other clients (redisLook.ts).
    const look = local === null ? (r: Redis, key: string) => r.get(key) : lookWithoutExpiring;
    const env: Environment = {
      nowMs: () => time.nowMs(),
      advanceTo: (t) => time.advanceTo(t),
      runUntil: (work, limitMs) => time.runUntil(work, limitMs),
      // No connection loss: a Redis connection holds no lock state, so a new one changes nothing the model sees.
      faults: { ...owned, ...network.faults() },
      ...(local === null ? { realTimeAheadMs: () => time.lagMs() } : {}),
      inspect: async (resource) => {
        const owners = await Promise.all(targets.map((_s, i) => (up[i] ? look(admin[i]!, lockKey(resource)) : Promise.resolve(null))));
        // The look is a server answering too: on a real clock it must be in time to count.
        time.noteServerReply();
        time.assertOnTime();
        return owners;
      },
    };
    return { time, network, connections, clocks, admin: admin.slice(0, targets.length), shared: local === null, keyPrefix: prefix, env, close };
  } catch (e) {
    await close();
    throw e;
  }
}

/** How long a key a run made on a shared server lives should the run die before deleting it. */
export const RUN_KEY_TTL_MS = 24 * 60 * 60 * 1000;
const TTL_FLUSH_MS = 100;
/** Gives a key with no expiry the safety ttl; a key with one (a lease) keeps its own. */
const SAFETY_TTL = "for _, k in ipairs(KEYS) do if redis.call('pttl', k) == -1 then redis.call('pexpire', k, ARGV[1]) end end return 0";

/**
 * The keys a run made on the user's servers, per server: recorded from every
 * command the run's connections send (keys as sent, the run's prefix
 * included), given a safety ttl (RUN_KEY_TTL_MS) within TTL_FLUSH_MS, and
 * deleted at the end with no SCAN of the user's keyspace.
 */
class RunKeys {
  readonly #keys = new Map<RedisTarget, Set<string>>();
  readonly #fresh = new Map<RedisTarget, Set<string>>();
  readonly #admin = new Map<RedisTarget, Redis>();
  readonly #timer: NodeJS.Timeout;
  #halted = false;

  constructor(targets: readonly RedisTarget[]) {
    for (const t of targets) {
      this.#keys.set(t, new Set());
      this.#fresh.set(t, new Set());
      this.#admin.set(t, connect(t));
    }
    this.#timer = setInterval(() => void this.#flushTtls(), TTL_FLUSH_MS);
    this.#timer.unref();
  }

  watch(target: RedisTarget, redis: Redis): void {
    const keys = this.#keys.get(target)!;
    const fresh = this.#fresh.get(target)!;
    const send = redis.sendCommand.bind(redis);
    redis.sendCommand = ((command: Parameters<Redis['sendCommand']>[0], stream?: unknown) => {
      if (this.#halted) {
        command.reject(new Error('the run was interrupted'));
        return command.promise;
      }
      for (const key of command.getKeys()) {
        const k = String(key);
        if (!keys.has(k)) fresh.add(k);
        keys.add(k);
      }
      return send(command, stream as never);
    }) as Redis['sendCommand'];
  }

  async #flushTtls(): Promise<void> {
    await Promise.all(
      [...this.#fresh].map(async ([target, fresh]) => {
        if (fresh.size === 0) return;
        const keys = [...fresh];
        fresh.clear();
        const admin = this.#admin.get(target)!;
        if (!(await ready(admin).then(() => true, () => false))) return;
        await admin.eval(SAFETY_TTL, keys.length, ...keys, String(RUN_KEY_TTL_MS)).catch(() => undefined);
      }),
    );
  }

  /** Deletes the recorded keys (UNLINK, in batches), bounded like every other command. */
  async delete(): Promise<void> {
    await Promise.all(
      [...this.#keys].map(async ([target, keys]) => {
        const admin = this.#admin.get(target)!;
        await ready(admin);
        const all = [...keys];
        for (let i = 0; i < all.length; i += 500) await admin.unlink(...all.slice(i, i + 500));
        for (const k of all) keys.delete(k);
      }),
    );
  }

  /** Interrupted: no command of the run goes out any more, then its keys are deleted. */
  async halt(): Promise<void> {
    this.#halted = true;
    await this.delete();
  }

  stop(): void {
    clearInterval(this.#timer);
    for (const admin of this.#admin.values()) admin.disconnect();
  }
}

async function startInstance(cluster: RedisCluster, design: Design, policy: StorePolicy, makeNode: RedisNodeFactory, clients: number, tokenBase: bigint, requestTimeoutMs?: number): Promise<BackendInstance> {
  const run = await startRedisRun(cluster, design, { clients });
  const network = run.network;
  let seed = 0x1234567;
  const lockClients: LockClient[] = run.connections.map((conn, client) => {
    const nodes: LeaseNode[] = conn.nodes.map((redis, index) => {
      const node = makeNode(redis, { tokenBase });
      return {
        acquire: (r, o, t) => network.call(client, index, () => node.acquire(r, o, t)),
        release: (r, o) => network.call(client, index, () => node.release(r, o)),
        extend: (r, o, t) => network.call(client, index, () => node.extend(r, o, t)),
        raiseToken: (r, t) => network.call(client, index, () => node.raiseToken(r, t)),
      };
    });
    // A paused client runs no timers until it resumes (then they fire before its replies), as a stopped process: what the timing faults need.
    const clock = network.pausable(client, run.clocks[client]!);
    const random = (): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed / 2 ** 32;
    };
    const lock = new LeaseLock({ nodes, clock, driftFactor: driftFactor(design), clockMarginMs: clockMarginMs(design), random, ...(requestTimeoutMs !== undefined ? { requestTimeoutMs } : {}) });
    const fenced = redisFencedStore(conn.store, policy);
    return {
      acquire: (resource, o) => lock.acquire(resource, o),
      extend: (lease, ttlMs) => lock.extend(lease, ttlMs),
      release: (lease) => lock.release(lease),
      store: { write: (r, t, v) => network.call(client, 'store', () => fenced.write(r, t, v)), read: (r) => network.call(client, 'store', () => fenced.read(r)) },
      clock,
    };
  });
  return {
    clients: lockClients,
    // lockcheck's own client takes the timing faults too (its clock holds timers while paused, it takes the run's request timeout),
    // on any servers: they act on the replies in the run's network layer, never on a server's process or clock.
    env: { ...run.env, faults: { ...run.env.faults, ...network.timingFaults() } },
    close: () => run.close(),
  };
}
