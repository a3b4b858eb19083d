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
  // What ZooKeeper refuses in a path (PathUtils.validatePath): it read as BAD_ARGUMENTS at the first call, or as an outage.
  if (ZNODE_UNSAFE.test(root) || root.split('/').some((part) => part === '.' || part === '..')) {
    throw new InvalidInputError('invalid-config', `root must be a znode path ZooKeeper takes (no control characters, no '.' or '..' component, no character in U+D800..U+F8FF or U+FFF0..U+FFFF), got ${shown(root)}`);
  }
  // ZooKeeper's own subtree (its quotas and configuration): a lock's znodes have no place among them.
  if (root === '/zookeeper' || root.startsWith('/zookeeper/')) throw new InvalidInputError('invalid-config', `root must not be ZooKeeper's own /zookeeper subtree, got ${shown(root)}`);
  return root;
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
