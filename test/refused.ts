import { InvalidInputError } from '../model/errors.ts';

/** What `f` threw synchronously, which must be a `kind` (InvalidInputError unless named): anything else is rethrown, no throw fails. */
export function refused<E extends Error = InvalidInputError>(f: () => unknown, kind: abstract new (...args: never[]) => E = InvalidInputError as never): E {
  try {
    f();
  } catch (e) {
    if (e instanceof kind) return e;
    throw e;
  }
  throw new Error(`expected a refusal (${kind.name})`);
}
