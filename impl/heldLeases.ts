import type { Lease, LeaseHandle } from './lease.ts';

const PRUNE_MIN = 64;

/**
 * The leases a lock tracks, by lease: held, or lost but not yet forgotten.
 * Lost ones (expired, never released) are forgotten once the table has
 * doubled, so it cannot grow without bound (at most about twice the held
 * ones). `handleOf` finds an entry's lease, the key it is kept under.
 */
export class HeldLeases<T> {
  readonly #entries = new Map<Lease, T>();
  #pruneAt = PRUNE_MIN;
  readonly #handleOf: (entry: T) => LeaseHandle;

  constructor(handleOf: (entry: T) => LeaseHandle) {
    this.#handleOf = handleOf;
  }

  get(lease: Lease): T | undefined {
    return this.#entries.get(lease);
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The lease's entry, forgotten, and its signal fired ('released' first, then forgotten); undefined for a lease not tracked. */
  release(lease: Lease): T | undefined {
    const entry = this.#entries.get(lease);
    if (entry === undefined) return undefined;
    this.#handleOf(entry).lose('released');
    this.#entries.delete(lease);
    return entry;
  }

  /** Tracks a new lease, first forgetting the lost ones if the table has doubled. */
  add(entry: T): void {
    if (this.#entries.size >= this.#pruneAt) {
      for (const [key, e] of this.#entries) if (this.#handleOf(e).lost) this.#entries.delete(key);
      this.#pruneAt = Math.max(PRUNE_MIN, 2 * this.#entries.size);
    }
    this.#entries.set(this.#handleOf(entry), entry);
  }
}
