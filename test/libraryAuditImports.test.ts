import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { LIBRARY_PACKAGES } from '../cli/rows.ts';
import type { LibraryId } from '../cli/rows.ts';

/**
 * A library audit (`lockcheck run|stress|matrix --backend lib:…`) in an
 * installed lockcheck loads its adapter module, and the user has installed
 * the one library that row names (the fix line says `npm install
 * --save-dev <that package>`): the audited libraries are not lockcheck's
 * dependencies. So an adapter module, with every module it imports, may load
 * no package but lockcheck's dependencies and its own row's library.
 * redlock4.ts and sesamecareRedlock.ts imported shared code from redlock.ts,
 * which imports `redlock`: with redlock 4 or the fork alone installed, their
 * audits stopped on ERR_MODULE_NOT_FOUND for 'redlock', reported as a bug in
 * lockcheck (exit 4; found by an audit of the installed package).
 */
const repo = fileURLToPath(new URL('..', import.meta.url));
const manifest = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
const adapters = join(repo, 'conformance/adapters');

/** The adapter module of each row, as conformance/adapters/libraries.ts loads it. */
function adapterModules(): Map<LibraryId, string> {
  const text = readFileSync(join(adapters, 'libraries.ts'), 'utf8');
  return new Map([...text.matchAll(/case '([^']+)':\s*return \(await import\('\.\/([^']+)'\)\)/g)].map((m) => [m[1] as LibraryId, join(adapters, m[2]!)]));
}

/** A package's name from an import specifier ('@scope/name/sub' → '@scope/name'). */
const packageOf = (specifier: string): string => specifier.split('/').slice(0, specifier.startsWith('@') ? 2 : 1).join('/');

/** Every package a module loads when it is imported: its static value imports and re-exports, followed through relative ones. */
function packagesLoaded(entry: string): Set<string> {
  const seen = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string): void => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    // `import type` and `export type` are erased; a bare `import 'x'` loads x.
    for (const m of text.matchAll(/^(?:import|export)\s+(?!type\s)(?:[^'";]*?\s+from\s+)?'([^']+)';/gm)) {
      const specifier = m[1]!;
      if (specifier.startsWith('.')) visit(resolve(dirname(file), specifier));
      else if (!specifier.startsWith('node:')) packages.add(packageOf(specifier));
    }
  };
  visit(entry);
  return packages;
}

describe('a library audit loads only its own library', () => {
  const modules = adapterModules();

  it('finds the adapter module of every row', () => {
    expect([...modules.keys()].sort()).toEqual(Object.keys(LIBRARY_PACKAGES).sort());
  });

  it.each(Object.keys(LIBRARY_PACKAGES) as LibraryId[])('%s: no package beyond lockcheck\'s dependencies and its library', (id) => {
    const others = [...packagesLoaded(modules.get(id)!)].filter((p) => manifest.dependencies[p] === undefined);
    expect(others).toEqual([LIBRARY_PACKAGES[id].name]);
  });
});
