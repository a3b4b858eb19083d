import { TokenOverflowError } from '../../impl/errors.ts';
import { MAX_TOKEN } from '../../model/errors.ts';

/**
 * The token a simulated server's counter mints after `current`, as the real
 * ones do: past 2^63-1 it refuses (TokenOverflowError, Redis's INCR overflow,
 * PostgreSQL's bigint out of range), never hands out a token out of range.
 */
export function mintAfter(current: bigint, resource: string): bigint {
  if (current >= MAX_TOKEN) throw new TokenOverflowError(resource);
  return current + 1n;
}
