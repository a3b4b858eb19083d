import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { refused } from './refused.ts';
import { checkOutputDir, checkOutputFile, checkOutputFilesIn, makeOutputDir, OutputFileError, writeEach, writeRedacted } from '../conformance/env/outputFile.ts';
import { checkCommand } from '../cli/check.ts';
import { REPORT_MAX_EVENTS, writeStressReport } from '../cli/stress.ts';
import type { History } from '../conformance/history/event.ts';
import { checkHistory } from '../conformance/history/check.ts';
import { testTempDir } from './tempDirs.ts';

const dir = testTempDir('lockcheck-output-');
const aFile = join(dir, 'a-file');
beforeAll(() => writeFileSync(aFile, 'kept\n'));

const refusal = (f: () => unknown): OutputFileError => refused(f, OutputFileError);

describe('outputs that cannot be written are typed errors naming the path and why', () => {
  it('writeRedacted: a directory, a missing directory, a path through a file', () => {
    expect(refusal(() => writeRedacted(dir, 'x', 'the report'))).toMatchObject({ problem: 'is-directory', path: dir, message: `cannot write the report ${dir}: it is a directory` });
    const missing = join(dir, 'no-such-dir', 'r.json');
    expect(refusal(() => writeRedacted(missing, 'x'))).toMatchObject({ problem: 'missing-directory', path: missing, message: `cannot write the file ${missing}: its directory does not exist` });
    expect(refusal(() => writeRedacted(join(aFile, 'r.json'), 'x'))).toMatchObject({ problem: 'not-a-directory' });
    expect(readFileSync(aFile, 'utf8')).toBe('kept\n');
  });

  it('makeOutputDir under a file: not-a-directory; it makes the directories on the way otherwise', () => {
    expect(refusal(() => makeOutputDir(join(aFile, 'out'), 'the timelines into'))).toMatchObject({ problem: 'not-a-directory', message: expect.stringMatching(/^cannot write the timelines into .*a-file\/out: a part of the path is not a directory$/) as string });
    makeOutputDir(join(dir, 'x', 'y'));
    writeRedacted(join(dir, 'x', 'y', 'f.txt'), 'password=s3cret\n');
    expect(readFileSync(join(dir, 'x', 'y', 'f.txt'), 'utf8')).toBe('password=<redacted>\n');
  });

  it('checkOutputFile and checkOutputDir find the same before any work starts, and accept what can be written', () => {
    expect(refusal(() => checkOutputFile(dir, 'the JUnit report'))).toMatchObject({ problem: 'is-directory' });
    expect(refusal(() => checkOutputFile(join(dir, 'none', 'j.xml'), 'the JUnit report'))).toMatchObject({ problem: 'missing-directory', message: expect.stringContaining('its directory does not exist') as string });
    expect(refusal(() => checkOutputFile(join(aFile, 'j.xml'), 'the JUnit report'))).toMatchObject({ problem: 'not-a-directory' });
    expect(refusal(() => checkOutputDir(aFile, 'the history into'))).toMatchObject({ problem: 'not-a-directory', message: `cannot write the history into ${aFile}: ${aFile} is not a directory` });
    expect(refusal(() => checkOutputDir(join(aFile, 'deeper', 'still'), 'the history into'))).toMatchObject({ problem: 'not-a-directory' });
    // What can be written passes: a new file in an existing directory, an existing file, a directory still to be made, a device.
    for (const ok of [join(dir, 'new.xml'), aFile, '/dev/null']) expect(() => checkOutputFile(ok, 'the report')).not.toThrow();
    for (const ok of [dir, join(dir, 'new', 'deeper')]) expect(() => checkOutputDir(ok, 'the report')).not.toThrow();
    // The directory still to be made and the new file were tried and removed: nothing left behind.
    expect(existsSync(join(dir, 'new'))).toBe(false);
    expect(existsSync(join(dir, 'new.xml'))).toBe(false);
  });

  it('a directory or file that cannot be made where mkdir/open say ENOENT (/proc, to root): refused before any work, and makeOutputDir ends with a typed error', () => {
    // Node's recursive mkdirSync spun forever there, deaf to signals: `stress --out /proc/x` hung after its run, SIGTERM or not. In a child, bounded.
    const outputFile = JSON.stringify(resolve('conformance/env/outputFile.ts'));
    const code = `const { makeOutputDir, checkOutputDir, checkOutputFile } = await import(${outputFile});
for (const f of [() => checkOutputDir('/proc/lockcheck-none/deeper', 'the history into'), () => makeOutputDir('/proc/lockcheck-none/deeper', 'the history into'), () => checkOutputFile('/proc/lockcheck-none.xml', 'the JUnit report')]) {
  try { f(); console.log('made'); } catch (e) { console.log(e.name, e.problem, e.message); }
}`;
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { encoding: 'utf8', timeout: 60_000 });
    expect(r.signal, r.stderr).toBeNull();
    expect(r.stdout.trim().split('\n')).toEqual([
      'OutputFileError permission cannot write the history into /proc/lockcheck-none/deeper: no directory can be made in /proc',
      'OutputFileError permission cannot write the history into /proc/lockcheck-none/deeper: no directory can be made in /proc',
      'OutputFileError permission cannot write the JUnit report /proc/lockcheck-none.xml: no file can be made in /proc',
    ]);
  }, 90_000);
});

describe('a command never loses its verdict, nor one output for another, to an output it cannot write', () => {
  it('checkOutputFilesIn: a directory where a file in --out goes, or a file where a directory in it goes, before any work starts', () => {
    const out = join(dir, 'stress-out');
    mkdirSync(join(out, 'history.jsonl'), { recursive: true });
    const files = [['history.jsonl', 'the stress history (--out)'], ['history.html', 'the stress history report (--out)']] as const;
    expect(refusal(() => checkOutputFilesIn(out, 'the stress history into (--out)', files))).toMatchObject({ problem: 'is-directory', message: `cannot write the stress history (--out) ${join(out, 'history.jsonl')}: it is a directory` });
    const matrix = join(dir, 'matrix-out');
    makeOutputDir(matrix);
    writeFileSync(join(matrix, 'matrix'), 'a file\n');
    expect(refusal(() => checkOutputFilesIn(matrix, 'the matrix into (--out)', [[join('matrix', 'index.html'), 'the matrix page (--out)']]))).toMatchObject({ problem: 'not-a-directory' });
    // Nothing there yet, or only what can be replaced: fine.
    expect(() => checkOutputFilesIn(join(dir, 'not-yet', 'out'), 'the stress history into (--out)', files)).not.toThrow();
    rmSync(join(out, 'history.jsonl'), { recursive: true });
    writeFileSync(join(out, 'history.html'), 'old\n');
    expect(() => checkOutputFilesIn(out, 'the stress history into (--out)', files)).not.toThrow();
  });

  it('writeEach: every output is tried, then the first failure is thrown', () => {
    const written: string[] = [];
    const first = new OutputFileError('io', 'a', 'cannot write a');
    expect(() =>
      writeEach([
        () => {
          throw first;
        },
        () => void written.push('b'),
        () => {
          throw new OutputFileError('io', 'c', 'cannot write c');
        },
        () => void written.push('d'),
      ]),
    ).toThrow(first);
    expect(written).toEqual(['b', 'd']);
  });

  it('check prints its verdict before it writes the report: a report that cannot be written loses only itself', async () => {
    const report = join(dir, 'check-report');
    mkdirSync(join(report, 'history.html'), { recursive: true });
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    try {
      await expect(checkCommand({ file: 'test/fixtures/histories/overlap.jsonl', json: false, report, storePolicy: undefined, timeoutMs: undefined, maxMemoryBytes: undefined })).rejects.toThrow(OutputFileError);
      expect(log.mock.calls.map((c) => String(c[0])).join('\n')).toMatch(/overlap\.jsonl: VIOLATION/);
    } finally {
      log.mockRestore();
    }
  });

  it("stress: a history too long for a timeline leaves no earlier run's history.html beside it", () => {
    const out = join(dir, 'stress-stale');
    makeOutputDir(out);
    writeFileSync(join(out, 'history.html'), 'an earlier run\n');
    const events = readFileSync('test/fixtures/histories/safe.jsonl', 'utf8').trim().split('\n').map((l) => JSON.parse(l) as History[number]);
    const small: History = events;
    expect(writeStressReport(out, small, checkHistory(small), 't')).toBe(join(out, 'history.html'));
    expect(readFileSync(join(out, 'history.html'), 'utf8')).not.toBe('an earlier run\n');
    const long: History = Array.from({ length: REPORT_MAX_EVENTS + 1 }, () => events[1]!);
    expect(writeStressReport(out, long, checkHistory(small), 't')).toBeNull();
    expect(existsSync(join(out, 'history.html'))).toBe(false);
    // None there: nothing to remove.
    expect(writeStressReport(out, long, checkHistory(small), 't')).toBeNull();
  });
});

describe('a write cut short leaves the file as it was', () => {
  it('over the size limit (ulimit -f): OutputFileError, the old file whole, no temporary file left', () => {
    const sub = mkdtempSync(join(dir, 'cut-'));
    const target = join(sub, 'report.md');
    writeFileSync(target, 'the old report\n');
    // A child whose files may not pass 1 KiB (Node ignores SIGXFSZ: the write fails with EFBIG) writes 5 KB over it.
    const module = resolve('conformance/env/outputFile.ts');
    const code = `import { writeRedacted } from ${JSON.stringify(module)};
try { writeRedacted(${JSON.stringify(target)}, 'x'.repeat(5000), 'the report'); console.log('written'); }
catch (e) { console.log(e.name, e.problem, e.message); }`;
    const r = spawnSync('sh', ['-c', 'ulimit -f 1; exec "$0" --import tsx --input-type=module -e "$1"', process.execPath, code], { encoding: 'utf8', timeout: 60_000 });
    expect(r.stdout).toMatch(/^OutputFileError io cannot write the report .*report\.md: the file is larger than this process may write \(ulimit -f\)/);
    expect(readFileSync(target, 'utf8')).toBe('the old report\n');
    expect(readdirSync(sub)).toEqual(['report.md']);
  }, 90_000);

  it('keeps the mode of an existing file; writes through a link the user made', () => {
    const sub = mkdtempSync(join(dir, 'mode-'));
    const target = join(sub, 'c.json');
    writeFileSync(target, '{}');
    chmodSync(target, 0o600);
    writeRedacted(target, '{"a":1}');
    expect(readFileSync(target, 'utf8')).toBe('{"a":1}');
    expect(statSync(target).mode & 0o777).toBe(0o600);
    expect(readdirSync(sub)).toEqual(['c.json']);
    // The user's own link is written through, as before: the file it points at changes.
    const link = join(sub, 'link.json');
    symlinkSync(target, link);
    writeRedacted(link, '{"b":2}');
    expect(readFileSync(target, 'utf8')).toBe('{"b":2}');
  });
  // Copied whole, the mode made, by a run as root, a root-owned setuid report anyone could change of another user's 04777 file.
  it('never keeps set-id bits or write for everyone, nor another user\'s mode; directories it makes are not world-writable under umask 0', () => {
    const sub = mkdtempSync(join(dir, 'modes-'));
    const own = join(sub, 'own.json');
    writeFileSync(own, '{}');
    chmodSync(own, 0o6777);
    writeRedacted(own, '{"a":1}');
    expect(statSync(own).mode & 0o7777).toBe(0o775);
    if (process.getuid?.() === 0) {
      const theirs = join(sub, 'theirs.html');
      writeFileSync(theirs, 'x');
      chownSync(theirs, 65534, 65534);
      chmodSync(theirs, 0o4777);
      writeRedacted(theirs, '<p>report</p>');
      const after = statSync(theirs);
      expect(after.uid).toBe(0);
      expect(after.mode & 0o7022).toBe(0);
    }
    const before = process.umask(0);
    try {
      makeOutputDir(join(sub, 'new', 'deeper'));
    } finally {
      process.umask(before);
    }
    expect(statSync(join(sub, 'new')).mode & 0o7777).toBe(0o775);
    expect(statSync(join(sub, 'new', 'deeper')).mode & 0o7777).toBe(0o775);
  });
});
