import { hashString, illegal, mix32, type Illegal, type Model } from '../model.ts';
import { leaseLockRelevance } from './leaseLockRelevance.ts';

/**
 * A lock whose grants are leases, as lockcheck's histories record them. The
 * model has no clock, so each operation carries the latest instant it can
 * have taken effect (`latest`: its return; Infinity when pending): a held
 * lock may be granted again only if its holder's deadline is not after that
 * instant. An unknown acquire (latest Infinity) may take effect at any time
 * after its invoke, so it may take over a lease that runs out, but never a
 * lock held with no deadline (a session lock); and having taken over, it
 * took effect after that deadline, so its owner's operations placed after it
 * (an extend, a release, a stacked acquire, its session's end) must have
 * returned no earlier than that deadline (`since`).
 */
export type LeaseLockInput =
  | { readonly f: 'acquire'; readonly owner: string; readonly validUntil: number; readonly latest: number; readonly token?: string }
  /** latest: the return (absent or Infinity: unknown). */
  | { readonly f: 'extend'; readonly owner: string; readonly validUntil: number; readonly latest?: number }
  | { readonly f: 'release'; readonly owner: string; readonly latest?: number }
  /** The owner's session ended (its connection was lost, its process exited): the server freed its session lock, stacked or not. latest: the signal's time. */
  | { readonly f: 'session-ended'; readonly owner: string; readonly latest?: number };

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
  /**
   * The earliest instant the holder's grant can have taken effect, when an unknown acquire took the lock over from a
   * lease (that lease's deadline); -Infinity otherwise. The holder's operations placed after the grant cannot have
   * returned before it.
   */
  readonly since: number;
}

const FREE: LeaseLockState = { holder: null, until: -Infinity, count: 0, token: undefined, since: -Infinity };

/**
 * MUTEX-1 as a sequential specification: an acquire is legal when the lock
 * is free or its holder's lease may have run out by the acquire's latest
 * instant (an unknown acquire: the lease has a deadline), or (a session lock
 * stacking, spec 7.4) when the holder acquires again with no deadline on
 * either grant and the same token; an extend only by the holder; a release
 * by the holder frees it (or unstacks one acquire), by anyone else changes
 * nothing (a compare-and-delete that found another owner); the end of the
 * holder's session frees it at once. The holder's extend, release, stacked
 * acquire or session's end that returned before `since` cannot follow its
 * grant. Lenient where time is uncertain, so it
 * never reports a violation a real-time order could explain.
 */
export function leaseLock(): Model<LeaseLockState, LeaseLockInput, unknown> {
  const ILLEGAL: Illegal = illegal; // a local copy: imported bindings cost a getter call under tsx
  return {
    name: 'lease-lock',
    init: () => FREE,
    step(state, input): LeaseLockState | Illegal {
      switch (input.f) {
        case 'acquire': {
          const pending = input.latest === Infinity;
          // Taken over: a lease that may have run out by the acquire's latest instant. An unknown acquire may land after any
          // deadline, but never frees a lock held without one (Infinity <= Infinity would let it take a session lock).
          if (state.holder === null || (pending ? state.until < Infinity : state.until <= input.latest)) {
            const since = pending && state.holder !== null ? Math.max(state.until, state.since) : -Infinity;
            return { holder: input.owner, until: input.validUntil, count: input.validUntil === Infinity ? 1 : 0, token: input.token, since };
          }
          // Whether the grant stacks depends on how it was granted, not on its deadline now (an unknown extend moves that).
          if (state.holder === input.owner && state.count > 0 && input.validUntil === Infinity && (state.token === undefined || input.token === undefined || state.token === input.token)) {
            return input.latest < state.since ? ILLEGAL : { ...state, count: state.count + 1 };
          }
          return ILLEGAL;
        }
        case 'extend':
          return state.holder === input.owner && !((input.latest ?? Infinity) < state.since) ? { ...state, until: input.validUntil } : ILLEGAL;
        case 'release':
          if (state.holder !== input.owner) return state;
          if ((input.latest ?? Infinity) < state.since) return ILLEGAL;
          return state.count > 1 ? { ...state, count: state.count - 1 } : FREE;
        case 'session-ended':
          if (state.holder !== input.owner) return state;
          return (input.latest ?? Infinity) < state.since ? ILLEGAL : FREE;
      }
    },
    equal: (a, b) => a.holder === b.holder && a.until === b.until && a.count === b.count && a.token === b.token && a.since === b.since,
    hash: (s) => (s.holder === null ? 0 : hashString(s.holder)) ^ mix32((Number.isFinite(s.until) ? Math.trunc(s.until) | 0 : 0x7fffffff) + s.count),
    relevance: leaseLockRelevance,
  };
}
