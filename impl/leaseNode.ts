/**
 * One lock-service node as the lease algorithms see it: four atomic scripts.
 * Redis runs them as Lua scripts (impl/redis); tests run them in memory.
 * Every method may reject (node down, unreachable, timed out): the algorithm
 * counts that as a vote against. A rejection no retry fixes
 * (ConnectionConfigError, ServerRefusedError, TokenOverflowError,
 * InvalidInputError; for release the first two only) is thrown by the
 * lock's acquire, extend and release when it kept that round off a quorum,
 * not read as `no-quorum`. A programming error (a TypeError, RangeError,
 * ReferenceError or SyntaxError) is no vote either: the lock's call rejects
 * with it at once. A node of your own whose transport reports an outage as a
 * TypeError (fetch's "fetch failed") must reject with another error for it.
 *
 * A node checks its arguments before anything is sent and rejects (never
 * throws synchronously) with InvalidInputError: `resource` as the lock's
 * ('invalid-resource'), `owner` a non-empty string of at most 256
 * characters, well-formed Unicode without NUL ('invalid-config'), `ttlMs` an
 * integer in [1, 2^31-1] ('invalid-ttl'), `token` a bigint in [0, 2^63-1]
 * ('invalid-token'). redisLeaseNode does; a node of your own should too.
 *
 * Calls to one node take effect in the order
 * they are made (one connection: Redis runs its commands in order), so a
 * release sent while an acquire is still unanswered runs after it.
 */
export interface LeaseNode {
  /**
   * If no live key for `resource` exists, sets it to `owner` with a ttl and,
   * in the same atomic step, increments the resource's token counter and
   * returns it. Returns null when another key is live.
   */
  acquire(resource: string, owner: string, ttlMs: number): Promise<bigint | null>;
  /** Deletes the key only if `owner` holds it. */
  release(resource: string, owner: string): Promise<boolean>;
  /** Resets the key's ttl only if `owner` holds it. */
  extend(resource: string, owner: string, ttlMs: number): Promise<boolean>;
  /** Raises the resource's token counter to at least `token`. */
  raiseToken(resource: string, token: bigint): Promise<void>;
}
