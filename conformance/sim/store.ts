import type { StorePolicy } from '../../model/design.ts';
import { checkResource, checkToken, checkValue } from '../../model/errors.ts';
import { passes } from '../../model/store.ts';
import type { FencedStore, ReadResult, WriteResult } from '../../impl/fencedStore.ts';
import type { SimNetwork, Server } from './network.ts';
import { checkPolicy } from '../../impl/options.ts';

/** An in-memory store server: each write judged by the policy in one atomic step. */
export class SimStore implements Server {
  readonly #cells = new Map<string, { value: string; token: bigint; highest: bigint }>();

  constructor(readonly policy: StorePolicy) {
    checkPolicy(policy, ['unfenced', 'strict', 'monotonic', 'transactional']);
  }

  /** Always: the store is never down (faults reach it through the network's links). */
  reachable(): boolean {
    return true;
  }

  /**
   * Judges and applies one write atomically: accepted, or rejected with the
   * highest token accepted. Throws InvalidInputError, changing nothing, for
   * what the real stores refuse: a bad resource, token or value (a value
   * that is no string, or holds NUL or a lone surrogate, was kept as it came;
   * the servers' size bounds on a value are not simulated).
   */
  write(resource: string, token: bigint, value: string): WriteResult {
    checkResource(resource);
    checkToken(token);
    checkValue(value);
    const cell = this.#cells.get(resource);
    if (cell !== undefined && !this.passes(token, cell.highest)) return { kind: 'rejected', highest: cell.highest };
    this.put(resource, token, value);
    return { kind: 'accepted' };
  }

  /** The cell's value and the token that wrote it (both null: never written). */
  read(resource: string): ReadResult {
    checkResource(resource);
    const cell = this.#cells.get(resource);
    return { value: cell?.value ?? null, token: cell?.token ?? null };
  }

  /** The highest token accepted: the GET half of a non-atomic check-then-write. */
  highest(resource: string): bigint | null {
    checkResource(resource);
    return this.#cells.get(resource)?.highest ?? null;
  }

  /** An unconditional SET: the write half of a non-atomic check-then-write. */
  put(resource: string, token: bigint, value: string): void {
    checkResource(resource);
    checkToken(token);
    checkValue(value);
    const highest = this.#cells.get(resource)?.highest;
    this.#cells.set(resource, { value, token, highest: highest === undefined || token > highest ? token : highest });
  }

  /** The store's policy (the model's rule). Overridable only to build broken fixtures. */
  protected passes(token: bigint, highest: bigint): boolean {
    return passes(this.policy, token, highest);
  }
}

/** A client's FencedStore over `store`: every read and write goes through the network as that client's call (faults apply). */
export function storeOver(network: SimNetwork, client: number, store: SimStore): FencedStore {
  return {
    write: (resource, token, value) => network.call(client, 'store', () => store.write(resource, token, value)),
    read: (resource) => network.call(client, 'store', () => store.read(resource)),
  };
}
