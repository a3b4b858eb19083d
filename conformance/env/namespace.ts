import { createHash } from 'node:crypto';
import { checkResource, MAX_RESOURCE_LENGTH } from '../../model/errors.ts';
import type { BackendInstance, LockClient } from '../adapter.ts';

/**
 * A run's clients and environment with every resource name under `prefix`.
 * On a shared server (the user's own) each run works under names of its own,
 * so it needs no reset that could touch anyone else's data, and it can
 * delete exactly what it made. The runner keeps using the plain names.
 */
export function namespaced(instance: BackendInstance, prefix: string): BackendInstance {
  // Bad names are refused as the backend would refuse them; a name too long with the prefix is kept under it by its hash.
  const name = (resource: string): string => {
    checkResource(resource);
    const full = `${prefix}${resource}`;
    return full.length <= MAX_RESOURCE_LENGTH ? full : `${prefix}#${createHash('sha256').update(resource).digest('hex')}`;
  };
  const env = instance.env;
  return {
    clients: instance.clients.map(
      (c): LockClient => ({
        acquire: async (resource, options) => c.acquire(name(resource), options),
        ...(c.extend !== undefined ? { extend: c.extend.bind(c) } : {}),
        release: (lease) => c.release(lease),
        store: { write: async (resource, token, value) => c.store.write(name(resource), token, value), read: async (resource) => c.store.read(name(resource)) },
        clock: c.clock,
      }),
    ),
    env: { ...env, ...(env.inspect !== undefined ? { inspect: (resource: string) => env.inspect!(name(resource)) } : {}) },
    close: () => instance.close(),
  };
}
