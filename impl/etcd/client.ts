import { noop } from 'cockatiel';
import { Etcd3 } from 'etcd3';
import { InvalidInputError } from '../../model/errors.ts';
import { checkObject, checkString, checkTimeoutMs, shown } from '../options.ts';

export interface EtcdClientOptions {
  /** Client URLs of the members, e.g. http://127.0.0.1:2379. */
  readonly hosts: readonly string[];
  /** Bound on establishing a connection, ms. Default 2000. */
  readonly dialTimeoutMs?: number;
  /**
   * etcd user and password, for a cluster with auth enabled (etcd3's `auth`:
   * the client exchanges them for a token and sends it with every call).
   */
  readonly auth?: { readonly username: string; readonly password: string };
  /**
   * TLS: the CA (PEM) that signed the members' certificates, and the
   * client's own certificate and key (PEM) for members that require client
   * certificates (etcd's --client-cert-auth). Default: plaintext.
   */
  readonly tls?: { readonly ca: string; readonly cert: string; readonly key: string };
}

/**
 * An etcd3 client for the lock: it does not retry a failed call by itself
 * (etcd3 retries three times by default, and a retried put-if-absent whose
 * first reply was lost would read as held) and trips no circuit breaker, so
 * every call the lock makes is exactly one round trip under its own timeout.
 */
export function etcdClient(options: EtcdClientOptions): Etcd3 {
  checkObject(options, 'etcdClient options');
  const hosts: unknown = options.hosts;
  if (!Array.isArray(hosts) || hosts.length === 0) throw new InvalidInputError('invalid-config', `hosts must be a non-empty array of URLs, got ${shown(hosts)}`);
  hosts.forEach((host, i) => checkString(host, `hosts[${i}]`, true));
  const dialTimeout = checkTimeoutMs(options.dialTimeoutMs ?? 2000, 'dialTimeoutMs');
  if (options.auth !== undefined) {
    checkObject(options.auth, 'auth');
    checkString(options.auth.username, 'auth.username', true);
    checkString(options.auth.password, 'auth.password', false);
  }
  if (options.tls !== undefined) {
    checkObject(options.tls, 'tls');
    checkString(options.tls.ca, 'tls.ca', true);
    checkString(options.tls.cert, 'tls.cert', true);
    checkString(options.tls.key, 'tls.key', true);
  }
  return new Etcd3({
    hosts: [...options.hosts],
    dialTimeout,
    faultHandling: { global: noop, host: () => noop },
    ...(options.auth !== undefined ? { auth: { username: options.auth.username, password: options.auth.password } } : {}),
    ...(options.tls !== undefined
      ? { credentials: { rootCertificate: Buffer.from(options.tls.ca), certChain: Buffer.from(options.tls.cert), privateKey: Buffer.from(options.tls.key) } }
      : {}),
  });
}
