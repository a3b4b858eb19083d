import { checkDuration, checkRetries, checkResource, checkTtl } from '../model/errors.ts';
import type { AcquireOptions } from './leaseLock.ts';
import { checkObject } from './options.ts';

/** A lease lock's acquire options, checked and defaulted (the signal apart: a backend may check its own options first). */
export interface LeaseAcquirePlan {
  readonly ttlMs: number;
  readonly retries: number;
  readonly retryDelayMs: number;
  readonly retryJitterMs: number;
}

/**
 * The checks every lease lock (Redis/Redlock, etcd, ZooKeeper) makes on an
 * acquire's input, in the one order they all name the first bad input:
 * resource, the options object, unknown keys (`checkKeys`, the lock's own
 * list), ttl, retries, retryDelayMs, retryJitterMs. Throws InvalidInputError.
 */
export function checkLeaseAcquire(resource: string, options: AcquireOptions, checkKeys: (options: object) => void): LeaseAcquirePlan {
  checkResource(resource);
  checkObject(options, 'acquire options');
  checkKeys(options);
  const ttlMs = checkTtl(options.ttlMs);
  const retries = checkRetries(options.retries);
  const retryDelayMs = checkDuration(options.retryDelayMs ?? 0, 'retryDelayMs');
  const retryJitterMs = checkDuration(options.retryJitterMs ?? 0, 'retryJitterMs');
  return { ttlMs, retries, retryDelayMs, retryJitterMs };
}
