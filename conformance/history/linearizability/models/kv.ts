import { hashString, illegal, mix32, type Illegal, type Model } from '../model.ts';

export type KvInput =
  | { readonly f: 'get'; readonly key: string }
  | { readonly f: 'put'; readonly key: string; readonly value: string }
  | { readonly f: 'append'; readonly key: string; readonly value: string };

/** What a get returned. */
export interface KvOutput {
  readonly value: string;
}

/**
 * Porcupine's kv model: string registers starting at "", with get, put and
 * append, checked one key at a time (P-compositionality).
 *
 * States are interned: a state is the index of its string in this model's
 * table, so comparing and hashing states costs nothing however long the
 * appended strings grow, and each append is computed once. Create one model
 * per check (the table lives as long as the model).
 */
export function kvStore(): Model<number, KvInput, KvOutput> {
  const ILLEGAL: Illegal = illegal; // a local copy: imported bindings cost a getter call under tsx
  const strings: string[] = [''];
  const ids = new Map<string, number>([['', 0]]);
  /** Per put/append input (by identity): its value's id, or its transitions state -> state. */
  const putIds = new Map<KvInput, number>();
  const appends = new Map<KvInput, Map<number, number>>();
  const intern = (s: string): number => {
    let id = ids.get(s);
    if (id === undefined) {
      id = strings.length;
      strings.push(s);
      ids.set(s, id);
    }
    return id;
  };
  return {
    name: 'kv',
    init: () => 0,
    step(state, input, output) {
      switch (input.f) {
        case 'get':
          return output === undefined || output.value === strings[state] ? state : ILLEGAL;
        case 'put': {
          let id = putIds.get(input);
          if (id === undefined) putIds.set(input, (id = intern(input.value)));
          return id;
        }
        case 'append': {
          let table = appends.get(input);
          if (table === undefined) appends.set(input, (table = new Map()));
          let next = table.get(state);
          if (next === undefined) table.set(state, (next = intern(strings[state] + input.value)));
          return next;
        }
      }
    },
    equal: (a, b) => a === b,
    hash: mix32,
    readOnly: (input) => input.f === 'get',
    partitionKey: (input) => input.key,
  };
}

/**
 * The same store as one object (a map from key to string, missing keys read
 * as ""), without partitioning: Porcupine's `kvNoPartitionModel`, exponentially
 * slower; kept to check that partitioning does not change verdicts.
 */
export function kvStoreUnpartitioned(): Model<ReadonlyMap<string, string>, KvInput, KvOutput> {
  return {
    name: 'kv-no-partition',
    init: () => new Map(),
    step(state, input, output) {
      const current = state.get(input.key) ?? '';
      switch (input.f) {
        case 'get':
          return output === undefined || output.value === current ? state : illegal;
        case 'put':
          return new Map(state).set(input.key, input.value);
        case 'append':
          return new Map(state).set(input.key, current + input.value);
      }
    },
    readOnly: (input) => input.f === 'get',
    equal(a, b) {
      if (a.size !== b.size) return false;
      for (const [k, v] of a) if (b.get(k) !== v) return false;
      return true;
    },
    hash(s) {
      let h = 0;
      for (const [k, v] of s) h ^= hashString(k) + Math.imul(hashString(v), 31);
      return h | 0;
    },
  };
}
