// A stress run's client process. tsx's loader is registered first in every case: a user's adapter may be TypeScript
// (Node 20 cannot run .ts itself). Compiled (dist/, where the build copies this file), the worker is worker.js beside it.
import { existsSync } from 'node:fs';
import { register } from 'tsx/esm/api';

register();
const compiled = new URL('./worker.js', import.meta.url);
await import(existsSync(compiled) ? compiled.href : new URL('./worker.ts', import.meta.url).href);
