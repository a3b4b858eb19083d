import { describe, expect, it } from 'vitest';
import { replayHint } from '../cli/replayHint.ts';

// The replay command `lockcheck run` prints after a failure: one that runs as printed (replay refuses an adapter
// module's counterexample without --backend, and the file keeps no server URLs).
describe('replayHint', () => {
  it('a built-in backend: the file alone', () => {
    expect(replayHint('lockcheck-counterexample.json', 'redlock/strict')).toBe('lockcheck replay lockcheck-counterexample.json');
  });

  it('an adapter module: its --backend again', () => {
    expect(replayHint('lockcheck-counterexample.json', './my-adapter.ts')).toBe('lockcheck replay lockcheck-counterexample.json --backend ./my-adapter.ts');
  });

  it('paths a shell would split are quoted', () => {
    expect(replayHint('out dir/c.json', "./it's mine.ts")).toBe(`lockcheck replay 'out dir/c.json' --backend './it'\\''s mine.ts'`);
  });

  it('found on the user\'s servers: says to give them again, without their URLs', () => {
    expect(replayHint('c.json', 'redis-single/strict', { redis: ['redis://:secret@h:6379'] })).toBe('lockcheck replay c.json, with the same --redis');
    expect(replayHint('c.json', './a.ts', { redis: ['redis://h:6379'], pg: 'postgres://h/db' })).toBe('lockcheck replay c.json --backend ./a.ts, with the same --redis and --pg');
  });
});
