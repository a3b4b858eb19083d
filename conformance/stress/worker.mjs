// A stress run's client process. tsx's loaders are registered first in every case: a user's adapter may be TypeScript
// (Node 20 cannot run .ts itself), also in a CommonJS package. Compiled (dist/, where the build copies this file), the
// worker is worker.js beside it.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { guardTsxCache, pinTsconfig } from '../env/tsxCache.mjs';

const compiled = new URL('./worker.js', import.meta.url);
// Before tsx loads (imported after the guard, not statically): tsx runs the code it finds in its cache (env/tsxCache.mjs).
guardTsxCache();
// The one the CLI named (inherited), else the repository's (the package has none: no options), never the working
// directory's (env/tsxCache.mjs).
pinTsconfig(existsSync(compiled) ? null : join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'tsconfig.json'));
const { register } = await import('tsx/esm/api');
const { register: registerCommonJs } = await import('tsx/cjs/api');

register();
// As cli/lockcheck.mjs: an adapter in a CommonJS package loads, and the module the user named is the one imported.
registerCommonJs();
globalThis[Symbol.for('lockcheck.plainImport')] = (url) => import(url);
await import(existsSync(compiled) ? compiled.href : new URL('./worker.ts', import.meta.url).href);
