import { hashString, illegal, mix32, type Illegal, type Model } from '../model.ts';
import { leaseLockRelevance } from './leaseLockRelevance.ts';

/**
 * A lock whose grants are leases, as lockcheck's histories record them. The
 * model has no clock, so each acquire carries the latest instant it can
 * have taken effect (its return; Infinity when pending): a held lock may be
 * granted again only if its holder's deadline is not after that instant.
 */
export type LeaseLockInput =
  | { readonly f: 'acquire'; readonly owner: string; readonly validUntil: number; readonly latest: number }
  | { readonly f: 'extend'; readonly owner: string; readonly validUntil: number }
  | { readonly f: 'release'; readonly owner: string };

export interface LeaseLockState {
  /** null: free. */
  readonly holder: string | null;
  /** The holder's deadline on the history's clock (Infinity: a session lock, or not known). */
  readonly until: number;
}

const FREE: LeaseLockState = { holder: null, until: -Infinity };

/**
 * MUTEX-1 as a sequential specification: an acquire is legal when the lock
 * is free or its holder's lease may have run out; an extend only by the
 * holder; a release by the holder frees it, by anyone else changes nothing
 * (a compare-and-delete that found another owner). Lenient where time is
 * uncertain, so it never reports a violation a real-time order could explain.
 */
export function leaseLock(): Model<LeaseLockState, LeaseLockInput, unknown> {
  const ILLEGAL: Illegal = illegal; // a local copy: imported bindings cost a getter call under tsx
  return {
    name: 'lease-lock',
    init: () => FREE,
    step(state, input): LeaseLockState | Illegal {
      switch (input.f) {
        case 'acquire':
          return state.holder === null || state.until <= input.latest ? { holder: input.owner, until: input.validUntil } : ILLEGAL;
        case 'extend':
          return state.holder === input.owner ? { holder: input.owner, until: input.validUntil } : ILLEGAL;
        case 'release':
          return state.holder === input.owner ? FREE : state;
      }
    },
    equal: (a, b) => a.holder === b.holder && a.until === b.until,
    hash: (s) => (s.holder === null ? 0 : hashString(s.holder)) ^ mix32(Number.isFinite(s.until) ? Math.trunc(s.until) | 0 : 0x7fffffff),
    relevance: leaseLockRelevance,
  };
}
