import type { LeaseLockInput } from '../conformance/history/linearizability/models/leaseLock.ts';
import type { Operation } from '../conformance/history/linearizability/operation.ts';

/**
 * LIN-1 of a lock history by brute force, written from spec/SPEC.md ("Linearizability checking") and not from the
 * checker's model: every order of the known operations and of any subset of the unknown ones, each given an instant
 * (the earliest its predecessors, its call and, for an unknown acquire taking a lease over, that lease's deadline
 * allow), legal when every known operation's instant is not after its return. Exponential: for histories of up to
 * 7 operations.
 */
interface RefState {
  readonly holder: string | null;
  readonly until: number;
  readonly count: number;
  readonly token: string | undefined;
}
const FREE: RefState = { holder: null, until: -Infinity, count: 0, token: undefined };

/** The state after `input` and the earliest instant it can take effect at, or undefined: not legal. */
function apply(s: RefState, input: LeaseLockInput, known: boolean, ret: number, at: number): { state: RefState; at: number } | undefined {
  switch (input.f) {
    case 'acquire': {
      const grant = (since: number) => ({ state: { holder: input.owner, until: input.validUntil, count: input.validUntil === Infinity ? 1 : 0, token: input.token }, at: Math.max(at, since) });
      if (s.holder === null) return grant(-Infinity);
      // A known acquire takes a lease over when its deadline is not after the acquire's return (lenient).
      if (known && s.until <= ret) return grant(-Infinity);
      // An unknown acquire takes a lease (never a session lock) over after its deadline.
      if (!known && s.until < Infinity) return grant(s.until);
      const sameToken = s.token === undefined || input.token === undefined || s.token === input.token;
      if (s.holder === input.owner && s.count > 0 && input.validUntil === Infinity && sameToken) return { state: { ...s, count: s.count + 1 }, at };
      return undefined;
    }
    case 'extend':
      return s.holder === input.owner ? { state: { ...s, until: input.validUntil }, at } : undefined;
    case 'release':
      if (s.holder !== input.owner) return { state: s, at };
      return { state: s.count > 1 ? { ...s, count: s.count - 1 } : FREE, at };
    case 'session-ended':
      return { state: s.holder === input.owner ? FREE : s, at };
  }
}

export function lockHistoryLinearizable(ops: readonly Operation<LeaseLockInput, unknown>[]): boolean {
  const known = ops.map((o) => o.return !== undefined && o.return !== Infinity);
  const search = (placed: readonly boolean[], state: RefState, at: number): boolean => {
    if (ops.every((_, i) => placed[i] || !known[i])) return true;
    return ops.some((o, i) => {
      if (placed[i]) return false;
      const ret = known[i] ? o.return! : Infinity;
      const next = apply(state, o.input, known[i]!, ret, Math.max(at, o.call));
      if (next === undefined || next.at > ret) return false;
      const now = [...placed];
      now[i] = true;
      return search(now, next.state, next.at);
    });
  };
  return search(
    ops.map(() => false),
    FREE,
    -Infinity,
  );
}
