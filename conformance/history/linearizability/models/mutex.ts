import { illegal, type Illegal, type Model } from '../model.ts';

export type MutexInput = { readonly f: 'acquire' } | { readonly f: 'release' };

/**
 * Knossos's `(mutex)`: one lock, no owners. An acquire is legal only when the
 * lock is free, a release only when it is held, whoever releases it.
 */
export function mutex(): Model<boolean, MutexInput, unknown> {
  const ILLEGAL: Illegal = illegal; // a local copy: imported bindings cost a getter call under tsx
  return {
    name: 'mutex',
    init: () => false,
    step: (held, input) => (input.f === 'acquire' ? (held ? ILLEGAL : true) : held ? false : ILLEGAL),
    equal: (a, b) => a === b,
    hash: (held) => (held ? 0x5f3759df : 0x1b873593),
  };
}
