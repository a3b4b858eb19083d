import type { MonotonicClock } from '../../impl/clock.ts';
import { withTimeout } from '../../impl/errors.ts';
import type { Lease } from '../../impl/lease.ts';
import type { AcquireOptions, AcquireResult, ExtendResult } from '../../impl/leaseLock.ts';

/** A lease lock's three operations. */
export interface LockOperations {
  acquire(resource: string, options: AcquireOptions): Promise<AcquireResult>;
  extend(lease: Lease, ttlMs: number): Promise<ExtendResult>;
  release(lease: Lease): Promise<unknown>;
}

/**
 * The bound a consensus lock's client keeps on each request in lockstep, as
 * the model keeps it (spec 7.6.1): the run's request timeout where one is
 * drawn (the timing faults), else the operation's own, its ttl for an
 * acquire or an extend (the ttl the lease was acquired with: a renewal lasts
 * that) and 1 s for a release. The lock nodes' own bound (2 s) is no help
 * under a black hole: the simulated network swallows the request before it
 * reaches the node.
 */
export class RequestBound {
  #ms = RELEASE_BOUND_MS;
  readonly #acquired = new WeakMap<Lease, number>();

  constructor(
    private readonly clock: MonotonicClock,
    private readonly requestTimeoutMs: number | undefined,
  ) {}

  /** The client's lock operations, each setting the bound of the requests it makes. */
  operations(lock: LockOperations): LockOperations {
    return {
      acquire: async (resource, o) => {
        this.#ms = this.requestTimeoutMs ?? o.ttlMs;
        const result = await lock.acquire(resource, o);
        if (result.kind === 'granted') this.#acquired.set(result.lease, o.ttlMs);
        return result;
      },
      extend: (lease, ttlMs) => {
        this.#ms = this.requestTimeoutMs ?? this.#acquired.get(lease) ?? ttlMs;
        return lock.extend(lease, ttlMs);
      },
      release: (lease) => {
        this.#ms = this.requestTimeoutMs ?? RELEASE_BOUND_MS;
        return lock.release(lease);
      },
    };
  }

  /** `work`, given up with a TimeoutError once the current operation's bound passes on the client's clock. */
  bounded<T>(what: string, work: () => Promise<T>): Promise<T> {
    return withTimeout(this.clock, this.#ms, what, work());
  }
}

/** A release waits this long for its replies when the run draws no request timeout (the model's). */
export const RELEASE_BOUND_MS = 1000;
