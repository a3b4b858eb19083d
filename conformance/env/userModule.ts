import { pathToFileURL } from 'node:url';

/**
 * Set by lockcheck's source entry points (cli/lockcheck.mjs,
 * conformance/stress/worker.mjs), which run lockcheck's TypeScript under
 * tsx's loader: an import() made from their plain .mjs. Made from a .ts
 * file, tsx resolves a named `x.js` to an `x.ts` beside it (TypeScript's
 * convention for imports between .ts files); the user's named file must be
 * the one loaded.
 */
export const PLAIN_IMPORT = Symbol.for('lockcheck.plainImport');

type Importer = (url: string) => Promise<Record<string, unknown>>;

/**
 * Imports the module file at `path` (absolute) that a user named: a
 * JavaScript file as it is, a TypeScript one through tsx, whether its
 * package is an ES module one ("type": "module", or .mts) or CommonJS (a
 * plain .ts without "type": "module", which tsx's ES module hooks alone
 * could not load: "Cannot require() ES Module ... in a cycle").
 */
export async function importUserModule(path: string): Promise<Record<string, unknown>> {
  const url = pathToFileURL(path).href;
  const plain = (globalThis as Record<symbol, unknown>)[PLAIN_IMPORT];
  if (typeof plain === 'function') return exportsOf(await (plain as Importer)(url));
  if (/\.[cm]?tsx?$/.test(path)) await registerTypeScript(path);
  return exportsOf((await import(url)) as Record<string, unknown>);
}

/**
 * A module's exports as an ES module's namespace. A CommonJS module compiled
 * from ES module syntax (tsx, esbuild, tsc) marks its exports `__esModule`;
 * imported, its whole `module.exports` is the namespace's default (Node finds
 * its named exports only where it can read them statically): those are the
 * exports, `default` among them.
 */
function exportsOf(namespace: Record<string, unknown>): Record<string, unknown> {
  const d = namespace['default'];
  return typeof d === 'object' && d !== null && (d as { __esModule?: unknown }).__esModule === true ? (d as Record<string, unknown>) : namespace;
}

let registered = false;

/**
 * tsx's loader for ES modules and for CommonJS, once: the compiled CLI
 * (dist/) loads a user's TypeScript adapter. Run from its sources the CLI
 * is already under both (or under vitest's own loader).
 */
async function registerTypeScript(path: string): Promise<void> {
  if (registered || import.meta.url.endsWith('.ts')) return;
  const guards = (await import(new URL('./tsxCache.mjs', import.meta.url).href)) as { guardTsxCache: () => void; pinTsconfig: (file: string | null) => void; adapterTsconfig: (path: string) => string | null };
  // Before tsx loads: it runs the code it finds in its cache, which another local user may have made, and follows the
  // "paths" of the working directory's tsconfig (or one above it), which they may have put there (tsxCache.mjs).
  guards.guardTsxCache();
  guards.pinTsconfig(guards.adapterTsconfig(path));
  (await import('tsx/esm/api')).register();
  (await import('tsx/cjs/api')).register();
  registered = true;
}
