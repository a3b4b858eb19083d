import * as fs from 'node:fs';
import { chmodSync, existsSync, lchownSync, mkdirSync, readdirSync, readFileSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { refused } from './refused.ts';
import { testTempDir } from './tempDirs.ts';

/**
 * Another local user who may write a shared directory on the way to an
 * output swaps what is there between lockcheck's look and its write: a
 * directory for a link of theirs, or a directory of theirs where lockcheck
 * was making one. The swap is made at the exact moment (node:fs wrapped: the
 * attacker acts just before the call named), so each case is deterministic;
 * the write must land where the path named when it was checked, or be
 * refused, never in the directory the other user chose.
 */
const hooks = vi.hoisted(() => ({ before: null as null | ((call: string, path: string) => void) }));
vi.mock('node:fs', async (original) => {
  const real = await original<typeof import('node:fs')>();
  const hooked =
    <A extends unknown[], R>(call: string, f: (...args: A) => R) =>
    (...args: A): R => {
      hooks.before?.(call, String(args[0]));
      return f(...args);
    };
  const wrapped = { ...real, openSync: hooked('open', real.openSync), mkdirSync: hooked('mkdir', real.mkdirSync), renameSync: hooked('rename', real.renameSync), rmSync: hooked('remove', real.rmSync), unlinkSync: hooked('remove', real.unlinkSync), rmdirSync: hooked('rmdir', real.rmdirSync) };
  return { ...wrapped, default: wrapped };
});
const { checkOutputDir, checkOutputFile, makeOutputDir, OutputFileError, removeStaleOutput, writeRedacted } = await import('../conformance/env/outputFile.ts');
const { StagedTimelines } = await import('../cli/matrixTimelines.ts');

const root = testTempDir('lockcheck-output-race-');
const OTHER = 65534;
let shared = '';
let victim = '';
let n = 0;
beforeEach(() => {
  hooks.before = null;
  // A directory every user may write, without the sticky bit: another user may rename what is in it.
  shared = join(root, `shared-${++n}`);
  victim = join(root, `victim-${n}`);
  mkdirSync(shared);
  chmodSync(shared, 0o777);
  mkdirSync(victim, { mode: 0o700 });
});

/** Once, the first time `call` is made on a path `match` accepts: runs the attacker's `swap`. */
function attackAt(call: string, match: (path: string) => boolean, swap: () => void): void {
  hooks.before = (c, path) => {
    if (c !== call || !match(path)) return;
    hooks.before = null;
    swap();
  };
}

/** The other user's link at `at`, to `to`. */
function foreignLink(to: string, at: string): void {
  symlinkSync(to, at);
  lchownSync(at, OTHER, OTHER);
}

/** The other user moves directory `dir` aside and puts their link to the victim's directory in its place. */
const swapForLink = (dir: string) => (): void => {
  renameSync(dir, `${dir}.moved`);
  foreignLink(victim, dir);
};

describe.skipIf(process.getuid?.() !== 0)("another user's swap between lockcheck's look and its write never chooses where it writes", () => {
  it('writeRedacted: the directory swapped for a link just before the file is made', () => {
    const out = join(shared, 'out');
    mkdirSync(out);
    attackAt('open', (p) => p.includes('.report.xml.'), swapForLink(out));
    let error: unknown = null;
    try {
      writeRedacted(join(out, 'report.xml'), '<r/>', 'the JUnit report');
    } catch (e) {
      error = e;
    }
    expect(readdirSync(victim)).toEqual([]);
    // Written where the path led when the write began (the directory now moved aside), or refused.
    if (error === null) expect(readFileSync(join(`${out}.moved`, 'report.xml'), 'utf8')).toBe('<r/>');
    else expect(error).toBeInstanceOf(OutputFileError);
  });

  it("writeRedacted: the user's own link swapped for another user's link to the victim's file just before it is followed", () => {
    const secret = join(victim, 'secret');
    writeFileSync(secret, 'kept');
    const out = join(shared, 'fifo.txt');
    writeFileSync(out, '');
    const mine = join(shared, 'mine.txt');
    symlinkSync(out, mine);
    attackAt('open', (p) => !p.includes('.tmp'), () => {
      fs.unlinkSync(mine);
      foreignLink(secret, mine);
    });
    try {
      writeRedacted(mine, 'report');
    } catch (e) {
      expect(e).toBeInstanceOf(OutputFileError);
    }
    expect(readFileSync(secret, 'utf8')).toBe('kept');
  });

  it('makeOutputDir: a link of the other user put where it was about to make a directory', () => {
    const fresh = join(shared, 'fresh');
    attackAt('mkdir', (p) => p.endsWith('fresh'), () => foreignLink(victim, fresh));
    const e = refused(() => makeOutputDir(join(fresh, 'deeper'), 'the stress history into'), OutputFileError);
    expect(e.problem).toBe('foreign-link');
    expect(readdirSync(victim)).toEqual([]);
  });

  it('makeOutputDir: a directory of the other user made where it was about to make one is refused, not written into', () => {
    const fresh = join(shared, 'fresh');
    attackAt('mkdir', (p) => p.endsWith('fresh'), () => {
      mkdirSync(fresh, { mode: 0o777 });
      chmodSync(fresh, 0o777);
      fs.chownSync(fresh, OTHER, OTHER);
    });
    const e = refused(() => makeOutputDir(join(fresh, 'deeper'), 'the stress history into'), OutputFileError);
    expect(e.problem).toBe('foreign-directory');
    expect(existsSync(join(fresh, 'deeper'))).toBe(false);
  });

  it('removeStaleOutput: the directory swapped for a link just before the removal removes nothing of the victim', () => {
    const out = join(shared, 'out');
    mkdirSync(out);
    writeFileSync(join(victim, 'history.html'), 'kept');
    attackAt('remove', (p) => p.endsWith('history.html'), swapForLink(out));
    try {
      removeStaleOutput(join(out, 'history.html'), 'the history report');
    } catch (e) {
      expect(e).toBeInstanceOf(OutputFileError);
    }
    expect(readFileSync(join(victim, 'history.html'), 'utf8')).toBe('kept');
  });

  it("checkOutputFile: the directory swapped for a link between its trial file's making and removal removes nothing of the victim", () => {
    const out = join(shared, 'out');
    mkdirSync(out);
    writeFileSync(join(victim, 'junit.xml'), 'kept');
    attackAt('remove', (p) => p.endsWith('junit.xml'), swapForLink(out));
    checkOutputFile(join(out, 'junit.xml'), 'the JUnit report');
    expect(readFileSync(join(victim, 'junit.xml'), 'utf8')).toBe('kept');
  });

  it("checkOutputDir: the parent swapped for a link between its trial directory's making and removal removes nothing of the victim", () => {
    const out = join(shared, 'out');
    mkdirSync(out);
    mkdirSync(join(victim, 'stress'));
    attackAt('rmdir', (p) => p.endsWith('stress'), swapForLink(out));
    checkOutputDir(join(out, 'stress'), 'the stress history into');
    expect(readdirSync(victim)).toEqual(['stress']);
  });

  it("matrix timelines: the report directory swapped for a link just before a cell's old timeline is removed", () => {
    const out = join(shared, 'matrix');
    writeFileSync(join(victim, 'redis-x-crash.html'), 'kept');
    const timelines = new StagedTimelines(out);
    try {
      writeRedacted(timelines.path('redis-x-pause'), '<p>t</p>', 'the timeline');
      // The crash cell has no timeline this run: its old one is removed.
      attackAt('remove', (p) => p.includes('redis-x-crash'), swapForLink(out));
      try {
        timelines.publish(['redis-x-pause', 'redis-x-crash']);
      } catch (e) {
        expect(e).toBeInstanceOf(OutputFileError);
      }
      expect(readdirSync(victim)).toEqual(['redis-x-crash.html']);
    } finally {
      hooks.before = null;
      timelines.drop();
    }
  });
});
