import { Redis } from 'ioredis';
import type { Clock } from '../../model/clock.ts';
import { clockAt, read, setDrift, step } from '../../model/clock.ts';
import type { Design, StorePolicy } from '../../model/design.ts';
import { clockMarginMs, describeDesign, driftFactor } from '../../model/design.ts';
import type { LeaseNode } from '../../impl/leaseNode.ts';
import { LeaseLock } from '../../impl/leaseLock.ts';
import { keysFor } from '../../impl/redis/keys.ts';
import { redisLeaseNode } from '../../impl/redis/node.ts';
import { redisFencedStore } from '../../impl/redis/store.ts';
import type { BackendInstance, BackendUnderTest, Environment, LockClient } from '../adapter.ts';
import { WAIT_FOR_ONE } from '../failover.ts';
import type { Endpoint } from '../sim/network.ts';
import { SimNetwork } from '../sim/network.ts';
import { VirtualTime } from '../sim/time.ts';
import { FakeClockFile } from './faketime.ts';
import { lookWithoutExpiring } from './redisLook.ts';
import { RedisReplicated } from './redisReplicated.ts';
import { EnvironmentError, RedisServer } from './redisServer.ts';
import { RunEnvironmentError } from './runEnvironment.ts';
import { inSlot, slotOf } from './runSlot.ts';
import { guardedTempDir } from './tempDir.ts';

/**
 * redis-replicated (spec 7.9) as a backend of the conformance runs: a
 * primary, its replica and Sentinel started by the environment, both data
 * servers on one faked wall clock (the model's node clock), clients on
 * virtual time reaching the primary through Sentinel.
 *
 * Replication is told to the model: with WAIT 1 every reply comes after the
 * replica acknowledged, as the model has it; without WAIT the replica is held
 * (its link dropped, kept from syncing again) for the whole run, which is the model's replica
 * that no `replicate` step reached. The failover fault is the model's crash
 * of node 0: the primary is killed and Sentinel promotes the replica; the
 * restart is the promoted replica serving, with the old primary rejoined as
 * its replica (held again without WAIT).
 */
/** The wall-clock instant the node's clock reads 0 at: far from the machine's own time on purpose. */
const EPOCH_MS = Date.UTC(2031, 0, 1);
const COMMAND_TIMEOUT_MS = 5_000;
const READY_TIMEOUT_MS = 10_000;

/**
 * The servers of the replicated rows, started once and shared by their runs:
 * a store server and a replicated cluster, replaced by a fresh one after a
 * run that failed over (the roles, the Sentinel's epoch, a rejoined replica).
 */
export class ReplicatedServers {
  #cluster: RedisReplicated | null = null;
  #usedUp = false;

  private constructor(
    readonly clockFile: FakeClockFile,
    readonly store: RedisServer,
    private readonly removeDir: () => void,
    private readonly timeoutMs: number | undefined,
  ) {}

  /** `timeoutMs`: bound on each wait of a cluster's start-up, reset and failover (RedisReplicated's default: 20 s). */
  static async start(options: { readonly timeoutMs?: number } = {}): Promise<ReplicatedServers> {
    // Also when the process is killed: the servers have their own clean-up, the clock file needs this one.
    const { dir, remove } = guardedTempDir('lockcheck-replicated-');
    try {
      // Inside the try: a clock file that cannot be written removes the directory too.
      const clockFile = new FakeClockFile(dir, 'node0.clock');
      clockFile.set(EPOCH_MS);
      return new ReplicatedServers(clockFile, await RedisServer.start({ persistence: 'none' }), remove, options.timeoutMs);
    } catch (e) {
      remove();
      throw e;
    }
  }

  /**
   * A cluster reset for a run: empty, the clock at the start, the replica in
   * sync (and held without WAIT). A cluster that failed over, or that a run
   * left degraded (a reset step that failed, a fault that did not complete),
   * is replaced by a fresh one; a fresh one that cannot be started or reset
   * fails this run only (RunEnvironmentError). Every wait is bounded.
   */
  async forRun(wait: boolean): Promise<RedisReplicated> {
    try {
      return await this.#reset(wait);
    } catch (first) {
      if (isMachineError(first)) throw first;
      await this.#discard();
      try {
        return await this.#reset(wait);
      } catch (e) {
        await this.#discard();
        if (isMachineError(e)) throw e;
        throw new RunEnvironmentError(`redis-replicated: no clean primary, replica and Sentinel for the run (${firstLine(first)}; then, on a fresh one: ${firstLine(e)})`);
      }
    }
  }

  async #reset(wait: boolean): Promise<RedisReplicated> {
    if (this.#usedUp) await this.#discard();
    this.clockFile.set(EPOCH_MS);
    this.#cluster ??= await RedisReplicated.start({ clockFile: this.clockFile, ...(this.timeoutMs !== undefined ? { timeoutMs: this.timeoutMs } : {}) });
    const cluster = this.#cluster;
    // Any step failing leaves the cluster to be replaced (the catch in forRun); from here it is reset.
    this.#usedUp = true;
    if (!wait && cluster.replicationHeld && (await cluster.replicaKeys()) === 0) {
      // Still held since a reset that left it empty: the replica is the model's initial one already. The primary is emptied
      // and the hold kept (releasing it costs up to a second: a replica retries its primary once a second).
      await cluster.primary.command(['FLUSHALL']);
      this.#usedUp = false;
      return cluster;
    }
    await cluster.releaseReplication();
    await cluster.primary.command(['FLUSHALL']);
    await cluster.releaseReplication();
    if (!wait) await cluster.holdReplication();
    this.#usedUp = false;
    return cluster;
  }

  async #discard(): Promise<void> {
    const cluster = this.#cluster;
    this.#cluster = null;
    this.#usedUp = false;
    await cluster?.stop();
  }

  /** The cluster of the run in progress (null between a discarded one and the next run). */
  get cluster(): RedisReplicated | null {
    return this.#cluster;
  }

  /** The run failed over, or a fault left the cluster in doubt: the next run starts on a fresh cluster. */
  failedOver(): void {
    this.#usedUp = true;
  }

  async stop(): Promise<void> {
    await Promise.all([this.#cluster?.stop(), this.store.stop()]);
    this.removeDir();
  }
}

export function realReplicatedBackend(servers: ReplicatedServers, design: Design, store: StorePolicy, options: { readonly name?: string } = {}): BackendUnderTest {
  if (design.kind !== 'redis-replicated') throw new Error(`realReplicatedBackend runs redis-replicated, not ${design.kind}`);
  return {
    name: options.name ?? `redis ${describeDesign(design)} / ${store}`,
    design,
    capabilities: { store, ttl: true, sessionBound: false, reentrant: false },
    // A run resets the servers (FLUSHALL, a fresh cluster after a failover) and fails them over: one run at a time (runSlot.ts).
    start: (o) => inSlot(slotOf(servers, 'redis-replicated conformance run'), () => startInstance(servers, design, store, o.clients, o.tokenBase, o.requestTimeoutMs)),
  };
}

/** Waits for a connection to be ready, bounded. */
function ready(redis: Redis): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      redis.off('ready', onReady);
      reject(new Error(`redis-replicated: a connection was not ready within ${READY_TIMEOUT_MS} ms`));
    }, READY_TIMEOUT_MS);
    const onReady = (): void => {
      clearTimeout(timer);
      resolve();
    };
    redis.once('ready', onReady);
  });
}

async function startInstance(servers: ReplicatedServers, design: Extract<Design, { kind: 'redis-replicated' }>, policy: StorePolicy, clients: number, tokenBase: bigint, requestTimeoutMs: number | undefined): Promise<BackendInstance> {
  const cluster = await servers.forRun(design.wait);
  const all: Redis[] = [];
  const close = async (): Promise<void> => {
    for (const r of all) r.disconnect();
  };
  try {
    const primary = async (): Promise<Redis> => {
      const r = await cluster.connect(COMMAND_TIMEOUT_MS);
      all.push(r);
      return r;
    };
    const storeConnection = async (): Promise<Redis> => {
      const r = new Redis(servers.store.url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: COMMAND_TIMEOUT_MS, connectTimeout: COMMAND_TIMEOUT_MS, lazyConnect: true });
      r.on('error', () => undefined);
      all.push(r);
      await r.connect();
      return r;
    };
    const admin = await primary();
    const storeAdmin = await storeConnection();
    await storeAdmin.flushall();
    let up = true;
    let wall: Clock = clockAt();
    const time: VirtualTime = new VirtualTime({ settle: () => network.settled(), onTick: (now) => servers.clockFile.set(EPOCH_MS + read(wall, now)) });
    const network: SimNetwork = new SimNetwork(time, (e: Endpoint) => (e === 'store' ? { reachable: () => true } : { reachable: () => up }));
    const clientClocks: Clock[] = Array.from({ length: clients }, () => clockAt());
    const nodeConnections: Redis[] = [];
    let seed = 0x2545f491;
    const random = (): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed / 2 ** 32;
    };
    const lockClients: LockClient[] = [];
    for (let client = 0; client < clients; client++) {
      const redis = await primary();
      nodeConnections.push(redis);
      const node = redisLeaseNode(redis, { tokenBase, ...(design.wait ? { replicas: WAIT_FOR_ONE } : {}) });
      const linked: LeaseNode = {
        acquire: (r, o, t) => network.call(client, 0, () => node.acquire(r, o, t)),
        release: (r, o) => network.call(client, 0, () => node.release(r, o)),
        extend: (r, o, t) => network.call(client, 0, () => node.extend(r, o, t)),
        raiseToken: (r, t) => network.call(client, 0, () => node.raiseToken(r, t)),
      };
      // A paused client runs no timers until it resumes, as a stopped process: what the timing faults need (as on lockcheck's other Redis backends).
      const clock = network.pausable(client, time.clockOf(() => clientClocks[client]!));
      const lock = new LeaseLock({ nodes: [linked], clock, driftFactor: driftFactor(design), clockMarginMs: clockMarginMs(design), random, ...(requestTimeoutMs !== undefined ? { requestTimeoutMs } : {}) });
      const fenced = redisFencedStore(await storeConnection(), policy);
      lockClients.push({
        acquire: (resource, o) => lock.acquire(resource, o),
        extend: (lease, ttlMs) => lock.extend(lease, ttlMs),
        release: (lease) => lock.release(lease),
        store: { write: (r, t, v) => network.call(client, 'store', () => fenced.write(r, t, v)), read: (r) => network.call(client, 'store', () => fenced.read(r)) },
        clock,
      });
    }
    const env: Environment = {
      nowMs: () => time.nowMs(),
      advanceTo: (t) => time.advanceTo(t),
      runUntil: (work, limitMs) => time.runUntil(work, limitMs),
      faults: {
        clockStep: async (_node, deltaMs) => {
          // One wall clock for primary and replica: the model's node clock, whichever of them serves.
          wall = step(wall, time.nowMs(), deltaMs);
          servers.clockFile.set(EPOCH_MS + read(wall, time.nowMs()));
        },
        clockDrift: async (target, driftPpm) => {
          if ('client' in target) clientClocks[target.client] = setDrift(clientClocks[target.client]!, time.nowMs(), driftPpm);
          else wall = setDrift(wall, time.nowMs(), driftPpm);
        },
        crash: {
          crash: async () => {
            // The failover: the primary is killed, Sentinel promotes the replica with what replication had delivered.
            up = false;
            servers.failedOver();
            await inRun('the failover', () => cluster.failover());
          },
          restart: async () => {
            await inRun('the restart after the failover', async () => {
              // The promoted replica serves; the old primary rejoins as its replica (held again without WAIT).
              await cluster.rejoin();
              if (!design.wait) await cluster.holdReplication();
              // Every connection follows Sentinel to the new primary before the node counts as up: the model's restart is instantaneous.
              await Promise.all([admin, ...nodeConnections].map(ready));
            });
            up = true;
          },
        },
        ...network.faults(),
        // Late replies and a slow or black-holed primary act in the network layer in front of it, as on lockcheck's other Redis backends.
        ...network.timingFaults(),
        // A Redis connection holds no lock state: a new one changes nothing the model sees.
        killConnection: async () => undefined,
      },
      inspect: async (resource) => {
        if (!up) return [null];
        await ready(admin);
        return [await lookWithoutExpiring(admin, keysFor(resource).lock)];
      },
    };
    return { clients: lockClients, env, close };
  } catch (e) {
    await close();
    // A connection through Sentinel that never came: the next run gets a fresh cluster.
    servers.failedOver();
    if (e instanceof EnvironmentError && !isMachineError(e) && !(e instanceof RunEnvironmentError)) throw new RunEnvironmentError(`redis-replicated: ${firstLine(e)}`);
    throw e;
  }
}

/** A fault on the cluster that fails (a server, Sentinel, a bounded wait) fails this run only: RunEnvironmentError. */
async function inRun(what: string, work: () => Promise<void>): Promise<void> {
  try {
    await work();
  } catch (e) {
    // A programming error stays one; whatever the servers did fails the run.
    if (e instanceof RunEnvironmentError || e instanceof TypeError || e instanceof ReferenceError) throw e;
    throw new RunEnvironmentError(`redis-replicated: ${what} failed: ${firstLine(e)}`);
  }
}

/** The machine lacks something (an install fixes it): no fresh cluster would help. */
function isMachineError(e: unknown): boolean {
  return e instanceof EnvironmentError && e.fix !== null;
}

function firstLine(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).split('\n')[0]!;
}
