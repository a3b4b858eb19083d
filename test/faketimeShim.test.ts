import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LIBFAKETIME_PATH, MALLOC_SHIM_DIR, buildMallocShim, multiarchOf } from '../conformance/env/faketime.ts';

/** The libfaketime malloc shim is preloaded into redis-server: it must come only from a directory nobody else can write. */
const made: string[] = [];
function scratch(): string {
  const dir = mkdtempSync(join(tmpdir(), 'lockcheck-shim-test-'));
  made.push(dir);
  return dir;
}
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const PLANTED = 'planted by someone else';
const isElf = (path: string): boolean => readFileSync(path).subarray(0, 4).equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]));

/** A cache root holding a planted malloc-shim.so where a build would look. */
function plant(root: string): string {
  const dir = join(root, MALLOC_SHIM_DIR);
  mkdirSync(dir, { recursive: true });
  const so = join(dir, 'malloc-shim.so');
  writeFileSync(so, PLANTED);
  return so;
}

describe('malloc shim: built and loaded only from a private directory', () => {
  it('a cache root whose path has a space or colon (a clone under "my project"): built where LD_PRELOAD can name it, never split', async () => {
    // Before: ld.so preloaded '…/my' and 'project/node_modules/…' (relative to the server's working directory), not the shim.
    for (const name of ['my project', 'a:b']) {
      const root = join(scratch(), name, 'node_modules', '.cache');
      mkdirSync(root, { recursive: true, mode: 0o700 });
      const path = await buildMallocShim(root);
      expect(path).not.toMatch(/[\s:]/);
      expect(isElf(path)).toBe(true);
      expect(statSync(dirname(path)).mode & 0o077).toBe(0);
    }
  });

  it('a world-writable cache root is rejected: the planted .so is not used, the shim is built in a private temp dir', async () => {
    const root = scratch();
    const planted = plant(root);
    chmodSync(root, 0o777);
    const path = await buildMallocShim(root);
    expect(path).not.toBe(planted);
    expect(readFileSync(planted, 'utf8')).toBe(PLANTED);
    expect(isElf(path)).toBe(true);
    expect(statSync(dirname(path)).mode & 0o077).toBe(0);
  });

  it('a cache dir writable by others, or owned by another user, is rejected', async () => {
    const root = scratch();
    const planted = plant(root);
    chmodSync(dirname(planted), 0o777);
    expect(await buildMallocShim(root)).not.toBe(planted);
    if (process.getuid?.() === 0) {
      chmodSync(dirname(planted), 0o700);
      chownSync(dirname(planted), 65534, 65534);
      expect(await buildMallocShim(root)).not.toBe(planted);
    }
    expect(readFileSync(planted, 'utf8')).toBe(PLANTED);
  });

  it('a symlinked cache dir is rejected', async () => {
    const root = scratch();
    const elsewhere = scratch();
    const planted = plant(elsewhere);
    symlinkSync(dirname(planted), join(root, MALLOC_SHIM_DIR));
    const path = await buildMallocShim(root);
    expect(path.startsWith(root)).toBe(false);
    expect(readFileSync(planted, 'utf8')).toBe(PLANTED);
  });

  it('in a private cache dir, a .so others can write is rebuilt, and a good build is reused', async () => {
    const root = scratch();
    const planted = plant(root);
    chmodSync(dirname(planted), 0o700);
    chmodSync(planted, 0o666);
    const path = await buildMallocShim(root);
    expect(path).toBe(planted);
    expect(isElf(path)).toBe(true);
    expect(statSync(path).mode & 0o022).toBe(0);
    const built = statSync(path).ino;
    expect(await buildMallocShim(root)).toBe(path);
    expect(statSync(path).ino).toBe(built);
  });
});

describe('libfaketime is looked for where Debian installs it on this machine', () => {
  it("under the machine's multiarch directory, not x86_64's alone (setup.sh names it by uname -m the same way)", () => {
    expect(multiarchOf('x64')).toBe('x86_64-linux-gnu');
    expect(multiarchOf('arm64')).toBe('aarch64-linux-gnu');
    // scripts/setup.sh installed it (npm test runs it first): the path built for this machine is the one there.
    expect(existsSync(LIBFAKETIME_PATH), LIBFAKETIME_PATH).toBe(true);
  });
});
