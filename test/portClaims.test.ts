import { execFileSync, spawnSync } from 'node:child_process';
import { lstatSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { testTempDir } from './tempDirs.ts';

/**
 * The shared port-claims directory (conformance/env/processes.ts) is in the
 * temp dir, where any local user may make it first or plant something in it.
 * Each case runs claimPort in a child whose TMPDIR is a directory of its own,
 * so the machine's real claims are never touched.
 */
const root = testTempDir('lockcheck-claims-test-');

/**
 * In a child with TMPDIR = `tmp` and umask 022: claims a port, prints the
 * claim file's directory and mode, releases the claim. `interleave` is code
 * run first in the child, to put another process's step between two of the
 * claim's own (see raceOn).
 */
function claimIn(tmp: string, interleave = ''): { dir: string; mode: number } {
  const processes = JSON.stringify(pathToFileURL(resolve('conformance/env/processes.ts')).href);
  const code = `process.umask(0o022); ${interleave}; const { claimPort, PORT_CLAIMS, privateClaims } = await import(${processes}); const { statSync, existsSync } = await import('node:fs'); const { join } = await import('node:path');
const c = await claimPort(); const dir = [PORT_CLAIMS, ...(privateClaims ? [privateClaims()] : [])].find((d) => existsSync(join(d, String(c.port))));
console.log(JSON.stringify({ dir, mode: dir === undefined ? 0 : statSync(dir).mode & 0o7777 })); c.release();`;
  // Bounded: before the fix a FIFO in the directory held the claim forever.
  const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, TMPDIR: tmp } });
  return JSON.parse(out) as { dir: string; mode: number };
}

/**
 * Child code that makes the first `call` (lstatSync or chmodSync) on the
 * shared claims directory, once it exists, find it removed just before, as
 * when another process's last claim is released right then (dropClaim
 * removes the emptied directory). The node:fs function is wrapped and the
 * ESM bindings synced, so processes.ts runs its own code on the real file
 * system, only with the other process's rmdir put at that moment.
 */
function raceOn(call: 'lstatSync' | 'chmodSync'): string {
  return `const fs = (await import('node:fs')).default; const { syncBuiltinESMExports } = await import('node:module');
const shared = process.env.TMPDIR + '/lockcheck-ports'; const real = fs.${call}; let raced = false;
fs.${call} = (path, ...rest) => { if (!raced && path === shared && fs.existsSync(shared)) { raced = true; fs.rmdirSync(shared); } return real(path, ...rest); };
syncBuiltinESMExports()`;
}

/** What lockcheck left in `tmp` (tsx keeps its cache there too). */
function lockcheckEntries(tmp: string): string[] {
  return readdirSync(tmp).filter((name) => name.startsWith('lockcheck'));
}

function fresh(name: string): string {
  const dir = join(root, name);
  mkdirSync(dir);
  return dir;
}

describe('port claims in the shared temp dir', () => {
  it('a claim file is writable by no one else, whatever the umask (before: 0666 under umask 0, another user could put their pid in it)', () => {
    const tmp = join(root, 'umask0');
    mkdirSync(tmp);
    const processes = JSON.stringify(pathToFileURL(resolve('conformance/env/processes.ts')).href);
    const code = `process.umask(0); const { claimPort, PORT_CLAIMS } = await import(${processes}); const { statSync } = await import('node:fs'); const { join } = await import('node:path');
const c = await claimPort(); console.log(String(statSync(join(PORT_CLAIMS, String(c.port))).mode & 0o7777)); c.release();`;
    const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, TMPDIR: tmp } });
    expect(Number(out.trim()) & 0o022).toBe(0);
  });

  it('a directory this user makes is 1777 whatever the umask (before: 1755, and every other user failed with EACCES)', () => {
    const tmp = fresh('umask');
    const claimed = claimIn(tmp);
    expect(claimed).toEqual({ dir: join(tmp, 'lockcheck-ports'), mode: 0o1777 });
  });

  // A CI run left an empty /tmp/lockcheck-ports-0: the shared directory vanished for a moment (another process's last release) and the claim fell back to the private one, which then stayed.
  it('the shared directory removed by another process between its making and the look at it: the claim still goes there; no private directory is made, nothing is left', () => {
    const tmp = fresh('race-lstat');
    expect(claimIn(tmp, raceOn('lstatSync'))).toEqual({ dir: join(tmp, 'lockcheck-ports'), mode: 0o1777 });
    expect(lockcheckEntries(tmp)).toEqual([]);
  });

  it('the shared directory (an old one, 0755) removed by another process just before it is set to 1777: the same', () => {
    const tmp = fresh('race-chmod');
    mkdirSync(join(tmp, 'lockcheck-ports'), { mode: 0o755 });
    expect(claimIn(tmp, raceOn('chmodSync'))).toEqual({ dir: join(tmp, 'lockcheck-ports'), mode: 0o1777 });
    expect(lockcheckEntries(tmp)).toEqual([]);
  });

  it('a symlink planted in its place is not followed: nothing is written or swept where it points; the claim goes to the private 0700 directory', () => {
    const tmp = fresh('symlink');
    const victim = join(root, 'victim');
    mkdirSync(victim);
    writeFileSync(join(victim, 'notes.txt'), 'not a pid');
    symlinkSync(victim, join(tmp, 'lockcheck-ports'));
    const claimed = claimIn(tmp);
    expect(readFileSync(join(victim, 'notes.txt'), 'utf8')).toBe('not a pid');
    expect(claimed.dir).toMatch(new RegExp(`^${tmp}/lockcheck-ports-`));
    expect(claimed.mode).toBe(0o700);
  });

  it('a FIFO, a link to /dev/zero or a large file among the claims is skipped, never read (before: the claim hung on the FIFO)', () => {
    const tmp = fresh('planted');
    const claims = join(tmp, 'lockcheck-ports');
    mkdirSync(claims, { mode: 0o1777 });
    execFileSync('chmod', ['1777', claims]);
    expect(spawnSync('mkfifo', [join(claims, '20000')]).status).toBe(0);
    symlinkSync('/dev/zero', join(claims, '20001'));
    writeFileSync(join(claims, '20002'), 'x'.repeat(1 << 20));
    const claimed = claimIn(tmp);
    expect(claimed).toEqual({ dir: claims, mode: 0o1777 });
    // What it could not judge as a claim it leaves alone.
    expect(lstatSync(join(claims, '20000')).isFIFO()).toBe(true);
    expect(lstatSync(join(claims, '20001')).isSymbolicLink()).toBe(true);
  });
});
