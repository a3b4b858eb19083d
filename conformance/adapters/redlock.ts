/**
 * Adapters for Redlock libraries from npm, checked against lockcheck's
 * redlock model on real redis-server processes: `redlock` (5.0.0-beta.2)
 * here, and its maintained fork `@sesamecare-oss/redlock` in
 * sesamecareRedlock.ts, both through one factory (redlockLibraryBackend) on
 * the adapter kit (redisLibraryBackend, conformance/kit.ts).
 *
 * The library runs unchanged. The kit gives each client its own ioredis
 * connections to the five nodes, every command of which goes through the
 * run's faults (partitions, delays, late replies, slow or black-holed nodes,
 * pauses, crashed nodes), and runs the library's calls on the client's
 * clocks: Date.now() reads the client's wall clock, the in-process
 * counterpart of the nodes' libfaketime clocks. What the adapter adds:
 * - Retries. Redlock runs with retryCount 0 and the adapter retries
 *   (`retries`, `retryDelayMs`) on the client's clock itself, so that one
 *   call of the library is one attempt.
 * - Deadlines. The library's `lock.expiration` is a wall-clock instant; the
 *   lease reports it on the client's monotonic clock, as the adapter API
 *   requires: validUntilMs = clock.now() + (lock.expiration - Date.now()).
 * - Results. A Lock is a grant (token 0n: Redlock has no fencing tokens, so
 *   the runner compares outcomes without them, and the store is unfenced).
 *   An ExecutionError is a denial, compared without its reason: the
 *   library's vote counts settle only once every node has answered, after
 *   the call (the contract's `denialReasons: false`).
 *
 * lockKey lets the runner read the library's keys, so OWN-1 is checked
 * white-box. On lockcheck's own servers every run starts with the nodes'
 * script caches flushed (the kit does), as fresh servers would have them.
 */
// @ts-expect-error TS7016: redlock's "exports" map hides its dist/index.d.ts (see bench/redlockTyped.ts); RedlockLibrary (redlockLibrary.ts) types what is used.
import RedlockV5, { ExecutionError as ExecutionErrorV5, ResourceLockedError as ResourceLockedErrorV5 } from 'redlock';
import type { BackendUnderTest, ConcurrentClient } from '../adapter.ts';
import type { RedisServerChoice } from '../kit.ts';
import type { RedlockAdapterOptions, RedlockLibrary } from './redlockLibrary.ts';
import { redlockConcurrent, redlockLibraryBackend } from './redlockLibrary.ts';

export type { RedlockAdapterOptions, RedlockLibrary, RedlockLike, RedlockLockLike, RedlockSettingsLike, RedlockStats } from './redlockLibrary.ts';
export { redlockConcurrent, redlockKey, redlockLibraryBackend } from './redlockLibrary.ts';
export { redlockContract } from './contracts.ts';

/** redlock@5.0.0-beta.2: `_attemptOperationOnClient` calls `evalsha`, and `eval` after a NOSCRIPT reply. */
export const REDLOCK_V5: RedlockLibrary = {
  name: 'redlock@5.0.0-beta.2',
  Redlock: RedlockV5,
  ExecutionError: ExecutionErrorV5,
  ResourceLockedError: ResourceLockedErrorV5,
  commands: ['evalsha', 'eval'],
};

export const REDLOCK_V5_CONCURRENT: ConcurrentClient = redlockConcurrent(REDLOCK_V5);

/** redlock@5.0.0-beta.2 over 5 nodes. */
export function redlockBackend(choice: RedisServerChoice = {}, options: RedlockAdapterOptions = {}): BackendUnderTest {
  return redlockLibraryBackend(REDLOCK_V5, choice, options);
}

/** `lockcheck run --backend ./conformance/adapters/redlock.ts [--redis …]` (five nodes); `lockcheck stress` takes `concurrent`. */
export default (choice: RedisServerChoice = {}): BackendUnderTest => redlockBackend(choice);
export const concurrent = REDLOCK_V5_CONCURRENT;
