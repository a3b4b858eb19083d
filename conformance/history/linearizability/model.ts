import type { Operation } from './operation.ts';

/**
 * A sequential specification: what one operation may answer in a state, and
 * the state it leaves. The checker searches for an order of a history's
 * operations that this specification accepts.
 */

/** The answer of `step` when the output cannot be observed in the state. */
export const illegal: unique symbol = Symbol('illegal');
export type Illegal = typeof illegal;

export interface Model<S, I, O> {
  readonly name: string;
  /** The state before any operation. */
  init(): S;
  /**
   * The operation applied to `state` and observed answering `output`
   * (`undefined`: the caller saw no answer). Returns the next state, or
   * `illegal` when that output is impossible in `state`. Must be pure: the
   * search calls it many times with the same arguments.
   */
  step(state: S, input: I, output: O | undefined): S | Illegal;
  /** State equality; two equal states must have equal hashes. */
  equal(a: S, b: S): boolean;
  /** A 32-bit integer hash of a state. */
  hash(state: S): number;
  /**
   * Whether the operation leaves every state it is legal in unchanged (a
   * read, a cas observed failing). The search places such an operation as
   * soon as it is legal and tries no alternative to it: doing it earlier
   * only lifts its deadline. Absent: never.
   */
  readOnly?(input: I, output: O | undefined): boolean;
  /**
   * How long operations with an unknown outcome can matter, derived from
   * this model's semantics: per operation, `undefined` (no bound; ignored
   * for known outcomes) or an instant T such that any linearization of the
   * history can be turned into one that leaves the operation out or places
   * it before every operation called after T (as if it had returned at T).
   * `-Infinity`: it never matters (always left out). The search then forgets
   * an unknown operation once the history has moved past T, instead of
   * keeping it as a candidate to the end. Must be exact, never a guess: the
   * verdict may not change (test/linearizability.test.ts checks it).
   */
  relevance?(operations: readonly Operation<I, O>[]): readonly (number | undefined)[];
  /**
   * P-compositionality: when the model is a product of independent objects
   * (one register per key), the key an input touches. Each key's operations
   * are then checked on their own, which is exponentially cheaper.
   */
  partitionKey?(input: I): string;
}

/** Mixes a 32-bit integer (murmur3's finaliser) so that nearby values spread over the table. */
export function mix32(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x | 0;
}

/** FNV-1a over the UTF-16 code units of a string. */
export function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h | 0;
}

/** A hash of a register value (number, string, bigint, boolean or null). */
export function hashValue(v: RegisterValue): number {
  if (v === null) return 0x6e756c6c;
  switch (typeof v) {
    case 'number':
      return Number.isInteger(v) && Math.abs(v) < 2 ** 31 ? mix32(v | 0) : hashString(String(v));
    case 'string':
      return hashString(v) ^ 0x5bd1e995;
    case 'bigint':
      return hashString(v.toString()) ^ 0x27d4eb2f;
    case 'boolean':
      return v ? 0x74727565 : 0x66616c73;
  }
}

/** What a register holds: `null` is "absent" (never written) or, in Knossos's models, "unknown". */
export type RegisterValue = number | string | bigint | boolean | null;
