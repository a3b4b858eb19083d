import type { Model } from './model.ts';
import type { Operation } from './operation.ts';

/** One independently checked part of a history: its key and its operations' indices in the whole history. */
export interface Partition<I, O> {
  /** The key (`undefined` when the model is not partitioned). */
  readonly key: string | undefined;
  readonly operations: readonly Operation<I, O>[];
  /** `indices[i]` is the index in the whole history of `operations[i]`. */
  readonly indices: readonly number[];
}

/** Splits a history by the model's key (P-compositionality), keys in order of first appearance. */
export function partitionHistory<S, I, O>(model: Model<S, I, O>, operations: readonly Operation<I, O>[]): Partition<I, O>[] {
  if (model.partitionKey === undefined) return [{ key: undefined, operations, indices: operations.map((_, i) => i) }];
  const byKey = new Map<string, { ops: Operation<I, O>[]; indices: number[] }>();
  operations.forEach((op, i) => {
    const key = model.partitionKey!(op.input);
    let part = byKey.get(key);
    if (part === undefined) byKey.set(key, (part = { ops: [], indices: [] }));
    part.ops.push(op);
    part.indices.push(i);
  });
  return [...byKey].map(([key, p]) => ({ key, operations: p.ops, indices: p.indices }));
}
