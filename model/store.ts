import { match } from 'ts-pattern';
import type { StorePolicy } from './design.ts';
import { checkResource, checkToken } from './errors.ts';
import { entryOf, withEntry } from './record.ts';
import { frozen } from './frozen.ts';

/**
 * The storage that a lock guards, one cell per resource. A fenced store keeps
 * the highest token it accepted and judges each write by its policy (FENCE-2);
 * an unfenced store accepts everything.
 */
export interface StoreCell {
  readonly value: string | null;
  /** Token of the last accepted write. */
  readonly token: bigint | null;
  /** Highest token ever accepted. */
  readonly highest: bigint | null;
}

/** The fenced store: its policy and one cell per resource. */
export interface StoreState {
  readonly policy: StorePolicy;
  /** Cells by resource (absent: never written; cellOf gives EMPTY_CELL). */
  readonly cells: Readonly<Record<string, StoreCell>>;
}

/** The store's judgement of a write: accepted, or rejected with the highest token accepted before. */
export type StoreDecision = { readonly accepted: true } | { readonly accepted: false; readonly highest: bigint };

/** A cell never written. */
export const EMPTY_CELL: StoreCell = frozen({ value: null, token: null, highest: null });

/** A store with `policy` and no cells. */
export function emptyStore(policy: StorePolicy): StoreState {
  return { policy, cells: {} };
}

export function cellOf(store: StoreState, resource: string): StoreCell {
  return entryOf(store.cells, resource) ?? EMPTY_CELL;
}

/** Whether `policy` lets a write with `token` through when `highest` was accepted before (FENCE-2). */
export function passes(policy: StorePolicy, token: bigint, highest: bigint | null): boolean {
  return match(policy)
    .with('unfenced', 'transactional', () => true)
    .with('strict', () => highest === null || token > highest)
    .with('monotonic', () => highest === null || token >= highest)
    .exhaustive();
}

/**
 * Applies one write. Validates first (a rejected input changes nothing) and
 * returns the decision with the next state.
 */
export function writeStore(
  store: StoreState,
  resource: string,
  token: bigint,
  value: string,
): { readonly decision: StoreDecision; readonly next: StoreState } {
  checkResource(resource);
  checkToken(token);
  const cell = cellOf(store, resource);
  if (!passes(store.policy, token, cell.highest)) {
    // A rejected write leaves no trace; highest is non-null here since null passes every policy.
    return { decision: { accepted: false, highest: cell.highest ?? 0n }, next: store };
  }
  const highest = cell.highest === null || token > cell.highest ? token : cell.highest;
  return {
    decision: { accepted: true },
    next: { ...store, cells: withEntry(store.cells, resource, { value, token, highest }) },
  };
}
