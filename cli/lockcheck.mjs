#!/usr/bin/env node
// The `lockcheck` bin: loads the TypeScript CLI through tsx's loader (Node 20 cannot run .ts itself).
import { readFileSync } from 'node:fs';
import { register as registerHooks } from 'node:module';
import { fileURLToPath } from 'node:url';
import { guardTsxCache, pinTsconfig } from '../conformance/env/tsxCache.mjs';

// Before tsx loads (imported below, not statically): it reads TSX_DISABLE_CACHE and TSX_TSCONFIG_PATH as it loads.
guardTsxCache();
// The repository's own tsconfig, never one of the working directory's (or above it, /tmp's), which another user may have put there.
pinTsconfig(fileURLToPath(new URL('../tsconfig.json', import.meta.url)));
const { register } = await import('tsx/esm/api');
const { register: registerCommonJs } = await import('tsx/cjs/api');
register();
// Run from the repository (this file is not shipped; the package's bin is dist/cli/main.js): lockcheck/… (the package's
// entries, which the shipped examples in docs/examples import, as a user's project does) are the sources this CLI runs,
// not dist/ (built only by npm run build, stale after an edit, and a second copy of every class). As test/sourceEntries.ts.
const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
const entries = Object.fromEntries(
  Object.entries(manifest.exports).flatMap(([subpath, target]) =>
    typeof target === 'object' && typeof target.types === 'string'
      ? [[`${manifest.name}${subpath.slice(1)}`, new URL(`../${target.types.replace(/^\.\/dist\//, '').replace(/\.d\.ts$/, '.ts')}`, import.meta.url).href]]
      : [],
  ),
);
registerHooks(
  `data:text/javascript,${encodeURIComponent(`const entries = ${JSON.stringify(entries)}; export async function resolve(specifier, context, next) { const url = Object.hasOwn(entries, specifier) ? entries[specifier] : undefined; return next(url ?? specifier, context); }`)}`,
);
// A TypeScript adapter in a CommonJS package (a plain .ts without "type": "module") is loaded as CommonJS.
registerCommonJs();
// The user's adapter module is imported from here, a plain .mjs: imported from a .ts file, tsx would load x.ts for a named x.js beside it.
globalThis[Symbol.for('lockcheck.plainImport')] = (url) => import(url);
await import('./main.ts');
