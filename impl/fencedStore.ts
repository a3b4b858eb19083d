/**
 * The storage a lock guards, as a client sees it. A fenced store judges each
 * write's token by its policy (spec FENCE-2) in one atomic step.
 */
export type WriteResult = { readonly kind: 'accepted' } | { readonly kind: 'rejected'; readonly highest: bigint };

export interface ReadResult {
  readonly value: string | null;
  /** Token of the write that produced the value. */
  readonly token: bigint | null;
}

export interface FencedStore {
  write(resource: string, token: bigint, value: string): Promise<WriteResult>;
  read(resource: string): Promise<ReadResult>;
}
