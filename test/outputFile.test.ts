import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { refused } from './refused.ts';
import { checkOutputDir, checkOutputFile, makeOutputDir, OutputFileError, writeRedacted } from '../conformance/env/outputFile.ts';

const dir = mkdtempSync(join(tmpdir(), 'lockcheck-output-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const aFile = join(dir, 'a-file');
writeFileSync(aFile, 'kept\n');

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
});
