import { hashString, illegal, mix32, type Illegal, type Model } from '../model.ts';
import { leaseLockRelevance } from './leaseLockRelevance.ts';

/**
 * A lock whose grants are leases, as lockcheck's histories record them. The
 * model has no clock, so each acquire carries the latest instant it can
 * have taken effect (its return; Infinity when pending): a held lock may be
 * granted again only if its holder's deadline is not after that instant.
 */
export type LeaseLockInput =
  | { readonly f: 'acquire'; readonly owner: string; readonly validUntil: number; readonly latest: number; readonly token?: string }
  | { readonly f: 'extend'; readonly owner: string; readonly validUntil: number }
  | { readonly f: 'release'; readonly owner: string }
  /** The owner's session ended (its connection was lost, its process exited): the server freed its session lock, stacked or not. */
  | { readonly f: 'session-ended'; readonly owner: string };

export interface LeaseLockState {
  /** null: free. */
  readonly holder: string | null;
  /** The holder's deadline on the history's clock (Infinity: a session lock, or not known). */
  readonly until: number;
  /**
   * How many acquires of the holder a session lock (granted without deadline) has stacked (PostgreSQL, spec 7.4):
   * each needs its own release. 0: a lease granted with a deadline, which does not stack.
   */
  readonly count: number;
  /** The holder's token, when its grant named one: a stacked acquire returns the same token. */
  readonly token: string | undefined;
}

const FREE: LeaseLockState = { holder: null, until: -Infinity, count: 0, token: undefined };

/**
 * MUTEX-1 as a sequential specification: an acquire is legal when the lock
 * is free or its holder's lease may have run out, or (a session lock
 * stacking, spec 7.4) when the holder acquires again with no deadline on
 * either grant and the same token; an extend only by the holder; a release
 * by the holder frees it (or unstacks one acquire), by anyone else changes
 * nothing (a compare-and-delete that found another owner); the end of the
 * holder's session frees it at once. Lenient where time is uncertain, so it
 * never reports a violation a real-time order could explain.
 */
export function leaseLock(): Model<LeaseLockState, LeaseLockInput, unknown> {
  const ILLEGAL: Illegal = illegal; // a local copy: imported bindings cost a getter call under tsx
  return {
    name: 'lease-lock',
    init: () => FREE,
    step(state, input): LeaseLockState | Illegal {
      switch (input.f) {
        case 'acquire':
          if (state.holder === null || state.until <= input.latest) return { holder: input.owner, until: input.validUntil, count: input.validUntil === Infinity ? 1 : 0, token: input.token };
          // Whether the grant stacks depends on how it was granted, not on its deadline now (an unknown extend moves that).
          if (state.holder === input.owner && state.count > 0 && input.validUntil === Infinity && (state.token === undefined || input.token === undefined || state.token === input.token)) {
            return { ...state, count: state.count + 1 };
          }
          return ILLEGAL;
        case 'extend':
          return state.holder === input.owner ? { ...state, until: input.validUntil } : ILLEGAL;
        case 'release':
          return state.holder !== input.owner ? state : state.count > 1 ? { ...state, count: state.count - 1 } : FREE;
        case 'session-ended':
          return state.holder === input.owner ? FREE : state;
      }
    },
    equal: (a, b) => a.holder === b.holder && a.until === b.until && a.count === b.count && a.token === b.token,
    hash: (s) => (s.holder === null ? 0 : hashString(s.holder)) ^ mix32((Number.isFinite(s.until) ? Math.trunc(s.until) | 0 : 0x7fffffff) + s.count),
    relevance: leaseLockRelevance,
  };
}
