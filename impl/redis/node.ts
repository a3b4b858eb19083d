import type { Redis } from 'ioredis';
import { checkToken } from '../../model/errors.ts';
import type { LeaseNode } from '../leaseNode.ts';
import { withLockCommands } from './commands.ts';
import { keysFor } from './keys.ts';
import { ConnectionConfigError, TokenOverflowError } from '../errors.ts';

/** Errors that say the node can never grant as configured, typed so that they are not read as an outage. */
function typed(resource: string, e: unknown): unknown {
  const message = e instanceof Error ? e.message : String(e);
  if (/^(NOAUTH|WRONGPASS)/.test(message)) return new ConnectionConfigError('authentication', message);
  if (/^TOKENOVERFLOW/.test(message)) return new TokenOverflowError(resource);
  return e;
}

/** One Redis node as a LeaseNode: the four lease scripts over an ioredis connection. */
export function redisLeaseNode(redis: Redis, options: { readonly prefix?: string; readonly tokenBase?: bigint } = {}): LeaseNode {
  const r = withLockCommands(redis);
  const base = checkToken(options.tokenBase ?? 0n).toString();
  const keys = (resource: string) => keysFor(resource, options.prefix);
  return {
    async acquire(resource, owner, ttlMs) {
      const k = keys(resource);
      const token = await r.lockcheckAcquire(k.lock, k.counter, owner, ttlMs, base).catch((e: unknown) => {
        throw typed(resource, e);
      });
      return token === null ? null : BigInt(token);
    },
    async release(resource, owner) {
      return (await r.lockcheckRelease(keys(resource).lock, owner)) === 1;
    },
    async extend(resource, owner, ttlMs) {
      return (await r.lockcheckExtend(keys(resource).lock, owner, ttlMs)) === 1;
    },
    async raiseToken(resource, token) {
      await r.lockcheckRaise(keys(resource).counter, checkToken(token).toString(), base);
    },
  };
}
