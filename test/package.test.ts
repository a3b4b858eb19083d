import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { testTempDir } from './tempDirs.ts';

/**
 * lockcheck as a user gets it: `npm pack` of this repository, the tarball
 * installed into an empty project (dependencies from the local npm cache
 * when it has them), and there a user's vitest file with conformanceSuite
 * and `npx lockcheck run` on a TypeScript and a JavaScript adapter.
 */
const repo = fileURLToPath(new URL('..', import.meta.url));
const dir = testTempDir('lockcheck-package-');
const project = join(dir, 'project');

/** `path`'s ancestors, nearest first, up to the root. */
function ancestorsOf(path: string): string[] {
  const out: string[] = [];
  for (let d = dirname(path); out.at(-1) !== d; d = dirname(d)) out.push(d);
  return out;
}

/** The child sees a plain shell's environment: nothing of this vitest run or of the npm script that started it. */
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(VITEST|npm_|NODE_OPTIONS$|TSX_|LOCKCHECK_)/i.test(k)));

function sh(cwd: string, command: string, args: readonly string[]): { code: number | null; out: string } {
  const r = spawnSync(command, args, { cwd, env, encoding: 'utf8', timeout: 180_000 });
  return { code: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}` };
}

const files: Record<string, string> = {
  'package.json': JSON.stringify({ name: 'user-project', private: true, type: 'module' }),
  // A TypeScript adapter that agrees with its model: lockcheck's in-memory Redis lease, from the public exports.
  'my-adapter.ts': [
    "import type { BackendUnderTest } from 'lockcheck/adapter';",
    "import { simLeaseBackend } from 'lockcheck';",
    "import { designs } from 'lockcheck/model';",
    "const backend: BackendUnderTest = simLeaseBackend(designs.redisSingle(), 'strict', {}, 'my lock (ts)');",
    'export default backend;',
  ].join('\n'),
  // A JavaScript adapter with a real-world bug: the lease is timed by the wall clock (MUTEX-1).
  'my-adapter.mjs': [
    "import { simLeaseBackend } from 'lockcheck';",
    "import { LeaseLock } from 'lockcheck/lock';",
    "import { designs } from 'lockcheck/model';",
    "export default simLeaseBackend(designs.redisSingle(), 'strict', { lock: (parts, wallClock) => new LeaseLock({ ...parts, clock: wallClock }) }, 'wall-clock lock (js)');",
  ].join('\n'),
  'test/good.test.ts': ["import { conformanceSuite } from 'lockcheck/suite';", "import backend from '../my-adapter.ts';", 'conformanceSuite(backend, { runs: 20, seed: 1 });'].join('\n'),
  'test/broken.test.ts': [
    "import { conformanceSuite } from 'lockcheck/suite';",
    "import backend from '../my-adapter.mjs';",
    "conformanceSuite(backend, { runs: 100, seed: 1, faults: ['advance', 'pause'] });",
  ].join('\n'),
};

const adapterDoc = readFileSync(join(repo, 'docs/adapter.md'), 'utf8');

function manifestOf(root: string): { exports: Record<string, unknown> } {
  return JSON.parse(readFileSync(join(root, 'node_modules/lockcheck/package.json'), 'utf8')) as { exports: Record<string, unknown> };
}

/** Every `import … from 'lockcheck…'` in a ts code block of the README and docs/*.md, with the value names it imports. */
function documentedImports(): { statement: string; from: string; values: string[] }[] {
  const pages = ['README.md', ...readdirSync(join(repo, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  const blocks = pages.flatMap((p) => [...readFileSync(join(repo, p), 'utf8').matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!));
  const statements = blocks.flatMap((b) => [...b.matchAll(/^import\s+(type\s+)?([^;]*?)\s+from\s+'(lockcheck(?:\/[^']*)?)';/gm)]);
  return statements.map((m) => {
    const names = m[1] !== undefined ? [] : (m[2]!.match(/\{([^}]*)\}/)?.[1] ?? '').split(',').map((n) => n.trim()).filter((n) => n !== '' && !n.startsWith('type '));
    return { statement: m[0], from: m[3]!, values: names };
  });
}

/**
 * Every ts code block of the README and docs/*.md written as a user's file: it imports lockcheck by its package names (and
 * at most the user's own adapter), so it must compile as written against the installed package. Blocks that import this
 * repository's sources (say so beside them) and interface sketches with no import are not a user's file.
 */
function documentedFiles(): { name: string; text: string }[] {
  const pages = ['README.md', ...readdirSync(join(repo, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  return pages.flatMap((page) => {
    const text = readFileSync(join(repo, page), 'utf8');
    return [...text.matchAll(/```ts\n([\s\S]*?)```/g)].flatMap((m) => {
      const sources = [...m[1]!.matchAll(/^import\s[^;]*?\sfrom\s+'([^']+)';/gm)].map((i) => i[1]!);
      if (!sources.some((f) => /^lockcheck(\/|$)/.test(f)) || sources.some((f) => f.startsWith('.') && !/\/my-adapter\.ts$/.test(f))) return [];
      const line = text.slice(0, m.index).split('\n').length;
      // A block importing '../my-adapter.ts' is a test file one directory down (docs/adapter.md's test/…).
      const dir = sources.includes('../my-adapter.ts') ? 'docblocks/' : '';
      return [{ name: `${dir}docblock-${page.replace(/\W/g, '-')}-${line}.ts`, text: m[1]! }];
    });
  });
}

describe('the npm package', () => {
  it('packs without tests or benchmarks, installs into an empty project, and runs the suite and the CLI there', () => {
    // Node resolves a package from every ancestor's node_modules: one above the temp dir (a /tmp/node_modules left by some
    // other work) would lend the empty project packages it does not have, and the checks below would fail for that.
    const lent = ancestorsOf(project).map((d) => join(d, 'node_modules')).filter((m) => existsSync(m));
    expect(lent, `remove ${lent.join(', ')}: the empty project would resolve packages from there`).toEqual([]);
    // Pack: `prepare` compiles the JavaScript and declarations into dist/, from scratch: a compiled module whose source
    // is gone (renamed, removed since the last build) is not shipped.
    mkdirSync(join(repo, 'dist/model'), { recursive: true });
    writeFileSync(join(repo, 'dist/model/removedSinceLastBuild.js'), 'export {};\n');
    const pack = sh(repo, 'npm', ['pack', '--json', '--pack-destination', dir]);
    expect(pack.code, pack.out).toBe(0);
    const packed = JSON.parse(pack.out.slice(pack.out.indexOf('['), pack.out.lastIndexOf(']') + 1)) as [{ filename: string; files: { path: string }[] }];
    const paths = packed[0].files.map((f) => f.path);
    expect(paths).toContain('dist/conformance/suite.js');
    expect(paths).toContain('dist/conformance/suite.d.ts');
    expect(paths).toContain('dist/cli/main.js');
    expect(paths).not.toContain('dist/model/removedSinceLastBuild.js');
    // TypeScript sources ship only as documentation: the worked examples the packaged docs link to.
    expect(paths.filter((p) => /^(test|bench|\.ci)\/|\.test\.|(^|\/)[^/]+\.ts$/.test(p) && !p.endsWith('.d.ts') && !p.startsWith('docs/examples/'))).toEqual([]);
    expect(paths).toContain('docs/examples/tinyLock.ts');
    // docs/matrix.md ships, and its cells link to the timelines of its report (and docs/choosing-a-lock.md to their text):
    // the report ships with it, but no run's working folder (docs/matrix/.run.*/).
    expect(paths).toEqual(expect.arrayContaining(['docs/matrix/index.html', 'docs/matrix/redlock_unfenced__crash-restart.html', 'docs/matrix/redlock_unfenced__crash-restart.txt']));
    expect(paths.filter((p) => p.startsWith('docs/matrix/') && !/^docs\/matrix\/[^/]+\.(html|txt|json)$/.test(p))).toEqual([]);
    // package.json says MIT: the licence's text ships with it.
    expect(paths).toContain('LICENSE');
    // Every file the compiled code starts or loads by path (`new URL('./…', import.meta.url)`) is in the package: tsc emits
    // only what it compiles, and a missing script fails late (a stress client) or unseen (the watchdog).
    const byPath = paths.filter((p) => p.endsWith('.js') || p.endsWith('.mjs')).flatMap((p) =>
      [...readFileSync(join(repo, p), 'utf8').matchAll(/new URL\(['"](\.{1,2}\/[^'"]+)['"], import\.meta\.url\)/g)].map((m) => join(dirname(p), m[1]!)),
    );
    expect(byPath).toEqual(expect.arrayContaining(['dist/conformance/stress/worker.mjs', 'dist/conformance/env/watchdog.mjs']));
    expect(byPath.filter((p) => !paths.includes(p) && !p.endsWith('.ts'))).toEqual([]);

    mkdirSync(join(project, 'test'), { recursive: true });
    for (const [name, text] of Object.entries(files)) writeFileSync(join(project, name), `${text}\n`);
    const devDependencies = (JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> }).devDependencies;
    // The packages docs/adapter.md's kit example tells a user to install, at the versions lockcheck's own audits use (unpinned: the registry's latest).
    const exampleInstall = adapterDoc.match(/```sh\nnpm install --save-dev lockcheck vitest ([^\n]*)\n```[\s\S]*?```ts\n\/\/ my-adapter\.ts/)?.[1]?.split(' ') ?? [];
    expect(exampleInstall).toContain('redis-semaphore');
    const install = sh(project, 'npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', join(dir, packed[0].filename), `vitest@${devDependencies.vitest!}`, ...exampleInstall.map((p) => (devDependencies[p] === undefined ? p : `${p}@${devDependencies[p]}`))]);
    expect(install.code, install.out).toBe(0);
    // The libraries lockcheck audits are not its dependencies.
    const manifest = JSON.parse(readFileSync(join(project, 'node_modules/lockcheck/package.json'), 'utf8')) as { dependencies: Record<string, string> };
    expect(Object.keys(manifest.dependencies)).not.toContain('redlock');

    // The user's vitest run: the agreeing adapter passes, the broken one fails with the property and the replay seed.
    const vitest = sh(project, join(project, 'node_modules/.bin/vitest'), ['run']);
    expect(vitest.code, vitest.out).toBe(1);
    expect(vitest.out).toMatch(/1 failed.*1 passed/);
    expect(vitest.out).toMatch(/CONFORMANCE FAILURE at step \d+ \(MUTEX-1/);
    expect(vitest.out).toMatch(/seed 1, path "/);

    // The CLI from the installed package: --help, a TypeScript adapter, a JavaScript one (through npx, as a user runs them), a replay.
    const bin = join(project, 'node_modules/.bin/lockcheck');
    const help = sh(project, bin, ['--help']);
    expect(help.code, help.out).toBe(0);
    expect(help.out).toMatch(/usage: lockcheck <command>/);
    const version = sh(project, bin, ['--version']);
    expect(version.code, version.out).toBe(0);
    expect(version.out.trim()).toBe((JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { version: string }).version);
    // A built-in backend from the installed package: its Redis server started and stopped by the compiled kit.
    const builtIn = sh(project, bin, ['run', '--backend', 'redis-single/strict', '--runs', '3']);
    expect(builtIn.code, builtIn.out).toBe(0);
    expect(builtIn.out).toMatch(/agrees with its model in 3 runs/);
    const ts = sh(project, 'npx', ['--no', '--', 'lockcheck', 'run', '--backend', './my-adapter.ts', '--runs', '10']);
    expect(ts.code, ts.out).toBe(0);
    expect(ts.out).toMatch(/my lock \(ts\): agrees with its model in 10 runs/);
    const js = sh(project, 'npx', ['--no', '--', 'lockcheck', 'run', '--backend', './my-adapter.mjs', '--faults', 'advance,pause']);
    expect(js.code, js.out).toBe(1);
    expect(js.out).toMatch(/CONFORMANCE FAILURE at step \d+ \(MUTEX-1/);
    const replay = sh(project, bin, ['replay', 'lockcheck-counterexample.json', '--backend', './my-adapter.mjs']);
    expect(replay.code, replay.out).toBe(1);
    expect(replay.out).toMatch(/MUTEX-1/);
    // The model's exploration with worker threads, and a history judged: compiled, the workers run their own .js file.
    const explored = sh(project, bin, ['explore', '--depth', '2', '--jobs', '2']);
    expect(explored.code, explored.out).toBe(0);
    expect(explored.out).toMatch(/Bounded exhaustive exploration \(depth 2/);
    // A stress run: its client processes start from the compiled worker (the package has no .ts to fall back on).
    const stressed = sh(project, bin, ['stress', '--backend', 'redis-single', '--clients', '2', '--seconds', '1', '--out', 'stress-out']);
    expect(stressed.code, stressed.out).toBe(0);
    expect(stressed.out).toMatch(/MUTEX-1\s+overlapping-holds\s+safe/);
    const checked = sh(project, bin, ['check', resolve('test/fixtures/histories/safe.jsonl')]);
    expect(checked.code, checked.out).toBe(0);

    // The setup script from the installed package installs only system packages (none are missing here), no npm packages.
    const setup = sh(project, 'sh', ['node_modules/lockcheck/scripts/setup.sh']);
    expect(setup.code, setup.out).toBe(0);
    expect(setup.out).not.toMatch(/npm ci/);

    // Every entry point of the exports map loads in plain Node (compiled JavaScript, no tsx), and every import the docs show
    // names exports that exist: at run time (.mjs) and in its types (tsc on the installed declarations, skipLibCheck off).
    const entries = Object.keys(manifestOf(project).exports).map((k) => k.replace(/^\./, 'lockcheck')).filter((k) => !k.endsWith('.json'));
    expect(entries).toEqual(expect.arrayContaining(['lockcheck', 'lockcheck/suite', 'lockcheck/adapter', 'lockcheck/kit', 'lockcheck/model', 'lockcheck/lock', 'lockcheck/history']));
    const documented = documentedImports();
    expect(documented.length).toBeGreaterThan(5);
    writeFileSync(join(project, 'entries.mjs'), entries.map((e, i) => `import * as e${i} from '${e}';\nif (typeof e${i} !== 'object') throw new Error('${e}');`).join('\n') + "\nconsole.log('entries ok');\n");
    // ... and each has its declarations: a namespace import of every entry, type-checked below with the docs' files.
    const manifestExports = manifestOf(project).exports as Record<string, { types?: string }>;
    for (const [key, target] of Object.entries(manifestExports)) if (!key.endsWith('.json')) expect(target.types !== undefined && paths.includes(target.types.replace(/^\.\//, '')), key).toBe(true);
    writeFileSync(join(project, 'docentries.ts'), entries.map((e, i) => `import * as e${i} from '${e}';\nexport const entry${i}: object = e${i};`).join('\n') + '\n');
    const loaded = sh(project, 'node', ['entries.mjs']);
    expect(loaded.out).toContain('entries ok');
    documented.forEach((d, i) => {
      writeFileSync(join(project, `doc${i}.ts`), `${d.statement}\n`);
      if (d.values.length > 0) writeFileSync(join(project, `doc${i}.mjs`), `import { ${d.values.join(', ')} } from '${d.from}';\n`);
    });
    writeFileSync(join(project, 'docs.mjs'), documented.flatMap((d, i) => (d.values.length > 0 ? [`await import('./doc${i}.mjs').catch((e) => console.log(${JSON.stringify(d.statement)} + ': ' + e.message));`] : [])).join('\n') + "\nconsole.log('docs ok');\n");
    const docs = sh(project, 'node', ['docs.mjs']);
    expect(docs.out.trim()).toBe('docs ok');
    // Every code block the docs give as a user's file (the kit example of docs/adapter.md among them), exactly as written,
    // type-checks against the installed package.
    const docFiles = documentedFiles();
    for (const page of ['README-md', 'docs-adapter-md', 'docs-etcd-md', 'docs-zookeeper-md', 'docs-histories-md']) expect(docFiles.some((f) => f.name.includes(`-${page}-`)), page).toBe(true);
    mkdirSync(join(project, 'docblocks'));
    for (const f of docFiles) writeFileSync(join(project, f.name), f.text);
    writeFileSync(join(project, 'my-kit-adapter.ts'), `${adapterDoc.match(/```ts\n(\/\/ my-adapter\.ts\n[\s\S]*?)```/)![1]}`);
    // The shipped examples, copied into the project as a user starts from them (only their imports were checked: test/examplesImports.test.ts).
    const shippedExamples = join(project, 'node_modules/lockcheck/docs/examples');
    mkdirSync(join(project, 'examples'));
    const exampleFiles = readdirSync(shippedExamples).filter((f) => f.endsWith('.ts'));
    expect(exampleFiles).toEqual(expect.arrayContaining(['tinyLock.ts', 'ledger.ts', 'redisSemaphoreAudit.ts']));
    for (const f of exampleFiles) copyFileSync(join(shippedExamples, f), join(project, 'examples', f));
    writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions: { target: 'es2022', module: 'nodenext', moduleResolution: 'nodenext', strict: true, noEmit: true, skipLibCheck: false, allowImportingTsExtensions: true }, include: ['doc*.ts', 'docblocks/*.ts', 'examples/*.ts', 'my-kit-adapter.ts', 'my-adapter.ts', 'test/good.test.ts'] }));
    const tsc = sh(project, join(repo, 'node_modules/.bin/tsc'), ['-p', '.']);
    expect(tsc.out, tsc.out).toBe('');
    expect(tsc.code).toBe(0);
    // ... and runs: the kit starts its Redis servers, the library is judged, the servers are stopped.
    const kit = sh(project, 'npx', ['--no', '--', 'lockcheck', 'run', '--backend', './my-kit-adapter.ts', '--runs', '3']);
    expect(kit.out).toMatch(/redis-semaphore@5\.8\.0 Mutex: (agrees with its model in 3 runs|CONFORMANCE FAILURE)/);

    // An adapter whose own code fails outside an operation: one line naming the adapter and the call, and its frame, no stack trace of lockcheck's.
    writeFileSync(join(project, 'bad-adapter.mjs'), ["import backend from './my-adapter.mjs';", "export default { ...backend, name: 'bad', start: async () => { throw new Error('cannot start'); } };"].join('\n'));
    const bad = sh(project, bin, ['run', '--backend', './bad-adapter.mjs']);
    expect(bad.code, bad.out).toBe(2);
    expect(bad.out.trim()).toMatch(/^lockcheck: adapter bad: start\(\) threw Error: cannot start\n {2}at [^\n]*bad-adapter\.mjs:2:\d+\)?$/);

    // A library audit whose library is not installed: one line and the install command, no stack trace.
    const lib = sh(project, bin, ['run', '--backend', 'lib:redlock@5.0.0-beta.2']);
    expect(lib.code, lib.out).toBe(3);
    expect(lib.out.trim()).toBe('lockcheck: lib:redlock@5.0.0-beta.2 needs the npm package redlock, which is not installed\n  fix: npm install --save-dev redlock@5.0.0-beta.2');
  }, 300_000);
});
