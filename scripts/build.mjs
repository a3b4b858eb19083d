// npm run build (and prepare): compiles the TypeScript into dist/, then copies the plain .mjs scripts that the compiled
// code starts by path (a stress client process, the watchdog): tsc emits only what it compiles.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const ROOTS = ['model', 'impl', 'conformance', 'cli'];
// The CLI's source entry runs cli/main.ts through tsx; the package's bin is dist/cli/main.js.
const SOURCE_ONLY = new Set(['cli/lockcheck.mjs']);

// dist/ from scratch: tsc never deletes, so a module since renamed or removed would stay in dist/ and ship with the package.
rmSync(join(root, 'dist'), { recursive: true, force: true });
execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });

function* scripts(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* scripts(path);
    else if (entry.name.endsWith('.mjs')) yield path;
  }
}

for (const top of ROOTS) {
  for (const path of scripts(join(root, top))) {
    const rel = relative(root, path);
    if (SOURCE_ONLY.has(rel)) continue;
    const target = join(root, 'dist', rel);
    mkdirSync(dirname(target), { recursive: true });
    copyFileSync(path, target);
  }
}
