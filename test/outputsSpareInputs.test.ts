/**
 * No output of a command may be written over one of its inputs: `check
 * same/history.html --report same` replaced the recording it judged with its
 * report (found by an audit). Refused before any work (exit 2), however the
 * two paths are spelt: the same path, a symbolic link, stdin redirected from
 * the file; for check's report, run's counterexample and JUnit files, and
 * stress's --out files against the adapter module they load.
 */
import { spawnSync } from 'node:child_process';
import { linkSync, mkdirSync, openSync, closeSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { lockcheckAsync } from './lockcheckProcess.ts';
import { testTempDir } from './tempDirs.ts';

const dir = testTempDir('lockcheck-inputs-');
const recording = readFileSync('test/fixtures/histories/overlap.jsonl', 'utf8');
/** A file that must come through every refusal as it was. */
const kept = (path: string): void => expect(readFileSync(path, 'utf8'), path).toBe(recording);

beforeAll(() => {
  mkdirSync(join(dir, 'same'));
  writeFileSync(join(dir, 'same', 'history.html'), recording);
  symlinkSync(join(dir, 'same', 'history.html'), join(dir, 'link.jsonl'));
  linkSync(join(dir, 'same', 'history.html'), join(dir, 'hard.jsonl'));
  mkdirSync(join(dir, 'st'));
  writeFileSync(join(dir, 'st', 'history.jsonl'), recording);
  writeFileSync(join(dir, 'adapter.mjs'), recording);
});

describe('an output at one of the command\'s inputs is refused before any work (exit 2), the input left as it was', () => {
  it('check: the history checked is --report\'s history.html (by its path, a symbolic link, a hard link, another spelling)', async () => {
    const results = await Promise.all([
      lockcheckAsync(['check', join(dir, 'same', 'history.html'), '--report', join(dir, 'same')]),
      lockcheckAsync(['check', join(dir, 'link.jsonl'), '--report', join(dir, 'same')]),
      lockcheckAsync(['check', join(dir, 'hard.jsonl'), '--report', join(dir, 'same', '..', 'same')]),
    ]);
    for (const r of results) {
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/--report's history\.html '.*same\/history\.html' is the history being checked '.*': writing it would destroy the input; give the output another path/);
      expect(r.stdout).toBe('');
    }
    kept(join(dir, 'same', 'history.html'));
  }, 120_000);

  it('check -: stdin read from --report\'s history.html', () => {
    const fd = openSync(join(dir, 'same', 'history.html'), 'r');
    try {
      const r = spawnSync(process.execPath, ['cli/lockcheck.mjs', 'check', '-', '--report', join(dir, 'same')], { stdio: [fd, 'pipe', 'pipe'], encoding: 'utf8', timeout: 100_000 });
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/is the history being checked stdin: writing it would destroy the input/);
    } finally {
      closeSync(fd);
    }
    kept(join(dir, 'same', 'history.html'));
  }, 120_000);

  it('run: --counterexample, its timeline or --junit at the adapter module; stress: --out\'s files at the adapter module', async () => {
    const adapter = join(dir, 'adapter.mjs');
    const cases = [
      [['run', '--backend', adapter, '--counterexample', adapter], /--counterexample '.*adapter\.mjs' is the adapter module \(--backend\)/],
      [['run', '--backend', adapter, '--junit', join(dir, '.', 'adapter.mjs')], /--junit '.*adapter\.mjs' is the adapter module \(--backend\)/],
      [['stress', '--backend', join(dir, 'st', 'history.jsonl'), '--out', join(dir, 'st')], /--out's history\.jsonl '.*st\/history\.jsonl' is the adapter module \(--backend\)/],
    ] as const;
    const results = await Promise.all(cases.map(([args]) => lockcheckAsync(args)));
    cases.forEach(([args, message], i) => {
      const r = results[i]!;
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(message);
    });
    kept(adapter);
    kept(join(dir, 'st', 'history.jsonl'));
  }, 120_000);
});
