import { InvalidInputError } from '../../model/errors.ts';
import { shownHosts } from '../options.ts';
import { znodePathProblem } from './paths.ts';

/**
 * The connect string as node-zookeeper-client reads it:
 * `host[:port][,host[:port]...][/chroot]` (port 2181 when left out).
 * Checked here because the library checks almost nothing: a port out of
 * range was thrown from its reconnect timer (an uncaught exception that
 * ended the process), and a scheme (`zk://...`), a space or a stray colon
 * made a client that could never connect, every call then read as an
 * outage (no-quorum) instead of the mistake it is. The chroot is held to
 * the root's rules (znodePathProblem).
 */
const HOST = /^[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?$/;
const CHROOT = /^(\/[^/]+)+$/;

export function checkConnectString(value: unknown): string {
  const bad = (why: string): never => {
    throw new InvalidInputError('invalid-config', `connectString must be host[:port][,host[:port]...][/chroot] (${why}), got ${shownHosts(value)}`);
  };
  if (typeof value !== 'string' || value === '') return bad('a non-empty string');
  const slash = value.indexOf('/');
  const hosts = slash < 0 ? value : value.slice(0, slash);
  const chroot = slash < 0 ? '' : value.slice(slash);
  if (chroot !== '' && !CHROOT.test(chroot)) bad('the chroot is not an absolute znode path without a trailing slash');
  // Every znode of the lock and the store goes under the chroot, as under the root: the same rules (a '.' component
  // was asserted on by the library at each call, read as an outage: every acquire denied no-quorum).
  const problem = chroot === '' ? null : znodePathProblem(chroot);
  if (problem !== null) bad(`the chroot must ${problem}`);
  const servers = hosts.split(',');
  servers.forEach((server, i) => {
    const [host, port, ...rest] = server.split(':');
    if (host === undefined || !HOST.test(host) || rest.length > 0) bad(`server ${i + 1} is not host[:port]`);
    if (port !== undefined && !(/^\d{1,5}$/.test(port) && Number(port) >= 1 && Number(port) <= 65535)) bad(`server ${i + 1}'s port is not in 1..65535`);
  });
  return value;
}
