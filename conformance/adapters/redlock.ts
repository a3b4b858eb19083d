/**
 * Adapters for Redlock libraries from npm, checked against lockcheck's
 * redlock model on real redis-server processes: `redlock` (5.0.0-beta.2)
 * here, and its maintained fork `@sesamecare-oss/redlock` in
 * sesamecareRedlock.ts, both through one factory (redlockLibraryBackend) on
 * the adapter kit (redisLibraryBackend, conformance/kit.ts).
 *
 * The library runs unchanged. The kit gives each client its own ioredis
 * connections to the five nodes, every command of which goes through the
 * run's faults (partitions, delays, late replies, slow or black-holed nodes,
 * pauses, crashed nodes), and runs the library's calls on the client's
 * clocks: Date.now() reads the client's wall clock, the in-process
 * counterpart of the nodes' libfaketime clocks. What the adapter adds:
 * - Retries. Redlock runs with retryCount 0 and the adapter retries
 *   (`retries`, `retryDelayMs`) on the client's clock itself, so that one
 *   attempt is one vote count it can read (ExecutionError.attempts[0]).
 * - Deadlines. The library's `lock.expiration` is a wall-clock instant; the
 *   lease reports it on the client's monotonic clock, as the adapter API
 *   requires: validUntilMs = clock.now() + (lock.expiration - Date.now()).
 * - Results. A Lock is a grant (token 0n: Redlock has no fencing tokens, so
 *   the runner compares outcomes without them, and the store is unfenced).
 *   An ExecutionError is a denial: 'no-quorum' when fewer than a quorum of
 *   nodes answered at all (votes for, plus votes against that are a
 *   ResourceLockedError), else 'held'.
 *
 * lockKey lets the runner read the library's keys, so OWN-1 is checked
 * white-box. On lockcheck's own servers every run starts with the nodes'
 * script caches flushed (the kit does), as fresh servers would have them.
 */
import type { Redis } from 'ioredis';
// @ts-expect-error TS7016: redlock's "exports" map hides its dist/index.d.ts (see bench/redlockTyped.ts); RedlockLibrary below types what is used.
import RedlockV5, { ExecutionError as ExecutionErrorV5, ResourceLockedError as ResourceLockedErrorV5 } from 'redlock';
import { designs, describeDesign } from '../../model/design.ts';
import type { MonotonicClock } from '../../impl/clock.ts';
import { LeaseHandle } from '../../impl/lease.ts';
import { checkTtl } from '../../model/errors.ts';
import { checkAcquireInput } from '../input.ts';
import type { AcquireResult, ExtendResult } from '../../impl/leaseLock.ts';
import type { BackendUnderTest, ConcurrentClient } from '../adapter.ts';
import { concurrentRedis, redisLibraryBackend } from '../kit.ts';
import type { LockCalls, RedisServerChoice } from '../kit.ts';
import { redlockContract } from './contracts.ts';
import { LibraryLocks } from './libraryLocks.ts';
import { retryOnClock } from './retryOnClock.ts';

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
}

/** Where the libraries keep the lock on a resource (the key is the resource name they are given). */
export const redlockKey = (resource: string): string => `locks:${resource}`;

/** A Redlock library over 5 nodes on the kit's servers: lockcheck's own, the user's (`--redis`), or a running cluster (`choice.cluster`). */
export function redlockLibraryBackend(library: RedlockLibrary, choice: RedisServerChoice = {}, options: RedlockAdapterOptions = {}): BackendUnderTest {
  const driftFactor = options.driftFactor ?? 0.01;
  const design = designs.redlock({ nodes: 5, ...(options.driftFactor !== undefined ? { driftFactor } : {}) });
  const backend = redisLibraryBackend(
    {
      name: options.name ?? `${library.name} ${describeDesign(design)}${options.driftFactor !== undefined ? ` driftFactor ${driftFactor}` : ''}`,
      design,
      contract: redlockContract(driftFactor),
      options: { driftFactor, retryCount: 0 },
      lockKey: redlockKey,
      client: ({ nodes, clock }) => redlockCalls(library, nodes, clock, driftFactor),
    },
    choice,
  );
  return { ...backend, concurrent: redlockConcurrent(library, driftFactor) };
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
      const locks = new LibraryLocks<RedlockLockLike>();
      return {
        async acquire(resource, ttlMs) {
          try {
            const lock = await redlock.acquire([redlockKey(resource)], ttlMs);
            return locks.granted(new LeaseHandle(resource, lock.value, 0n, clock.now() + (lock.expiration - Date.now()), clock), lock);
          } catch (error) {
            return denial(library, error);
          }
        },
        async release(lease) {
          const lock = locks.end(lease, 'released');
          if (lock === undefined) return;
          await lock.release();
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
export function redlockBackend(choice: RedisServerChoice = {}, options: RedlockAdapterOptions = {}): BackendUnderTest {
  return redlockLibraryBackend(REDLOCK_V5, choice, options);
}

/** `lockcheck run --backend ./conformance/adapters/redlock.ts [--redis …]` (five nodes); `lockcheck stress` takes `concurrent`. */
export default (choice: RedisServerChoice = {}): BackendUnderTest => redlockBackend(choice);
export const concurrent = REDLOCK_V5_CONCURRENT;

/**
 * One client's calls through the library (the kit runs them on the client's
 * clocks, so Date.now() inside them is the client's wall clock).
 */
function redlockCalls(library: RedlockLibrary, nodes: readonly Redis[], clock: MonotonicClock, driftFactor: number): LockCalls {
  // No retries inside the library: one attempt is one vote count the adapter reads; it retries on the client's clock itself.
  const redlock = new library.Redlock(nodes, { driftFactor, retryCount: 0, retryDelay: 0, retryJitter: 0, automaticExtensionThreshold: 500 });
  // The library emits every node's failure, a plain denial included; an EventEmitter without a listener throws.
  redlock.on('error', () => undefined);
  const locks = new LibraryLocks<RedlockLockLike>();
  /** The library's wall-clock deadline, on the client's monotonic clock. */
  const deadline = (lock: RedlockLockLike): number => clock.now() + (lock.expiration - Date.now());

  const attempt = async (resource: string, ttlMs: number): Promise<AcquireResult> => {
    try {
      const lock = await redlock.acquire([redlockKey(resource)], ttlMs);
      return locks.granted(new LeaseHandle(resource, lock.value, 0n, deadline(lock), clock), lock);
    } catch (error) {
      return denial(library, error);
    }
  };

  return {
    async acquire(resource, { ttlMs, retries = 0, retryDelayMs = 0 }) {
      checkAcquireInput(resource, { ttlMs, retries }, true);
      return retryOnClock(clock, retries, retryDelayMs, () => attempt(resource, ttlMs));
    },
    async extend(lease, ttlMs): Promise<ExtendResult> {
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
    },
    async release(lease) {
      const lock = locks.end(lease, 'released');
      if (lock === undefined) return;
      // Rejects when no quorum released; the keys then expire by their ttl, as the model has it.
      await lock.release().catch(() => undefined);
    },
  };
}
