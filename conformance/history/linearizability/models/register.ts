import { hashValue, illegal, type Illegal, type Model, type RegisterValue } from '../model.ts';

/** A single register's operations. */
export type RegisterInput =
  | { readonly f: 'read' }
  | { readonly f: 'write'; readonly value: RegisterValue }
  | { readonly f: 'cas'; readonly from: RegisterValue; readonly to: RegisterValue };

/** What a read returned (`value`; `null` is "absent" or, in Knossos's models, "not known"), or whether a cas applied (`ok`). */
export interface RegisterOutput {
  readonly value?: RegisterValue;
  readonly ok?: boolean;
}

export type RegisterModel = Model<RegisterValue, RegisterInput, RegisterOutput>;

interface RegisterRules {
  readonly name: string;
  readonly init: RegisterValue;
  /** Knossos: a read of nil is a wildcard ("we do not know what it read"). */
  readonly nilReadMatchesAnything: boolean;
  readonly allowCas: boolean;
}

// A switch rather than ts-pattern: this runs in the search's innermost loop.
function makeRegister(rules: RegisterRules): RegisterModel {
  const { nilReadMatchesAnything, allowCas } = rules;
  const ILLEGAL: Illegal = illegal; // a local copy: imported bindings cost a getter call under tsx
  return {
    name: rules.name,
    init: () => rules.init,
    step(state, input, output) {
      switch (input.f) {
        case 'read': {
          if (output === undefined || output.value === undefined) return state;
          const v = output.value;
          return v === state || (v === null && nilReadMatchesAnything) ? state : ILLEGAL;
        }
        case 'write':
          return input.value;
        case 'cas': {
          if (!allowCas) return ILLEGAL;
          const applies = input.from === state;
          // A failed cas is a definite observation that the compare failed (Porcupine's etcd model).
          if (output !== undefined && output.ok !== undefined && output.ok !== applies) return ILLEGAL;
          return applies ? input.to : state;
        }
        default:
          return unreachable(input);
      }
    },
    equal: (a, b) => a === b,
    hash: hashValue,
    readOnly: (input, output) => input.f === 'read' || (input.f === 'cas' && output?.ok === false),
  };
}

function unreachable(x: never): never {
  throw new Error(`unexpected register operation ${JSON.stringify(x)}`);
}

/**
 * Porcupine's etcd model: one register, initially absent (`null`); a read
 * must return exactly the current value (`null`: absent); `cas(from, to)`
 * applies when the register holds `from`, and a failed cas is an observation
 * that it did not. An unobserved output (timed-out, unknown) is legal.
 */
export const etcdRegister = (): RegisterModel =>
  makeRegister({ name: 'etcd-register', init: null, nilReadMatchesAnything: false, allowCas: true });

/** Knossos's `(cas-register init)`: reads of nil match anything; a cas applies only when the register holds `from`. */
export const casRegister = (init: RegisterValue = 0): RegisterModel =>
  makeRegister({ name: `cas-register ${String(init)}`, init, nilReadMatchesAnything: true, allowCas: true });

/** Knossos's `(register init)`: read and write only. */
export const register = (init: RegisterValue = 0): RegisterModel =>
  makeRegister({ name: `register ${String(init)}`, init, nilReadMatchesAnything: true, allowCas: false });
