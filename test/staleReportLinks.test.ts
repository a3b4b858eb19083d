import { lchownSync, mkdirSync, readFileSync, symlinkSync, writeFileSync, existsSync, lstatSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { testTempDir } from './tempDirs.ts';
import { OutputFileError, removeStaleOutput } from '../conformance/env/outputFile.ts';

/**
 * Removing a stale history.html (stress, above the timeline's size) never
 * removes what a link there names: the link itself goes (the user's own), or
 * the removal is refused (another user's link, at the path or on the way).
 */
const dir = testTempDir('lockcheck-stale-');

it("the user's own link at the path: the link is removed, the file and directory it names are left", () => {
  const victim = join(dir, 'victim.txt');
  writeFileSync(victim, 'keep\n');
  const victimDir = join(dir, 'victim-dir');
  mkdirSync(victimDir);
  writeFileSync(join(victimDir, 'f'), 'keep\n');
  for (const [name, target] of [['a', victim], ['b', victimDir]] as const) {
    const out = join(dir, name);
    mkdirSync(out);
    symlinkSync(target, join(out, 'history.html'));
    removeStaleOutput(join(out, 'history.html'), 'the history report');
    expect(existsSync(join(out, 'history.html'))).toBe(false);
  }
  expect(readFileSync(victim, 'utf8')).toBe('keep\n');
  expect(readFileSync(join(victimDir, 'f'), 'utf8')).toBe('keep\n');
});

it.skipIf(process.getuid?.() !== 0)("another user's link at the path or on the way: refused, nothing removed", () => {
  const victim = join(dir, 'victim2.txt');
  writeFileSync(victim, 'keep\n');
  const out = join(dir, 'c');
  mkdirSync(out);
  const planted = join(out, 'history.html');
  symlinkSync(victim, planted);
  lchownSync(planted, 65534, 65534);
  expect(() => removeStaleOutput(planted, 'the history report')).toThrow(OutputFileError);
  expect(lstatSync(planted).isSymbolicLink()).toBe(true);
  // A directory on the way replaced by another user's link to a directory holding a history.html.
  const elsewhere = join(dir, 'elsewhere');
  mkdirSync(elsewhere);
  writeFileSync(join(elsewhere, 'history.html'), 'keep\n');
  const way = join(dir, 'way');
  symlinkSync(elsewhere, way);
  lchownSync(way, 65534, 65534);
  expect(() => removeStaleOutput(join(way, 'history.html'), 'the history report')).toThrow(OutputFileError);
  expect(readFileSync(join(elsewhere, 'history.html'), 'utf8')).toBe('keep\n');
  expect(readFileSync(victim, 'utf8')).toBe('keep\n');
});
