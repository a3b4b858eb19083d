import type { ConcurrentClient } from '../adapter.ts';

/**
 * The npm lock libraries lockcheck audits through its adapters (the
 * matrix's `lib:` rows), and where each one's concurrent client lives. The
 * adapters are imported on demand: lockcheck does not depend on the
 * libraries it audits.
 */
export type LibraryId = 'redlock' | 'redlock4' | 'sesamecare-redlock' | 'advisory-lock' | 'redis-semaphore-mutex' | 'redis-semaphore-redlock-mutex' | 'ioredis-lock' | 'redis-lock';

/** The concurrent client of a library's adapter (loaded in a stress client process). */
export async function libraryConcurrent(id: LibraryId): Promise<ConcurrentClient> {
  switch (id) {
    case 'redlock':
      return (await import('./redlock.ts')).REDLOCK_V5_CONCURRENT;
    case 'redlock4':
      return (await import('./redlock4.ts')).REDLOCK4_CONCURRENT;
    case 'sesamecare-redlock':
      return (await import('./sesamecareRedlock.ts')).SESAMECARE_REDLOCK_CONCURRENT;
    case 'advisory-lock':
      return (await import('./advisoryLock.ts')).ADVISORY_LOCK_CONCURRENT;
    case 'redis-semaphore-mutex':
      return (await import('./redisSemaphore.ts')).REDIS_SEMAPHORE_MUTEX_CONCURRENT;
    case 'redis-semaphore-redlock-mutex':
      return (await import('./redisSemaphore.ts')).REDIS_SEMAPHORE_REDLOCK_MUTEX_CONCURRENT;
    case 'ioredis-lock':
      return (await import('./ioredisLock.ts')).IOREDIS_LOCK_CONCURRENT;
    case 'redis-lock':
      return (await import('./redisLock.ts')).REDIS_LOCK_CONCURRENT;
  }
}
