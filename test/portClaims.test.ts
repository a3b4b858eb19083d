import { execFileSync, spawnSync } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * The shared port-claims directory (conformance/env/processes.ts) is in the
 * temp dir, where any local user may make it first or plant something in it.
 * Each case runs claimPort in a child whose TMPDIR is a directory of its own,
 * so the machine's real claims are never touched.
 */
const root = mkdtempSync(join(tmpdir(), 'lockcheck-claims-test-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** In a child with TMPDIR = `tmp` and umask 022: claims a port, prints the claim file's directory and mode, releases nothing (its exit does). */
function claimIn(tmp: string): { dir: string; mode: number } {
  const processes = JSON.stringify(pathToFileURL(resolve('conformance/env/processes.ts')).href);
  const code = `process.umask(0o022); const { claimPort, PORT_CLAIMS, privateClaims } = await import(${processes}); const { statSync, existsSync } = await import('node:fs'); const { join } = await import('node:path');
const c = await claimPort(); const dir = [PORT_CLAIMS, ...(privateClaims ? [privateClaims()] : [])].find((d) => existsSync(join(d, String(c.port))));
console.log(JSON.stringify({ dir, mode: dir === undefined ? 0 : statSync(dir).mode & 0o7777 })); c.release();`;
  // Bounded: before the fix a FIFO in the directory held the claim forever.
  const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, TMPDIR: tmp } });
  return JSON.parse(out) as { dir: string; mode: number };
}

function fresh(name: string): string {
  const dir = join(root, name);
  mkdirSync(dir);
  return dir;
}

describe('port claims in the shared temp dir', () => {
  it('a directory this user makes is 1777 whatever the umask (before: 1755, and every other user failed with EACCES)', () => {
    const tmp = fresh('umask');
    const claimed = claimIn(tmp);
    expect(claimed).toEqual({ dir: join(tmp, 'lockcheck-ports'), mode: 0o1777 });
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
