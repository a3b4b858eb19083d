import { hashString, hashValue, illegal, type Model, type RegisterValue } from '../model.ts';

/** One micro-operation of a transaction: a read of `key` (value `null`: not known) or a write. */
export interface MicroOp {
  readonly f: 'read' | 'write';
  readonly key: string;
  readonly value: RegisterValue;
}

export type MultiRegisterState = Readonly<Record<string, RegisterValue>>;
/** The transaction as invoked (reads not yet known). */
export type MultiRegisterInput = readonly MicroOp[];
/** The transaction as completed (reads filled in); absent when the outcome is unknown. */
export type MultiRegisterOutput = readonly MicroOp[];

/**
 * Knossos's `(multi-register init)`: a transaction of reads and writes over
 * named registers, applied atomically in order. A read is legal when its
 * value is `null` (unknown) or the register's current value.
 */
export function multiRegister(init: MultiRegisterState): Model<MultiRegisterState, MultiRegisterInput, MultiRegisterOutput> {
  return {
    name: 'multi-register',
    init: () => init,
    step(state, input, output) {
      let next = state;
      for (const op of output ?? input) {
        if (op.f === 'read') {
          if (op.value !== null && op.value !== (next[op.key] ?? null)) return illegal;
        } else if ((next[op.key] ?? null) !== op.value) {
          next = { ...next, [op.key]: op.value };
        }
      }
      return next;
    },
    readOnly: (input) => input.every((op) => op.f === 'read'),
    equal(a, b) {
      if (a === b) return true;
      const ka = Object.keys(a);
      if (ka.length !== Object.keys(b).length) return false;
      return ka.every((k) => a[k] === b[k]);
    },
    hash(s) {
      let h = 0;
      for (const k of Object.keys(s)) h ^= hashString(k) + Math.imul(hashValue(s[k] ?? null), 31);
      return h | 0;
    },
  };
}
