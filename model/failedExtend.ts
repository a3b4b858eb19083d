import type { FailedExtend } from './design.ts';

/**
 * What a refused extension does to the lease, by the client's terms
 * (spec 7.11 failedExtend), for the reference and the packed step alike.
 * Internal to the model (not exported by lockcheck/model).
 */

/**
 * Whether a refused extension leaves the lease's deadline as it was before
 * the extension was sent ('unchanged', 'dropped-if-denied'); otherwise a
 * shorter ttl lowers it at the send (spec 4.1). Absent terms: lockcheck's client, which lowers.
 */
export function keepsDeadline(terms: FailedExtend | undefined): boolean {
  return terms?.lease === 'unchanged' || terms?.lease === 'dropped-if-denied';
}

/** Whether a refused extension drops the lease; `denied`: the nodes' answers refused it (not the want of answers). */
export function dropsLease(terms: FailedExtend, denied: boolean): boolean {
  return terms.lease === 'dropped' || (terms.lease === 'dropped-if-denied' && denied);
}
