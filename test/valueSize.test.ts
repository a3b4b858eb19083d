import { describe, expect, it } from 'vitest';
import { checkValueBytes } from '../impl/valueSize.ts';
import { refusal } from './probes.ts';

/**
 * A store value is bounded by its UTF-8 bytes, the bound itself included
 * (impl/valueSize.ts; the stores' bounds are hundreds of MB, too large to
 * send in a test, so the check is tested here with a small one). Mutation
 * testing (session h34) found the bound's edge and the exact count
 * unchecked: the stores' tests send one value far past it.
 */
describe('checkValueBytes', () => {
  const check = (value: string): void => checkValueBytes(value, 12, 'a test cell', 'the test bound');

  it('takes a value of exactly the bound, in ASCII and in two-byte characters', () => {
    expect(() => check('a'.repeat(12))).not.toThrow();
    expect(() => check('é'.repeat(6))).not.toThrow();
    expect(() => check('')).not.toThrow();
  });

  it('refuses one byte more, naming its size in UTF-8 bytes and the bound', () => {
    for (const [value, bytes] of [
      ['a'.repeat(13), 13],
      ['é'.repeat(6) + 'a', 13],
      // Four emoji of 4 bytes each (8 UTF-16 units) and a letter: the count is of bytes, not of characters or units.
      ['😀'.repeat(4) + 'a', 17],
    ] as const) {
      const error = refusal(() => check(value));
      expect(error.code).toBe('precondition');
      expect(error.message).toBe(`precondition: value too large for a test cell: ${bytes} bytes, at most 12 (the test bound)`);
    }
  });
});
