import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The examples in docs/examples are what a user copies into a project, where
 * only the package's entries (package.json `exports`) can be imported: each
 * relative import of an example must be the source of one of them, so that
 * the same line works as `from 'lockcheck/…'` (checkAcquireInput, which the
 * worked example used, was in no entry).
 */
const repo = fileURLToPath(new URL('..', import.meta.url));
const manifest = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { exports: Record<string, { types?: string } | string> };
/** ./dist/conformance/kit.d.ts -> <repo>/conformance/kit.ts */
const entries = new Set(
  Object.values(manifest.exports).flatMap((e) => (typeof e === 'object' && e.types !== undefined ? [resolve(repo, e.types.replace(/^\.\/dist\//, '').replace(/\.d\.ts$/, '.ts'))] : [])),
);
const examples = join(repo, 'docs/examples');

describe('docs/examples import only what the package exports', () => {
  it('finds the entries', () => {
    expect(entries).toContain(resolve(repo, 'conformance/kit.ts'));
  });

  it.each(readdirSync(examples).filter((f) => f.endsWith('.ts')))('%s', (file) => {
    const text = readFileSync(join(examples, file), 'utf8');
    const relative = [...text.matchAll(/^import\s[^;]*?from\s+'(\.[^']+)'/gms)].map((m) => m[1]!);
    const outside = relative.filter((spec) => !entries.has(resolve(examples, spec)));
    expect(outside).toEqual([]);
  });
});
