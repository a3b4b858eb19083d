import { checkResource } from '../../model/errors.ts';

/** Where a resource lives in Redis. The prefix keeps lockcheck's keys apart from the application's. */
export interface KeyNames {
  /** The lease's key: the holder's owner value, with the ttl. */
  readonly lock: string;
  /** The resource's token counter. */
  readonly counter: string;
  /** Set with the resource's first token: a counter missing while it is there was deleted behind lockcheck (impl/redis/scripts.ts, ACQUIRE). */
  readonly minted: string;
  /** The fenced store's cell for the resource (redisFencedStore). */
  readonly cell: string;
}

/** The Redis keys of `resource` under `prefix` (default 'lockcheck'). Throws InvalidInputError('invalid-resource') for a bad resource. */
export function keysFor(resource: string, prefix = 'lockcheck'): KeyNames {
  checkResource(resource);
  return { lock: lockKey(resource, prefix), counter: counterKey(resource, prefix), minted: mintedKey(resource, prefix), cell: `${prefix}:store:${resource}` };
}

/** The lock key alone, for a resource already checked (the lock clients check it once per call, not per node). */
export const lockKey = (resource: string, prefix = 'lockcheck'): string => `${prefix}:lock:${resource}`;
/** The token counter's key alone, for a resource already checked. */
export const counterKey = (resource: string, prefix = 'lockcheck'): string => `${prefix}:token:${resource}`;
/** The marker of a resource that has minted tokens, alone, for a resource already checked. */
export const mintedKey = (resource: string, prefix = 'lockcheck'): string => `${prefix}:minted:${resource}`;
