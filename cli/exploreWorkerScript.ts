import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/** The part of esbuild's API used here (esbuild is tsx's own compiler, resolved through tsx: no dependency of ours). */
interface Esbuild {
  build(options: {
    entryPoints: string[];
    bundle: true;
    platform: 'node';
    format: 'esm';
    target: string;
    write: false;
    logLevel: 'error';
  }): Promise<{ outputFiles: ReadonlyArray<{ readonly text: string }> }>;
}

const scripts = new Map<string, Promise<URL>>();

/**
 * What an explore worker thread runs (exploreWorker.ts). Compiled (dist/),
 * the worker's own .js file. From the sources (the bin loads them through
 * tsx), one ES module bundled in memory by tsx's esbuild, once a process,
 * and handed to each worker as a data: URL: a worker loading the .ts files
 * through tsx took about 0.7 s to start, the bundle about 0.15 s, and
 * nothing is written to disk (bench/explore.md, session h15).
 */
export function exploreWorkerScript(): Promise<URL> {
  return workerScript('exploreWorker');
}

/** The same for any worker entry beside this file (`checkWorker`: lockcheck check's search, so that Ctrl-C is heard). */
export function workerScript(entry: 'exploreWorker' | 'checkWorker'): Promise<URL> {
  if (!import.meta.url.endsWith('.ts')) return Promise.resolve(new URL(`./${entry}.js`, import.meta.url));
  let script = scripts.get(entry);
  if (script === undefined) scripts.set(entry, (script = bundle(entry)));
  return script;
}

async function bundle(entry: string): Promise<URL> {
  const require = createRequire(import.meta.url);
  const esbuild = createRequire(require.resolve('tsx/package.json'))('esbuild') as Esbuild;
  const out = await esbuild.build({
    entryPoints: [fileURLToPath(new URL(`./${entry}.ts`, import.meta.url))],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    write: false,
    logLevel: 'error',
  });
  return new URL(`data:text/javascript;base64,${Buffer.from(out.outputFiles[0]!.text).toString('base64')}`);
}
