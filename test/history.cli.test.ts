import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

/** `lockcheck check` as a user runs it: a child process, its exit code, its output. */
const dir = mkdtempSync(join(tmpdir(), 'lockcheck-check-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const FIXTURES = 'test/fixtures/histories';

function lockcheck(args: string[], input?: string): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['cli/lockcheck.mjs', ...args], { encoding: 'utf8', timeout: 60_000, ...(input === undefined ? {} : { input }) });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('lockcheck check', () => {
  it('a safe history: exit 0; --json gives the report', () => {
    const r = lockcheck(['check', join(FIXTURES, 'safe.jsonl'), '--json']);
    expect(r.code, r.stderr).toBe(0);
    const json = JSON.parse(r.stdout) as { verdict: string; storePolicy: string; counts: Record<string, number>; checks: { property: string; verdict: string }[] };
    expect(json).toMatchObject({ verdict: 'safe', storePolicy: 'strict', counts: { operations: 8, unknownOutcomes: 2, writesAccepted: 1, writesUnknown: 1 } });
    expect(json.checks.map((c) => c.property)).toEqual(expect.arrayContaining(['MUTEX-1', 'FENCE-1', 'STORE-1', 'FENCE-2']));
  });

  it('a violation: exit 1, the finding names the lines of both holds; --report writes the timeline', () => {
    const report = join(dir, 'report');
    const r = lockcheck(['check', join(FIXTURES, 'overlap.jsonl'), '--report', report]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toMatch(/VIOLATION/);
    expect(r.stdout).toMatch(/MUTEX-1: two clients believed they held 'r' at once: process 0 from 4 to 80 ms .* process 1 from 42 to 70 ms .*\[lines 2, 3, 5, 7, 14, 16\]/);
    expect(readFileSync(join(report, 'history.html'), 'utf8')).toMatch(/class="hold violating"/);
  });

  it('reads stdin with -, and --store-policy overrides the meta line', () => {
    const stale = [
      { type: 'meta', store: 'strict' },
      { type: 'invoke', process: 0, time: 0, op: 'write', resource: 'r', key: 'k', value: '1', prev: null, token: '5' },
      { type: 'ok', process: 0, time: 1, op: 'write', resource: 'r', key: 'k' },
      { type: 'invoke', process: 1, time: 2, op: 'write', resource: 'r', key: 'k', value: '2', prev: '1', token: '5' },
      { type: 'ok', process: 1, time: 3, op: 'write', resource: 'r', key: 'k' },
    ]
      .map((e) => JSON.stringify(e))
      .join('\n');
    const strict = lockcheck(['check', '-', '--json'], stale);
    expect(strict.code, strict.stderr).toBe(1);
    expect(JSON.parse(strict.stdout)).toMatchObject({ verdict: 'violation', counts: { staleWritesAccepted: 1 } });
    expect(lockcheck(['check', '-', '--store-policy', 'monotonic'], stale).code).toBe(0);
  });

  it('bad input: exit 2 with a message naming the line and field; bad arguments: exit 2', () => {
    const file = join(dir, 'bad.jsonl');
    writeFileSync(file, readFileSync(join(FIXTURES, 'safe.jsonl'), 'utf8').replace('"token":"2"', '"token":2'));
    const r = lockcheck(['check', file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/bad\.jsonl is not a valid history: line 11, field 'token': must be a string of decimal digits/);
    for (const [args, message] of [
      [['check', join(dir, 'missing.jsonl')], /cannot read history .*missing\.jsonl/],
      [['check', file, '--store-policy', 'fenced'], /unknown store policy 'fenced'/],
    ] as const) {
      const x = lockcheck([...args]);
      expect(x.code, `${args.join(' ')}: ${x.stderr}`).toBe(2);
      expect(x.stderr).toMatch(message);
    }
  });
});
