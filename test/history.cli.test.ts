import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { StressSummary } from '../cli/stress.ts';
import { MalformedRecordingError, summaryText, validRecording } from '../cli/stress.ts';
import type { History } from '../conformance/history/event.ts';
import { checkHistory } from '../conformance/history/check.ts';
import { HistoryFormatError, parseHistory } from '../conformance/history/parse.ts';
import { reportText } from '../cli/check.ts';
import type { LockcheckProcess } from './lockcheckProcess.ts';
import { lockcheckAsync, lockcheckSync } from './lockcheckProcess.ts';
import { testTempDir } from './tempDirs.ts';

/** `lockcheck check` as a user runs it: a child process, its exit code, its output. */
const dir = testTempDir('lockcheck-check-');
const FIXTURES = 'test/fixtures/histories';

const lockcheck = (args: string[], input?: string): LockcheckProcess => lockcheckSync(args, input === undefined ? {} : { input });

describe('lockcheck check', () => {
  // Each spawn costs a second or more of a loaded machine: one spawn per exit code and path through main.ts.
  it('a violation: exit 1, --json gives the report with both holds of the overlap; --report writes the timeline', () => {
    const report = join(dir, 'report');
    const r = lockcheck(['check', join(FIXTURES, 'overlap.jsonl'), '--json', '--report', report]);
    expect(r.code, r.stderr).toBe(1);
    const json = JSON.parse(r.stdout) as { verdict: string; storePolicy: string; reportFile: string; counts: Record<string, number>; findings: { property: string; events: number[]; intervals?: unknown[] }[] };
    expect(json).toMatchObject({ verdict: 'violation', storePolicy: 'strict', counts: { operations: 7, holds: 2, overlappingHolds: 1, writesAccepted: 1, writesRejected: 1, faults: 1 } });
    expect(json.findings[0]).toMatchObject({
      property: 'MUTEX-1',
      events: [1, 2, 4, 6, 13, 15],
      intervals: [
        { process: 0, resource: 'r', start: 4, end: 80 },
        { process: 1, resource: 'r', start: 42, end: 70 },
      ],
    });
    expect(json.reportFile).toBe(join(report, 'history.html'));
    expect(readFileSync(json.reportFile, 'utf8')).toMatch(/class="hold violating"/);
  });

  it('reads stdin with -; --store-policy overrides the meta line; a safe history exits 0', () => {
    const stale = [
      { type: 'meta', store: 'strict' },
      { type: 'invoke', process: 0, time: 0, op: 'write', resource: 'r', key: 'k', value: '1', prev: null, token: '5' },
      { type: 'ok', process: 0, time: 1, op: 'write', resource: 'r', key: 'k' },
      { type: 'invoke', process: 1, time: 2, op: 'write', resource: 'r', key: 'k', value: '2', prev: '1', token: '5' },
      { type: 'ok', process: 1, time: 3, op: 'write', resource: 'r', key: 'k' },
    ]
      .map((e) => JSON.stringify(e))
      .join('\n');
    const r = lockcheck(['check', '-', '--store-policy', 'monotonic'], stale);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^-: SAFE\n/);
    expect(r.stdout).toMatch(/store policy: monotonic/);
    expect(r.stdout).toMatch(/FENCE-2 +stale-writes +safe/);
    // --timeout-ms 0 is what timeoutMs: 0 is in the API (it was refused here, taken there): a history this small is
    // judged whole whatever the budget, so the same verdicts.
    const zero = lockcheck(['check', '-', '--timeout-ms', '0', '--json'], stale);
    expect(zero.code, zero.stderr).toBe(1);
    const api = checkHistory(parseHistory(stale) as History, { timeoutMs: 0 });
    expect(JSON.parse(zero.stdout)).toMatchObject({ verdict: api.verdict, checks: api.checks });
    expect(api.verdict).toBe('violation');
  });

  it('a search that runs out of time: exit 4, never a guess', () => {
    // 16 concurrent grants of leases that have run out (any may have taken over any other), then each owner extends in turn:
    // only the last grant's owner can, so not linearizable, but the search must try the orders of the grants (exponential even
    // memoised), which 1 ms does not allow. (16 lost acquire replies no longer serve: an unknown acquire cannot take over
    // a lock whose deadline is not known, which the search now decides at once.)
    const r = lockcheck(['check', join(FIXTURES, 'undecided.jsonl'), '--timeout-ms', '1']);
    expect(r.code, r.stderr).toBe(4);
    expect(r.stdout).toMatch(/: UNKNOWN\n/);
    expect(r.stdout).toMatch(/LIN-1 +lock-linearizable +unknown: 1 of 1 lock not decided: 1 ran out of the 1 ms budget \(--timeout-ms\)/);
    expect(r.stdout).not.toMatch(/\bviolation\b/);
  });

  it('a search that reaches its memory bound: exit 4 naming --memory-mib, however long the time budget', () => {
    // 16 concurrent writes, then a read of a value none wrote: every subset of the writes is tried (about 30 MB of memo table).
    const events = [
      ...Array.from({ length: 16 }, (_, i) => ({ type: 'invoke', process: i, time: i, op: 'write', resource: 'r', key: 'k', value: `w${i}` })),
      ...Array.from({ length: 16 }, (_, i) => ({ type: 'ok', process: i, time: 100 + i, op: 'write', resource: 'r', key: 'k' })),
      { type: 'invoke', process: 0, time: 200, op: 'read', resource: 'r', key: 'k' },
      { type: 'ok', process: 0, time: 201, op: 'read', resource: 'r', key: 'k', value: 'never written' },
    ];
    const r = lockcheck(['check', '-', '--memory-mib', '1', '--timeout-ms', '86400000'], events.map((e) => JSON.stringify(e)).join('\n'));
    expect(r.code, r.stderr).toBe(4);
    expect(r.stdout).toMatch(/LIN-1 +register-linearizable +unknown: 1 of 1 register not decided: 1 reached the 1 MiB memory bound \(--memory-mib\)/);
  });

  it('a malformed history: exit 2 with a message naming the line and field', () => {
    const file = join(dir, 'bad.jsonl');
    writeFileSync(file, readFileSync(join(FIXTURES, 'safe.jsonl'), 'utf8').replace('"token":"2"', '"token":2'));
    const r = lockcheck(['check', file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/bad\.jsonl is not a valid history: line 11, field 'token': must be a string of decimal digits/);
  });

  it('bytes that are not UTF-8: exit 2 naming the line, never merged into one name by replacement characters', () => {
    // Latin-1 'café' and 'cafè': two resources; replaced by U+FFFD both were one, and the two holds a MUTEX-1 violation.
    const line = (process: number, type: string, time: number, name: Buffer, grant = '') =>
      Buffer.concat([Buffer.from(`{"type":"${type}","process":${process},"time":${time},"op":"acquire","resource":"caf`), name, Buffer.from(`"${grant}}\n`)]);
    const file = join(dir, 'latin1.jsonl');
    writeFileSync(file, Buffer.concat([line(0, 'invoke', 0, Buffer.from([0xe9])), line(0, 'ok', 1, Buffer.from([0xe9]), ',"owner":"a"'), line(1, 'invoke', 2, Buffer.from([0xe8])), line(1, 'ok', 3, Buffer.from([0xe8]), ',"owner":"b"')]));
    const r = lockcheck(['check', file]);
    expect(r.code, r.stdout).toBe(2);
    expect(r.stderr).toMatch(/latin1\.jsonl is not a valid history: line 1: not UTF-8/);
  });

  it('a history without a client operation: exit 2, not a safe verdict (an empty or truncated recording)', () => {
    const r = lockcheck(['check', '-'], JSON.stringify({ type: 'meta', store: 'strict' }) + '\n');
    expect(r.code, r.stdout).toBe(2);
    expect(r.stderr).toMatch(/lockcheck: stdin has no client operations \(1 event\): nothing to judge/);
    expect(r.stdout).toBe('');
  });

  it('bad arguments: exit 2', () => {
    const r = lockcheck(['check', join(FIXTURES, 'safe.jsonl'), '--store-policy', 'fenced']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/unknown store policy 'fenced' \(known: unfenced, monotonic, strict, transactional\)/);
  });

  it('input files are bounded regular files: a FIFO, a directory or an oversized file is refused with exit 2 (check and replay), never read', async () => {
    const fifo = join(dir, 'fifo.jsonl');
    execFileSync('mkfifo', [fifo]);
    const huge = join(dir, 'huge.jsonl');
    writeFileSync(huge, '');
    truncateSync(huge, 256 * 1024 * 1024 + 1); // sparse: no disk used
    const hugeCounterexample = join(dir, 'huge.json');
    writeFileSync(hugeCounterexample, '');
    truncateSync(hugeCounterexample, 16 * 1024 * 1024 + 1);
    const cases: [string[], RegExp][] = [
      // Before, a FIFO nobody writes to held the CLI forever: bounded here by the child's 100 s (a start of the CLI takes tens of seconds on a loaded machine: 20 s killed one in a CI-like run).
      [['check', fifo], /cannot read .*fifo\.jsonl: a history must be a regular file/],
      [['check', huge], /cannot read .*huge\.jsonl: a history larger than 268435456 bytes is refused/],
      [['replay', dir], /cannot read .*: a counterexample must be a regular file/],
      [['replay', hugeCounterexample], /cannot read .*huge\.json: a counterexample larger than 16777216 bytes is refused/],
    ];
    const results = await Promise.all(cases.map(([args]) => lockcheckAsync(args, 100_000)));
    cases.forEach(([args, message], i) => {
      expect(results[i]!.code, `${args.join(' ')}: ${results[i]!.stderr}`).toBe(2);
      expect(results[i]!.stderr).toMatch(message);
    });
  }, 240_000);

  it("text from the file reaches the terminal with its control characters shown, never as a terminal's escape sequence", () => {
    const file = join(dir, 'escape.jsonl');
    // The message quotes the bad value: an OSC 52 sequence would write the user's clipboard.
    writeFileSync(file, `${JSON.stringify({ type: 'invoke', process: 0, time: 0, op: '\u001b]52;c;AAAA\u0007', resource: 'r' })}\n`);
    const r = lockcheck(['check', file]);
    expect(r.code).toBe(2);
    expect(r.stderr).not.toContain('\u001b');
    expect(r.stderr).not.toContain('\u0007');
    expect(r.stderr).toContain("field 'op': must be one of acquire, extend, release, write, read, got '\\x1b]52;c;AAAA\\x07'");
  });

  it("another command's option: exit 2 naming it and what the command takes, instead of being ignored", () => {
    const r = lockcheck(['check', join(FIXTURES, 'safe.jsonl'), '--seconds', '60']);
    expect(r.code, r.stdout).toBe(2);
    expect(r.stderr).toMatch(/check does not take --seconds \(it takes --json, --report, --store-policy, --timeout-ms, --memory-mib\)/);
    // Before any server starts.
    const s = lockcheck(['stress', '--backend', 'redis-single', '--timeout-ms', '5']);
    expect(s.code).toBe(2);
    expect(s.stderr).toMatch(/stress does not take --timeout-ms/);
  });
});

describe('the stress summary', () => {
  it('names the lines of each finding, says how many it left out, and how to judge the history again', () => {
    const finding = { check: 'overlapping-holds', property: 'MUTEX-1', message: 'two clients believed they held r at once', events: [3, 7] } as const;
    const summary = {
      backend: 'redis-single', store: 'unfenced', clients: 2, seconds: 1, nemesis: [], seed: 1, verdict: 'violation', operations: 10, opsPerSecond: 10, cycles: 2,
      holds: 2, overlappingHolds: 7, lostUpdates: 0, staleWritesAccepted: 0, writesRejected: 0, unknownOutcomes: 0, faults: 3, faultIntervals: 6, durationMs: 1000, overheadMs: 0,
      clientErrors: [], adapterErrors: [], unobserved: null, faultsNotStruck: [], checks: [], findings: Array.from({ length: 7 }, () => finding), historyFile: 'out/history.jsonl', reportFile: 'out/history.html',
    } as unknown as StressSummary;
    const text = summaryText(summary);
    expect(text).toMatch(/^ {2}MUTEX-1: two clients believed they held r at once \[lines 4, 8\]$/m);
    expect(text).toMatch(/\.\.\. 2 more findings \(--json lists them\)/);
    // What lockcheck check calls faults (intervals in the history) beside what the nemesis did (a strike may be two steps).
    expect(text).toMatch(/, 2 holds, 3 faults injected \(6 fault intervals in the history\)$/m);
    expect(text).toMatch(/history: out\/history\.jsonl \(judge it again: lockcheck check out\/history\.jsonl\)/);
    // One of each reads as one, not '1 faults injected (1 fault intervals …)'.
    expect(summaryText({ ...summary, holds: 1, faults: 1, faultIntervals: 1 })).toMatch(/, 1 hold, 1 fault injected \(1 fault interval in the history\)$/m);
  });

  it("reads as English at one: 'an unfenced store', '1 fault' (lockcheck check)", () => {
    const history = parseHistory(
      [
        '{"type":"meta","store":"unfenced"}',
        '{"type":"invoke","process":"nemesis","time":0,"op":"fault","fault":"pause-client","target":"0"}',
        '{"type":"invoke","process":0,"time":1,"op":"acquire","resource":"r","ttlMs":100}',
        '{"type":"ok","process":0,"time":2,"op":"acquire","resource":"r","owner":"a","token":"1","validUntil":90}',
        '{"type":"ok","process":"nemesis","time":3,"op":"fault","fault":"pause-client","target":"0"}',
      ].join('\n'),
    );
    if (history instanceof HistoryFormatError) throw history;
    const text = reportText('h.jsonl', checkHistory(history));
    expect(text).toMatch(/unknown, 1 fault$/m);
    expect(text).toMatch(/skipped: an unfenced store fences nothing$/m);
  });
});

describe("a stress run's recorded history", () => {
  it('is judged only if lockcheck check would read it: an adapter lease with an empty owner or a negative token is named, not judged', () => {
    const meta = { type: 'meta', store: 'strict' };
    const acquire = (grant: Record<string, unknown>) => [
      { type: 'invoke', process: 0, time: 0, op: 'acquire', resource: 'r', ttlMs: 100 },
      { type: 'ok', process: 0, time: 1, op: 'acquire', resource: 'r', ...grant },
    ];
    expect(validRecording([meta, ...acquire({ owner: 'a', token: '1', validUntil: 90 })] as unknown as History)).toHaveLength(3);
    for (const [grant, field] of [
      [{ owner: '', token: '1' }, 'owner'],
      [{ owner: 'a', token: '-1' }, 'token'],
      [{ owner: 'a', token: '1', validUntil: null }, 'validUntil'],
    ] as const) {
      const bad = [meta, ...acquire(grant)] as unknown as History;
      expect(() => validRecording(bad, 'out/history.jsonl')).toThrow(MalformedRecordingError);
      expect(() => validRecording(bad, 'out/history.jsonl')).toThrow(new RegExp(`not judged: line 3, field '${field}'.* \\(in out/history\\.jsonl\\); .*an adapter's lease`));
    }
  });
});

/** 40 writes whose outcome is unknown, then reads that no order of them explains: the register's search runs to its budget. */
function pathological(): string {
  const events: object[] = [];
  const n = 40;
  for (let p = 0; p < n; p++) events.push({ type: 'invoke', process: p, time: 0, op: 'write', resource: 'r', key: 'k', value: `v${p}` });
  for (let p = 0; p < n; p++) events.push({ type: 'info', process: p, time: 1, op: 'write', resource: 'r', key: 'k' });
  let t = 2;
  for (let i = 0; i < 60; i++) {
    events.push({ type: 'invoke', process: n, time: t++, op: 'read', resource: 'r', key: 'k' });
    events.push({ type: 'ok', process: n, time: t++, op: 'read', resource: 'r', key: 'k', value: `v${(i * 7) % n}` });
  }
  events.push({ type: 'invoke', process: n, time: t++, op: 'read', resource: 'r', key: 'k' }, { type: 'ok', process: n, time: t, op: 'read', resource: 'r', key: 'k', value: 'none wrote' });
  return events.map((e) => JSON.stringify(e)).join('\n') + '\n';
}

describe('lockcheck check interrupted', () => {
  it('Ctrl-C during a long search prints what was decided, the rest unknown (interrupted), exit 130', async () => {
    const file = join(dir, 'pathological.jsonl');
    writeFileSync(file, pathological());
    const child = spawn(process.execPath, ['cli/lockcheck.mjs', 'check', file, '--timeout-ms', '600000'], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 100_000 });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    // The progress line says the search is running (a line at most every 5 s in a log, the first after 1 s): then Ctrl-C.
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
      if (/searching the register histories/.test(stderr) && !child.killed) child.kill('SIGINT');
    });
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code, stderr).toBe(130);
    expect(stdout).toMatch(/: UNKNOWN\n/);
    expect(stdout).toMatch(/MUTEX-1 {2}overlapping-holds {6}skipped: no holds in the history/);
    expect(stdout).toMatch(/LIN-1 {4}register-linearizable  unknown: not decided: interrupted while searching the register histories/);
    expect(stdout).toMatch(/interrupted \(SIGINT\)/);
  }, 110_000);
});
