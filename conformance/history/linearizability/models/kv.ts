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
 * A state is a small integer naming a string that is never built unless a
 * get of the same length has to be compared with it: each state records its
 * parent, the appended tail, its length and two polynomial hashes, which an
 * append extends in O(1). So appends cost the same however long the strings
 * grow, and equality stays exact (equal hashes and lengths are confirmed on
 * the strings). Create one model per check (the table lives as long as it).
 */
export function kvStore(): Model<number, KvInput, KvOutput> {
  const ILLEGAL: Illegal = illegal; // a local copy: imported bindings cost a getter call under tsx
  const parent: number[] = [-1];
  const tail: string[] = [''];
  const length: number[] = [0];
  const hashA: number[] = [0];
  const hashB: number[] = [0];
  const text: (string | undefined)[] = [''];
  /** Per put/append input (by identity): its value's hashes, and for an append its transitions state -> state. */
  const seen = new Map<KvInput, { readonly a: number; readonly b: number; readonly powA: number; readonly powB: number; readonly next: Map<number, number> }>();
  const putIds = new Map<string, number>([['', 0]]);

  const valueOf = (id: number): string => {
    let s = text[id];
    if (s === undefined) {
      const chain: number[] = [];
      let at = id;
      while (text[at] === undefined) {
        chain.push(at);
        at = parent[at]!;
      }
      s = text[at]!;
      for (let i = chain.length - 1; i >= 0; i--) text[chain[i]!] = s = s + tail[chain[i]!]!;
    }
    return s;
  };
  const facts = (input: KvInput & { readonly value: string }) => {
    let f = seen.get(input);
    if (f === undefined) {
      let a = 0;
      let b = 0;
      let powA = 1;
      let powB = 1;
      for (let i = 0; i < input.value.length; i++) {
        const c = input.value.charCodeAt(i);
        a = (Math.imul(a, 0x01000193) + c) | 0;
        b = (Math.imul(b, 0x5bd1e995) + c) | 0;
        powA = Math.imul(powA, 0x01000193);
        powB = Math.imul(powB, 0x5bd1e995);
      }
      seen.set(input, (f = { a, b, powA, powB, next: new Map() }));
    }
    return f;
  };
  const add = (from: number, value: string, a: number, b: number): number => {
    const id = length.length;
    parent.push(from);
    tail.push(value);
    length.push((from < 0 ? 0 : length[from]!) + value.length);
    hashA.push(a);
    hashB.push(b);
    text.push(from < 0 ? value : undefined);
    return id;
  };
  return {
    name: 'kv',
    init: () => 0,
    step(state, input, output) {
      switch (input.f) {
        case 'get': {
          if (output === undefined) return state;
          const v = output.value;
          return v.length === length[state] && v === valueOf(state) ? state : ILLEGAL;
        }
        case 'put': {
          const f = facts(input);
          let id = f.next.get(-1);
          if (id === undefined) {
            id = putIds.get(input.value);
            if (id === undefined) putIds.set(input.value, (id = add(-1, input.value, f.a, f.b)));
            f.next.set(-1, id);
          }
          return id;
        }
        case 'append': {
          const f = facts(input);
          let id = f.next.get(state);
          if (id === undefined) {
            const a = (Math.imul(hashA[state]!, f.powA) + f.a) | 0;
            const b = (Math.imul(hashB[state]!, f.powB) + f.b) | 0;
            f.next.set(state, (id = add(state, input.value, a, b)));
          }
          return id;
        }
      }
    },
    equal: (x, y) => x === y || (length[x] === length[y] && hashA[x] === hashA[y] && hashB[x] === hashB[y] && valueOf(x) === valueOf(y)),
    hash: (x) => hashA[x]! ^ mix32(length[x]!),
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
