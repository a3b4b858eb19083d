import { describe, expect, it } from 'vitest';
import { replayHint } from '../cli/replayHint.ts';
import { stressCommandLine, summaryText } from '../cli/stress.ts';
import type { StressSummary } from '../cli/stress.ts';

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

// Every command lockcheck prints to copy quotes the user's paths as replayHint does: a path with a space was split
// in two, and one with ';' or '$(…)' ran more than lockcheck when pasted.
describe('commands printed to copy quote paths a shell would split', () => {
  const hostile = "my runs/$(touch pwned); it's";

  it('the stress summary\'s lockcheck check of its history', () => {
    const summary = {
      backend: 'redis-single', store: 'unfenced', clients: 1, seconds: 1, nemesis: [], seed: 1, verdict: 'safe', operations: 1, opsPerSecond: 1, cycles: 1,
      holds: 1, overlappingHolds: 0, lostUpdates: 0, staleWritesAccepted: 0, writesRejected: 0, unknownOutcomes: 0, faults: 0, faultIntervals: 0, durationMs: 1000, overheadMs: 0,
      clientErrors: [], adapterErrors: [], unobserved: null, faultsNotStruck: [], checks: [], findings: [], historyFile: `${hostile}/history.jsonl`, reportFile: null,
    } as unknown as StressSummary;
    expect(summaryText(summary)).toContain(`(judge it again: lockcheck check 'my runs/$(touch pwned); it'\\''s/history.jsonl')`);
  });

  it('the stress command line of an adapter module at such a path', () => {
    const line = stressCommandLine({ clients: 1, seconds: 1, resources: 1, ttlMinMs: 200, ttlMaxMs: 300, store: 'unfenced', nemesis: [], seed: 1, backend: 'redis-single', adapter: { name: 'a', ref: { kind: 'module', path: `/x/${hostile}.ts` }, client: {} as never } });
    expect(line).toMatch(/^lockcheck stress --backend '\/x\/my runs\/\$\(touch pwned\); it'\\''s\.ts' --store unfenced /);
  });
});
