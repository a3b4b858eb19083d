import { InvalidInputError } from '../../model/errors.ts';
import { checkPrefix, shown } from '../options.ts';

/**
 * Where a resource's lock queue and store cell live in ZooKeeper. Resource
 * names are percent-encoded (and '.' too, since '.' and '..' are not path
 * components ZooKeeper allows), so no name can reach another's path; the two
 * kinds of znode sit under different parents.
 */
export const DEFAULT_ROOT = '/lockcheck';

/** The root option of the lock and the store: an absolute znode path, default DEFAULT_ROOT. */
export function checkRoot(root: unknown = DEFAULT_ROOT): string {
  if (typeof root !== 'string' || !/^(\/[^/]+)+$/.test(root)) throw new InvalidInputError('invalid-config', `root must be an absolute znode path without a trailing slash, got ${shown(root)}`);
  checkPrefix(root, 'root');
  const problem = znodePathProblem(root);
  if (problem !== null) throw new InvalidInputError('invalid-config', `root must ${problem}, got ${shown(root)}`);
  return root;
}

/**
 * Why an absolute path (the root, the connect string's chroot: every znode
 * the lock and the store make sits under both) is no place for them, or
 * null: what ZooKeeper refuses in a path (PathUtils.validatePath; it read as
 * BAD_ARGUMENTS at the first call, or as an outage: node-zookeeper-client
 * asserts on a '.' or '..' component), or ZooKeeper's own subtree (its
 * quotas and configuration). Said as what the path must be.
 */
export function znodePathProblem(path: string): string | null {
  if (!takenByZookeeper(path)) return `be ${ZNODE_PATH}`;
  if (path === '/zookeeper' || path.startsWith('/zookeeper/')) return "not be ZooKeeper's own /zookeeper subtree";
  return null;
}

/** What takenByZookeeper asks of a path. */
export const ZNODE_PATH = "a znode path ZooKeeper takes (no control characters, no '.' or '..' component, no character in U+D800..U+F8FF or U+FFF0..U+FFFF)";

/**
 * Whether ZooKeeper takes `path`'s characters and components (PathUtils.validatePath; node-zookeeper-client asserts on
 * a '.' or '..' component). Its shape (absolute, no empty component) is the caller's to check.
 */
export function takenByZookeeper(path: string): boolean {
  return !ZNODE_UNSAFE.test(path) && !path.split('/').some((part) => part === '.' || part === '..');
}

/** The characters ZooKeeper refuses in a path (PathUtils.validatePath), NUL included. */
// oxlint-disable-next-line no-control-regex -- the control characters are what it looks for
const ZNODE_UNSAFE = /[\u0000-\u001f\u007f-\u009f\ud800-\uf8ff\ufff0-\uffff]/;

/** The prefix of the ephemeral sequential znodes a lock's contenders create. */
export const CONTENDER = 'c-';

function encode(resource: string): string {
  return encodeURIComponent(resource).replace(/\./g, '%2E');
}

export function lockDir(resource: string, root = DEFAULT_ROOT): string {
  return `${root}/lock/${encode(resource)}`;
}

export function cellPath(resource: string, root = DEFAULT_ROOT): string {
  return `${root}/cell/${encode(resource)}`;
}

/**
 * The sequence number ZooKeeper appended to a contender's name: the parent's
 * counter, a signed 32-bit integer as `%010d`. Past 2^31-1 it wraps to
 * -2^31, and the name ends '-2147483648' after the dash that ends the prefix
 * ('c--2147483648'): read as negative, not as the digits after the last dash.
 */
export function sequenceOf(name: string): number {
  const m = /-(-?\d{1,10})$/.exec(name);
  return m === null ? Number.NaN : Number(m[1]);
}

/**
 * Contenders in the order ZooKeeper created them. Sequence numbers wrap past
 * 2^31-1, so they compare by their difference as a signed 32-bit integer
 * (serial-number arithmetic), right while fewer than 2^31 creations separate
 * the contenders in line: by value, the first contender after the wrap came
 * before every older one, and two held the lock.
 */
export function inLine(names: readonly string[]): string[] {
  return [...names].sort((a, b) => (sequenceOf(a) - sequenceOf(b)) | 0);
}
