import type { StorePolicy } from '../../model/design.ts';
import { checkResource, checkToken, checkValue, InvalidInputError } from '../../model/errors.ts';
import type { FencedStore, ReadResult, WriteResult } from '../fencedStore.ts';
import { cellKey, DEFAULT_PREFIX, highestKey } from './keys.ts';
import type { EtcdNode } from './node.ts';
import { checkFencedWriteSize } from './node.ts';
import { checkMethods, checkObject, checkPolicy, checkPrefix, FENCES, knownOptions } from '../options.ts';
import { parseCell } from '../storeCell.ts';

/**
 * A fenced store in etcd (spec FENCE-2): per resource, a cell holding the
 * value and the token that wrote it, and the highest token accepted. Each
 * write is one etcd transaction that compares the token with the highest
 * and, if the policy accepts it, writes both: judgement and write are one
 * atomic step and one round trip (a write in flight lands whole or not at
 * all, as the model's store does).
 *
 * Kept in etcd because the resource Jepsen's etcd analysis guards is there
 * too: the fence is checked where the data lives. Its writes move the
 * revision of the cluster it is in; conformance keeps it in a cluster of its
 * own, and tokens are compared by order only anyway (spec 7.7).
 */
/** etcdFencedStore's options. */
export interface EtcdStoreOptions {
  /** Key prefix of the cells and their highest tokens. Default 'lockcheck/'. */
  readonly prefix?: string;
}

const checkKeys = knownOptions('etcdFencedStore options', ['prefix']);
/** The most digits a token has (2^63-1). */
const WIDEST_TOKEN = '9'.repeat(19);

interface Cell {
  readonly value: string;
  readonly token: string;
}

/**
 * The fenced store in etcd over `node`, judging tokens by `policy`
 * ('unfenced', 'strict' or 'monotonic'). Throws InvalidInputError for a
 * transactional policy or bad options; its calls throw as EtcdNode's do.
 */
export function etcdFencedStore(node: EtcdNode, policy: StorePolicy, options: EtcdStoreOptions = {}): FencedStore {
  checkMethods(node, 'node', 'an EtcdNode', ['get', 'fencedWrite']);
  if (policy === 'transactional') throw new InvalidInputError('invalid-config', 'an etcd store cannot be transactional');
  checkPolicy(policy, FENCES);
  checkObject(options, 'etcdFencedStore options');
  checkKeys(options);
  const prefix = options.prefix === undefined ? DEFAULT_PREFIX : checkPrefix(options.prefix, 'prefix');
  return {
    async write(resource, token, value): Promise<WriteResult> {
      checkResource(resource);
      checkToken(token);
      checkValue(value);
      const cell: Cell = { value, token: token.toString() };
      // Judged with the widest token, so that a value fits or not whatever its token (as the ZooKeeper store judges): a value accepted with token 1 was refused with a 19-digit one.
      checkFencedWriteSize(cellKey(resource, prefix), highestKey(resource, prefix), Buffer.byteLength(JSON.stringify({ ...cell, token: WIDEST_TOKEN }), 'utf8'));
      return node.fencedWrite(cellKey(resource, prefix), highestKey(resource, prefix), token, JSON.stringify(cell), policy);
    },
    async read(resource): Promise<ReadResult> {
      checkResource(resource);
      const key = cellKey(resource, prefix);
      const text = await node.get(key);
      if (text === null) return { value: null, token: null };
      const cell = parseCell(text, `etcd key '${key.toString('utf8')}'`, ['token'] as const);
      return { value: cell.value, token: cell.token };
    },
  };
}
