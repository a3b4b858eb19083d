import { mkdtempSync, rmSync } from 'node:fs';
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
