import { describe, expect, it } from 'vitest';
import { TimeoutError, UnavailableError } from '../impl/errors.ts';

/**
 * An error's constructor never throws in the place of the error it makes
 * (impl/errorText.ts): whatever a caller (or a driver) hands it as the
 * message, the error is made and its message says what it could. Mutation
 * testing (session h34) found the fallback for a value String() cannot
 * convert unchecked; it read "a object".
 */
describe('an error made from a value String() cannot convert', () => {
  const unprintable = [
    ['an object whose toString throws', { toString: (): string => { throw new Error('no'); } }],
    ['an object without a prototype', Object.create(null) as object],
  ] as const;

  it.each(unprintable)('%s: TimeoutError names it as an object', (_what, value) => {
    const e = new TimeoutError(value as unknown as string, 5);
    expect(e.message).toBe('an object timed out after 5 ms');
  });

  it.each(unprintable)('%s: UnavailableError says it is an object', (_what, value) => {
    expect(new UnavailableError(value as unknown as string).message).toBe('an object');
  });

  it('a function whose toString throws: named as a function', () => {
    const f = Object.assign(() => undefined, { toString: (): string => { throw new Error('no'); } });
    expect(new UnavailableError(f as unknown as string).message).toBe('a function');
  });

  it('a Symbol, a number and a string are shown as they are; an absent message stays empty', () => {
    expect(new TimeoutError(Symbol('acquire') as unknown as string, 7).message).toBe('Symbol(acquire) timed out after 7 ms');
    expect(new UnavailableError(42 as unknown as string).message).toBe('42');
    expect(new UnavailableError('down').message).toBe('down');
    expect(new UnavailableError().message).toBe('');
  });
});
