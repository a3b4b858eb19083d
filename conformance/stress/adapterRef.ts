import type { ConcurrentClient } from '../adapter.ts';
import type { LibraryId } from '../adapters/libraries.ts';
import { libraryConcurrent } from '../adapters/libraries.ts';
import { importUserModule } from '../env/userModule.ts';
import { knownOptions } from '../../impl/options.ts';

/**
 * Where a stress client process finds an adapter's concurrent client: one of
 * lockcheck's library audits, or the module the user named with --backend
 * (an absolute path, passed over IPC). Nothing else is ever imported: no
 * path is read from a file.
 */
export type AdapterRef = { readonly kind: 'library'; readonly library: LibraryId } | { readonly kind: 'module'; readonly path: string };

export async function loadConcurrent(ref: AdapterRef): Promise<ConcurrentClient> {
  if (ref.kind === 'library') return libraryConcurrent(ref.library);
  const mod = await importUserModule(ref.path);
  return concurrentOf(mod, ref.path);
}

/**
 * The concurrent client an adapter module offers: `default.concurrent` when
 * the default export is the backend, else a named export `concurrent`. A
 * default export that is a function is never called here (it may start
 * servers): such a module exports `concurrent` by name.
 */
export function concurrentOf(mod: Readonly<Record<string, unknown>>, where: string): ConcurrentClient {
  const d = mod['default'];
  const found = mod['concurrent'] ?? (typeof d === 'object' && d !== null ? (d as { concurrent?: unknown }).concurrent : undefined);
  if (found === undefined) {
    throw new TypeError(`'${where}' offers no concurrent client: give its backend a \`concurrent\` member (ConcurrentClient, docs/adapter.md#concurrent-clients-lockcheck-stress-on-your-adapter)${typeof d === 'function' ? ', exported by name (`export const concurrent`) since its default export is a function' : ''}`);
  }
  const c = found as Partial<ConcurrentClient>;
  // A misspelt key (`token` for `tokens`, `lockkey`) was ignored and its default run in its place: false findings, or a targeted fault that never struck.
  unknownKeys(where, 'concurrent', c, ['servers', 'connect', 'lockKey', 'tokens']);
  if (typeof c.servers === 'object' && c.servers !== null) unknownKeys(where, 'concurrent.servers', c.servers, ['kind', 'nodes']);
  const s = c.servers as { kind?: unknown; nodes?: unknown } | undefined;
  const serversOk = s !== undefined && ((s.kind === 'redis' && (s.nodes === 1 || s.nodes === 5)) || s.kind === 'postgres');
  if (typeof c.connect !== 'function' || !serversOk || (c.lockKey !== undefined && typeof c.lockKey !== 'function') || (c.tokens !== undefined && typeof c.tokens !== 'boolean')) {
    throw new TypeError(`'${where}': concurrent must be a ConcurrentClient: { servers: { kind: 'redis', nodes: 1 | 5 } | { kind: 'postgres' }, connect(servers, clock), lockKey?, tokens? }`);
  }
  return c as ConcurrentClient;
}

/** knownOptions' check (the nearest key suggested), its refusal as this module's: a TypeError naming the module. */
function unknownKeys(where: string, name: string, value: object, known: readonly string[]): void {
  try {
    knownOptions(name, known)(value);
  } catch (e) {
    throw new TypeError(`'${where}': ${(e as Error).message.replace(/^invalid-config: /, '')}`);
  }
}
