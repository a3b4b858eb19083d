import { checkResource } from '../../model/errors.ts';

/** Where a resource lives in Redis. The prefix keeps lockcheck's keys apart from the application's. */
export interface KeyNames {
  readonly lock: string;
  readonly counter: string;
  readonly cell: string;
}

export function keysFor(resource: string, prefix = 'lockcheck'): KeyNames {
  checkResource(resource);
  return { lock: `${prefix}:lock:${resource}`, counter: `${prefix}:token:${resource}`, cell: `${prefix}:store:${resource}` };
}
