import { hashValue, illegal, type Illegal, type Model, type RegisterValue } from '../model.ts';
import { isPending, type Operation } from '../operation.ts';

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
    relevance: (ops) => writeRelevance(ops, nilReadMatchesAnything),
  };
}

/**
 * How long an unknown write can matter: only a later read that returns its
 * value can depend on it (without it, the reads up to the next write would
 * have had to return that value; the state after the next write is the
 * same), so it matters until the last such read has returned, and never
 * when no read returns its value. Not bounded when the history has a cas
 * (which observes the value too, failing or not).
 */
function writeRelevance(ops: readonly Operation<RegisterInput, RegisterOutput>[], nilReadMatchesAnything: boolean): (number | undefined)[] {
  const out = new Array<number | undefined>(ops.length).fill(undefined);
  if (ops.some((o) => o.input.f === 'cas')) return out;
  /** Per value, the latest return of a read that observed it (a wildcard read observes nothing). */
  const lastSeen = new Map<RegisterValue, number>();
  for (const o of ops) {
    const v = o.input.f === 'read' ? o.output?.value : undefined;
    if (v === undefined || (v === null && nilReadMatchesAnything)) continue;
    lastSeen.set(v, Math.max(lastSeen.get(v) ?? -Infinity, o.return ?? Infinity));
  }
  // Until the last read of its value returns, if that is not before its call (once per value, not per write and read:
  // a register whose values repeat made this quadratic before the search's deadline could apply).
  ops.forEach((o, i) => {
    if (!isPending(o) || o.input.f !== 'write') return;
    const last = lastSeen.get(o.input.value) ?? -Infinity;
    out[i] = last >= o.call ? last : -Infinity;
  });
  return out;
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
