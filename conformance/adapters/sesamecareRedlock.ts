/**
 * The adapter for `@sesamecare-oss/redlock`, the maintained fork of redlock 5
 * (same Redlock class, Lock, ExecutionError and ResourceLockedError). It sends
 * its per-node requests as ioredis custom commands (`defineCommand`):
 * `acquireLock`, `extendLock` and `releaseLock`, each one EVALSHA with
 * ioredis's own fallback to EVAL inside the same call. Everything else is the
 * shared Redlock adapter (redlock.ts).
 */
import { ExecutionError, Redlock, ResourceLockedError } from '@sesamecare-oss/redlock';
import type { BackendUnderTest, ConcurrentClient } from '../adapter.ts';
import type { RedisCluster } from '../env/redisBackend.ts';
import type { RedlockAdapterOptions, RedlockLibrary } from './redlock.ts';
import { redlockConcurrent, redlockLibraryBackend } from './redlock.ts';

export const SESAMECARE_REDLOCK: RedlockLibrary = {
  name: '@sesamecare-oss/redlock@1.4.0',
  Redlock,
  ExecutionError,
  ResourceLockedError,
  commands: ['acquireLock', 'extendLock', 'releaseLock'],
};

/** @sesamecare-oss/redlock over 5 nodes. */
export function sesamecareRedlockBackend(cluster: RedisCluster, options: RedlockAdapterOptions = {}): BackendUnderTest {
  return redlockLibraryBackend(SESAMECARE_REDLOCK, cluster, options);
}

export const SESAMECARE_REDLOCK_CONCURRENT: ConcurrentClient = redlockConcurrent(SESAMECARE_REDLOCK);
