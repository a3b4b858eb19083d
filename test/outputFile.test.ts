import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
