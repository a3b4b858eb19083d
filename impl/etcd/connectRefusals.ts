import type { Etcd3 } from 'etcd3';

/** UNAVAILABLE from gRPC's resolver: a host name that does not resolve (as PostgreSQL's ENOTFOUND). */
export const NAME_NOT_RESOLVED = /Name resolution failed for target/;

/**
 * UNAVAILABLE whose last connection error is the TLS handshake refusing the
 * configuration: a member's certificate the CA does not verify, or issued for
 * another name; a client certificate the member refuses; TLS spoken to a
 * plaintext port. gRPC keeps retrying these, and no retry can succeed.
 */
export const TLS_REFUSED =
  /unable to verify the first certificate|unable to get (?:local )?issuer certificate|self[- ]signed certificate|certificate has expired|certificate is not yet valid|ERR_TLS_CERT_ALTNAME_INVALID|alert (?:bad certificate|unknown ca|certificate required|certificate unknown|certificate expired|handshake failure)|wrong version number/;

/** gRPC's UNAVAILABLE for a call that found no connection to go out on (the TLS refusal is then its last connection error). */
const NO_CONNECTION = /No connection established/;

/**
 * A call refused before anything of it was sent, by its host's configuration:
 * the host's name does not resolve, or the TLS handshake refused the
 * configuration. Either is the same for every call to that host.
 */
export function refusedAtConnect(error: unknown): boolean {
  return error instanceof Error && (NAME_NOT_RESOLVED.test(error.message) || (NO_CONNECTION.test(error.message) && TLS_REFUSED.test(error.message)));
}

/**
 * Which hosts of one etcdClient refused their last call at connect
 * (refusedAtConnect), by the order etcd3 made their policies in (the order of
 * `hosts`); a host is known to connect again once a call to it ends
 * otherwise. Such a refusal is a configuration mistake of the client only
 * when every host refuses (as one host that resolves is enough for the
 * ZooKeeper client): with one member's name gone from DNS, or one member's
 * certificate not what the client trusts, every call etcd3 sent to it was
 * thrown as ConnectionConfigError ('unknown-host', 'tls') although the other
 * members served.
 */
export class HostRefusals {
  readonly #refused: boolean[] = [];

  /** A new host, at the next index. */
  add(): number {
    this.#refused.push(false);
    return this.#refused.length - 1;
  }

  /** A call to `host` ended: with `error`, or (undefined) answered. */
  ended(host: number, error?: unknown): void {
    this.#refused[host] = refusedAtConnect(error);
  }

  get hosts(): number {
    return this.#refused.length;
  }

  /** Every host refused its last call at connect. */
  get everyHost(): boolean {
    return this.#refused.length > 0 && this.#refused.every(Boolean);
  }
}

const byClient = new WeakMap<Etcd3, HostRefusals>();

/** The refusals `client`'s hosts met (etcdClient's clients); undefined for a client built otherwise. */
export function hostRefusalsOf(client: Etcd3): HostRefusals | undefined {
  return byClient.get(client);
}

export function trackHostRefusals(client: Etcd3, refusals: HostRefusals): void {
  byClient.set(client, refusals);
}
