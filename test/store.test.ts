import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { InvalidInputError, MAX_TOKEN } from '../model/errors.ts';
import { emptyStore, writeStore } from '../model/store.ts';
import type { StorePolicy } from '../model/design.ts';

const token = fc.bigInt({ min: 0n, max: MAX_TOKEN });
const smallToken = fc.bigInt({ min: 0n, max: 6n });

describe('fenced store (FENCE-2)', () => {
  for (const policy of ['strict', 'monotonic'] as const satisfies readonly StorePolicy[]) {
    test.prop([fc.array(fc.tuple(fc.oneof(token, smallToken), fc.string()), { maxLength: 40 })])(
      `${policy}: accepts exactly the writes its policy lets through, under any schedule`,
      (writes) => {
        let store = emptyStore(policy);
        let highest: bigint | null = null;
        for (const [t, value] of writes) {
          const { decision, next } = writeStore(store, 'r', t, value);
          // An independent oracle of the rule, not the store's own helper.
          const allowed = highest === null || (policy === 'strict' ? t > highest : t >= highest);
          expect(decision.accepted).toBe(allowed);
          if (allowed) highest = highest === null || t > highest ? t : highest;
          else expect(next).toBe(store);
          store = next;
          expect(store.cells['r']?.highest ?? null).toBe(highest);
        }
      },
    );
  }

  it('strict rejects a second write with the same token; monotonic accepts it', () => {
    const once = (p: StorePolicy) => writeStore(emptyStore(p), 'r', 7n, 'a').next;
    expect(writeStore(once('strict'), 'r', 7n, 'b').decision).toEqual({ accepted: false, highest: 7n });
    expect(writeStore(once('monotonic'), 'r', 7n, 'b').decision).toEqual({ accepted: true });
  });

  it('unfenced and transactional take every write, a token below the highest too, and keep the highest (session h39)', () => {
    for (const policy of ['unfenced', 'transactional'] as const) {
      const store = writeStore(emptyStore(policy), 'r', 7n, 'a').next;
      const { decision, next } = writeStore(store, 'r', 3n, 'b');
      expect(decision, policy).toEqual({ accepted: true });
      expect(next.cells['r'], policy).toEqual({ value: 'b', token: 3n, highest: 7n });
    }
  });

  it('compares tokens exactly past 2^53', () => {
    const big = 2n ** 53n + 1n;
    const store = writeStore(emptyStore('strict'), 'r', big, 'a').next;
    expect(writeStore(store, 'r', big - 1n, 'b').decision.accepted).toBe(false);
    expect(writeStore(store, 'r', big + 1n, 'b').decision.accepted).toBe(true);
    expect(writeStore(store, 'r', MAX_TOKEN, 'c').decision.accepted).toBe(true);
  });

  test.prop([fc.oneof(fc.bigInt({ max: -1n }), fc.bigInt({ min: MAX_TOKEN + 1n }), fc.integer(), fc.constant(undefined), fc.string())])(
    'rejects a token that is not a bigint in [0, 2^63-1] and keeps its state',
    (bad) => {
      const store = writeStore(emptyStore('strict'), 'r', 3n, 'kept').next;
      const before = structuredClone(store);
      expect(() => writeStore(store, 'r', bad as bigint, 'x')).toThrow(InvalidInputError);
      expect(store).toEqual(before);
    },
  );
});
