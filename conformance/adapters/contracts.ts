import type { LibraryContract } from '../adapter.ts';

/**
 * What each audited library promises (its adapter's `contract`), in a module
 * that loads none of the libraries: the matrix's `lib:` rows and the seed
 * exploration (conformance/writeSeeds.ts) read the contracts from here, so
 * the model that predicts a row and seeds its runs is the model of the
 * library's contract, the same one its adapter is judged by.
 */

/**
 * What both Redlock libraries promise (redlock 5 dist/esm/index.js, the fork
 * build/index.js): a deadline `lock.expiration` with their own drift
 * allowance, `Math.round(driftFactor * duration) + 2`, where lockcheck's
 * model rounds up; no fencing tokens; no client-side timeout (ioredis
 * connections without commandTimeout); `extend(duration)` sets the duration
 * it is given; a failed extend throws and leaves the Lock and its keys as
 * they were (`failedExtend: { lease: 'unchanged' }`: `extend` builds a new
 * Lock only on success, so the caller's Lock keeps its `expiration` while
 * the call is out and after it fails, an extension to a shorter duration
 * too); and no check of its input (an empty resource name is a key).
 * A refusal does not say why when it is given: `acquire` rejects with an
 * ExecutionError as soon as a quorum voted against, and its `attempts` are
 * promises of vote counts that settle only once every node has answered,
 * which a slow node (no client timeout) delays past the call (denialReasons
 * false: an adapter that waited for them to name a reason was judged as a
 * call still pending, and the run ended inconclusive).
 */
export function redlockContract(driftFactor: number): LibraryContract {
  return { ...redlockTerms(driftFactor), failedExtend: { lease: 'unchanged', keys: 'kept' }, denialReasons: false };
}

/** What redlock 4 and 5 share. */
function redlockTerms(driftFactor: number): LibraryContract {
  return { deadline: 'known', clientTimeout: false, validatesInput: false, refreshTtl: 'given', tokens: 'none', driftMargin: { factor: driftFactor, fixedMs: 2, rounding: 'round' } };
}

/**
 * redlock 4.2.0: the promises of redlock 5 (but the reasons), and its failed extend as
 * redlock.js has it: `_lock`'s failure path unlocks (deletes the keys on
 * every node it reaches) while the caller's Lock keeps its expiration
 * (`extend` sets `lock.expiration` only on success: 'unchanged').
 * It says why it refused: `_lock` waits for every node before it answers,
 * and its adapter counts the votes it has then (redlock4.ts). So it decides
 * on every reply (`decidesAt: 'every-reply'`): `_lock` counts `waiting` down
 * over every server's callback, its failure path waits for `lock.unlock`,
 * which does the same, and so does a release (without it, a slow node left
 * 9 of 30 timing runs inconclusive: the call pending past the model's answer).
 */
export const REDLOCK4_CONTRACT: LibraryContract = { ...redlockTerms(0.01), decidesAt: 'every-reply', failedExtend: { lease: 'unchanged', keys: 'deleted' } };

/**
 * What redis-semaphore's mutexes promise: no deadline (`isAcquired` stays
 * true until a refresh fails), no client-side timeout, a refresh re-arms the
 * fixed lockTimeout, no tokens, no input checks. Mutex: a refresh that finds
 * its key gone drops the lock (Lock.js `_processRefresh`: `_refresh` false,
 * `_acquired = false`, onLockLost); one that throws (mutex/refresh.js lets a
 * Redis error reject: a cut link) leaves it acquired, so 'dropped-if-denied'
 * ("when lock loss is detected", its README says of onLockLost).
 */
export const REDIS_SEMAPHORE_CONTRACT: LibraryContract = { deadline: 'none', clientTimeout: false, refreshTtl: 'acquired', tokens: 'none', validatesInput: false, failedExtend: { lease: 'dropped-if-denied', keys: 'kept' } };
/**
 * RedlockMutex's acquire (redlockMutex/acquire.js, acquireRedlockMutex)
 * counts a node that fails (`.catch(() => 0)`) as a node that said no, and
 * returns false either way: it does not tell a held lock from too few nodes.
 * Its refresh counts a failed node as a no too (redlockMutex/refresh.js), so
 * any refusal drops the lock and deletes its value from every node
 * (`delIfEqualLua` on every client). It decides on every reply: acquire,
 * refresh and release await `Promise.all` over the nodes, and a refused
 * acquire or refresh awaits its `delIfEqualLua` round on every node too.
 */
export const REDIS_SEMAPHORE_REDLOCK_CONTRACT: LibraryContract = { ...REDIS_SEMAPHORE_CONTRACT, decidesAt: 'every-reply', failedExtend: { lease: 'dropped', keys: 'deleted' }, denialReasons: false };

/**
 * @microfleet/ioredis-lock: no deadline, no timeout, extend sets the ttl
 * given, no tokens. Its extend (lib/lock.js) drops the lock (`_locked =
 * false`) only when `pexpireifequal` answers 0, the key gone; a Redis error
 * (a cut link) throws the same LockExtendError with the lock still held:
 * 'dropped-if-denied'.
 */
export const IOREDIS_LOCK_CONTRACT: LibraryContract = { deadline: 'none', clientTimeout: false, refreshTtl: 'given', tokens: 'none', validatesInput: false, failedExtend: { lease: 'dropped-if-denied', keys: 'kept' } };

/**
 * redis-lock: done() is all the caller gets (no deadline), a node-redis v4
 * client without command timeouts and a retry loop without end (no client
 * timeout), no tokens, any name and timeout taken. It has no extend.
 */
export const REDIS_LOCK_CONTRACT: LibraryContract = { deadline: 'none', clientTimeout: false, tokens: 'none', validatesInput: false };

/** advisory-lock: a session lock (no deadline), no tokens, and no timeout (its pg.Client is opened from a bare connection string). */
export const ADVISORY_LOCK_CONTRACT: LibraryContract = { deadline: 'none', clientTimeout: false, tokens: 'none', validatesInput: false };
