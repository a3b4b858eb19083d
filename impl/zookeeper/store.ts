import type { StorePolicy } from '../../model/design.ts';
import { checkResource, checkToken, checkValue, InvalidInputError } from '../../model/errors.ts';
import type { FencedStore, ReadResult, WriteResult } from '../fencedStore.ts';
import { cellPath, checkRoot } from './paths.ts';
import { checkMethods, checkObject, checkPolicy, FENCES, knownOptions } from '../options.ts';
import type { ZookeeperNode } from './node.ts';
import { parseCell } from '../storeCell.ts';

/**
 * A fenced store in ZooKeeper (spec FENCE-2): per resource, one znode
 * holding the value, the token that wrote it and the highest token accepted.
 * A write reads the cell, judges its token by the policy, and writes with
 * the version it read (a create for the first write): the write lands only
 * if nothing else wrote between, else it is judged again on what is there.
 * Judgement and write are thus one atomic step at the versioned write, as
 * the model's store is.
 */
export interface ZookeeperStoreOptions {
  /** Root znode of the cells. Default '/lockcheck'. */
  readonly root?: string;
}

const checkKeys = knownOptions('zookeeperFencedStore options', ['root']);

/**
 * The fenced store in ZooKeeper over `node`, judging tokens by `policy`
 * ('unfenced', 'strict' or 'monotonic'). Throws InvalidInputError for a
 * transactional policy or bad options; its calls throw as ZookeeperNode's do.
 */
export function zookeeperFencedStore(node: ZookeeperNode, policy: StorePolicy, options: ZookeeperStoreOptions = {}): FencedStore {
  checkMethods(node, 'node', 'a ZookeeperNode', ['get', 'fencedWrite']);
  if (policy === 'transactional') throw new InvalidInputError('invalid-config', 'a ZooKeeper store cannot be transactional');
  checkPolicy(policy, FENCES);
  checkObject(options, 'zookeeperFencedStore options');
  checkKeys(options);
  const root = checkRoot(options.root);
  return {
    async write(resource, token, value): Promise<WriteResult> {
      checkResource(resource);
      checkToken(token);
      checkValue(value);
      return node.fencedWrite(cellPath(resource, root), token, value, policy);
    },
    async read(resource): Promise<ReadResult> {
      checkResource(resource);
      const path = cellPath(resource, root);
      const text = await node.get(path);
      if (text === null) return { value: null, token: null };
      // Read as the etcd store reads its cell: a node (ZookeeperNode is public) answering what no cell holds is a typed refusal, not a SyntaxError.
      const cell = parseCell(text, `zookeeper znode '${path}'`, ['token'] as const);
      return { value: cell.value, token: cell.token };
    },
  };
}
