import type { Lease, LeaseHandle } from './lease.ts';

const PRUNE_MIN = 64;

/**
 * The leases a lock tracks, by lease: held, or lost but not yet forgotten.
 * Lost ones (expired, never released) are forgotten once the table has
 * doubled, so it cannot grow without bound (at most about twice the held
 * ones). A forgotten entry is still found (get, release) for as long as its
 * lease object is reachable: a lease lost on the client's clock may still
 * hold its key, session or contender on the servers, and its release must
 * remove them as it would have before the table was pruned. Once the
 * application drops the lease, the entry goes with it (a WeakMap).
 * `handleOf` finds an entry's lease, the key it is kept under.
 */
export class HeldLeases<T> {
  readonly #entries = new Map<Lease, T>();
  /** Lost entries the prune forgot: no longer counted, still released when asked. */
  readonly #forgotten = new WeakMap<Lease, T>();
  /** Leases whose release was answered: nothing of them is left on the servers, and no grant brings it back. */
  readonly #released = new WeakSet<Lease>();
  #pruneAt = PRUNE_MIN;
  readonly #handleOf: (entry: T) => LeaseHandle;

  constructor(handleOf: (entry: T) => LeaseHandle) {
    this.#handleOf = handleOf;
  }

  get(lease: Lease): T | undefined {
    return this.#entries.get(lease) ?? this.#forgotten.get(lease);
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The lease's entry, forgotten, and its signal fired ('released' first, then forgotten); undefined for a lease not tracked. */
  release(lease: Lease): T | undefined {
    const entry = this.get(lease);
    if (entry === undefined) return undefined;
    this.#handleOf(entry).lose('released');
    this.#entries.delete(lease);
    this.#forgotten.delete(lease);
    return entry;
  }

  /** A released lease whose release was answered: a later release of it has nothing left to ask. */
  answered(lease: Lease): void {
    this.#released.add(lease);
  }

  /** Whether a release of the lease here was answered. */
  released(lease: Lease): boolean {
    return this.#released.has(lease);
  }

  /**
   * A released entry whose release got no answer: kept findable (not
   * counted) while its lease is reachable, so that the next release of the
   * lease tries again instead of answering that nothing is left.
   */
  unanswered(entry: T): void {
    this.#forgotten.set(this.#handleOf(entry), entry);
  }

  /** Tracks a new lease, first forgetting the lost ones if the table has doubled. */
  add(entry: T): void {
    if (this.#entries.size >= this.#pruneAt) {
      for (const [key, e] of this.#entries) {
        if (!this.#handleOf(e).lost) continue;
        this.#entries.delete(key);
        this.#forgotten.set(key, e);
      }
      this.#pruneAt = Math.max(PRUNE_MIN, 2 * this.#entries.size);
    }
    this.#entries.set(this.#handleOf(entry), entry);
  }
}
