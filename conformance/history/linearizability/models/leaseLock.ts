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
 * took effect after that deadline, so every operation placed after it (its
 * owner's and anyone's, after the lock is freed again too) must have
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
   * The earliest instant at which what is placed from now on can take effect: the latest deadline of a lease an unknown
   * acquire took over (it took effect after it, and instants follow the order); -Infinity if none. An operation that
   * returned before it cannot be placed any more, whoever's it is and whatever holds the lock: kept when the lock is
   * freed (a taker's unknown release then frees it after that deadline, not before).
   */
  readonly since: number;
}

const FREE: LeaseLockState = { holder: null, until: -Infinity, count: 0, token: undefined, since: -Infinity };
/** The lock freed: what follows still took effect no earlier than `since`. */
const freed = (s: LeaseLockState): LeaseLockState => (s.since === -Infinity ? FREE : { ...FREE, since: s.since });

/**
 * MUTEX-1 as a sequential specification: an acquire is legal when the lock
 * is free or its holder's lease may have run out by the acquire's latest
 * instant (an unknown acquire: the lease has a deadline), or (a session lock
 * stacking, spec 7.4) when the holder acquires again with no deadline on
 * either grant and the same token; an extend only by the holder; a release
 * by the holder frees it (or unstacks one acquire), by anyone else changes
 * nothing (a compare-and-delete that found another owner); the end of the
 * holder's session frees it at once. No operation that returned before
 * `since` (the deadline an unknown acquire's takeover followed) can come
 * after. Lenient where time is uncertain, so it never reports a violation a
 * real-time order could explain.
 */
export function leaseLock(): Model<LeaseLockState, LeaseLockInput, unknown> {
  const ILLEGAL: Illegal = illegal; // a local copy: imported bindings cost a getter call under tsx
  return {
    name: 'lease-lock',
    init: () => FREE,
    step(state, input): LeaseLockState | Illegal {
      // Instants follow the order: nothing placed after a takeover of a lease took effect before that lease's deadline.
      if ((input.latest ?? Infinity) < state.since) return ILLEGAL;
      switch (input.f) {
        case 'acquire': {
          const pending = input.latest === Infinity;
          // Taken over: a lease that may have run out by the acquire's latest instant. An unknown acquire may land after any
          // deadline, but never frees a lock held without one (Infinity <= Infinity would let it take a session lock).
          if (state.holder === null || (pending ? state.until < Infinity : state.until <= input.latest)) {
            const since = pending && state.holder !== null ? Math.max(state.until, state.since) : state.since;
            return { holder: input.owner, until: input.validUntil, count: input.validUntil === Infinity ? 1 : 0, token: input.token, since };
          }
          // Whether the grant stacks depends on how it was granted, not on its deadline now (an unknown extend moves that).
          if (state.holder === input.owner && state.count > 0 && input.validUntil === Infinity && (state.token === undefined || input.token === undefined || state.token === input.token)) {
            return { ...state, count: state.count + 1 };
          }
          return ILLEGAL;
        }
        case 'extend':
          return state.holder === input.owner ? { ...state, until: input.validUntil } : ILLEGAL;
        case 'release':
          if (state.holder !== input.owner) return state;
          return state.count > 1 ? { ...state, count: state.count - 1 } : freed(state);
        case 'session-ended':
          return state.holder !== input.owner ? state : freed(state);
      }
    },
    equal: (a, b) => a.holder === b.holder && a.until === b.until && a.count === b.count && a.token === b.token && a.since === b.since,
    hash: (s) => (s.holder === null ? 0 : hashString(s.holder)) ^ mix32((Number.isFinite(s.until) ? Math.trunc(s.until) | 0 : 0x7fffffff) + s.count),
    relevance: leaseLockRelevance,
  };
}
