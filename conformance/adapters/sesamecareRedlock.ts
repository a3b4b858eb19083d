/**
 * The adapter for `@sesamecare-oss/redlock`, the maintained fork of redlock 5
 * (same Redlock class, Lock, ExecutionError and ResourceLockedError). It sends
 * its per-node requests as ioredis custom commands (`defineCommand`):
 * `acquireLock`, `extendLock` and `releaseLock`, each one EVALSHA with
 * ioredis's own fallback to EVAL inside the same call; the kit's connections
 * take them through the run's faults like any other command. Everything else
 * is the shared Redlock adapter (redlockLibrary.ts).
 */
import { ExecutionError, Redlock, ResourceLockedError } from '@sesamecare-oss/redlock';
import type { BackendUnderTest, ConcurrentClient } from '../adapter.ts';
import type { RedisServerChoice } from '../kit.ts';
import type { RedlockAdapterOptions, RedlockLibrary } from './redlockLibrary.ts';
import { redlockConcurrent, redlockLibraryBackend } from './redlockLibrary.ts';

export const SESAMECARE_REDLOCK: RedlockLibrary = {
  name: '@sesamecare-oss/redlock@1.4.0',
  Redlock,
  ExecutionError,
  ResourceLockedError,
  commands: ['acquireLock', 'extendLock', 'releaseLock'],
};

/** @sesamecare-oss/redlock over 5 nodes. */
export function sesamecareRedlockBackend(choice: RedisServerChoice = {}, options: RedlockAdapterOptions = {}): BackendUnderTest {
  return redlockLibraryBackend(SESAMECARE_REDLOCK, choice, options);
}

export const SESAMECARE_REDLOCK_CONCURRENT: ConcurrentClient = redlockConcurrent(SESAMECARE_REDLOCK);

/** `lockcheck run --backend ./conformance/adapters/sesamecareRedlock.ts [--redis …]`; `lockcheck stress` takes `concurrent`. */
export default (choice: RedisServerChoice = {}): BackendUnderTest => sesamecareRedlockBackend(choice);
export const concurrent = SESAMECARE_REDLOCK_CONCURRENT;
