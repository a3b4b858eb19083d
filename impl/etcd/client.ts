import { noop } from 'cockatiel';
import { Etcd3 } from 'etcd3';

export interface EtcdClientOptions {
  /** Client URLs of the members, e.g. http://127.0.0.1:2379. */
  readonly hosts: readonly string[];
  /** Bound on establishing a connection, ms. Default 2000. */
  readonly dialTimeoutMs?: number;
}

/**
 * An etcd3 client for the lock: it does not retry a failed call by itself
 * (etcd3 retries three times by default, and a retried put-if-absent whose
 * first reply was lost would read as held) and trips no circuit breaker, so
 * every call the lock makes is exactly one round trip under its own timeout.
 */
export function etcdClient(options: EtcdClientOptions): Etcd3 {
  if (options.hosts.length === 0) throw new RangeError('etcdClient: at least one host');
  return new Etcd3({
    hosts: [...options.hosts],
    dialTimeout: options.dialTimeoutMs ?? 2000,
    faultHandling: { global: noop, host: () => noop },
  });
}
