/**
 * The storage a lock guards, as a client sees it. A fenced store judges each
 * write's token by its policy (spec FENCE-2) in one atomic step.
 */
export type WriteResult = { readonly kind: 'accepted' } | { readonly kind: 'rejected'; readonly highest: bigint };

/** What a read sees: the value last written and its token (both null: never written). */
export interface ReadResult {
  readonly value: string | null;
  /** Token of the write that produced the value. */
  readonly token: bigint | null;
}

/** A store guarded by fencing tokens, one cell per resource (spec 6). */
export interface FencedStore {
  /**
   * Writes `value` to `resource`'s cell with `token`: accepted, or rejected
   * with the highest token the cell has accepted when the policy refuses it.
   * Throws TimeoutError or UnavailableError when the outcome is unknown;
   * InvalidInputError('precondition'), before anything is sent, for a value
   * that is not well-formed text without NUL or is larger than the server
   * takes in one request (docs/errors.md).
   */
  write(resource: string, token: bigint, value: string): Promise<WriteResult>;
  /** Reads `resource`'s cell. */
  read(resource: string): Promise<ReadResult>;
}
