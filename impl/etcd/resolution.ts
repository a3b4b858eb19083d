import type { Etcd3 } from 'etcd3';

/** UNAVAILABLE from gRPC's resolver: a host name that does not resolve (as PostgreSQL's ENOTFOUND). */
export const NAME_NOT_RESOLVED = /Name resolution failed for target/;

/** Whether `error` is a call that failed because its host's name did not resolve: nothing of it was sent. */
export function unresolvedName(error: unknown): boolean {
  return error instanceof Error && NAME_NOT_RESOLVED.test(error.message);
}

/**
 * Which hosts of one etcdClient failed name resolution at their last call,
 * by the order etcd3 made their policies in (the order of `hosts`). A host
 * is known to resolve again once a call to it ends otherwise. A name that
 * does not resolve is a configuration mistake only when it is every host's
 * (as one host that resolves is enough for the ZooKeeper client): with one
 * member's name gone from DNS, a call etcd3 sent there was thrown as
 * ConnectionConfigError('unknown-host') although the others served.
 */
export class HostNames {
  readonly #unresolved: boolean[] = [];

  /** A new host, at the next index. */
  add(): number {
    this.#unresolved.push(false);
    return this.#unresolved.length - 1;
  }

  /** A call to `host` ended: with `error`, or (undefined) answered. */
  ended(host: number, error?: unknown): void {
    this.#unresolved[host] = unresolvedName(error);
  }

  get hosts(): number {
    return this.#unresolved.length;
  }

  /** Every host failed name resolution at its last call. */
  get noneResolves(): boolean {
    return this.#unresolved.length > 0 && this.#unresolved.every(Boolean);
  }
}

const byClient = new WeakMap<Etcd3, HostNames>();

/** The tracker of `client`'s host names (etcdClient's clients); undefined for a client built otherwise. */
export function hostNamesOf(client: Etcd3): HostNames | undefined {
  return byClient.get(client);
}

export function trackHostNames(client: Etcd3, names: HostNames): void {
  byClient.set(client, names);
}
