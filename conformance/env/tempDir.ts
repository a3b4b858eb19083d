import { spawn, spawnSync } from 'node:child_process';
import { lstatSync, mkdtempSync, readdirSync, rmdirSync, rmSync, unlinkSync } from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
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
    // A server's directory in it may be another user's (a PostgreSQL cluster's when we are root).
    removeTreeSync(dir);
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
    await removeTree(dir);
    throw error;
  }
}

/** builtIn, for a synchronous `build`. */
function builtInSync<T>(dir: string, build: () => T): T {
  try {
    return build();
  } catch (error) {
    removeTreeSync(dir);
    throw error;
  }
}

/**
 * How directory `dir` is removed: by this process, or (lockcheck as root)
 * entry by entry. A recursive removal lists a directory after checking it is
 * no link, and whoever may write in it (its owner, e.g. OS user postgres for
 * a PostgreSQL cluster's) can swap in a link to /etc in between, which root
 * would then empty. So root walks only directories it owns whose entries no
 * one else can swap (entriesFixed); another user's directory is emptied as
 * that user (find -delete, run in it: the directory around it may be closed
 * to them), reaching only what they could remove anyway, then removed by this
 * process (rmdir follows no link). What they keep from being removed stays:
 * theirs.
 */
type Removal = 'gone' | 'self' | 'file' | 'walk' | { readonly uid: number; readonly gid: number };

function removalOf(dir: string): Removal {
  let stat;
  try {
    stat = lstatSync(dir);
  } catch {
    return 'gone';
  }
  if (process.getuid?.() !== 0) return 'self';
  if (!stat.isDirectory()) return 'file';
  if (stat.uid !== 0) return { uid: stat.uid, gid: stat.gid };
  return entriesFixed(stat.mode) ? 'walk' : 'file';
}

/**
 * Whether no one else can rename or replace what root owns in a directory of
 * root's: none may write in it, or it is sticky (only an entry's owner moves
 * it). Root's own directory open to others' writes and not sticky is not
 * walked: only an empty one goes.
 */
function entriesFixed(mode: number): boolean {
  return (mode & 0o022) === 0 || (mode & 0o1000) !== 0;
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

function namesIn(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return []; // gone meanwhile
  }
}

/** A file, a link, or an empty directory: never followed. */
function removeEntry(path: string): void {
  try {
    if (lstatSync(path).isDirectory()) rmdirSync(path);
    else unlinkSync(path);
  } catch {
    // gone, or kept
  }
}

/** Removes directory `dir` and everything in it; another user's tree as that user (removalOf). */
export function removeTreeSync(dir: string): void {
  const removal = removalOf(dir);
  if (removal === 'gone') return;
  if (removal === 'self') return rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  if (removal === 'file') return removeEntry(dir);
  if (removal === 'walk') for (const name of namesIn(dir)) removeTreeSync(join(dir, name));
  else spawnSync('find', FIND_ARGS, findOptions(dir, removal));
  removeEmptied(dir);
}

/** removeTreeSync, without blocking the event loop. */
export async function removeTree(dir: string): Promise<void> {
  const removal = removalOf(dir);
  if (removal === 'gone') return;
  if (removal === 'self') return rm(dir, { recursive: true, force: true, maxRetries: 3 });
  if (removal === 'file') return removeEntry(dir);
  if (removal === 'walk') {
    for (const name of await readdir(dir).catch(() => [])) await removeTree(join(dir, name));
  } else {
    await new Promise<void>((resolve) => {
      const child = spawn('find', FIND_ARGS, findOptions(dir, removal));
      child.once('error', () => resolve());
      child.once('close', () => resolve());
    });
  }
  removeEmptied(dir);
}
