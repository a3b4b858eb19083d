/**
 * Adapters for Redlock libraries from npm, checked against lockcheck's
 * redlock model on real redis-server processes: `redlock` (5.0.0-beta.2)
 * here, and its maintained fork `@sesamecare-oss/redlock` in
 * sesamecareRedlock.ts, both through one factory (redlockLibraryBackend).
 *
 * The library runs unchanged. What the adapter adds:
 * - Links. Each client's Redlock gets its own ioredis connections to the five
 *   nodes, wrapped in a Proxy: the methods the library sends its per-node
 *   requests with (`evalsha` and `eval` for redlock 5; the custom commands
 *   `acquireLock`, `extendLock`, `releaseLock` for the fork) go through
 *   `network.call(client, node, ...)`, so partitions, delays, pauses and
 *   crashed nodes apply to them and virtual time waits for their real I/O.
 * - Retries. Redlock runs with retryCount 0 and the adapter retries
 *   (`retries`, `retryDelayMs`) on the client's clock: the library's own
 *   retries sleep on a real setTimeout, which virtual time cannot drive.
 * - Time. The library reads Date.now() for its deadlines. While one of a
 *   client's calls runs, Date.now() reads that client's wall clock (see
 *   libraryClock.ts), the in-process counterpart of the libfaketime clocks of
 *   the nodes. Its deadline `lock.expiration` is a wall-clock instant; the
 *   lease reports it on the client's monotonic clock, as the adapter API
 *   requires: validUntilMs = clock.now() + (lock.expiration - Date.now()).
 * - Results. A Lock is a grant (token 0n: Redlock has no fencing tokens, so
 *   the runner compares outcomes without them, and the store is unfenced).
 *   An ExecutionError is a denial: 'no-quorum' when fewer than a quorum of
 *   nodes answered at all (votes for, plus votes against that are a
 *   ResourceLockedError), else 'held'.
 *
 * The environment is lockcheck's own Redis environment (startRedisRun), with
 * the same faults; inspect() reads the library's keys, so OWN-1 is checked
 * white-box. Every run starts with the nodes' script caches flushed, as fresh
 * servers would have them.
 */
import type { Redis } from 'ioredis';
// @ts-expect-error TS7016: redlock's "exports" map hides its dist/index.d.ts (see bench/redlockTyped.ts); RedlockLibrary below types what is used.
import RedlockV5, { ExecutionError as ExecutionErrorV5, ResourceLockedError as ResourceLockedErrorV5 } from 'redlock';
import { designs, describeDesign, nodeCount } from '../../model/design.ts';
import { sleep } from '../../impl/clock.ts';
import { LeaseHandle } from '../../impl/lease.ts';
import { checkTtl } from '../../model/errors.ts';
import { checkAcquireInput } from '../input.ts';
import type { Lease } from '../../impl/lease.ts';
import type { AcquireResult, ExtendResult } from '../../impl/leaseLock.ts';
import { redisFencedStore } from '../../impl/redis/store.ts';
import type { BackendInstance, BackendUnderTest, ConcurrentClient, LockClient } from '../adapter.ts';
import { concurrentRedis } from '../stress/client.ts';
import type { RedisCluster } from '../env/redisBackend.ts';
import { startRedisRun, toleranceOn } from '../env/redisBackend.ts';
import type { SimNetwork } from '../sim/network.ts';
import { onClientClock, onLibraryClockInstance } from '../libraryClock.ts';
import { redlockContract } from './contracts.ts';

/** Per-attempt statistics, as both libraries record them. */
export interface RedlockStats {
  readonly quorumSize: number;
  readonly votesFor: ReadonlySet<unknown>;
  readonly votesAgainst: ReadonlyMap<unknown, Error>;
}

export interface RedlockLockLike {
  readonly value: string;
  /** Wall-clock ms (Date.now()) until which the library considers the lock valid. */
  readonly expiration: number;
  release(): Promise<unknown>;
  extend(duration: number): Promise<RedlockLockLike>;
}

export interface RedlockLike {
  acquire(resources: string[], duration: number): Promise<RedlockLockLike>;
  on(event: 'error', listener: (error: unknown) => void): unknown;
}

export interface RedlockSettingsLike {
  readonly driftFactor: number;
  readonly retryCount: number;
  readonly retryDelay: number;
  readonly retryJitter: number;
  readonly automaticExtensionThreshold: number;
}

/** A Redlock library: its Redlock class, its two error classes, and the ioredis methods it sends requests with. */
export interface RedlockLibrary {
  readonly name: string;
  readonly Redlock: new (clients: Iterable<Redis>, settings: RedlockSettingsLike) => RedlockLike;
  readonly ExecutionError: abstract new (...args: never[]) => Error & { readonly attempts: ReadonlyArray<Promise<RedlockStats>> };
  readonly ResourceLockedError: abstract new (...args: never[]) => Error;
  /** Every per-node request goes through one of these ioredis methods. */
  readonly commands: readonly string[];
}

/** redlock@5.0.0-beta.2: `_attemptOperationOnClient` calls `evalsha`, and `eval` after a NOSCRIPT reply. */
export const REDLOCK_V5: RedlockLibrary = {
  name: 'redlock@5.0.0-beta.2',
  Redlock: RedlockV5,
  ExecutionError: ExecutionErrorV5,
  ResourceLockedError: ResourceLockedErrorV5,
  commands: ['evalsha', 'eval'],
};

export interface RedlockAdapterOptions {
  readonly name?: string;
  /** The drift factor, given to the library and to the model alike. Default 0.01 (the libraries' default). */
  readonly driftFactor?: number;
  /**
   * What the library's Date.now() reads: the client's wall clock (default; see
   * libraryClock.ts), or the machine's clock. With 'system' the deadlines it
   * reports miss every delay fault and include a real ms or two of I/O that
   * varies from run to run: for experiments, not for a deterministic check.
   */
  readonly dateNow?: 'client-clock' | 'system';
}

/** Where the libraries keep the lock on a resource (the key is the resource name they are given). */
export const redlockKey = (resource: string): string => `locks:${resource}`;

export function redlockLibraryBackend(library: RedlockLibrary, cluster: RedisCluster, options: RedlockAdapterOptions = {}): BackendUnderTest {
  const design = designs.redlock({ nodes: 5, ...(options.driftFactor !== undefined ? { driftFactor: options.driftFactor } : {}) });
  if (nodeCount(design) > cluster.nodes.length) throw new Error(`${describeDesign(design)} needs ${nodeCount(design)} nodes; the cluster has ${cluster.nodes.length}`);
  if (cluster.persistence === 'aof-always') throw new Error(`${describeDesign(design)} does not match the cluster's persistence (${cluster.persistence})`);
  return {
    name: options.name ?? `${library.name} ${describeDesign(design)}${options.driftFactor !== undefined ? ` driftFactor ${options.driftFactor}` : ''}`,
    design,
    capabilities: { store: 'unfenced', ttl: true, sessionBound: false, reentrant: false, tokens: false, ...toleranceOn(cluster) },
    contract: redlockContract(options.driftFactor ?? 0.01),
    options: { driftFactor: options.driftFactor ?? 0.01, dateNow: options.dateNow ?? 'client-clock', retryCount: 0 },
    start: ({ clients }) => startInstance(library, cluster, design, clients, options.dateNow ?? 'client-clock'),
    concurrent: redlockConcurrent(library, options.driftFactor ?? 0.01),
  };
}

export { redlockContract } from './contracts.ts';

/** A failed acquire as a denial: 'no-quorum' when fewer than a quorum of nodes answered at all, else 'held'. Rethrows anything but an ExecutionError. */
async function denial(library: RedlockLibrary, error: unknown): Promise<AcquireResult> {
  if (!(error instanceof library.ExecutionError)) throw error;
  // The first (only) attempt's votes; the promise settles once every node has answered or failed.
  const stats = await error.attempts[0]!;
  const answered = stats.votesFor.size + [...stats.votesAgainst.values()].filter((e) => e instanceof library.ResourceLockedError).length;
  return { kind: 'denied', reason: answered < stats.quorumSize ? 'no-quorum' : 'held' };
}

/**
 * A Redlock library in a concurrent run (`lockcheck stress`), used as its
 * README says: one Redlock over five ioredis connections (each command
 * bounded by a 2 s timeout, as a user's connections should be), an 'error'
 * listener (the library emits every node's failure, a plain denial included,
 * and an EventEmitter without one throws), no retries of its own (the
 * workload backs off and tries again), real time. The lease's deadline is
 * `lock.expiration` moved onto the shared monotonic clock.
 */
export function redlockConcurrent(library: RedlockLibrary, driftFactor = 0.01): ConcurrentClient {
  return {
    servers: { kind: 'redis', nodes: 5 },
    lockKey: redlockKey,
    tokens: false,
    async connect(servers, clock) {
      const nodes = await Promise.all(servers.redis.map(concurrentRedis));
      const redlock = new library.Redlock(nodes, { driftFactor, retryCount: 0, retryDelay: 0, retryJitter: 0, automaticExtensionThreshold: 500 });
      redlock.on('error', () => undefined);
      const locks = new Map<Lease, { handle: LeaseHandle; lock: RedlockLockLike }>();
      return {
        async acquire(resource, ttlMs) {
          try {
            const lock = await redlock.acquire([redlockKey(resource)], ttlMs);
            const handle = new LeaseHandle(resource, lock.value, 0n, clock.now() + (lock.expiration - Date.now()), clock);
            locks.set(handle, { handle, lock });
            return { kind: 'granted', lease: handle };
          } catch (error) {
            return denial(library, error);
          }
        },
        async release(lease) {
          const held = locks.get(lease);
          if (held === undefined) return;
          locks.delete(lease);
          held.handle.lose('released');
          await held.lock.release();
        },
        async close() {
          for (const n of nodes) n.disconnect();
        },
      };
    },
  };
}

export const REDLOCK_V5_CONCURRENT: ConcurrentClient = redlockConcurrent(REDLOCK_V5);

/** redlock@5.0.0-beta.2 over 5 nodes. */
export function redlockBackend(cluster: RedisCluster, options: RedlockAdapterOptions = {}): BackendUnderTest {
  return redlockLibraryBackend(REDLOCK_V5, cluster, options);
}

/** The connection as the library sees it: its request methods go through the client's link to `node`. */
export function linked(redis: Redis, commands: ReadonlySet<string>, network: SimNetwork, client: number, node: number): Redis {
  return new Proxy(redis, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof property !== 'string' || !commands.has(property) || typeof value !== 'function') return value;
      return (...args: unknown[]) => network.call(client, node, () => (value as (...a: unknown[]) => Promise<unknown>).apply(target, args));
    },
  });
}

async function startInstance(
  library: RedlockLibrary,
  cluster: RedisCluster,
  design: ReturnType<typeof designs.redlock>,
  clients: number,
  dateNow: 'client-clock' | 'system',
): Promise<BackendInstance> {
  const run = await startRedisRun(cluster, design, { clients, lockKey: redlockKey });
  return onLibraryClockInstance(run, async () => {
    // Fresh servers have no script cached: every run starts the same way (redlock 5 then pays a NOSCRIPT round trip).
    // The user's own servers keep their script cache: there the first run alone pays it.
    if (!run.shared) await Promise.all(run.admin.map((r) => r.script('FLUSH')));
    const commands = new Set(library.commands);
    const driftFactor = design.kind === 'redlock' ? design.driftFactor : 0.01;
    const lockClients: LockClient[] = run.connections.map((conn, client) => {
      const clock = run.clocks[client]!;
      // Runs library code with Date.now() on this client's wall clock.
      const onWall = <T>(fn: () => T): T => (dateNow === 'client-clock' ? onClientClock(clock, fn) : fn());
      const redlock = new library.Redlock(
        conn.nodes.map((redis, node) => linked(redis, commands, run.network, client, node)),
        // No retries inside the library: they would sleep on a real setTimeout, outside virtual time.
        { driftFactor, retryCount: 0, retryDelay: 0, retryJitter: 0, automaticExtensionThreshold: 500 },
      );
      const locks = new Map<Lease, { handle: LeaseHandle; lock: RedlockLockLike }>();
      /** The library's wall-clock deadline, on the client's monotonic clock. Call on the wall clock. */
      const deadline = (lock: RedlockLockLike): number => clock.now() + (lock.expiration - Date.now());

      const attempt = (resource: string, ttlMs: number): Promise<AcquireResult> =>
        onWall(async (): Promise<AcquireResult> => {
          try {
            const lock = await redlock.acquire([redlockKey(resource)], ttlMs);
            const handle = new LeaseHandle(resource, lock.value, 0n, deadline(lock), clock);
            locks.set(handle, { handle, lock });
            return { kind: 'granted', lease: handle };
          } catch (error) {
            return denial(library, error);
          }
        });

      return {
        clock,
        store: (() => {
          const fenced = redisFencedStore(conn.store, 'unfenced');
          return { write: (r, t, v) => run.network.call(client, 'store', () => fenced.write(r, t, v)), read: (r) => run.network.call(client, 'store', () => fenced.read(r)) };
        })(),
        async acquire(resource, { ttlMs, retries = 0, retryDelayMs = 0 }) {
          checkAcquireInput(resource, { ttlMs, retries }, true);
          for (let tries = 0; ; tries++) {
            const result = await attempt(resource, ttlMs);
            if (result.kind !== 'denied' || tries >= retries) return result;
            await sleep(clock, retryDelayMs);
          }
        },
        extend: (lease, ttlMs) =>
          onWall(async (): Promise<ExtendResult> => {
            checkTtl(ttlMs);
            const held = locks.get(lease);
            if (held === undefined) return { kind: 'not-extended', reason: 'expired' };
            try {
              const lock = await held.lock.extend(ttlMs);
              const validUntilMs = deadline(lock);
              held.lock = lock;
              held.handle.extendTo(validUntilMs);
              return { kind: 'extended', validUntilMs };
            } catch (error) {
              if (!(error instanceof library.ExecutionError)) throw error;
              // No attempt at all: the library found the lock expired by its own clock before sending anything.
              return { kind: 'not-extended', reason: error.attempts.length === 0 ? 'expired' : 'no-quorum' };
            }
          }),
        async release(lease) {
          const held = locks.get(lease);
          if (held === undefined) return;
          locks.delete(lease);
          held.handle.lose('released');
          // Rejects when no quorum released; the keys then expire by their ttl, as the model has it.
          await onWall(() => held.lock.release()).catch(() => undefined);
        },
      };
    });
    return lockClients;
  }, dateNow === 'client-clock');
}
