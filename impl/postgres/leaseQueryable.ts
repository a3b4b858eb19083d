import type pg from 'pg';
import { InvalidInputError } from '../../model/errors.ts';

/**
 * A lease's transaction as its holder gets it (`queryable(lease)`,
 * `withLock`'s `tx`): the lease's connection, whose `query` refuses once
 * `live()` says the lease is over, before anything is sent. The lock keeps
 * its connections for later acquires: a statement sent through a kept
 * reference after the COMMIT (a late callback, a paused holder) ran in
 * autocommit with no lock held, or inside the next holder's transaction,
 * and committed with it. A statement sent while the lease is live is queued
 * ahead of the COMMIT, so it runs inside the transaction.
 *
 * Everything but `query` is the connection's own (a Proxy: code that reads
 * the client's fields, such as its processID, still works).
 */
export function leaseQueryable(client: pg.Client, resource: string, live: () => boolean): pg.Client {
  const query = (...args: unknown[]): unknown => {
    if (live()) return (client.query as (...a: unknown[]) => unknown)(...args);
    return refused(new InvalidInputError('precondition', `no open transaction for '${resource}': its lease is over (released, rolled back or lost), so the statement was not sent`), args);
  };
  const tx = new Proxy(client, {
    get(target, property) {
      if (property === 'query') return query;
      const value: unknown = Reflect.get(target, property, target);
      // The client's own methods run on the client itself, not on the proxy.
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  leaseTransactions.add(tx);
  return tx;
}

/** Every lease transaction handed out: a transactional fenced store writes through one of them only. */
const leaseTransactions = new WeakSet<object>();

/** Whether `db` is a lease's transaction as leaseQueryable made it (`queryable(lease)`, `withLock`'s `tx`). */
export function isLeaseTransaction(db: unknown): boolean {
  return typeof db === 'object' && db !== null && leaseTransactions.has(db);
}

/** The refusal in the form the call asked for, as node-postgres answers a client that is not queryable: a submittable's error, a callback, or a rejected promise. */
function refused(e: Error, args: unknown[]): unknown {
  const [config, values, callback] = args;
  const submittable = config as { submit?: unknown; handleError?: (e: Error) => void } | null;
  if (typeof submittable?.submit === 'function') {
    process.nextTick(() => submittable.handleError?.(e));
    return submittable;
  }
  const done = typeof values === 'function' ? values : callback;
  if (typeof done === 'function') {
    process.nextTick(() => (done as (e: Error) => void)(e));
    return undefined;
  }
  return Promise.reject(e);
}
