import type { Redis } from 'ioredis';
import type { StorePolicy } from '../../model/design.ts';
import { checkToken, InvalidInputError } from '../../model/errors.ts';
import type { FencedStore } from '../fencedStore.ts';
import { fencedWriteScript } from './commands.ts';
import { keysFor } from './keys.ts';
import { checkConnection } from './node.ts';
import { checkObject, checkPolicy, checkString, FENCES } from '../options.ts';

/** A fenced store in Redis: each write is one script that applies the policy (spec FENCE-2). */
export function redisFencedStore(redis: Redis, policy: StorePolicy, options: { readonly prefix?: string } = {}): FencedStore {
  checkConnection(redis, 'redis', ['hmget']);
  if (policy === 'transactional') throw new InvalidInputError('invalid-config', 'a Redis store cannot be transactional');
  checkPolicy(policy, FENCES);
  checkObject(options, 'redisFencedStore options');
  if (options.prefix !== undefined) checkString(options.prefix, 'prefix', false);
  return {
    async write(resource, token, value) {
      if (typeof value !== 'string') throw new InvalidInputError('precondition', 'value must be a string');
      const [accepted, highest] = (await fencedWriteScript.run(redis, [keysFor(resource, options.prefix).cell, checkToken(token).toString(), value, policy])) as [number, string?];
      return accepted === 1 ? { kind: 'accepted' } : { kind: 'rejected', highest: BigInt(highest!) };
    },
    async read(resource) {
      const [value, token] = await redis.hmget(keysFor(resource, options.prefix).cell, 'value', 'token');
      return { value: value ?? null, token: token === null || token === undefined ? null : BigInt(token) };
    },
  };
}
