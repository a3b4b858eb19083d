import type { Redis } from 'ioredis';
import { ACQUIRE, EXTEND, FENCED_WRITE, RAISE, RELEASE } from './scripts.ts';

/**
 * The scripts registered on an ioredis connection: ioredis sends them by SHA
 * (EVALSHA) and falls back to EVAL on NOSCRIPT, as after a restart that lost
 * the script cache.
 */
export interface LockCommands {
  lockcheckAcquire(lock: string, counter: string, owner: string, ttlMs: number, tokenBase: string): Promise<string | null>;
  lockcheckRelease(lock: string, owner: string): Promise<number>;
  lockcheckExtend(lock: string, owner: string, ttlMs: number): Promise<number>;
  lockcheckRaise(counter: string, token: string, tokenBase: string): Promise<number>;
  lockcheckFencedWrite(cell: string, token: string, value: string, policy: string): Promise<[number, string?]>;
}

const registered = new WeakSet<Redis>();

export function withLockCommands(redis: Redis): Redis & LockCommands {
  if (!registered.has(redis)) {
    redis.defineCommand('lockcheckAcquire', { numberOfKeys: 2, lua: ACQUIRE });
    redis.defineCommand('lockcheckRelease', { numberOfKeys: 1, lua: RELEASE });
    redis.defineCommand('lockcheckExtend', { numberOfKeys: 1, lua: EXTEND });
    redis.defineCommand('lockcheckRaise', { numberOfKeys: 1, lua: RAISE });
    redis.defineCommand('lockcheckFencedWrite', { numberOfKeys: 1, lua: FENCED_WRITE });
    registered.add(redis);
  }
  return redis as Redis & LockCommands;
}
