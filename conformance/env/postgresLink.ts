import { TcpProxy } from './proxy.ts';

/**
 * A client's own link to a PostgreSQL server: a TCP proxy in front of it
 * (on lockcheck's server or the user's), so that a partition cuts the real
 * socket (spec 3). Not over TLS: the client would check the server's
 * certificate against the proxy's address, so a URL that asks for TLS gets
 * no proxy, and with it no partition.
 */

/** Why clients of this server get no proxy of their own, or null if they do. */
export function noProxyReason(url: string): string | null {
  const q = new URL(url).searchParams;
  const sslmode = q.get('sslmode');
  const tls = (sslmode !== null && sslmode !== 'disable') || ['1', 'true', 'no-verify'].includes(q.get('ssl') ?? '') || ['sslcert', 'sslkey', 'sslrootcert'].some((k) => q.has(k));
  return tls ? 'the URL asks for TLS, whose certificate check a proxy in front of the server would fail: no partition on it' : null;
}

/** A proxy to the server `url` names, for one client's link (close it with the run). */
export function startLink(url: string): Promise<TcpProxy> {
  const u = new URL(url);
  return TcpProxy.start({ host: u.hostname, port: u.port === '' ? 5432 : Number(u.port) });
}

/** The same URL, through `proxy`. */
export function throughLink(url: string, proxy: TcpProxy): string {
  const u = new URL(url);
  u.hostname = proxy.host;
  u.port = String(proxy.port);
  return u.href;
}
