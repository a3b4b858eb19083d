import type { RedisConnection as Redis } from './connection.ts';
import { checkResource, checkToken, checkTtl, MAX_TTL_MS } from '../../model/errors.ts';
import { checkMethods, checkObject, checkOwner, checkPrefix, checkTokenBase, isObject, knownOptions, shown } from '../options.ts';
import type { LeaseNode } from '../leaseNode.ts';
import { acquireScript, checkScriptable, extendScript, raiseScript, releaseScript } from './commands.ts';
import { tickWrites } from './tickWrites.ts';
import { counterKey, lockKey, mintedKey } from './keys.ts';
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

/** The most replicas a WAIT may ask for: a sane bound (an int32), far above any deployment. */
const MAX_REPLICAS = 2 ** 31 - 1;

/** `replicas` checked: an integer count in [1, 2^31-1] and an integer timeoutMs in [1, 2^31-1] (as a timer's bound; 1e21 went to WAIT as "1e+21"). */
function checkReplicas(wanted: unknown): WaitForReplicas {
  const ok =
    isObject(wanted) &&
    typeof wanted.count === 'number' &&
    Number.isInteger(wanted.count) &&
    wanted.count >= 1 &&
    wanted.count <= MAX_REPLICAS &&
    typeof wanted.timeoutMs === 'number' &&
    Number.isInteger(wanted.timeoutMs) &&
    wanted.timeoutMs >= 1 &&
    wanted.timeoutMs <= MAX_TTL_MS;
  if (!ok) {
    throw new InvalidInputError(
      'invalid-config',
      `replicas needs an integer count >= 1 and an integer timeoutMs >= 1 (WAIT 0 would block forever), each at most ${MAX_REPLICAS}, got ${isObject(wanted) ? `count ${shown(wanted.count)}, timeoutMs ${shown(wanted.timeoutMs)}` : shown(wanted)}`,
    );
  }
  checkReplicaKeys(wanted);
  return wanted as unknown as WaitForReplicas;
}

/**
 * A call's failure before anything was sent: a bad argument is the
 * InvalidInputError it is; anything else the client threw (it refuses to
 * queue a command in some states) is typed as a reply would be.
 */
const unsent = (error: unknown, resource: unknown): Promise<never> => Promise.reject((error instanceof InvalidInputError ? error : typed(error, String(resource))) as Error);

/**
 * One Redis node as a LeaseNode: the four lease scripts over an ioredis
 * connection, each followed by WAIT if `replicas` is given. Every argument
 * is checked before anything is sent (the node is public): a bad resource,
 * owner, ttl or token rejects with InvalidInputError, never a TypeError from
 * inside ioredis (a number as owner threw synchronously from the command's
 * encoding, and while the connection was still opening threw inside ioredis,
 * uncaught, leaving the call unsettled). Every failure the server returns is
 * typed (impl/redis/replyErrors.ts), WAIT's included: NOAUTH/WRONGPASS a
 * ConnectionConfigError, NOPERM a ServerRefusedError('permission'), a state
 * that passes an UnavailableError.
 */
export function redisLeaseNode(redis: Redis, options: { readonly prefix?: string; readonly tokenBase?: bigint; readonly replicas?: WaitForReplicas } = {}): LeaseNode {
  checkConnection(redis, 'redis');
  checkObject(options, 'redisLeaseNode options');
  checkKeys(options);
  const baseToken = checkTokenBase(options.tokenBase ?? 0n);
  const base = baseToken.toString();
  /** The first token a fresh counter mints: the script tells a counter deleted behind it by this one (ACQUIRE). */
  const first = (baseToken + 1n).toString();
  if (options.prefix !== undefined) checkPrefix(options.prefix, 'prefix');
  const wanted = options.replicas === undefined ? undefined : checkReplicas(options.replicas);
  // Each call is the script command's one promise: the reply and the typed error are made inside it (impl/redis/commands.ts).
  // The resource is checked once per acquire and release in the lock client, and once per call here (a LeaseNode is public too); the key built once.
  const prefix = options.prefix;
  const batch = tickWrites(redis);
  const scripts: LeaseNode = {
    acquire: (resource, owner, ttlMs) => {
      try {
        checkResource(resource);
        checkOwner(owner);
        checkTtl(ttlMs);
        batch();
        return acquireScript.run(redis, [lockKey(resource, prefix), counterKey(resource, prefix), mintedKey(resource, prefix), owner, String(ttlMs), base, first], toToken, typed, resource);
      } catch (error) {
        return unsent(error, resource);
      }
    },
    release: (resource, owner) => {
      try {
        checkResource(resource);
        checkOwner(owner);
        batch();
        return releaseScript.run(redis, [lockKey(resource, prefix), owner], isOne, typed, resource);
      } catch (error) {
        return unsent(error, resource);
      }
    },
    extend: (resource, owner, ttlMs) => {
      try {
        checkResource(resource);
        checkOwner(owner);
        checkTtl(ttlMs);
        batch();
        return extendScript.run(redis, [lockKey(resource, prefix), owner, String(ttlMs)], isOne, typed, resource);
      } catch (error) {
        return unsent(error, resource);
      }
    },
    raiseToken: (resource, token) => {
      try {
        checkResource(resource);
        const raised = checkToken(token).toString();
        batch();
        return raiseScript.run(redis, [counterKey(resource, prefix), raised, base], nothing, typed, resource);
      } catch (error) {
        return unsent(error, resource);
      }
    },
  };
  if (wanted === undefined) return scripts;
  /** WAIT on the same connection: it covers every write this connection made so far. Its failures are typed as the scripts' (NOPERM: a user without WAIT). */
  const replicated = async <T>(reply: T, resource: string): Promise<T> => {
    let acknowledged: number;
    try {
      acknowledged = Number(await redis.call('WAIT', String(wanted.count), String(wanted.timeoutMs)));
    } catch (error) {
      throw typed(error, resource);
    }
    // Not `<`: a reply that is no number (NaN) is no acknowledgement either.
    if (!(acknowledged >= wanted.count)) throw new ReplicationError(wanted.count, acknowledged);
    return reply;
  };
  return {
    async acquire(resource, owner, ttlMs) {
      const token = await scripts.acquire(resource, owner, ttlMs);
      // A denial wrote nothing: only a grant waits for the replicas.
      return token === null ? null : replicated(token, resource);
    },
    async release(resource, owner) {
      return replicated(await scripts.release(resource, owner), resource);
    },
    async extend(resource, owner, ttlMs) {
      return replicated(await scripts.extend(resource, owner, ttlMs), resource);
    },
    async raiseToken(resource, token) {
      await replicated(await scripts.raiseToken(resource, token), resource);
    },
  };
}

/** The token comes as a digit string (exact to 2^63-1; never through a Lua number or a JS number). */
const toToken = (token: unknown): bigint | null => (token === null ? null : BigInt(token as string));
const nothing = (): void => undefined;
/** A script's integer reply 1: a number, or a string on a connection with ioredis's stringNumbers (a key extended or released was read as not, before). */
export const isOne = (reply: unknown): boolean => reply === 1 || reply === '1';
