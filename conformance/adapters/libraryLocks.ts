import type { Lease, LeaseHandle } from '../../impl/lease.ts';
import type { AcquireResult } from '../../impl/leaseLock.ts';

/** A library's lock objects, each under the lease the adapter handed out for it (the library's own object is no Lease). */
export class LibraryLocks<L> {
  readonly #held = new Map<Lease, { readonly handle: LeaseHandle; lock: L }>();

  /** Keeps `lock` under its new lease: the grant. */
  granted(handle: LeaseHandle, lock: L): AcquireResult {
    this.#held.set(handle, { handle, lock });
    return { kind: 'granted', lease: handle };
  }

  /** The lease's entry (its lock may be replaced, as an extend's new one), or undefined for one not held. */
  get(lease: Lease): { readonly handle: LeaseHandle; lock: L } | undefined {
    return this.#held.get(lease);
  }

  /** Forgets the lease and fires its signal (`reason`); its lock, or undefined for a lease not held. */
  end(lease: Lease, reason: 'released' | 'expired'): L | undefined {
    const held = this.#held.get(lease);
    if (held === undefined) return undefined;
    this.#held.delete(lease);
    held.handle.lose(reason);
    return held.lock;
  }

  /** The locks still held. */
  *locks(): IterableIterator<L> {
    for (const held of this.#held.values()) yield held.lock;
  }
}
