import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { sourceEntries } from './sourceEntries.ts';
import * as lockFromPackage from 'lockcheck/lock';
import * as kitFromPackage from 'lockcheck/kit';
import * as lockFromSource from '../impl/index.ts';
import * as kitFromSource from '../conformance/kit.ts';

/**
 * The examples in docs/examples ship with the package (package.json
 * "files") and are what a user copies into a project, where only the
 * package's entries (its "exports") can be imported. So each import of an
 * example is a package's: `lockcheck/…` naming an entry (in the repository
 * the entry's source: test/sourceEntries.ts), or another package; a relative
 * import may only reach a file shipped beside it. They imported
 * ../../impl/index.ts and the like, which the package does not ship: from
 * the installed package they did not load (found by an audit); and
 * checkAcquireInput, which the worked example used, was in no entry.
 */
const repo = fileURLToPath(new URL('..', import.meta.url));
const manifest = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { name: string; files: string[] };
const entries = sourceEntries(repo);
const examples = join(repo, 'docs/examples');
/** A path of the repository the package ships ("files": a directory ending in /, a glob of one level, a file). */
const shipped = (path: string): boolean =>
  manifest.files.some((f) => (f.endsWith('/') ? path.startsWith(f) : f.includes('*') ? new RegExp(`^${f.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')}$`).test(path) : path === f));

describe('docs/examples import only what the package ships', () => {
  it('finds the entries and the shipped examples', () => {
    expect(entries.get('lockcheck/kit')).toBe(resolve(repo, 'conformance/kit.ts'));
    expect(shipped('docs/examples/tinyLock.ts')).toBe(true);
    expect(shipped('impl/index.ts')).toBe(false);
  });

  it('in the repository, lockcheck/… are the sources the tests import (one copy of each class), not dist/', () => {
    expect(lockFromPackage.LeaseHandle).toBe(lockFromSource.LeaseHandle);
    expect(kitFromPackage.VirtualTime).toBe(kitFromSource.VirtualTime);
  });

  it.each(readdirSync(examples).filter((f) => f.endsWith('.ts')))('%s', (file) => {
    const text = readFileSync(join(examples, file), 'utf8');
    const specifiers = [...text.matchAll(/^\s*(?:import|export)\s[^;]*?from\s+'([^']+)'|^\s*import\s+'([^']+)'|\bimport\(\s*'([^']+)'\s*\)/gms)].map((m) => (m[1] ?? m[2] ?? m[3])!);
    expect(specifiers.length).toBeGreaterThan(0);
    const unshipped = specifiers.filter((spec) => (spec.startsWith('.') ? !shipped(relative(repo, resolve(examples, spec))) : (spec === manifest.name || spec.startsWith(`${manifest.name}/`)) && !entries.has(spec)));
    expect(unshipped, 'imports a user of the package cannot make').toEqual([]);
    // Through the package's name, so that the same line works in a user's project.
    expect(specifiers.filter((spec) => spec.startsWith('.')), 'relative imports').toEqual([]);
  });
});
