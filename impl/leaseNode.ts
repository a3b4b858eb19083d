/**
 * One lock-service node as the lease algorithms see it: four atomic scripts.
 * Redis runs them as Lua scripts (impl/redis); tests run them in memory.
 * Every method may reject (node down, unreachable, timed out): the algorithm
 * counts that as a vote against. Calls to one node take effect in the order
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
