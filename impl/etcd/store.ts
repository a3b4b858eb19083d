import type { StorePolicy } from '../../model/design.ts';
import { checkResource, checkToken, InvalidInputError } from '../../model/errors.ts';
import type { FencedStore, ReadResult, WriteResult } from '../fencedStore.ts';
import { UnavailableError } from '../errors.ts';
import { cellKey, DEFAULT_PREFIX } from './keys.ts';
import type { EtcdNode } from './node.ts';

/**
 * A fenced store in etcd itself (spec FENCE-2): one key per resource holding
 * the value, the token that wrote it and the highest token accepted. A write
 * reads the cell, judges the token by the policy, and puts only if the cell's
 * mod revision is unchanged (one transaction), so the judgement and the write
 * are one atomic step; a write that lost the race reads again.
 *
 * Kept in the lock's own cluster because the resource Jepsen's etcd analysis
 * guards is there too: no second system to start, and the fence is checked
 * where the data lives. Its writes move the cluster's revision; tokens are
 * compared by order only, which that does not change.
 */
export interface EtcdStoreOptions {
  readonly prefix?: string;
  /** Reads and retries of one write when other writers keep winning. Default 16. */
  readonly maxRounds?: number;
}

interface Cell {
  readonly value: string;
  readonly token: string;
  readonly highest: string;
}

export function etcdFencedStore(node: EtcdNode, policy: StorePolicy, options: EtcdStoreOptions = {}): FencedStore {
  if (policy === 'transactional') throw new InvalidInputError('invalid-config', 'an etcd store cannot be transactional');
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const maxRounds = options.maxRounds ?? 16;
  const readCell = async (resource: string): Promise<{ cell: Cell | null; modRevision: bigint }> => {
    const r = await node.get(cellKey(resource, prefix));
    return { cell: r.value === null ? null : (JSON.parse(r.value) as Cell), modRevision: r.modRevision };
  };
  return {
    async write(resource, token, value): Promise<WriteResult> {
      checkResource(resource);
      checkToken(token);
      if (typeof value !== 'string') throw new InvalidInputError('precondition', 'value must be a string');
      for (let round = 0; round < maxRounds; round++) {
        const { cell, modRevision } = await readCell(resource);
        const highest = cell === null ? null : BigInt(cell.highest);
        if (highest !== null && ((policy === 'strict' && token <= highest) || (policy === 'monotonic' && token < highest))) return { kind: 'rejected', highest };
        const next: Cell = { value, token: token.toString(), highest: (highest === null || token > highest ? token : highest).toString() };
        if (await node.putIfUnchanged(cellKey(resource, prefix), JSON.stringify(next), modRevision)) return { kind: 'accepted' };
      }
      throw new UnavailableError(`etcd store: the write on '${resource}' lost ${maxRounds} races in a row`);
    },
    async read(resource): Promise<ReadResult> {
      checkResource(resource);
      const { cell } = await readCell(resource);
      return cell === null ? { value: null, token: null } : { value: cell.value, token: BigInt(cell.token) };
    },
  };
}
