import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * lockcheck's own version, from its package.json: the nearest one above this file named lockcheck. Searched for, not
 * imported by a fixed path: the source (cli/) and the compiled package (dist/cli/) sit at different depths below it.
 */
export function lockcheckVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const manifest = JSON.parse(readFileSync(file, 'utf8')) as { name?: unknown; version?: unknown };
      if (manifest.name === 'lockcheck' && typeof manifest.version === 'string') return manifest.version;
    }
    const up = dirname(dir);
    // The filesystem's root bounds the search: a copy of the code without its package.json is a broken install.
    if (up === dir) throw new Error(`lockcheck's package.json is not in any directory above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
}
