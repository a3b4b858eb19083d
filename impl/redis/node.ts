import type { Redis } from 'ioredis';
import { checkResource, checkToken } from '../../model/errors.ts';
import type { LeaseNode } from '../leaseNode.ts';
import { acquireScript, extendScript, forgetScripts, raiseScript, releaseScript } from './commands.ts';
import { tickWrites } from './tickWrites.ts';
import { counterKey, keysFor, lockKey } from './keys.ts';
import { ConnectionConfigError, InvalidInputError, ReplicationError, ServerRefusedError, TokenOverflowError } from '../errors.ts';

/** Errors that say the node can never grant as configured, typed so that they are not read as an outage. */
function typed(resource: string, e: unknown): unknown {
  const message = e instanceof Error ? e.message : String(e);
  if (/^(NOAUTH|WRONGPASS)/.test(message)) return new ConnectionConfigError('authentication', message);
  if (/^TOKENOVERFLOW/.test(message)) return new TokenOverflowError(resource);
  // An ACL without the scripts' commands or keys, or a script the server cannot run: no retry fixes these.
  if (/^NOPERM/.test(message)) return new ServerRefusedError('permission', 'NOPERM', message, { cause: e });
  if (/^ERR (Error running script|user_script|unknown command)/.test(message)) return new ServerRefusedError('statement', 'ERR', message, { cause: e });
  return e;
}

/**
 * Replicas a script's writes must reach before its reply counts (WAIT
 * `count` `timeoutMs`, spec 7.9: redis-replicated with WAIT). The timeout must
 * be shorter than the lock's request timeout, or the WAIT outlives the vote.
 */
export interface WaitForReplicas {
  readonly count: number;
  readonly timeoutMs: number;
}

/** One Redis node as a LeaseNode: the four lease scripts over an ioredis connection, each followed by WAIT if `replicas` is given. */
export function redisLeaseNode(redis: Redis, options: { readonly prefix?: string; readonly tokenBase?: bigint; readonly replicas?: WaitForReplicas } = {}): LeaseNode {
  const base = checkToken(options.tokenBase ?? 0n).toString();
  const keys = (resource: string) => keysFor(resource, options.prefix);
  const wanted = options.replicas;
  if (wanted !== undefined && !(Number.isInteger(wanted.count) && wanted.count >= 1 && Number.isInteger(wanted.timeoutMs) && wanted.timeoutMs >= 1)) {
    throw new InvalidInputError('invalid-config', 'replicas needs an integer count >= 1 and an integer timeoutMs >= 1 (WAIT 0 would block forever)');
  }
  /** WAIT on the same connection: it covers every write this connection made so far. */
  const replicated = async <T>(reply: T): Promise<T> => {
    if (wanted === undefined) return reply;
    const acknowledged = Number(await redis.call('WAIT', String(wanted.count), String(wanted.timeoutMs)));
    if (acknowledged < wanted.count) throw new ReplicationError(wanted.count, acknowledged);
    return reply;
  };
  const refused = (resource: string) => (e: unknown) => {
    forgetScripts(redis, e);
    throw typed(resource, e);
  };
  /** A release's or an extend's failure, as it came (a vote against). */
  const failed = (e: unknown): never => {
    forgetScripts(redis, e);
    throw e;
  };
  // Without replicas each call is the script's promise and one .then: a lock round makes one per node, so they count.
  // The resource is checked once per acquire and release in the lock client, and once per call here (a LeaseNode is public too); the key built once.
  if (wanted === undefined) {
    const prefix = options.prefix;
    const batch = tickWrites(redis);
    return {
      acquire: (resource, owner, ttlMs) => {
        checkResource(resource);
        batch();
        return acquireScript.run(redis, [lockKey(resource, prefix), counterKey(resource, prefix), owner, ttlMs, base]).then(toToken, refused(resource));
      },
      release: (resource, owner) => {
        checkResource(resource);
        batch();
        return releaseScript.run(redis, [lockKey(resource, prefix), owner]).then(isOne, failed);
      },
      extend: (resource, owner, ttlMs) => {
        checkResource(resource);
        batch();
        return extendScript.run(redis, [lockKey(resource, prefix), owner, ttlMs]).then(isOne, failed);
      },
      raiseToken: async (resource, token) => {
        await raiseScript.run(redis, [keys(resource).counter, checkToken(token).toString(), base]).catch(failed);
      },
    };
  }
  return {
    async acquire(resource, owner, ttlMs) {
      const k = keys(resource);
      const token = (await acquireScript.run(redis, [k.lock, k.counter, owner, ttlMs, base]).catch(refused(resource))) as string | null;
      // A denial wrote nothing: only a grant waits for the replicas.
      return token === null ? null : BigInt(await replicated(token));
    },
    async release(resource, owner) {
      return (await replicated(await releaseScript.run(redis, [keys(resource).lock, owner]).catch(failed))) === 1;
    },
    async extend(resource, owner, ttlMs) {
      return (await replicated(await extendScript.run(redis, [keys(resource).lock, owner, ttlMs]).catch(failed))) === 1;
    },
    async raiseToken(resource, token) {
      await replicated(await raiseScript.run(redis, [keys(resource).counter, checkToken(token).toString(), base]).catch(failed));
    },
  };
}

const toToken = (token: unknown): bigint | null => (token === null ? null : BigInt(token as string));
const isOne = (reply: unknown): boolean => reply === 1;
