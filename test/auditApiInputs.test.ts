import { describe, expect, it } from 'vitest';
import { simLeaseBackend } from '../conformance/sim/backend.ts';
import { simSessionBackend } from '../conformance/sim/sessionBackend.ts';
import { checkConformance } from '../conformance/check.ts';
import { htmlTimeline } from '../conformance/timeline.ts';
import type { RunReport } from '../conformance/verdict.ts';
import { shown } from '../impl/options.ts';
import { InvalidInputError } from '../impl/errors.ts';
import { designs } from '../model/design.ts';
import * as model from '../model/index.ts';
import { checkDuration } from '../model/errors.ts';
import { LeaseLock } from '../impl/leaseLock.ts';

/** Claims 1 ms less validity than it has: a conformance failure, whose report has a timeline. */
class ShortValidity extends LeaseLock {
  protected override driftMarginMs(ttlMs: number): number {
    return super.driftMarginMs(ttlMs) + 1;
  }
}

/**
 * Inputs an audit of the public API found mishandled (session h35): a long
 * string took time quadratic in its length before its refusal came back
 * (the secret search of a message), a long report overflowed the call
 * stack, and a value with no string form threw a TypeError from a message.
 */
describe('long and odd inputs are refused or answered at once, typed', () => {
  it('a message shows a string of a million characters by its kind at once; one with an @ still as perhaps a secret', () => {
    // The secret search rescanned to the end from every position: minutes for this length (21 s at 200,000).
    expect(shown('x'.repeat(1_000_000))).toBe('a string of 1000000 characters');
    expect(shown(`${'x'.repeat(1_000_000)}@`)).toBe('a string of 1000001 characters (not shown: it may hold a secret)');
    expect(shown(`${'x'.repeat(1_000_000)} password=`)).toMatch(/not shown: it may hold a secret/);
    // Short text is searched as before.
    expect(shown('postgres://app:hunter2@db/x')).toBe('a string of 27 characters (not shown: it may hold a secret)');
    expect(shown('plain')).toBe('"plain"');
  });

  it('htmlTimeline of a report of 200,000 steps is a page, not a RangeError', async () => {
    const found = await checkConformance(simLeaseBackend(designs.redisSingle(), 'strict', { lock: (p) => new ShortValidity(p) }, 'short validity'), { runs: 30, seed: 3, faults: ['advance', 'pause'] });
    const report: RunReport | undefined = found.failure?.report;
    if (report === undefined) throw new Error('no report to lengthen');
    const long: RunReport = { ...report, steps: Array.from({ length: 200_000 }, () => report.steps[0]!) };
    expect(htmlTimeline(long)).toMatch(/^<!doctype html>/i);
  });

  it('a client or a name with no string form is refused with InvalidInputError, not a TypeError from the message', () => {
    const w = model.initialWorld({ design: designs.redisSingle(), clients: 2, store: 'strict' });
    expect(() => model.holdsValid(w, Object.create(null) as number, 'r')).toThrow(InvalidInputError);
    expect(() => checkDuration(1.5, Object.create(null) as string)).toThrow(InvalidInputError);
  });

  it('the sim backends check their store and name as they are made: InvalidInputError, not a TypeError or a later adapter error', () => {
    for (const make of [(store: unknown, name?: unknown) => simLeaseBackend(designs.redisSingle(), store as 'strict', {}, name as string), (store: unknown, name?: unknown) => simSessionBackend(store as 'strict', {}, name as string)]) {
      for (const store of [Symbol('s'), 'zzz', undefined, 5]) expect(() => make(store)).toThrow(expect.objectContaining({ name: 'InvalidInputError', code: 'invalid-config', message: expect.stringContaining('policy must be one of') as string }));
      for (const name of [42, '', null]) expect(() => make('strict', name)).toThrow(expect.objectContaining({ name: 'InvalidInputError', message: expect.stringContaining('name must be a non-empty string') as string }));
      expect(make('monotonic', 'mine').name).toBe('mine');
      expect(make('strict').name).toMatch(/^memory .* \/ strict$/);
    }
  });
});
