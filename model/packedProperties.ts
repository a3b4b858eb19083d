/**
 * The state properties (MUTEX-1, LIVE-1; properties.ts's mutex and live)
 * judged on a packed state, so that the explorer can leave a fresh state of
 * the last level as numbers: it builds that state's World (the reference
 * step) only where a property it has not found yet may be broken.
 *
 * Each check reads exactly what the fingerprint makes visible (a lease's
 * validity relative to its client's clock, a key's liveness and its age
 * against LIVE-1's bound), so two states with one fingerprint get one
 * answer, as spec 8.4 requires of the World's checks.
 */
import { C_MONO_ANCHOR, clientAt, K_EXPIRES, K_LIVE_SINCE, K_PRESENT, K_TTL, KEY_STRIDE, L_PRESENT, L_VALID_UNTIL, LEASE_STRIDE, C_LEASES, N_KEYS, N_UP, nodeAt } from './packed.ts';
import type { PackedContext } from './packedFingerprint.ts';
import { expiryAt, readAt } from './packedFingerprint.ts';
import type { PropertyId } from './properties.ts';
import { liveBoundMs } from './properties.ts';

export const MUTEX_1 = 1;
export const LIVE_1 = 2;

export const STATE_BITS: ReadonlyArray<readonly [PropertyId, number]> = [
  ['MUTEX-1', MUTEX_1],
  ['LIVE-1', LIVE_1],
];

/** MUTEX-1: two clients hold a lease on one resource that each one's clock says is still valid (world.ts holdsValid). */
function mutexBroken(ctx: PackedContext, w: Float64Array): boolean {
  const l = ctx.layout;
  const now = w[0]!;
  for (let r = 0; r < l.resources.length; r++) {
    let holders = 0;
    for (let i = 0; i < l.clients; i++) {
      const c = clientAt(l, i);
      const lease = c + C_LEASES + r * LEASE_STRIDE;
      if (w[lease + L_PRESENT] !== 1) continue;
      const valid = w[lease + L_VALID_UNTIL]!;
      if ((Number.isNaN(valid) || readAt(w, c + C_MONO_ANCHOR, now) < valid) && ++holders > 1) return true;
    }
  }
  return false;
}

/** LIVE-1: an up node holds a ttl key past its bound that it may still see alive (node.ts liveness, with the tolerance). */
function liveBroken(ctx: PackedContext, w: Float64Array): boolean {
  const l = ctx.layout;
  const now = w[0]!;
  for (let n = 0; n < l.nodes; n++) {
    const at = nodeAt(l, n);
    if (w[at + N_UP] !== 1) continue;
    for (let r = 0; r < l.resources.length; r++) {
      const k = at + N_KEYS + r * KEY_STRIDE;
      if (w[k + K_PRESENT] !== 1) continue;
      const ttl = w[k + K_TTL]!;
      if (Number.isNaN(ttl)) continue;
      if (now - w[k + K_LIVE_SINCE]! <= liveBoundMs(ttl, ctx.driftFactor, ctx.toleranceMs)) continue;
      const expires = w[k + K_EXPIRES]!;
      if (Number.isNaN(expires) || expiryAt(ctx, w, at, now) <= expires + ctx.toleranceMs) return true;
    }
  }
  return false;
}

/** The state properties (STATE_BITS) the packed state `w` breaks. */
export function packedStateBreaks(ctx: PackedContext, w: Float64Array): number {
  return (mutexBroken(ctx, w) ? MUTEX_1 : 0) | (liveBroken(ctx, w) ? LIVE_1 : 0);
}
