/**
 * The Redlock adapter shared by redlock 5 (redlock.ts), its fork
 * @sesamecare-oss/redlock (sesamecareRedlock.ts) and, for the key,
 * redlock 4 (redlock4.ts): one factory over a `RedlockLibrary` the caller
 * passes in. It imports no library itself, so an audit loads only the
 * package of its own row (an installed lockcheck has none of them).
 * How the adapter reads the library: see redlock.ts.
 */
import type { Redis } from 'ioredis';
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

/**
 * A failed acquire as a denial (an ExecutionError; anything else is rethrown).
 * The reason is not read: the library's vote counts (`attempts`) settle only
 * once every node has answered, after the call (redlockContract, denialReasons).
 */
function denial(library: RedlockLibrary, error: unknown): AcquireResult {
  if (!(error instanceof library.ExecutionError)) throw error;
  return { kind: 'denied', reason: 'held' };
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
