import { InvalidInputError } from '../../model/errors.ts';

/**
 * Where a resource's lock queue and store cell live in ZooKeeper. Resource
 * names are percent-encoded (and '.' too, since '.' and '..' are not path
 * components ZooKeeper allows), so no name can reach another's path; the two
 * kinds of znode sit under different parents.
 */
export const DEFAULT_ROOT = '/lockcheck';

/** The root option of the lock and the store: an absolute znode path, default DEFAULT_ROOT. */
export function checkRoot(root: unknown = DEFAULT_ROOT): string {
  if (typeof root !== 'string' || !/^(\/[^/]+)+$/.test(root)) throw new InvalidInputError('invalid-config', `root must be an absolute znode path without a trailing slash, got ${String(root)}`);
  return root;
}

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

/** The sequence number ZooKeeper appended to a contender's name (10 digits, the parent's counter). */
export function sequenceOf(name: string): number {
  return Number(name.slice(name.lastIndexOf('-') + 1));
}
