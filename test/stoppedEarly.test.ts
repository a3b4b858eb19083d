import { describe, expect, it } from 'vitest';
import { auditText, describeCell } from '../cli/matrix.ts';
import { matrixCell } from './matrixCell.ts';
import { describeStoppedEarly, INCONCLUSIVE_CAUSES } from '../conformance/index.ts';
import { InvalidInputError } from '../model/errors.ts';

/**
 * A run that stops early says why, and so do the counts of a check and the
 * matrix: "6 of 30 runs inconclusive" alone left a user to guess whether
 * lockcheck or the library or the machine was at fault.
 */
describe('runs stopped early say why', () => {
  it('one cause in words; several with their counts, most first', () => {
    expect(describeStoppedEarly({ 'no-client-timeout': 6 })).toBe('a call had not returned when the model had it done (the library declares no client-side timeout)');
    expect(describeStoppedEarly({ ambiguous: 1, 'out-of-pace': 3 })).toBe('3 real time outran the pace, 1 too ambiguous to follow');
    expect(describeStoppedEarly({})).toBe('no cause recorded');
    // Junk is refused, typed, naming what was wrong.
    expect(() => describeStoppedEarly(null as never)).toThrow(InvalidInputError);
    expect(() => describeStoppedEarly({ lost: 1 } as never)).toThrow(/keyed by causes \(ambiguous, out-of-pace, environment, no-client-timeout\)/);
    expect(() => describeStoppedEarly({ ambiguous: -1 })).toThrow(/a count of runs/);
    expect(() => describeStoppedEarly({ ambiguous: Number.NaN })).toThrow(InvalidInputError);
    expect(Object.keys(INCONCLUSIVE_CAUSES).sort()).toEqual(['ambiguous', 'environment', 'no-client-timeout', 'out-of-pace']);
  });

  const cell = matrixCell({ backend: 'lib:some-lock', audit: true, faultClass: 'timing', runs: 30, stoppedEarly: 6, stoppedEarlyBy: { 'no-client-timeout': 6 } });

  it('in a matrix cell and its progress line', () => {
    expect(auditText(cell)).toContain('6 of 30 runs inconclusive: a call had not returned when the model had it done (the library declares no client-side timeout)');
    expect(describeCell({ ...cell, audit: false })).toContain('(6 stopped early: a call had not returned');
  });
});
