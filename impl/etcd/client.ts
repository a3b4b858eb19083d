import { createPrivateKey, X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import { noop } from 'cockatiel';
import { PASS_OVER_MS, passOverPolicies } from './passOver.ts';
import { HostRefusals, trackHostRefusals } from './connectRefusals.ts';
import { checkedClock } from '../checkedClock.ts';
import { systemClock, type MonotonicClock } from '../clock.ts';
import { Etcd3 } from 'etcd3';
import { boundSockets } from './sockets.ts';
import { InvalidInputError } from '../../model/errors.ts';
import { checkClock, checkCredential, checkObject, checkString, checkTimeoutMs, knownOptions, shown, shownHosts } from '../options.ts';

/** etcdClient's options: where the cluster is and how to reach it. */
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
   * `serverName`: the name the members' certificates carry, checked (and sent
   * as the TLS server name) instead of the host in each URL. Give it when the
   * hosts are IP addresses: TLS carries no IP address as a server name (Node
   * warns, DEP0123), and a certificate for a name then still verifies.
   */
  readonly tls?: { readonly ca: string; readonly cert: string; readonly key: string; readonly serverName?: string };
  /**
   * The monotonic clock that times how long a member whose call failed as an
   * outage is passed over (5 s). Default: the process's (systemClock).
   */
  readonly clock?: MonotonicClock;
}

const checkKeys = knownOptions('etcdClient options', ['hosts', 'dialTimeoutMs', 'auth', 'tls', 'clock']);
const checkAuthKeys = knownOptions('auth', ['username', 'password']);
/** Not Node's TLS options: lockcheck turns these into gRPC credentials, so they are closed too. */
const checkTlsKeys = knownOptions('tls', ['ca', 'cert', 'key', 'serverName']);

/**
 * An etcd3 client for the lock: it does not retry a failed call by itself
 * (etcd3 retries three times by default, and a retried put-if-absent whose
 * first reply was lost would read as held) and trips no circuit breaker, so
 * every call the lock makes is exactly one round trip under its own timeout;
 * a member whose call failed as an outage is passed over for a while
 * (passOverPolicies), so that one member down does not fail every third call.
 */
export function etcdClient(options: EtcdClientOptions): Etcd3 {
  checkObject(options, 'etcdClient options');
  checkKeys(options);
  const hosts: unknown = options.hosts;
  if (!Array.isArray(hosts) || hosts.length === 0) throw new InvalidInputError('invalid-config', `hosts must be a non-empty array of URLs, got ${shownHosts(hosts)}`);
  // Every index, holes included (forEach skips them: new Array(2) passed, and etcd3 threw a TypeError on it).
  for (let i = 0; i < hosts.length; i++) checkHost(hosts[i], `hosts[${i}]`);
  const dialTimeout = checkTimeoutMs(options.dialTimeoutMs ?? 2000, 'dialTimeoutMs');
  // Each reading checked (impl/checkedClock.ts): the pass-over reads a bad one as NaN, no member passed over.
  const clock = options.clock === undefined ? systemClock : checkedClock(checkClock(options.clock));
  if (options.auth !== undefined) {
    checkObject(options.auth, 'auth');
    checkAuthKeys(options.auth);
    checkCredential(options.auth.username, 'auth.username', true);
    checkCredential(options.auth.password, 'auth.password', false);
  }
  if (options.tls !== undefined) {
    checkObject(options.tls, 'tls');
    checkTlsKeys(options.tls);
    checkString(options.tls.ca, 'tls.ca', true);
    checkString(options.tls.cert, 'tls.cert', true);
    checkString(options.tls.key, 'tls.key', true);
    if (options.tls.serverName !== undefined) {
      checkString(options.tls.serverName, 'tls.serverName', true);
      if (isIP(options.tls.serverName) !== 0) throw new InvalidInputError('invalid-config', `tls.serverName must be a host name, not an IP address (TLS sends none as a server name), got ${shown(options.tls.serverName)}`);
      // As TLS sends it (RFC 6066: ASCII, no trailing dot): anything else the member refused at every handshake (etcd
      // answered 'localhost.' with an alert that read as an outage, every acquire denied no-quorum) or no certificate has.
      if (!SERVER_NAME.test(options.tls.serverName) || options.tls.serverName.length > 253) {
        throw new InvalidInputError('invalid-config', `tls.serverName must be a host name as TLS sends it (dot-separated labels of 1 to 63 ASCII letters, digits, '-' or '_', no '-' at either end, no trailing dot; at most 253 characters), got ${shown(options.tls.serverName)}`);
      }
    }
    checkTls(options.tls);
  }
  const refusals = new HostRefusals();
  const client = new Etcd3({
    hosts: [...options.hosts],
    dialTimeout,
    faultHandling: { global: noop, host: passOverPolicies(clock, PASS_OVER_MS, refusals) },
    // etcd3 authenticates before a call, without the call's deadline, and every call waits on that one exchange:
    // on a connection that never answers it hung for ever, and every later call with it. Bounded like a dial.
    ...(options.auth !== undefined ? { auth: { username: options.auth.username, password: options.auth.password, callOptions: () => ({ deadline: Date.now() + dialTimeout }) } } : {}),
    ...(options.tls !== undefined
      ? {
          credentials: { rootCertificate: Buffer.from(options.tls.ca), certChain: Buffer.from(options.tls.cert), privateKey: Buffer.from(options.tls.key) },
          ...(options.tls.serverName !== undefined ? { grpcOptions: { 'grpc.ssl_target_name_override': options.tls.serverName } } : {}),
        }
      : {}),
  });
  trackHostRefusals(client, refusals);
  return boundSockets(client, dialTimeout);
}

/** A host name as TLS's server name extension carries it: ASCII labels, no trailing dot. */
const SERVER_NAME = /^(?:[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*$/;

/**
 * What etcd3 can dial: `http://host:port`, `https://host:port` or
 * `host:port` (etcd3 strips the scheme; TLS is whatever `tls` says). Anything
 * else (another scheme, a path, user info, no port) it handed to gRPC as a
 * host name that never resolves: every call an outage, never the mistake.
 */
const HOST = /^(?:https?:\/\/)?(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]):(\d{1,5})\/?$/;

function checkHost(value: unknown, name: string): void {
  const port = typeof value === 'string' ? HOST.exec(value)?.[1] : undefined;
  if (port === undefined || Number(port) < 1 || Number(port) > 65535) refuseHost(name, value);
}

function refuseHost(name: string, value: unknown): never {
  throw new InvalidInputError('invalid-config', `${name} must be http://host:port, https://host:port or host:port with a port in 1..65535, got ${shownHosts(value)}`);
}

/**
 * The PEMs parse and the key is the certificate's: else gRPC threw a bare
 * OpenSSL error from the constructor (a mismatched key), or every call failed
 * as UNAVAILABLE (a CA that is not a certificate). The key is never shown.
 */
function checkTls(tls: { readonly ca: string; readonly cert: string; readonly key: string }): void {
  const certificate = (pem: string, name: string): X509Certificate => {
    try {
      return new X509Certificate(pem);
    } catch {
      throw new InvalidInputError('invalid-config', `${name} must be a PEM certificate, got ${shown(pem)}`);
    }
  };
  certificate(tls.ca, 'tls.ca');
  const cert = certificate(tls.cert, 'tls.cert');
  let key;
  try {
    key = createPrivateKey(tls.key);
  } catch {
    throw new InvalidInputError('invalid-config', `tls.key must be a PEM private key, got ${shown(tls.key, 'privateKey')}`);
  }
  if (!cert.checkPrivateKey(key)) throw new InvalidInputError('invalid-config', "tls.key is not the private key of tls.cert");
}
