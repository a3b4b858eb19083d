import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/**
 * The package's entries (package.json `exports`) by the source file each is
 * built from: 'lockcheck/kit' -> <repo>/conformance/kit.ts (from its types,
 * ./dist/conformance/kit.d.ts). The shipped examples (docs/examples) import
 * `lockcheck/…` as a user's project does; in the repository those names
 * must reach the sources, not dist/ (built only by npm run build or
 * prepare, and stale after any edit, and a second copy of every class
 * beside the sources the tests import). vitest.config.ts and
 * stryker.vitest.config.ts alias them so, as tsconfig.json's paths do for
 * tsc and cli/lockcheck.mjs for the CLI run from the repository.
 */
export function sourceEntries(repo: string): Map<string, string> {
  const manifest = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { name: string; exports: Record<string, { types?: string } | string> };
  const entries = new Map<string, string>();
  for (const [subpath, target] of Object.entries(manifest.exports)) {
    if (typeof target !== 'object' || target.types === undefined) continue;
    entries.set(`${manifest.name}${subpath.slice(1)}`, resolve(repo, target.types.replace(/^\.\/dist\//, '').replace(/\.d\.ts$/, '.ts')));
  }
  return entries;
}

/** The same as vite's resolve.alias: each name exactly (lockcheck/kit, not lockcheck/kitchen). */
export function sourceAliases(repo: string): Array<{ find: RegExp; replacement: string }> {
  return [...sourceEntries(repo)].map(([name, file]) => ({ find: new RegExp(`^${name.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}$`), replacement: file }));
}
