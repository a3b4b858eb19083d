#!/usr/bin/env node
// The `lockcheck` bin: loads the TypeScript CLI through tsx's loader (Node 20 cannot run .ts itself).
import { register } from 'tsx/esm/api';
import { register as registerCommonJs } from 'tsx/cjs/api';

register();
// A TypeScript adapter in a CommonJS package (a plain .ts without "type": "module") is loaded as CommonJS.
registerCommonJs();
// The user's adapter module is imported from here, a plain .mjs: imported from a .ts file, tsx would load x.ts for a named x.js beside it.
globalThis[Symbol.for('lockcheck.plainImport')] = (url) => import(url);
await import('./main.ts');
