import { describe, expect, it } from 'vitest';
import { withEntry } from '../model/record.ts';

describe('withEntry', () => {
  it('copies the record with the entry set, the original unchanged, keys in place', () => {
    const before = { a: 1, b: 2 };
    const after = withEntry(before, 'a', 3);
    expect(after).toEqual({ a: 3, b: 2 });
    expect(Object.keys(withEntry(before, 'c', 4))).toEqual(['a', 'b', 'c']);
    expect(before).toEqual({ a: 1, b: 2 });
  });

  it("sets '__proto__' as an own entry, as the object literal does (any string is a resource name)", () => {
    const after = withEntry<number>({}, '__proto__', 1);
    expect(Object.getPrototypeOf(after)).toBe(Object.prototype);
    expect(Object.keys(after)).toEqual(['__proto__']);
  });
});
