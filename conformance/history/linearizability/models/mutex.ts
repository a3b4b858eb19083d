import { illegal, type Model } from '../model.ts';

export type MutexInput = { readonly f: 'acquire' } | { readonly f: 'release' };

/**
 * Knossos's `(mutex)`: one lock, no owners. An acquire is legal only when the
 * lock is free, a release only when it is held, whoever releases it.
 */
export const mutex = (): Model<boolean, MutexInput, unknown> => ({
  name: 'mutex',
  init: () => false,
  step: (held, input) => (input.f === 'acquire' ? (held ? illegal : true) : held ? false : illegal),
  equal: (a, b) => a === b,
  hash: (held) => (held ? 0x5f3759df : 0x1b873593),
});
