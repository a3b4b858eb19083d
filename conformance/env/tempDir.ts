import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { atExit } from './processes.ts';
import { Guard } from './watchdog.ts';

/**
 * A private (0700) temp dir named `prefix`…, removed by `remove()`, else at
 * exit or on a signal (atExit), else, should this process be SIGKILLed (no
 * handler runs then), by the watchdog. An atExit clean-up alone left the
 * directory for good when the process was killed.
 */
export function guardedTempDir(prefix: string): { readonly dir: string; readonly remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const guard = new Guard();
  guard.set({ processes: [], dirs: [dir] });
  let unregister: () => void = () => undefined;
  const remove = (): void => {
    rmSync(dir, { recursive: true, force: true });
    guard.release();
    unregister();
  };
  unregister = atExit(remove);
  return { dir, remove };
}
