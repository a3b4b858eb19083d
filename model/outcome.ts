/**
 * What a command returns. Ambiguous outcomes are values too: a `timed-out`
 * acquire may or may not have taken effect, and the model allows both.
 */

/** Why an acquire was denied. */
export type DenyReason =
  /** Someone else holds it (on a quorum of the nodes asked). */
  | 'held'
  /** Too few nodes answered: down, restarting or unreachable. */
  | 'no-quorum'
  /** A quorum answered but the time it took left no validity (Redlock step 3). */
  | 'validity-exhausted';

/** One command's outcome, by operation (granted/denied, extended/not-extended, released/not-held, accepted/rejected, a read's value), or ok/timed-out. */
export type Outcome =
  | { readonly kind: 'granted'; readonly token: bigint; readonly validUntilMs: number | null }
  | { readonly kind: 'denied'; readonly reason: DenyReason }
  | { readonly kind: 'extended'; readonly validUntilMs: number }
  | { readonly kind: 'not-extended'; readonly reason: 'not-held' | 'expired' | 'no-quorum' }
  | { readonly kind: 'released' }
  | { readonly kind: 'not-held' }
  | { readonly kind: 'accepted' }
  | { readonly kind: 'rejected'; readonly highest: bigint }
  | { readonly kind: 'value'; readonly value: string | null; readonly token: bigint | null }
  /** Faults, and operations that leave the client not knowing what happened. */
  | { readonly kind: 'ok' }
  | { readonly kind: 'timed-out' };

/** The kinds of Outcome. */
export type OutcomeKind = Outcome['kind'];
