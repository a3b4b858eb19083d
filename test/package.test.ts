import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * lockcheck as a user gets it: `npm pack` of this repository, the tarball
 * installed into an empty project (dependencies from the local npm cache
 * when it has them), and there a user's vitest file with conformanceSuite
 * and `npx lockcheck run` on a TypeScript and a JavaScript adapter.
 */
const repo = fileURLToPath(new URL('..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'lockcheck-package-'));
const project = join(dir, 'project');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

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
    "export default simLeaseBackend(designs.redisSingle(), 'strict', { lock: (parts) => new LeaseLock({ ...parts, clock: parts.wallClock }) }, 'wall-clock lock (js)');",
  ].join('\n'),
  'test/good.test.ts': ["import { conformanceSuite } from 'lockcheck/suite';", "import backend from '../my-adapter.ts';", 'conformanceSuite(backend, { runs: 20, seed: 1 });'].join('\n'),
  'test/broken.test.ts': [
    "import { conformanceSuite } from 'lockcheck/suite';",
    "import backend from '../my-adapter.mjs';",
    "conformanceSuite(backend, { runs: 100, seed: 1, faults: ['advance', 'pause'] });",
  ].join('\n'),
};

describe('the npm package', () => {
  it('packs without tests or reports, installs into an empty project, and runs the suite and the CLI there', () => {
    // Pack: `prepare` compiles the JavaScript and declarations into dist/.
    const pack = sh(repo, 'npm', ['pack', '--json', '--pack-destination', dir]);
    expect(pack.code, pack.out).toBe(0);
    const packed = JSON.parse(pack.out.slice(pack.out.indexOf('['), pack.out.lastIndexOf(']') + 1)) as [{ filename: string; files: { path: string }[] }];
    const paths = packed[0].files.map((f) => f.path);
    expect(paths).toContain('dist/conformance/suite.js');
    expect(paths).toContain('dist/conformance/suite.d.ts');
    expect(paths).toContain('dist/cli/main.js');
    expect(paths.filter((p) => /^(test|bench|\.ci|docs\/matrix)\/|\.test\.|(^|\/)[^/]+\.ts$/.test(p) && !p.endsWith('.d.ts'))).toEqual([]);

    mkdirSync(join(project, 'test'), { recursive: true });
    for (const [name, text] of Object.entries(files)) writeFileSync(join(project, name), `${text}\n`);
    const vitestVersion = (JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> }).devDependencies.vitest!;
    const install = sh(project, 'npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', join(dir, packed[0].filename), `vitest@${vitestVersion}`]);
    expect(install.code, install.out).toBe(0);
    // The libraries lockcheck audits are not its dependencies.
    const manifest = JSON.parse(readFileSync(join(project, 'node_modules/lockcheck/package.json'), 'utf8')) as { dependencies: Record<string, string> };
    expect(Object.keys(manifest.dependencies)).not.toContain('redlock');

    // The user's vitest run: the agreeing adapter passes, the broken one fails with the property and the replay seed.
    const vitest = sh(project, join(project, 'node_modules/.bin/vitest'), ['run']);
    expect(vitest.code, vitest.out).toBe(1);
    expect(vitest.out).toMatch(/1 failed.*1 passed/);
    expect(vitest.out).toMatch(/CONFORMANCE FAILURE at step \d+ \(MUTEX-1/);
    expect(vitest.out).toMatch(/seed: 1, path: "/);

    // The CLI from the installed package: --help, a TypeScript adapter, a JavaScript one (through npx, as a user runs them), a replay.
    const bin = join(project, 'node_modules/.bin/lockcheck');
    const help = sh(project, bin, ['--help']);
    expect(help.code, help.out).toBe(0);
    expect(help.out).toMatch(/usage: lockcheck <command>/);
    const ts = sh(project, 'npx', ['--no', '--', 'lockcheck', 'run', '--backend', './my-adapter.ts', '--runs', '10']);
    expect(ts.code, ts.out).toBe(0);
    expect(ts.out).toMatch(/my lock \(ts\): agrees with its model in 10 runs/);
    const js = sh(project, 'npx', ['--no', '--', 'lockcheck', 'run', '--backend', './my-adapter.mjs', '--faults', 'advance,pause']);
    expect(js.code, js.out).toBe(1);
    expect(js.out).toMatch(/CONFORMANCE FAILURE at step \d+ \(MUTEX-1/);
    const replay = sh(project, bin, ['replay', 'lockcheck-counterexample.json', '--backend', './my-adapter.mjs']);
    expect(replay.code, replay.out).toBe(1);
    expect(replay.out).toMatch(/MUTEX-1/);

    // The setup script from the installed package installs only system packages (none are missing here), no npm packages.
    const setup = sh(project, 'sh', ['node_modules/lockcheck/scripts/setup.sh']);
    expect(setup.code, setup.out).toBe(0);
    expect(setup.out).not.toMatch(/npm ci/);

    // A library audit whose library is not installed: one line and the install command, no stack trace.
    const lib = sh(project, bin, ['run', '--backend', 'lib:redlock@5.0.0-beta.2']);
    expect(lib.code, lib.out).toBe(3);
    expect(lib.out.trim()).toBe('lockcheck: lib:redlock@5.0.0-beta.2 needs the npm package redlock, which is not installed\n  fix: npm install --save-dev redlock@5.0.0-beta.2');
  }, 300_000);
});
