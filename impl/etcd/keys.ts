/**
 * Where a resource's lock and store cell live in etcd. The two kinds of key
 * sit under different segments, so no resource name can reach another's.
 */
export const DEFAULT_PREFIX = 'lockcheck/';

export function lockKey(resource: string, prefix = DEFAULT_PREFIX): Buffer {
  return Buffer.from(`${prefix}lock/${resource}`, 'utf8');
}

export function cellKey(resource: string, prefix = DEFAULT_PREFIX): Buffer {
  return Buffer.from(`${prefix}cell/${resource}`, 'utf8');
}

export function highestKey(resource: string, prefix = DEFAULT_PREFIX): Buffer {
  return Buffer.from(`${prefix}highest/${resource}`, 'utf8');
}
