/**
 * Locks on PostgreSQL (spec: pg-session, pg-xact): a session advisory lock
 * with a fencing token minted in the same statement, a transaction-scoped
 * lock whose writes commit with it, and the fenced store both write through.
 */
export { PostgresSessionLock } from './sessionLock.ts';
export type { PostgresLockOptions, SessionAcquireOptions } from './sessionLock.ts';
export { PostgresTransactionLock } from './xactLock.ts';
export type { WithLockOptions } from './xactLock.ts';
export { openPostgresFencedStore, postgresFencedStore } from './store.ts';
export type { PostgresFencedStoreConnection, PostgresFencedStoreOptions, PostgresStoreOptions, Queryable } from './store.ts';
export { ensureSchema, SCHEMA } from './schema.ts';
export { advisoryKey } from './keys.ts';
/** The wire client's refusal of replies it cannot read (also exported by lockcheck/lock, with isRefusal true for it). */
export { WireProtocolError } from '../errors.ts';
