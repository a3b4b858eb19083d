/**
 * Closes a fresh ZooKeeper ensemble's tree to every client without the run's
 * digest credentials: the root and /zookeeper (with /zookeeper/quota) get an
 * ACL that gives everything to the run's identity and nothing to anyone
 * else, so another local user's client can create, read, change or delete
 * no znode and change no ACL. ZooKeeper has no way to start with such a root,
 * so this runs right after the ensemble first serves; a client that got in
 * before it is caught, not missed: each ACL is set only at the version a
 * fresh ensemble has (0) and only while the tree holds nothing but
 * ZooKeeper's own nodes, else the start fails.
 *
 * It does not stop another user from connecting, opening sessions, asking
 * whether a path exists (exists checks no ACL) or sending srvr/ruok: names
 * can be learnt and load added, nothing changed.
 */
import { createHash } from 'node:crypto';
import zookeeper from 'node-zookeeper-client';
import type { Client, Exception, Stat } from 'node-zookeeper-client';
import { EnvironmentError } from './faketime.ts';

/** The ACL id ZooKeeper's digest scheme gives `user:password`: user:base64(sha1(user:password)). */
export function digestId(credentials: string): string {
  const user = credentials.slice(0, credentials.indexOf(':'));
  return `${user}:${createHash('sha1').update(credentials, 'utf8').digest('base64')}`;
}

/** What a fresh ensemble's tree holds below each node this closes. */
const FRESH: ReadonlyArray<{ readonly path: string; readonly children: readonly string[]; readonly optional: boolean }> = [
  { path: '/', children: ['zookeeper'], optional: false },
  { path: '/zookeeper', children: ['config', 'quota'], optional: false },
  { path: '/zookeeper/quota', children: [], optional: true },
];

/** Sets the ACLs through `connectString` with `credentials` (digest `user:password`), bounded by `timeoutMs`. */
export async function lockDown(connectString: string, credentials: string, timeoutMs: number): Promise<void> {
  const client = zookeeper.createClient(connectString, { sessionTimeout: Math.max(timeoutMs, 2000), retries: 0 });
  client.addAuthInfo('digest', Buffer.from(credentials, 'utf8'));
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new EnvironmentError(`ZookeeperEnsemble: closing the tree to other clients took over ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    await Promise.race([closeTree(client, credentials), timeout]);
  } finally {
    clearTimeout(timer);
    client.close();
  }
}

async function closeTree(client: Client, credentials: string): Promise<void> {
  const connected = new Promise<void>((resolve) => client.once('connected', () => resolve()));
  client.connect();
  await connected;
  const acl = [new zookeeper.ACL(zookeeper.Permission.ALL, new zookeeper.Id('digest', digestId(credentials)))];
  for (const { path, children, optional } of FRESH) {
    const stat = await call<Stat | null>((cb) => client.exists(path, cb));
    if (stat === null) {
      if (optional) continue;
      throw intruded(`${path} is missing`);
    }
    const found = await call<string[]>((cb) => client.getChildren(path, cb));
    const extra = found.filter((c) => !children.includes(c));
    if (extra.length > 0) throw intruded(`${path} holds ${extra.map((c) => JSON.stringify(c)).join(', ')}`);
    try {
      // At version 0 only: an ACL another client set first makes this fail.
      await call<Stat>((cb) => client.setACL(path, acl, 0, cb));
    } catch (error) {
      throw intruded(`the ACL of ${path} could not be set at its first version (${String(error)})`);
    }
  }
}

function intruded(what: string): EnvironmentError {
  return new EnvironmentError(`ZookeeperEnsemble: another client changed the fresh ensemble before it was closed to others: ${what}`);
}

function call<T>(start: (cb: (error: Error | Exception | null, value: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => start((error, value) => (error ? reject(error) : resolve(value))));
}
