// tsx's cache of compiled code (<temp dir>/tsx-<euid>, a name anyone can foresee) is code the CLI runs: made first by
// another local user, they replaced a cached module and the next `lockcheck` ran it with the caller's rights
// (conformance/env/tsxCache.mjs). Each case runs the bin with a TMPDIR of its own: the machine's real cache is never touched.
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { testTempDir } from './tempDirs.ts';

const root = testTempDir('lc-tsx-');
const uid = process.geteuid?.() ?? 0;

function lockcheckVersion(tmp: string): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['cli/lockcheck.mjs', '--version'], { encoding: 'utf8', timeout: 100_000, env: { ...process.env, TMPDIR: tmp, TSX_DISABLE_CACHE: '' } });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("tsx's cache of compiled code", () => {
  it('is made 0700 by the bin, and a copy of it in a directory others may write is never run', () => {
    const own = join(root, 'own');
    mkdirSync(own);
    const first = lockcheckVersion(own);
    expect(first.stdout.trim()).toBe('0.1.0');
    const cache = join(own, `tsx-${uid}`);
    expect(statSync(cache).mode & 0o7777).toBe(0o700);
    const entries = readdirSync(cache);
    expect(entries.length).toBeGreaterThan(0);

    // Another user's: the same entries, each changed to leave a mark when run.
    const shared = join(root, 'shared');
    const planted = join(shared, `tsx-${uid}`);
    mkdirSync(planted, { recursive: true });
    chmodSync(planted, 0o777);
    if (uid === 0) chownSync(planted, 65534, 65534);
    const mark = join(root, 'ran-planted-code');
    for (const name of entries) {
      const entry = JSON.parse(readFileSync(join(cache, name), 'utf8')) as { code: string };
      const [first, ...rest] = entry.code.split('\n');
      const plant = `process.getBuiltinModule('fs').writeFileSync(${JSON.stringify(mark)}, 'x');`;
      entry.code = first!.startsWith('#!') ? [first, plant, ...rest].join('\n') : `${plant}\n${entry.code}`;
      writeFileSync(join(planted, name), JSON.stringify(entry));
    }
    const r = lockcheckVersion(shared);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe('0.1.0');
    // Before: the mark was made (the planted main.ts ran).
    expect(existsSync(mark)).toBe(false);
    expect(r.stderr).toContain(`lockcheck: tsx's cache of compiled code ${planted} `);
    expect(readdirSync(planted).sort()).toEqual([...entries].sort());
    // A stress client process loads tsx too (for a TypeScript adapter, the installed package's included): the same.
    const worker = spawnSync(process.execPath, ['conformance/stress/worker.mjs'], { encoding: 'utf8', timeout: 100_000, env: { ...process.env, TMPDIR: shared, TSX_DISABLE_CACHE: '' } });
    expect(worker.stderr).toContain(`lockcheck: tsx's cache of compiled code ${planted} `);
    expect(existsSync(mark)).toBe(false);
    // Before: worker.ts's compiled code was written into the planted directory.
    expect(readdirSync(planted).sort()).toEqual([...entries].sort());
  }, 240_000);

  it('vitest.config.ts (npx vitest run directly, no npm script before it) turns the cache off for the workers and their children', () => {
    const theirs = join(root, 'vitest-theirs');
    mkdirSync(join(theirs, `tsx-${uid}`), { recursive: true });
    chmodSync(join(theirs, `tsx-${uid}`), 0o777);
    // The config read as vitest reads it, in a process whose temp dir has the cache another user may write.
    const code = `process.env.TMPDIR = ${JSON.stringify(theirs)}; await import('./vitest.config.ts'); console.log(JSON.stringify(process.env.TSX_DISABLE_CACHE ?? null));`;
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { encoding: 'utf8', timeout: 100_000, env: { ...process.env, TSX_DISABLE_CACHE: '' } });
    expect(r.stdout.trim(), r.stderr).toBe('"1"');
    expect(r.stderr).toContain(`lockcheck: tsx's cache of compiled code ${join(theirs, `tsx-${uid}`)} may be written by others`);
  }, 120_000);

  it("a tsconfig.json another user put in the working directory, or above it, never maps lockcheck's imports to their code", () => {
    // /tmp/tsconfig.json would serve every working directory under /tmp: here a directory of the test's own stands for it.
    const shared = join(root, 'tsconfig-shared');
    const cwd = join(shared, 'work', 'here');
    mkdirSync(cwd, { recursive: true });
    const mark = join(root, 'ran-their-module');
    writeFileSync(join(shared, 'evil.mjs'), `import { writeFileSync } from 'node:fs'; writeFileSync(${JSON.stringify(mark)}, 'x'); export const match = () => { throw new Error('theirs'); }; export const P = {};\n`);
    writeFileSync(join(shared, 'tsconfig.json'), JSON.stringify({ compilerOptions: { baseUrl: '.', paths: { 'ts-pattern': ['./evil.mjs'] } } }));
    const lockcheck = join(process.cwd(), 'cli', 'lockcheck.mjs');
    const r = spawnSync(process.execPath, [lockcheck, 'check', join(process.cwd(), 'test/fixtures/histories/safe.jsonl')], { cwd, encoding: 'utf8', timeout: 100_000, env: { ...process.env, TSX_TSCONFIG_PATH: '' } });
    // Before: 'Error: theirs' from their match(), after their module had run.
    expect(existsSync(mark)).toBe(false);
    expect(r.stdout, r.stderr).toMatch(/safe\.jsonl: SAFE/);
  }, 120_000);

  it("a user's TypeScript adapter: its own project's tsconfig, found only through directories no other user may write", async () => {
    const { adapterTsconfig, pinTsconfig } = (await import(new URL('../conformance/env/tsxCache.mjs', import.meta.url).href)) as { adapterTsconfig: (path: string) => string | null; pinTsconfig: (file: string | null, env: Record<string, string | undefined>) => void };
    const project = join(root, 'project');
    mkdirSync(join(project, 'src'), { recursive: true });
    writeFileSync(join(project, 'tsconfig.json'), '{}');
    expect(adapterTsconfig(join(project, 'src', 'adapter.ts'))).toBe(join(project, 'tsconfig.json'));
    // Above a directory anyone may write (sticky or not, as /tmp), nothing is looked for.
    const open = join(root, 'open');
    mkdirSync(join(open, 'mine'), { recursive: true });
    chmodSync(open, 0o1777);
    writeFileSync(join(open, 'tsconfig.json'), '{}');
    expect(adapterTsconfig(join(open, 'mine', 'adapter.ts'))).toBeNull();
    // None: the null device (no options), not the working directory's; one the user named is kept.
    const env: Record<string, string | undefined> = {};
    pinTsconfig(null, env);
    expect(env['TSX_TSCONFIG_PATH']).toBe('/dev/null');
    const named = { TSX_TSCONFIG_PATH: '/mine/tsconfig.json' };
    pinTsconfig(join(project, 'tsconfig.json'), named);
    expect(named.TSX_TSCONFIG_PATH).toBe('/mine/tsconfig.json');
  });

  it('scripts/setup.sh (before npm test, npm start and the tsx npm scripts) stops at a cache not to be trusted', () => {
    const setup = (tmp: string) => spawnSync(process.execPath, ['conformance/env/tsxCache.mjs'], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, TMPDIR: tmp, TSX_DISABLE_CACHE: '' } });
    const theirs = join(root, 'theirs');
    mkdirSync(join(theirs, `tsx-${uid}`), { recursive: true });
    chmodSync(join(theirs, `tsx-${uid}`), 0o777);
    const refused = setup(theirs);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/^lockcheck setup: tsx's cache of compiled code .*tsx-\d+ may be written by others \(mode 777\), and tsx would run the code in it: remove it, or set TSX_DISABLE_CACHE=1\n$/);
    const fresh = join(root, 'fresh');
    mkdirSync(fresh);
    expect(setup(fresh).status).toBe(0);
    expect(statSync(join(fresh, `tsx-${uid}`)).mode & 0o7777).toBe(0o700);
    // Made by tsx under umask 002 (a group per user): writable by this user's own group only, trusted.
    chmodSync(join(fresh, `tsx-${uid}`), 0o770);
    expect(setup(fresh).status).toBe(0);
    expect(readFileSync('scripts/setup.sh', 'utf8')).toContain('node conformance/env/tsxCache.mjs');
  });
});
