import type { RedisConnection as Redis } from './connection.ts';
import { checkResource, checkToken } from '../../model/errors.ts';
import { checkMethods, checkObject, checkPrefix, checkTokenBase, isObject, knownOptions } from '../options.ts';
import type { LeaseNode } from '../leaseNode.ts';
import { acquireScript, checkScriptable, extendScript, raiseScript, releaseScript } from './commands.ts';
import { tickWrites } from './tickWrites.ts';
import { counterKey, keysFor, lockKey, mintedKey } from './keys.ts';
import { InvalidInputError, ReplicationError } from '../errors.ts';
import { typed } from './replyErrors.ts';

/**
 * Replicas a script's writes must reach before its reply counts (WAIT
 * `count` `timeoutMs`, spec 7.9: redis-replicated with WAIT). The timeout must
 * be shorter than the lock's request timeout, or the WAIT outlives the vote.
 */
export interface WaitForReplicas {
  /** Replicas that must acknowledge. */
  readonly count: number;
  /** WAIT's own timeout, ms. */
  readonly timeoutMs: number;
}

const checkKeys = knownOptions('redisLeaseNode options', ['prefix', 'tokenBase', 'replicas']);
const checkReplicaKeys = knownOptions('replicas', ['count', 'timeoutMs']);

/**
 * Throws InvalidInputError unless `redis` looks like an ioredis connection:
 * the calls the scripts make (sendCommand; call for WAIT), and its options
 * (the key prefix is read from them). `extra`: what else the caller calls.
 */
export function checkConnection(redis: unknown, name: string, extra: readonly string[] = []): Redis {
  checkMethods(redis, name, 'an ioredis connection', ['sendCommand', 'call', ...extra]);
  checkObject((redis as Redis).options, `${name}.options`);
  checkScriptable(redis as Redis, name);
  return redis as Redis;
}

/** One Redis node as a LeaseNode: the four lease scripts over an ioredis connection, each followed by WAIT if `replicas` is given. */
export function redisLeaseNode(redis: Redis, options: { readonly prefix?: string; readonly tokenBase?: bigint; readonly replicas?: WaitForReplicas } = {}): LeaseNode {
  checkConnection(redis, 'redis');
  checkObject(options, 'redisLeaseNode options');
  checkKeys(options);
  const baseToken = checkTokenBase(options.tokenBase ?? 0n);
  const base = baseToken.toString();
  /** The first token a fresh counter mints: the script tells a counter deleted behind it by this one (ACQUIRE). */
  const first = (baseToken + 1n).toString();
  if (options.prefix !== undefined) checkPrefix(options.prefix, 'prefix');
  const keys = (resource: string) => keysFor(resource, options.prefix);
  const wanted = options.replicas;
  if (wanted !== undefined && !(isObject(wanted) && Number.isInteger(wanted.count) && wanted.count >= 1 && Number.isInteger(wanted.timeoutMs) && wanted.timeoutMs >= 1)) {
    throw new InvalidInputError('invalid-config', 'replicas needs an integer count >= 1 and an integer timeoutMs >= 1 (WAIT 0 would block forever)');
  }
  if (wanted !== undefined) checkReplicaKeys(wanted);
  /** WAIT on the same connection: it covers every write this connection made so far. */
  const replicated = async <T>(reply: T): Promise<T> => {
    if (wanted === undefined) return reply;
    const acknowledged = Number(await redis.call('WAIT', String(wanted.count), String(wanted.timeoutMs)));
    if (acknowledged < wanted.count) throw new ReplicationError(wanted.count, acknowledged);
    return reply;
  };
  // Each call is the script command's one promise: the reply and the typed error are made inside it (impl/redis/commands.ts).
  // The resource is checked once per acquire and release in the lock client, and once per call here (a LeaseNode is public too); the key built once.
  const prefix = options.prefix;
  if (wanted === undefined) {
    const batch = tickWrites(redis);
    return {
      acquire: (resource, owner, ttlMs) => {
        checkResource(resource);
        batch();
        return acquireScript.run(redis, [lockKey(resource, prefix), counterKey(resource, prefix), mintedKey(resource, prefix), owner, String(ttlMs), base, first], toToken, typed, resource);
      },
      release: (resource, owner) => {
        checkResource(resource);
        batch();
        return releaseScript.run(redis, [lockKey(resource, prefix), owner], isOne);
      },
      extend: (resource, owner, ttlMs) => {
        checkResource(resource);
        batch();
        return extendScript.run(redis, [lockKey(resource, prefix), owner, String(ttlMs)], isOne);
      },
      raiseToken: async (resource, token) => {
        checkResource(resource);
        await raiseScript.run(redis, [counterKey(resource, prefix), checkToken(token).toString(), base], nothing);
      },
    };
  }
  return {
    async acquire(resource, owner, ttlMs) {
      const k = keys(resource);
      const token = await acquireScript.run(redis, [k.lock, k.counter, k.minted, owner, String(ttlMs), base, first], toToken, typed, resource);
      // A denial wrote nothing: only a grant waits for the replicas.
      return token === null ? null : replicated(token);
    },
    async release(resource, owner) {
      return replicated(await releaseScript.run(redis, [keys(resource).lock, owner], isOne));
    },
    async extend(resource, owner, ttlMs) {
      return replicated(await extendScript.run(redis, [keys(resource).lock, owner, String(ttlMs)], isOne));
    },
    async raiseToken(resource, token) {
      await replicated(await raiseScript.run(redis, [keys(resource).counter, checkToken(token).toString(), base], nothing));
    },
  };
}

/** The token comes as a digit string (exact to 2^63-1; never through a Lua number or a JS number). */
const toToken = (token: unknown): bigint | null => (token === null ? null : BigInt(token as string));
const nothing = (): void => undefined;
const isOne = (reply: unknown): boolean => reply === 1;
