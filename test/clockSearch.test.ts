import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { read, trueTimeOf } from '../model/clock.ts';
import type { Clock } from '../model/clock.ts';

/** A seeded generator (a 32-bit LCG): the same clocks on every run. */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

describe('the clock search (trueTimeOf) always ends', () => {
  // In a child process with a time bound: the old search stepped t++ past 2^53, where t no longer moves.
  it('refuses readings and times past 2^53-1 at the entry, and a reading reached only past it in the step, by InvalidInputError; never hangs', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'test/fixtures/clockSearchProbe.ts'], { encoding: 'utf8', timeout: 20_000 });
    const lines = r.stdout.split('\n').filter((l) => l !== '');
    expect(lines.at(-1), `did not finish (${r.signal ?? r.status}): ${r.stderr.slice(0, 300)}; last: ${lines.at(-1)}`).toBe('done');
    expect(lines.filter((l) => !l.startsWith('call ') && l !== 'done')).toEqual([
      'refused api reading past 2^53: invalid-config: trueTimeOf readingMs must be a finite number of ms in [-9007199254740991, 9007199254740991], got 9007199254741002',
      'refused api fromMs past 2^53: invalid-config: trueTimeOf fromMs must be a finite number of ms in [-9007199254740991, 9007199254740991], got 9007199254741002',
      'refused api clock reading past 2^53: invalid-config: trueTimeOf clock.readingMs must be a finite number of ms in [-9007199254740991, 9007199254740991], got 1152921504606847000',
      expect.stringMatching(/^refused core slow clock at the top: invalid-duration: the clock reads 9007199254740991 only after true time 9007199254740991/),
      expect.stringMatching(/^refused step: a retry delay past 2\^53: invalid-duration: the clock reads 100 only after true time 9007199254740991/),
    ]);
  });

  it('finds the first true time that reads enough, as a step-by-step search does, for seeded clocks of every drift', () => {
    const next = lcg(20261204);
    for (let i = 0; i < 500; i++) {
      const clock: Clock = { anchorTrueMs: Math.floor(next() * 2000) - 1000, readingMs: Math.floor(next() * 2000) - 1000, driftPpm: Math.floor(next() * 9_900_001) - 900_000 };
      const from = Math.floor(next() * 2000) - 1000;
      const reading = Math.floor(next() * 4000) - 2000;
      let first = from;
      while (read(clock, first) < reading) first++;
      expect(trueTimeOf(clock, reading, from), JSON.stringify({ clock, from, reading })).toBe(first);
    }
  });

  it('ends near 2^53 too, with a time that reads enough right after one that does not', () => {
    const max = Number.MAX_SAFE_INTEGER;
    const clock: Clock = { anchorTrueMs: 0, readingMs: -max, driftPpm: 9_000_000 };
    const t = trueTimeOf(clock, max - 5, 0);
    expect(read(clock, t)).toBeGreaterThanOrEqual(max - 5);
    expect(read(clock, t - 1)).toBeLessThan(max - 5);
  });
});
