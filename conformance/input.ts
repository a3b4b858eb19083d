import { checkDuration, checkRetries, checkResource, checkTtl, InvalidInputError } from '../model/errors.ts';
import { checkObject, refuse } from '../impl/options.ts';

/**
 * The input checks every LockClient owes its caller (the suite sends
 * invalid calls and expects InvalidInputError before anything is sent), for
 * adapters around libraries that do not check themselves.
 */
export function checkAcquireInput(resource: unknown, options: { readonly ttlMs?: unknown; readonly retries?: unknown; readonly retryDelayMs?: unknown }, ttl: boolean): void {
  // Public (lockcheck/kit): an adapter's own mistake in calling it is named too, never a TypeError.
  checkObject(options, 'checkAcquireInput options');
  if (typeof ttl !== 'boolean') refuse('checkAcquireInput ttl', 'a boolean (whether the lock has a ttl)', ttl);
  checkResource(resource);
  if (ttl) checkTtl(options.ttlMs);
  else if (options.ttlMs !== undefined) throw new InvalidInputError('unsupported-operation', 'a session lock has no ttl');
  checkRetries(options.retries);
  checkDuration(options.retryDelayMs ?? 0, 'retryDelayMs');
}
