import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { LockcheckProcess } from './lockcheckProcess.ts';
import { lockcheckAsync as lockcheckAsyncIn, lockcheckSync } from './lockcheckProcess.ts';
import { testTempDir } from './tempDirs.ts';

/** The lockcheck command as a user runs it: a child process, its exit code, its output. */
const dir = testTempDir('lockcheck-cli-');
/** A plain file where a directory is asked for. */
const aFile = join(dir, 'a-file');
beforeAll(() => writeFileSync(aFile, 'not a directory\n'));

/** The lockcheck command as a user runs it; a command of the real-server kind gets minutes. */
const lockcheck = (...args: string[]): LockcheckProcess => lockcheckSync(args, { timeoutMs: 240_000 });
const lockcheckAsync = (...args: string[]): Promise<LockcheckProcess> => lockcheckAsyncIn(args, 240_000);

/**
 * Each command line exits 2 with its message and no stack. Four at a time:
 * serially, twelve starts of the CLI took over two minutes at load average 35.
 */
async function expectBadArguments(cases: ReadonlyArray<readonly [readonly string[], RegExp]>): Promise<void> {
  for (let i = 0; i < cases.length; i += 4) {
    const batch = cases.slice(i, i + 4);
    const results = await Promise.all(batch.map(([args]) => lockcheckAsync(...args)));
    batch.forEach(([args, message], j) => {
      const r = results[j]!;
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(r.stderr).not.toMatch(/^\s+at /m);
    });
  }
}

describe('lockcheck command line', () => {
  it('rejects bad arguments with exit code 2 and a clear message', async () => {
    const cases = [
      [['frobnicate'], /unknown command 'frobnicate'/],
      [['run'], /run needs --backend/],
      [['run', '--backend', 'nosuch'], /unknown backend 'nosuch' \(built-in: redis-single\/unfenced/],
      // A suggestion ends its sentence once: no '?.' before the list.
      [['run', '--backend', 'redis-singel'], /unknown backend 'redis-singel'; did you mean 'redis-single\/strict'\? \(built-in: /],
      // An option the command does not take is named as such, whatever its value (it read as '--out needs a value').
      [['run', '--out', ''], /run does not take --out \(it takes /],
      // --version alone: with --json it printed plain text, exit 0.
      [['--version', '--json'], /--version takes no command or other option, got --json/],
      [['--version', 'run'], /--version takes no command or other option, got 'run'/],
      [['run', '--backend', 'redis-single/strict', '--runs', '0'], /--runs must be an integer/],
      [['run', '--backend', 'redis-single/strict', '--faults', 'earthquake'], /unknown fault kind 'earthquake'/],
      [['run', '--backend', 'redis-single/strict', '--path', '1:2'], /--path needs the --seed/],
      [['run', '--backend', './no/such/module.ts'], /cannot load adapter module/],
      [['matrix', '--faults', 'earthquake'], /unknown fault class 'earthquake'/],
      [['replay'], /replay needs exactly one counterexample file/],
      [['replay', join(dir, 'missing.json')], /cannot read .*missing.json: ENOENT/],
      [['--bogus'], /Unknown option '--bogus'/],
      [['explore', '--memory-mib', '100'], /--memory-mib bounds a --budget run/],
      [['explore', '--budget', '5', '--seconds', '3'], /--seconds \(a bound per cell\) and --budget/],
      [['explore', '--budget', '0'], /--budget must be an integer/],
      // Refused by its length, not echoed back: the message would carry all 5,000 characters.
      [['run', '--backend', 'x'.repeat(5000)], /^lockcheck: argument 3 is 5000 characters long; lockcheck takes at most 4096 \(the longest path\)$/m],
    ] as const;
    await expectBadArguments(cases);
    expect((await lockcheckAsync('--help')).stdout).toMatch(/usage: lockcheck <command>/);
    // --version prints package.json's version and nothing else, as `npx lockcheck --version` in docs/getting-started.md.
    const version = await lockcheckAsync('--version');
    expect(version.stdout.trim()).toBe((JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version);
  }, 300_000);

  /** Directory `name` in the test's directory, with a directory at `file` in it, where the command writes a file. */
  const blocked = (name: string, file: string): string => {
    mkdirSync(join(dir, name, file), { recursive: true });
    return join(dir, name);
  };

  it('refuses an output it cannot write before any work starts: exit 2, the path and why', async () => {
    // No server is started for these: the check comes first (a run of many minutes must not end by failing to save what it found).
    const cases = [
      [['run', '--backend', 'redis-single/strict', '--junit', dir], /cannot write the JUnit report \(--junit\) .*: it is a directory/],
      [['run', '--backend', 'redis-single/strict', '--counterexample', join(dir, 'no-such-dir', 'c.json')], /cannot write a counterexample \(--counterexample\) .*c\.json: its directory does not exist/],
      [['matrix', '--out', join(aFile, 'out')], /cannot write the matrix into \(--out\) .*: .*a-file is not a directory/],
      [['matrix', '--junit', join(dir, 'no-such-dir', 'j.xml')], /cannot write the JUnit report \(--junit\) .*j\.xml: its directory does not exist/],
      [['stress', '--backend', 'redis-single', '--out', aFile], /cannot write the stress history into \(--out\) .*a-file: .*a-file is not a directory/],
      [['check', 'test/fixtures/histories/safe.jsonl', '--report', join(aFile, 'r')], /cannot write the history report into \(--report\) .*: .*a-file is not a directory/],
      // The files a command writes into its directory, and beside its counterexample, too: each was found only when the work was done.
      [['stress', '--backend', 'redis-single', '--clients', '2', '--seconds', '3', '--out', blocked('s2', 'history.jsonl')], /cannot write the stress history \(--out\) .*s2\/history\.jsonl: it is a directory/],
      [['stress', '--backend', 'redis-single', '--out', blocked('s5', 'history.html')], /cannot write the stress history report \(--out\) .*s5\/history\.html: it is a directory/],
      [['check', 'test/fixtures/histories/overlap.jsonl', '--report', blocked('rep2', 'history.html')], /cannot write the history report \(--report\) .*rep2\/history\.html: it is a directory/],
      [['matrix', '--out', blocked('m', 'matrix.md')], /cannot write the matrix \(--out\) .*m\/matrix\.md: it is a directory/],
      [['run', '--backend', 'redis-single/strict', '--counterexample', join(blocked('ce', 'c.html'), 'c.json')], /cannot write the counterexample's timeline \(--counterexample\) .*ce\/c\.html: it is a directory/],
    ] as const;
    await expectBadArguments(cases);
  }, 300_000);

  it('replay of a saved schedule with a command the model cannot run there (edited by hand): exit 2 naming the command, not "no longer fails"', () => {
    const base = { lockcheck: 'counterexample', backend: 'redis-single/strict', faults: ['advance', 'pause'], seed: 42, path: '3:0:1', runs: 100, verdict: 'property-violation', properties: ['STORE-1'], steps: ['{}'] };
    const cases = [
      [{ kind: 'acquire', client: 99, resource: 'r0', ttlMs: 5 }, /schedule\.commands\[1\] \(client 99 acquire 'r0' ttl 5ms\) is not a command the model can run/],
      [{ kind: 'resume', client: 0 }, /schedule\.commands\[1\] \(client 0 resumes\) is not a command the model can run/],
    ] as const;
    for (const [bad, message] of cases) {
      const file = join(dir, 'edited.json');
      writeFileSync(file, JSON.stringify({ ...base, schedule: { commands: [{ kind: 'acquire', client: 0, resource: 'r0', ttlMs: 5 }, bad], tokenBase: '0' } }));
      const r = lockcheck('replay', file);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/is not a valid lockcheck counterexample: "schedule" does not replay as saved/);
      expect(r.stderr).toMatch(message);
    }
  });

  it('replay of a file whose schedule has a command of no known kind, or whose path names no case: exit 2 naming it, never a crash (exit 1) or "no longer fails" (exit 0)', async () => {
    const tiny = join(dir, 'tiny.mts');
    writeFileSync(tiny, `import { tinyLock } from ${JSON.stringify(join(process.cwd(), 'docs/examples/tinyLock.ts'))};\nexport default tinyLock;\n`);
    const base = { lockcheck: 'counterexample', backend: tiny, faults: null, seed: 1, path: '0', runs: 1, verdict: 'conformance-failure', properties: [], steps: [] };
    const cases: Array<readonly [object, RegExp]> = [
      ...['bogus', 'constructor', 'toString', '__proto__'].map((kind) => [{ ...base, schedule: { commands: [{ kind }], tokenBase: '0' } }, new RegExp(`"schedule\\.commands\\[0\\]" has the kind "${kind}", not a command kind`)] as const),
      // Files from before schedules were saved replay by seed and path: one that fast-check follows to no case ran none.
      [{ ...base, path: '0:99999' }, /the path "0:99999" in '.*' names no case fast-check can replay \(it ran none\)/],
      [{ ...base, path: '99:99:99' }, /"path" names run 99, but "runs" is 1/],
    ];
    const files = cases.map(([content], i) => {
      const file = join(dir, `judges-nothing-${i}.json`);
      writeFileSync(file, JSON.stringify(content));
      return file;
    });
    for (let i = 0; i < files.length; i += 3) {
      const results = await Promise.all(files.slice(i, i + 3).map((file) => lockcheckAsync('replay', file, '--backend', tiny)));
      results.forEach((r, j) => {
        expect(r.code, r.stderr).toBe(2);
        expect(r.stderr).toMatch(cases[i + j]![1]);
        expect(r.stderr).not.toMatch(/^\s+at /m);
        expect(r.stdout).not.toMatch(/no longer fails/);
      });
    }
  }, 240_000);

  it('an adapter module is the file named: a TypeScript one in a CommonJS package loads, and x.js is loaded, not an x.ts beside it', async () => {
    const tinyLock = JSON.stringify(join(process.cwd(), 'docs/examples/tinyLock.ts'));
    const cjs = join(dir, 'cjs-package');
    mkdirSync(cjs, { recursive: true });
    writeFileSync(join(cjs, 'package.json'), JSON.stringify({ name: 'cjs-adapter' }));
    writeFileSync(join(cjs, 'adapter.ts'), `import { tinyLock } from ${tinyLock};\nexport default { ...tinyLock, name: 'from a CommonJS package' };\n`);
    writeFileSync(join(cjs, 'awaits.ts'), `await Promise.resolve();\nexport default {};\n`);
    const both = join(dir, 'js-and-ts');
    mkdirSync(both, { recursive: true });
    writeFileSync(join(both, 'package.json'), JSON.stringify({ type: 'module' }));
    writeFileSync(join(both, 'adapter.js'), `import { tinyLock } from ${tinyLock};\nexport default { ...tinyLock, name: 'the .js named' };\n`);
    writeFileSync(join(both, 'adapter.ts'), `export default { name: 'the .ts beside it' };\n`);
    const run = (module: string, i: number) => lockcheckAsync('run', '--backend', module, '--runs', '2', '--counterexample', join(dir, `loads-${i}.json`));
    const [fromCjs, fromJs, awaits] = await Promise.all([run(join(cjs, 'adapter.ts'), 0), run(join(both, 'adapter.js'), 1), run(join(cjs, 'awaits.ts'), 2)]);
    expect(fromCjs.code, fromCjs.stderr).toBe(0);
    expect(fromCjs.stdout).toMatch(/^from a CommonJS package: agrees with its model in 2 runs/m);
    expect(fromJs.code, fromJs.stderr).toBe(0);
    expect(fromJs.stdout).toMatch(/^the \.js named: agrees with its model in 2 runs/m);
    // What CommonJS cannot do (top-level await): exit 2, saying how to load it as an ES module.
    expect(awaits.code, awaits.stderr).toBe(2);
    expect(awaits.stderr).toMatch(/cannot load adapter module .*awaits\.ts': [\s\S]*\(it is loaded as CommonJS: its package\.json has no "type": "module"; name it \.mts, or add "type": "module"/);
  }, 240_000);

  it('failover says what it is doing as it goes (it printed nothing for its first 13 s)', () => {
    const r = lockcheck('failover', '--json');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/^\[\d+\.\d s\] failover 1\/3 \(redis-replicated\(async\), grant not yet replicated\): starting a primary, a replica and Sentinel$/m);
    expect(r.stderr).toMatch(/^\[\d+\.\d s\] failover 3\/3 .*: killing the primary; waiting for Sentinel to promote the replica$/m);
    expect(JSON.parse(r.stdout)).toMatchObject({ agreesWithModel: true });
  }, 240_000);

  it('an adapter module that calls process.exit(0) as it loads: exit 4 (nothing decided), and the message names the call, not a promise that never settles', () => {
    const module = join(dir, 'exitingAdapter.mts');
    writeFileSync(module, 'process.exit(0);\nexport default {};\n');
    const r = lockcheck('run', '--backend', module);
    expect(r.code, r.stderr).toBe(4);
    expect(r.stderr).toMatch(/the command stopped unfinished: process\.exit\(0\) was called before it ended \(by an adapter module\?\)/);
    expect(r.stderr).not.toMatch(/never settle/);
  });

  // Exit 1 is a verdict (run: a conformance failure; check and stress: a violation): a crash must never read as one.
  it.each([
    ['an uncaught exception', 'setTimeout(() => { throw new Error("adapter timer broke"); }, 0);', /^lockcheck: uncaught exception: Error: adapter timer broke/m],
    ['an unhandled rejection', 'void Promise.reject(new Error("adapter promise broke"));', /^lockcheck: unhandled rejection: Error: adapter promise broke/m],
  ])('%s in an adapter module stops run with exit 4 (nothing decided), not 1 (a conformance failure)', (_what, code, message) => {
    const module = join(dir, `crashingAdapter${code.length}.mts`);
    // The crash comes after the module loaded: a promise that keeps the loader waiting makes the command wait for it too.
    writeFileSync(module, `${code}\nawait new Promise((resolve) => setTimeout(resolve, 60_000));\nexport default {};\n`);
    const r = lockcheck('run', '--backend', module);
    expect(r.code, r.stderr).toBe(4);
    expect(r.stderr).toMatch(message);
  });

  it('an adapter module of the old API is refused when loaded: exit 2, what changed and how to port', () => {
    const r = lockcheck('run', '--backend', 'test/fixtures/oldApiAdapter.ts');
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/an old adapter: written for the old adapter API .*To port: delete the backend's `faults: \[\.\.\.\]`/);
  });

  it('run on a built-in backend on real servers: exit 0, findings reported, JSON and JUnit written', () => {
    const junit = join(dir, 'run.xml');
    const r = lockcheck('run', '--backend', 'redis-single/unfenced', '--runs', '40', '--faults', 'advance,pause', '--json', '--junit', junit);
    expect(r.code, r.stderr).toBe(0);
    const json = JSON.parse(r.stdout) as { backend: string; runs: number; failure: unknown; findings: Record<string, number> };
    // The verdict the exit code says, and what reproduces the run (the seed, the faults).
    expect(json).toMatchObject({ backend: 'redis-single/unfenced', verdict: 'agrees', seed: 20161010, faults: ['advance', 'pause'], runs: 40, failure: null });
    expect(json.findings['STORE-1']).toBeGreaterThan(0);
    expect(readFileSync(junit, 'utf8')).toMatch(/<testsuites name="lockcheck run redis-single\/unfenced" tests="1" failures="0"/);
  }, 240_000);

  it('replay never runs a module named in the file, and rejects a malformed file with exit code 2', () => {
    const marker = join(dir, 'payload-ran');
    const payload = join(dir, 'payload.mjs');
    writeFileSync(payload, `import { writeFileSync } from 'node:fs'; writeFileSync(${JSON.stringify(marker)}, 'ran');\n`);
    const base = { lockcheck: 'counterexample', backend: payload, faults: null, seed: 1, path: '0', runs: 10, verdict: 'conformance-failure', properties: ['MUTEX-1'], steps: [] };
    const file = join(dir, 'payload.json');
    writeFileSync(file, JSON.stringify(base));
    const r = lockcheck('replay', file);
    expect(r.code, r.stderr).toBe(2);
    expect(existsSync(marker)).toBe(false);
    writeFileSync(file, JSON.stringify({ ...base, backend: 'redis-single/strict', runs: 'abc' }));
    const abc = lockcheck('replay', file);
    expect(abc.code, abc.stderr).toBe(2);
    expect(abc.stderr).toMatch(/"runs" must be an integer in \[1, 1000000\], got "abc"/);
    expect(abc.stdout).not.toMatch(/no longer fails/);
  }, 60_000);

  it('run on a broken adapter module: exit 1, a counterexample file that replay reproduces', () => {
    const file = join(dir, 'ce.json');
    const r = lockcheck('run', '--backend', 'test/fixtures/brokenAdapter.ts', '--runs', '50', '--counterexample', file);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toMatch(/CONFORMANCE FAILURE .*MUTEX-1/);
    expect(r.stdout).toMatch(/LOCKCHECK_SEED=\d+ LOCKCHECK_PATH=/);
    expect(existsSync(file.replace(/\.json$/, '.html'))).toBe(true);
    const saved = JSON.parse(readFileSync(file, 'utf8')) as { backend: string; properties: string[] };
    expect(saved).toMatchObject({ backend: 'test/fixtures/brokenAdapter.ts', properties: ['MUTEX-1'] });
    // The file names a module: replay loads it only when the user names it too.
    const refused = lockcheck('replay', file);
    expect(refused.code, refused.stderr).toBe(2);
    expect(refused.stderr).toMatch(/replay loads a module only when you name it: lockcheck replay .* --backend <module path>/);
    const replay = lockcheck('replay', file, '--backend', 'test/fixtures/brokenAdapter.ts');
    expect(replay.code, replay.stderr).toBe(1);
    expect(replay.stdout).toMatch(/CONFORMANCE FAILURE at step 1 \(MUTEX-1/);
  }, 240_000);

  it("a library audit's counterexample replays as run found it: past the safe deviations, to the unsafe one", () => {
    const file = join(dir, 'audit-ce.json');
    const r = lockcheck('run', '--backend', 'test/fixtures/carelessAudit.ts', '--runs', '100', '--faults', 'advance', '--counterexample', file);
    expect(r.code, r.stderr).toBe(1);
    const found = /CONFORMANCE FAILURE at step (\d+) \(([A-Z]+-1): [^;]*; unsafe: /.exec(r.stdout);
    expect(found, r.stdout).not.toBeNull();
    expect(r.stdout).toMatch(/lockcheck replay \S+audit-ce\.json --backend test\/fixtures\/carelessAudit\.ts/);
    const replay = lockcheck('replay', file, '--backend', 'test/fixtures/carelessAudit.ts');
    expect(replay.code, replay.stderr).toBe(1);
    // Not the first deviation in the safe direction (a replay that stopped there showed another failure than the file's).
    expect(replay.stdout).toContain(`CONFORMANCE FAILURE at step ${found![1]} (${found![2]}`);
    expect(replay.stdout).not.toMatch(/^[^\n]*; safe: /);
    // The file holds the minimised schedule, and replay runs it as it is: the same timeline, step for step.
    const saved = JSON.parse(readFileSync(file, 'utf8')) as { schedule?: { commands: unknown[]; tokenBase: string } };
    expect(saved.schedule?.commands).toHaveLength(Number(found![1]));
    expect(r.stdout).toMatch(/, minimised to \d+ \(\d+ replays, [\d.]+ s\)/);
    const timeline = (out: string): string => out.slice(0, out.indexOf('\nallowed:'));
    expect(timeline(replay.stdout)).toBe(timeline(r.stdout));
  }, 240_000);

  it('matrix: measures, compares with the prediction, writes the markdown and the HTML report', () => {
    const out = join(dir, 'docs');
    const junit = join(dir, 'matrix.xml');
    // A timeline of an earlier run: replaced where this run measures its cell, kept where it does not.
    mkdirSync(join(out, 'matrix'), { recursive: true });
    writeFileSync(join(out, 'matrix', 'redis-single_unfenced__clock-step.html'), 'an earlier run\n');
    writeFileSync(join(out, 'matrix', 'redlock_unfenced__clock-step.html'), 'a cell not measured now\n');
    const r = lockcheck('matrix', '--backend', 'redis-single/unfenced,redis-single/strict', '--faults', 'clock-step', '--runs', '15', '--out', out, '--junit', junit);
    expect(r.code, r.stderr).toBe(0);
    const md = readFileSync(join(out, 'matrix.md'), 'utf8');
    expect(md).toMatch(/\| redis-single\/unfenced \| \[🔎\]\(matrix\/redis-single_unfenced__clock-step\.html\) MUTEX-1/);
    const html = readFileSync(join(out, 'matrix', 'index.html'), 'utf8');
    expect(html).toMatch(/<a href="redis-single_strict__clock-step.html">/);
    expect(readFileSync(join(out, 'matrix', 'redis-single_strict__clock-step.html'), 'utf8')).toMatch(/PROPERTY VIOLATION/);
    expect(readFileSync(junit, 'utf8')).toMatch(/tests="2" failures="0"/);
    expect(readFileSync(join(out, 'matrix', 'redis-single_unfenced__clock-step.html'), 'utf8')).toMatch(/PROPERTY VIOLATION/);
    expect(readFileSync(join(out, 'matrix', 'redlock_unfenced__clock-step.html'), 'utf8')).toBe('a cell not measured now\n');
    expect(readdirSync(join(out, 'matrix')).filter((f) => f.startsWith('.'))).toEqual([]);
  }, 240_000);

  it('matrix --json: a cell not measured has no prediction compared (null), not a depth 0 and an empty prediction that read as the model\'s', () => {
    const junit = join(dir, 'not-measured.xml');
    const r = lockcheck('matrix', '--backend', 'pg-session/unfenced', '--faults', 'clock-step', '--stress-seconds', '0', '--json', '--out', join(dir, 'not-measured'), '--junit', junit);
    expect(r.code, r.stderr).toBe(0);
    // Its JUnit case is skipped with why, not a pass a CI job reads as measured and green.
    expect(readFileSync(junit, 'utf8')).toMatch(/<testcase name="pg-session\/unfenced x clock-step" time="[\d.]+"><skipped message="not measured: [^"]*takes no clock-step fault/);
    const json = JSON.parse(r.stdout) as { complete: boolean; partial: unknown; cells: unknown[] };
    expect(json).toMatchObject({ complete: true, partial: null });
    expect(json.cells).toEqual([expect.objectContaining({ backend: 'pg-session/unfenced', notMeasured: expect.stringMatching(/takes no clock-step fault/) as string, measured: null, predicted: null, predictedDepth: null })]);
  }, 240_000);

  it('matrix: a cell that fails saves its counterexample beside its timeline, and says how to replay it', () => {
    const out = join(dir, 'failing');
    // An audit's worst deviation is its failure: redlock 5 under timing faults claims an extension for a lease that is over
    // (its 10th run; under partitions its only run-found failure was the failed extend to a shorter ttl, lockcheck's bound until h38).
    const r = lockcheck('matrix', '--backend', 'lib:redlock@5.0.0-beta.2', '--faults', 'timing', '--runs', '10', '--stress-seconds', '0', '--out', out);
    expect(r.code, r.stderr).toBe(0);
    const file = join(out, 'matrix', 'lib_redlock_5.0.0-beta.2__timing.json');
    expect(r.stderr).toContain(`lib:redlock@5.0.0-beta.2 x timing: counterexample ${file} (lockcheck replay ${file})`);
    const saved = JSON.parse(readFileSync(file, 'utf8')) as { backend: string; verdict: string; properties: string[]; schedule?: { commands: unknown[] } };
    expect(saved).toMatchObject({ backend: 'lib:redlock@5.0.0-beta.2', verdict: 'conformance-failure' });
    const cell = readFileSync(join(out, 'matrix', 'lib_redlock_5.0.0-beta.2__timing.txt'), 'utf8');
    const step = /CONFORMANCE FAILURE at step (\d+) \(([A-Z]+-\d)/.exec(cell);
    expect(step, cell).not.toBeNull();
    expect(saved.properties).toEqual([step![2]]);
    expect(saved.schedule?.commands.length).toBeGreaterThanOrEqual(Number(step![1]));
    const replay = lockcheck('replay', file);
    expect(replay.code, replay.stderr).toBe(1);
    expect(replay.stdout).toContain(`CONFORMANCE FAILURE at step ${step![1]} (${step![2]}`);
    // The report says it too, not only the run's stderr: the cell's timeline, text and page, ends with the command (audit h39).
    expect(cell).toContain(`replay on real servers: lockcheck replay ${file}`);
    expect(readFileSync(join(out, 'matrix', 'lib_redlock_5.0.0-beta.2__timing.html'), 'utf8')).toContain(`replay on real servers: <code>lockcheck replay ${file}</code>`);
  }, 240_000);

  it('matrix: interrupted, it leaves the previous report and its timelines as they were, and nothing of its own', async () => {
    const out = join(dir, 'interrupted');
    const timeline = join(out, 'matrix', 'redis-single_unfenced__clock-step.html');
    mkdirSync(join(out, 'matrix'), { recursive: true });
    writeFileSync(join(out, 'matrix.md'), 'the previous report\n');
    writeFileSync(timeline, 'the previous timeline\n');
    // Interrupted once the cell's runs are under way (a progress line names it), so its timeline would be written.
    const r = await interrupted(['matrix', '--backend', 'redis-single/unfenced', '--faults', 'clock-step', '--runs', '200', '--stress-seconds', '0', '--out', out], 'redis-single/unfenced x clock-step: ');
    expect(r.signal, r.stderr).toBe('SIGINT');
    expect(readFileSync(join(out, 'matrix.md'), 'utf8')).toBe('the previous report\n');
    expect(readFileSync(timeline, 'utf8')).toBe('the previous timeline\n');
    expect(readdirSync(join(out, 'matrix'))).toEqual(['redis-single_unfenced__clock-step.html']);
    // A first run interrupted leaves no empty directories behind.
    const fresh = join(dir, 'fresh', 'docs');
    const first = await interrupted(['matrix', '--backend', 'redis-single/unfenced', '--faults', 'clock-step', '--runs', '200', '--stress-seconds', '0', '--out', fresh], 'redis-single/unfenced x clock-step: ');
    expect(first.signal, first.stderr).toBe('SIGINT');
    expect(existsSync(join(dir, 'fresh'))).toBe(false);
  }, 240_000);

  // Two cells, the signal during the second (100 runs: it is still running when the signal lands, on a loaded machine too): the first one's result is not lost.
  const twoCells = ['matrix', '--backend', 'redis-single/unfenced,redis-single/strict', '--faults', 'clock-step', '--runs', '100', '--stress-seconds', '0'];
  const second = 'redis-single/strict x clock-step: ';

  it('matrix: interrupted after a cell, --out named: that directory gets the cells measured, marked partial, in markdown, HTML, JSON and JUnit', async () => {
    const out = join(dir, 'partial-named');
    const junit = join(dir, 'partial.xml');
    const r = await interrupted([...twoCells, '--out', out, '--json', '--junit', junit], second);
    expect(r.signal, r.stderr).toBe('SIGINT');
    expect(r.stderr).toMatch(/the run was interrupted by SIGINT after 1 of 2 cells: wrote the partial report/);
    const md = readFileSync(join(out, 'matrix.md'), 'utf8');
    expect(md).toMatch(/^# The measured matrix \(PARTIAL\)/);
    expect(md).toMatch(/\| redis-single\/unfenced \| \[🔎\]\(matrix\/redis-single_unfenced__clock-step\.html\) MUTEX-1/);
    expect(md).toMatch(/\| redis-single\/strict \| — \(not measured: not run: the run was interrupted by SIGINT before this cell\)/);
    expect(existsSync(join(out, 'matrix', 'redis-single_unfenced__clock-step.html'))).toBe(true);
    expect(readFileSync(join(out, 'matrix', 'index.html'), 'utf8')).toMatch(/<h1>The measured matrix \(PARTIAL\)<\/h1>/);
    const json = JSON.parse(r.stdout) as { complete: boolean; partial: { reason: string; cellsMeasured: number; cellsPlanned: number; notRun: unknown[] }; cells: Array<{ backend: string }> };
    expect(json).toMatchObject({ complete: false, partial: { reason: 'interrupted by SIGINT', cellsMeasured: 1, cellsPlanned: 2, notRun: [{ backend: 'redis-single/strict', faultClass: 'clock-step' }] } });
    expect(json.cells.map((c) => c.backend)).toEqual(['redis-single/unfenced']);
    expect(readFileSync(junit, 'utf8')).toMatch(/<failure[^>]*message="partial: the run was interrupted by SIGINT after 1 of 2 cells/);
    expect(readdirSync(join(out, 'matrix')).filter((f) => f.startsWith('.'))).toEqual([]);
  }, 240_000);

  it('run --json interrupted: stdout says so, with no verdict, the seed and how many runs had started', async () => {
    const r = await interrupted(['run', '--backend', 'redis-single/unfenced', '--runs', '100000', '--json', '--counterexample', join(dir, 'interrupted-run.json')], 'redis-single/unfenced: run ');
    expect(r.signal, r.stderr).toBe('SIGINT');
    expect(JSON.parse(r.stdout)).toMatchObject({ backend: 'redis-single/unfenced', interrupted: 'SIGINT', verdict: null, seed: 20161010, runsPlanned: 100000, runsStarted: expect.any(Number) as number });
  }, 240_000);

  it('matrix: an error that stops it after a cell (a program missing for a later row) writes the partial report, then exits with its code', () => {
    // A PATH without etcd: every other program where it was.
    const bin = join(dir, 'no-etcd-bin');
    mkdirSync(bin);
    for (const from of (process.env.PATH ?? '').split(':')) {
      let names: string[];
      try {
        names = readdirSync(from);
      } catch {
        continue;
      }
      for (const name of names) if (name !== 'etcd' && !existsSync(join(bin, name))) symlinkSync(join(from, name), join(bin, name));
    }
    const out = join(dir, 'partial-error');
    const r = spawnSync(process.execPath, ['cli/lockcheck.mjs', 'matrix', '--backend', 'redis-single/unfenced,etcd-lease/strict', '--faults', 'clock-step', '--runs', '5', '--stress-seconds', '0', '--out', out, '--json'], { encoding: 'utf8', timeout: 200_000, env: { ...process.env, PATH: bin } });
    expect(r.status, r.stderr).toBe(3);
    expect(r.stderr).toMatch(/the run was stopped by an error \(.*etcd.*\) after 1 of 2 cells: wrote the partial report/);
    expect(JSON.parse(r.stdout)).toMatchObject({ complete: false, partial: { reason: expect.stringMatching(/^stopped by an error/) as string, cellsMeasured: 1, notRun: [{ backend: 'etcd-lease/strict' }] } });
    expect(readFileSync(join(out, 'matrix.md'), 'utf8')).toMatch(/^# The measured matrix \(PARTIAL\)/);
  }, 240_000);

  it('matrix: interrupted after a cell under the default --out (docs): the committed docs/matrix.md stays, the partial report goes beside it', async () => {
    const cwd = join(dir, 'default-out');
    mkdirSync(join(cwd, 'docs', 'matrix'), { recursive: true });
    writeFileSync(join(cwd, 'docs', 'matrix.md'), 'the committed report\n');
    writeFileSync(join(cwd, 'docs', 'matrix', 'redis-single_unfenced__clock-step.html'), 'the committed timeline\n');
    const r = await interrupted(twoCells, second, 'SIGTERM', cwd);
    expect(r.signal, r.stderr).toBe('SIGTERM');
    expect(r.stderr).toMatch(/wrote the partial report docs\/matrix\.partial\.md and docs\/matrix\/partial\/index\.html \(docs\/matrix\.md is left as it was\)/);
    expect(readFileSync(join(cwd, 'docs', 'matrix.md'), 'utf8')).toBe('the committed report\n');
    expect(readFileSync(join(cwd, 'docs', 'matrix', 'redis-single_unfenced__clock-step.html'), 'utf8')).toBe('the committed timeline\n');
    const md = readFileSync(join(cwd, 'docs', 'matrix.partial.md'), 'utf8');
    expect(md).toMatch(/^# The measured matrix \(PARTIAL\)/);
    expect(md).toMatch(/\[🔎\]\(matrix\/partial\/redis-single_unfenced__clock-step\.html\) MUTEX-1/);
    expect(readFileSync(join(cwd, 'docs', 'matrix', 'partial', 'redis-single_unfenced__clock-step.html'), 'utf8')).toMatch(/PROPERTY VIOLATION/);
    expect(readFileSync(join(cwd, 'docs', 'matrix', 'partial', 'index.html'), 'utf8')).toMatch(/Partial report/);
  }, 240_000);
});

/** lockcheck sent one `signal` once its stderr shows `when` (run in `cwd`); killed at 200 s if it never does. */
function interrupted(args: readonly string[], when: string, signal: NodeJS.Signals = 'SIGINT', cwd = process.cwd()): Promise<LockcheckProcess & { readonly signal: NodeJS.Signals | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(process.cwd(), 'cli', 'lockcheck.mjs'), ...args], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 200_000, cwd });
    let stdout = '';
    let stderr = '';
    let sent = false;
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
      // Once: a second Ctrl-C skips the wait for the async clean-up (test/secondSignal.test.ts).
      if (!sent && stderr.includes(when)) sent = child.kill(signal);
    });
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}
