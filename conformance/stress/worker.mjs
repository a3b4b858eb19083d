// A stress run's client process: loads the TypeScript worker through tsx's loader (Node 20 cannot run .ts itself).
import { register } from 'tsx/esm/api';
import { register as registerCommonJs } from 'tsx/cjs/api';

register();
// As cli/lockcheck.mjs: an adapter in a CommonJS package loads, and the module the user named is the one imported.
registerCommonJs();
globalThis[Symbol.for('lockcheck.plainImport')] = (url) => import(url);
await import('./worker.ts');
