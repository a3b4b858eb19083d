/**
 * The lock clients: a lease lock over any set of lease nodes (one node, or
 * Redlock's majority), leases whose AbortSignal fires when they may no
 * longer be used, the fenced store interface, and the monotonic clock every
 * client reads. The Redis and PostgreSQL locks are in `lockcheck/redis` and
 * `lockcheck/postgres`.
 */
export { LeaseLock } from './leaseLock.ts';
export type { AcquireOptions, AcquireResult, ExtendResult, LeaseLockOptions } from './leaseLock.ts';
export { LeaseHandle } from './lease.ts';
export type { Lease } from './lease.ts';
export type { LeaseNode } from './leaseNode.ts';
export type { FencedStore, ReadResult, WriteResult } from './fencedStore.ts';
export { systemClock } from './clock.ts';
export { sleep, withTimeout } from './publicTime.ts';
export type { MonotonicClock } from './clock.ts';
export { using, LockNotAcquiredError } from './using.ts';
export type { UsableLock, UsingOptions } from './using.ts';
export { ConnectionConfigError, InvalidInputError, isRefusal, LeaseLostError, ReplicationError, ServerRefusedError, TimeoutError, TokenOverflowError, UnavailableError, WireProtocolError } from './errors.ts';
