import { describe, expect, it } from 'vitest';
import { read } from '../model/clock.ts';
import { readAt } from '../model/packedFingerprint.ts';

/**
 * The packed clock reading (model/packedFingerprint.ts readAt) skips the division where the clock has no drift and the
 * elapsed time is an integer: it must read what clock.ts's read() reads, also at fractional elapsed times, with drift,
 * and past 32 bits, where the shortcut does not apply.
 */
describe('readAt', () => {
  it('reads as clock.ts reads, with and without drift, at integer and fractional elapsed times', () => {
    const elapsed = [0, 1, 7, 12, 999, -3, 0.5, 2.25, 1e-9, 5 - 1e-9, 2 ** 31 + 3, -(2 ** 31) - 1, 2 ** 40 + 0.5, 2 ** 34 + 1, 2 ** 45 + 3, 123456789012];
    const drifts = [0, 1, -1, 10_000, -10_000, 900_000 - 1, -900_000];
    const w = new Float64Array(3);
    let checked = 0;
    for (const anchor of [0, 5, 1000.5]) {
      for (const reading of [0, -20, 17, 3.5]) {
        for (const driftPpm of drifts) {
          for (const e of elapsed) {
            w[0] = anchor;
            w[1] = reading;
            w[2] = driftPpm;
            const now = anchor + e;
            expect(readAt(w, 0, now), `anchor ${anchor}, reading ${reading}, drift ${driftPpm}, now ${now}`).toBe(read({ anchorTrueMs: anchor, readingMs: reading, driftPpm }, now));
            checked++;
          }
        }
      }
    }
    expect(checked).toBe(3 * 4 * drifts.length * elapsed.length);
  });
});
