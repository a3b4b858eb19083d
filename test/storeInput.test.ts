import { describe, expect, it } from 'vitest';
import { SimStore } from '../conformance/kit.ts';
import { emptyStore, InvalidInputError, writeStore } from '../model/index.ts';
import type { StoreState } from '../model/index.ts';

/**
 * The in-memory stores a user reaches (lockcheck/model's writeStore and
 * emptyStore, lockcheck/kit's SimStore) take what the real stores take and
 * refuse the rest as they do: InvalidInputError, nothing changed.
 */
const BAD_VALUES: ReadonlyArray<readonly [string, unknown]> = [
  ['a number', 42],
  ['null', null],
  ['NUL', 'a\0b'],
  ['a lone surrogate', 'a\uD800'],
];
const BAD_TOKENS: readonly unknown[] = [1, '1', Number.NaN, -1n, 2n ** 63n];

function refusedAs(f: () => unknown, code: string): void {
  let thrown: unknown;
  try {
    f();
  } catch (e) {
    thrown = e;
  }
  expect(thrown).toBeInstanceOf(InvalidInputError);
  expect((thrown as InvalidInputError).code).toBe(code);
}

describe("lockcheck/model's store", () => {
  const written = (): StoreState => writeStore(emptyStore('strict'), 'r', 5n, 'v').next;

  it('writeStore refuses a value, token or resource no real store takes, leaves the store as it was, and judges tokens exactly past 2^53 and at 2^63-1', () => {
    const before = written();
    const copy = structuredClone(before);
    for (const [, value] of BAD_VALUES) refusedAs(() => writeStore(before, 'r', 6n, value as string), 'precondition');
    refusedAs(() => writeStore(before, 'fresh', 6n, 'a\0b'), 'precondition');
    for (const token of BAD_TOKENS) refusedAs(() => writeStore(before, 'r', token as bigint, 'v'), 'invalid-token');
    for (const resource of ['', 'x'.repeat(257), 'a\0']) refusedAs(() => writeStore(before, resource, 6n, 'v'), 'invalid-resource');
    expect(before).toEqual(copy);
    let s = writeStore(emptyStore('strict'), 'r', 2n ** 53n, 'a').next;
    const next = writeStore(s, 'r', 2n ** 53n + 1n, 'b');
    expect(next.decision).toEqual({ accepted: true });
    s = next.next;
    expect(writeStore(s, 'r', 2n ** 53n + 1n, 'c').decision).toEqual({ accepted: false, highest: 2n ** 53n + 1n });
    s = writeStore(s, 'r', 2n ** 63n - 1n, 'd').next;
    expect(s.cells['r']).toEqual({ value: 'd', token: 2n ** 63n - 1n, highest: 2n ** 63n - 1n });
  });

  it('writeStore and emptyStore refuse a store or policy that is not one, by name (was a ts-pattern error)', () => {
    refusedAs(() => emptyStore('bogus' as never), 'invalid-config');
    refusedAs(() => writeStore({ policy: 'bogus', cells: {} } as never, 'r', 1n, 'v'), 'invalid-config');
  });
});

describe("lockcheck/kit's SimStore", () => {
  it('write and put refuse a value no real store keeps; nothing changes', () => {
    const store = new SimStore('monotonic');
    store.write('r', 5n, 'v');
    for (const [, value] of BAD_VALUES) {
      refusedAs(() => store.write('r', 6n, value as string), 'precondition');
      refusedAs(() => store.put('r', 6n, value as string), 'precondition');
    }
    expect(store.read('r')).toEqual({ value: 'v', token: 5n });
    expect(store.highest('r')).toBe(5n);
  });

  it('read, highest and put refuse a resource or token the real stores refuse (read and highest answered for any name)', () => {
    const store = new SimStore('strict');
    for (const resource of ['', 'x'.repeat(257), 'a\0', 7]) {
      refusedAs(() => store.read(resource as string), 'invalid-resource');
      refusedAs(() => store.highest(resource as string), 'invalid-resource');
      refusedAs(() => store.put(resource as string, 1n, 'v'), 'invalid-resource');
    }
    for (const token of BAD_TOKENS) {
      refusedAs(() => store.put('r', token as bigint, 'v'), 'invalid-token');
      refusedAs(() => store.write('r', token as bigint, 'v'), 'invalid-token');
    }
    expect(store.read('r')).toEqual({ value: null, token: null });
    expect(store.highest('r')).toBeNull();
  });
});
