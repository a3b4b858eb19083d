import { spawn, spawnSync } from 'node:child_process';
import { lstatSync, mkdtempSync, rmdirSync, rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { atExit } from './processes.ts';
import { Guard } from './watchdog.ts';

/**
 * A private (0700) temp dir named `prefix`… in `parent` (the OS's temp dir
 * by default; /dev/shm for a server's files in memory), removed by
 * `remove()`, else at exit or on a signal (atExit), else, should this
 * process be SIGKILLed (no handler runs then), by the watchdog. An atExit
 * clean-up alone left the directory for good when the process was killed
 * (a killed mutation run left dozens in /dev/shm, which is memory).
 */
export function guardedTempDir(prefix: string, parent = tmpdir()): { readonly dir: string; readonly remove: () => void } {
  const dir = mkdtempSync(join(parent, prefix));
  const guard = builtInSync(dir, () => {
    const made = new Guard();
    made.set({ processes: [], dirs: [dir] });
    return made;
  });
  let unregister: () => void = () => undefined;
  const remove = (): void => {
    rmSync(dir, { recursive: true, force: true });
    guard.release();
    unregister();
  };
  unregister = atExit(remove);
  return { dir, remove };
}

/**
 * `build(dir)` for a directory just made for it, the directory removed should
 * `build` throw: until what it builds (a server, a group) holds the
 * directory, nothing else would remove it, nor the watchdog know of it.
 */
export async function builtIn<T>(dir: string, build: (dir: string) => T | Promise<T>): Promise<T> {
  try {
    return await build(dir);
  } catch (error) {
    await rm(dir, { recursive: true, force: true, maxRetries: 3 });
    throw error;
  }
}

/** builtIn, for a synchronous `build`. */
function builtInSync<T>(dir: string, build: () => T): T {
  try {
    return build();
  } catch (error) {
    rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
    throw error;
  }
}

/**
 * Who must remove directory `dir`: this process, or (lockcheck as root) the
 * other user who owns it (a PostgreSQL cluster's, run as OS user postgres).
 * A recursive removal lists a directory after checking it is no link, and
 * the directory's owner can swap in a link to /etc in between, which root
 * would then empty: what is in their tree is removed as them (find -delete,
 * run in it: the directory around it may be closed to them), reaching only
 * what they could remove anyway, then the emptied directory by this process
 * (rmdir follows no link). What they keep from being removed stays: theirs.
 */
function removerOf(dir: string): 'gone' | 'self' | { readonly uid: number; readonly gid: number } {
  let stat;
  try {
    stat = lstatSync(dir);
  } catch {
    return 'gone';
  }
  return process.getuid?.() === 0 && stat.uid !== 0 && stat.isDirectory() ? { uid: stat.uid, gid: stat.gid } : 'self';
}

const FIND_ARGS = ['.', '-xdev', '-mindepth', '1', '-delete'];
const findOptions = (dir: string, owner: { readonly uid: number; readonly gid: number }) => ({ cwd: dir, ...owner, stdio: 'ignore', timeout: 60_000, env: { PATH: '/usr/bin:/bin' } }) as const;

function removeEmptied(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // not emptied (what its owner keeps), or gone
  }
}

/** Removes directory `dir` and everything in it; another user's tree as that user (removerOf). */
export function removeTreeSync(dir: string): void {
  const remover = removerOf(dir);
  if (remover === 'gone') return;
  if (remover === 'self') return rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  spawnSync('find', FIND_ARGS, findOptions(dir, remover));
  removeEmptied(dir);
}

/** removeTreeSync, without blocking the event loop. */
export async function removeTree(dir: string): Promise<void> {
  const remover = removerOf(dir);
  if (remover === 'gone') return;
  if (remover === 'self') return rm(dir, { recursive: true, force: true, maxRetries: 3 });
  await new Promise<void>((resolve) => {
    const child = spawn('find', FIND_ARGS, findOptions(dir, remover));
    child.once('error', () => resolve());
    child.once('close', () => resolve());
  });
  removeEmptied(dir);
}
