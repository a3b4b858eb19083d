import { createHash } from 'node:crypto';
import { checkResource } from '../../model/errors.ts';

/**
 * Resource names to PostgreSQL advisory keys: the first 8 bytes of the
 * SHA-256 of the UTF-8 name, as a signed 64-bit integer (the one-argument
 * pg_advisory_lock(bigint) form).
 *
 * Collisions: two names that map to the same key share one lock. That never
 * breaks exclusion (it only over-excludes), but the two resources then block
 * each other. With n resources the chance of any collision is about
 * n^2 / 2^65: 1e-10 for 100,000 names. Advisory keys are database-wide, so
 * other code taking numeric advisory locks in the same database shares the
 * key space: give lockcheck its own database, or check for overlap.
 */
export function advisoryKey(resource: string): bigint {
  checkResource(resource);
  return createHash('sha256').update(resource, 'utf8').digest().readBigInt64BE(0);
}

/** Keys of the names used lately, as the statements take them (decimal digits). */
const recentKeys = new Map<string, string>();
/** Bound on recentKeys: emptied when full, so a stream of distinct names costs a hash each, as without it. */
const RECENT_KEYS = 1024;

/**
 * advisoryKey as the lock statements take it, remembered for the names used
 * lately: the hash costs more client CPU than the rest of an acquire.
 */
export function advisoryKeyText(resource: string): string {
  let key = recentKeys.get(resource);
  if (key === undefined) {
    key = advisoryKey(resource).toString();
    if (recentKeys.size >= RECENT_KEYS) recentKeys.clear();
    recentKeys.set(resource, key);
  }
  return key;
}
