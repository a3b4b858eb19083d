import type { RedisStoreConnection } from './connection.ts';
import type { StorePolicy } from '../../model/design.ts';
import { checkToken, checkValue, InvalidInputError } from '../../model/errors.ts';
import { storedToken } from '../storeCell.ts';
import type { MonotonicClock } from '../clock.ts';
import { systemClock } from '../clock.ts';
import { checkedClock } from '../checkedClock.ts';
import { isDefect, isRefusal, TimeoutError, UnavailableError, withTimeout } from '../errors.ts';
import type { FencedStore } from '../fencedStore.ts';
import { fencedWriteScript } from './commands.ts';
import { keysFor } from './keys.ts';
import { checkValueBytes } from '../valueSize.ts';
import { checkConnection, isOne } from './node.ts';
import { typed } from './replyErrors.ts';
import { checkClock, checkObject, checkPolicy, checkPrefix, checkTimeoutMs, FENCES, knownOptions } from '../options.ts';

export interface RedisStoreOptions {
  /** Key prefix. Default 'lockcheck'. */
  readonly prefix?: string;
  /**
   * Bound on each write and read, in ms on `clock`. Default 5000. A write
   * with no reply in time is a TimeoutError: it may have landed (a later
   * write with a larger token settles it).
   */
  readonly timeoutMs?: number;
  /** The clock the bound is on. Default: performance.now(). */
  readonly clock?: MonotonicClock;
}

const checkKeys = knownOptions('redisFencedStore options', ['prefix', 'timeoutMs', 'clock']);

/** Redis's default proto-max-bulk-len (512 MiB): a longer argument ends the connection (protocol error), and a string holds no more. */
const MAX_BULK_BYTES = 2 ** 29;

/**
 * A fenced store in Redis: each write is one script that applies the policy
 * (spec FENCE-2). Failures are typed as the lock's: TimeoutError (no reply
 * in time), ConnectionConfigError (credentials refused), ServerRefusedError
 * (no permission for the script or the keys, a script the server cannot
 * run), UnavailableError (the connection is gone, or the server is in a
 * passing state), each with the client's error as `cause`.
 */
export function redisFencedStore(redis: RedisStoreConnection, policy: StorePolicy, options: RedisStoreOptions = {}): FencedStore {
  checkConnection(redis, 'redis', ['hmget']);
  if (policy === 'transactional') throw new InvalidInputError('invalid-config', 'a Redis store cannot be transactional');
  checkPolicy(policy, FENCES);
  checkObject(options, 'redisFencedStore options');
  checkKeys(options);
  if (options.prefix !== undefined) checkPrefix(options.prefix, 'prefix');
  const timeoutMs = checkTimeoutMs(options.timeoutMs ?? 5000, 'timeoutMs');
  const clock = options.clock === undefined ? systemClock : checkedClock(checkClock(options.clock));
  const bounded = <T>(what: string, resource: string, work: Promise<T>): Promise<T> =>
    withTimeout(clock, timeoutMs, `redis fenced store ${what}`, work).catch((e: unknown) => {
      throw storeError(e, what, resource);
    });
  return {
    write(resource, token, value) {
      let sent: Promise<[number | string, string?]>;
      try {
        // The bound's start, read (and checked: impl/checkedClock.ts) before the write goes out: a bad reading sends nothing.
        clock.now();
        const args = [keysFor(resource, options.prefix).cell, checkToken(token).toString(), checkValue(value), policy];
        checkValueBytes(value, MAX_BULK_BYTES, 'a Redis store cell', "Redis's default proto-max-bulk-len");
        sent = fencedWriteScript.run(redis, args) as Promise<[number | string, string?]>;
      } catch (e) {
        // Bad input (InvalidInputError), or the client refusing to queue the command at all (ioredis throws in some states).
        return Promise.reject(storeError(e, 'write', resource));
      }
      return bounded('write', resource, sent).then(([accepted, highest]) => (isOne(accepted) ? { kind: 'accepted' } : { kind: 'rejected', highest: storedToken(highest, `redis key ${keysFor(resource, options.prefix).cell}`, 'highest', 'plain') }));
    },
    async read(resource) {
      const cell = keysFor(resource, options.prefix).cell;
      // As for a write: the clock checked before the read goes out.
      clock.now();
      const [value, token] = await bounded('read', resource, redis.hmget(cell, 'value', 'token'));
      // A token field lockcheck did not write is a typed refusal, never a SyntaxError from BigInt.
      return { value: value ?? null, token: token === null || token === undefined ? null : storedToken(token, `redis key ${cell}`, 'token') };
    },
  };
}

/** What a store call's failure is: the lock's typing of Redis replies, and any other failure of the call an UnavailableError; a programming error (a TypeError, ...) as it is, never an outage. */
function storeError(e: unknown, what: string, resource: string): Error {
  if (e instanceof TimeoutError || e instanceof InvalidInputError) return e;
  if (isDefect(e)) return e as Error;
  const t = typed(e, resource);
  if (isRefusal(t) || t instanceof UnavailableError) return t;
  return new UnavailableError(`redis fenced store ${what} of '${resource}' failed: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
}
