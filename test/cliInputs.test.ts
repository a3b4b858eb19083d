import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { LockcheckProcess } from './lockcheckProcess.ts';
import { lockcheckAsync } from './lockcheckProcess.ts';
import { stressCommandLine } from '../cli/stress.ts';
import { resolve } from 'node:path';
import { testTempDir } from './tempDirs.ts';

/**
 * The command line under a demanding user's hand: odd but plausible input to
 * every command is refused with exit 2 and a message naming the option and
 * the value, before any work starts. Each case ends in an error of its own
 * further on (a tripwire: an output that cannot be written, an unknown
 * backend), so that were the input accepted the case would fail fast on the
 * wrong message rather than start real work.
 */
const dir = testTempDir('lockcheck-cli-inputs-');
const aFile = join(dir, 'a-file');
beforeAll(() => writeFileSync(aFile, 'not a directory\n'));
/** Tripwires: where nothing can be written, and a history that does not exist. */
const noDir = join(aFile, 'out');
const noJunit = join(dir, 'no-such-dir', 'j.xml');
const noHistory = join(dir, 'missing.jsonl');

type Case = readonly [args: readonly string[], message: RegExp, absent?: RegExp];

/** Each command line exits 2 with its message, no stack, and (when given) without `absent`. Four at a time, as in cli.test.ts. */
async function expectBadArguments(cases: readonly Case[]): Promise<void> {
  for (let i = 0; i < cases.length; i += 4) {
    const batch = cases.slice(i, i + 4);
    const results = await Promise.all(batch.map(([args]) => lockcheckAsync(args, 120_000)));
    batch.forEach(([args, message, absent], j) => {
      const r = results[j]!;
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr, args.join(' ')).toMatch(message);
      expect(r.stderr).not.toMatch(/^\s+at /m);
      if (absent !== undefined) expect(r.stderr, args.join(' ')).not.toMatch(absent);
    });
  }
}

describe('lockcheck command line: odd input', () => {
  it('a number option takes decimal digits in its range only, for every command (no hex, exponent, blank, fraction, unit)', async () => {
    await expectBadArguments([
      [['run', '--backend', 'redis-single/strict', '--runs', '1e3', '--junit', noJunit], /--runs must be an integer in \[1, 1000000\] in decimal digits, got '1e3'/],
      [['run', '--backend', 'nosuch', '--seed', '0x10'], /--seed must be an integer in \[-2147483648, 2147483647\] in decimal digits, got '0x10'/],
      // fast-check seeds are 32-bit: one outside is refused, not wrapped.
      [['run', '--backend', 'nosuch', '--seed=4294967295'], /--seed must be an integer in \[-2147483648, 2147483647\].*got '4294967295'/],
      [['matrix', '--runs', ' 5', '--out', noDir], /--runs must be an integer .*got ' 5'/],
      [['matrix', '--stress-seconds', '1.0', '--out', noDir], /--stress-seconds must be an integer .*got '1\.0'/],
      [['check', noHistory, '--memory-mib', '1e3'], /--memory-mib must be an integer .*got '1e3'/],
      [['check', noHistory, '--timeout-ms', '+5'], /--timeout-ms must be an integer .*got '\+5'/],
      [['stress', '--backend', 'redis-single', '--clients', '0b11', '--out', noDir], /--clients must be an integer .*got '0b11'/],
      [['stress', '--backend', 'redis-single', '--seconds', '10s', '--out', noDir], /--seconds must be an integer .*got '10s'/],
      [['explore', '--depth', '6.0', '--design', 'nosuch'], /--depth must be an integer in \[1, 10\] .*got '6\.0'/],
      [['explore', '--budget', '9007199254740993', '--design', 'nosuch'], /--budget must be an integer .*got '9007199254740993'/],
    ]);
  }, 300_000);

  it('an option given twice, an empty value, or a list naming nothing, an unknown item or one item twice, is refused (--redis alone repeats: it is a list)', async () => {
    await expectBadArguments([
      [['run', '--backend', 'nosuch', '--runs', '5', '--runs', '7'], /--runs is given twice \('5' and '7'\): give it once/],
      [['check', noHistory, '--json', '--json'], /--json is given twice: give it once/],
      [['run', '--backend='], /--backend needs a value, got ''/],
      [['matrix', '--out', '', '--faults', 'nosuch'], /--out needs a value, got ''/],
      [['run', '--backend', 'nosuch', '--faults', ','], /--faults names nothing, got ','/],
      [['matrix', '--backend', 'redis-single/strict,nosuch', '--out', noDir], /unknown backend 'nosuch' in --backend/],
      [['run', '--backend', 'nosuch', '--faults', 'advance,pause,advance'], /--faults lists 'advance' twice/],
      [['stress', '--backend', 'redis-single', '--nemesis', 'pause-client,pause-client', '--out', noDir], /--nemesis lists 'pause-client' twice/],
      // A value shown is redacted before it is cut short: no password, and no URL mangled by the cut.
      [['run', '--backend', 'nosuch', '--redis', 'redis://:sekrit@127.0.0.1:1,redis://:sekrit@127.0.0.1:1'], /--redis lists 'redis:\/\/127\.0\.0\.1:1' twice, got 'redis:\/\/127\.0\.0\.1:1,redis:\/\/127\.0\.0\.1:1'/, /sekrit|<no host>/],
    ]);
  }, 300_000);

  it('replay reads a counterexample as check reads a history: a byte-order mark dropped, UTF-16, binary and empty named, stdin as stdin', async () => {
    const partial = '{"lockcheck":"counterexample"}';
    const bom = join(dir, 'bom.json');
    writeFileSync(bom, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(partial)]));
    const utf16 = join(dir, 'utf16.json');
    writeFileSync(utf16, Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(partial, 'utf16le')]));
    const binary = join(dir, 'binary.json');
    writeFileSync(binary, Buffer.from([0x7b, 0xff, 0x00, 0xc3, 0x28, 0x7d]));
    writeFileSync(join(dir, 'empty.json'), '\n');
    await expectBadArguments([
      // Past the mark, the file parses: the first field it lacks is named.
      [['replay', bom], /is not a valid lockcheck counterexample: "backend" must be a backend name or module path, got undefined/],
      [['replay', utf16], /a counterexample must be UTF-8 text; this is UTF-16/],
      [['replay', binary], /a counterexample must be UTF-8 text; this is not \(a binary file\?\)/],
      [['replay', join(dir, 'empty.json')], /'.*empty\.json' is not a valid lockcheck counterexample: the file is empty/],
      // stdin is /dev/null here: empty, and named as stdin.
      [['replay', '-'], /'stdin' is not a valid lockcheck counterexample: the file is empty/],
    ]);
  }, 300_000);

  it('the stress command line lockcheck prints to run a history again is one the CLI takes', async () => {
    const base = { clients: 3, seconds: 2, resources: 1, ttlMinMs: 200, ttlMaxMs: 300, store: 'strict', nemesis: [] } as const;
    // pg-xact takes no --store; no nemesis is 'none', not an empty value; a negative seed is --seed=-5; an adapter module by its path, not its name.
    const lines = [
      stressCommandLine({ ...base, backend: 'pg-xact', seed: -5 }),
      stressCommandLine({ ...base, backend: 'redis-single', store: 'unfenced', seed: 7, nemesis: ['pause-holder'], adapter: { name: 'a fixture', ref: { kind: 'module', path: resolve('test/fixtures/concurrentAdapter.ts') }, client: {} as never } }),
    ];
    expect(lines[0]).toBe('lockcheck stress --backend pg-xact --clients 3 --seconds 2 --resources 1 --ttl 200-300 --nemesis none --seed=-5');
    // Each is accepted as far as the output, which is made unwritable here so that nothing runs.
    await expectBadArguments(lines.map((line): Case => [[...line.split(' ').slice(1), '--out', noDir], /cannot write the stress history into \(--out\)/]));
  }, 300_000);

  it('two outputs of one command at one path are refused (the second written replaced the first)', async () => {
    await expectBadArguments([
      [['run', '--backend', 'nosuch', '--junit', join(dir, 'c.json'), '--counterexample', join(dir, 'c.json')], /--junit and --counterexample name one file, '.*c\.json': each output needs a path of its own/],
      [['run', '--backend', 'nosuch', '--junit', join(dir, 'c.html'), '--counterexample', join(dir, 'c.json')], /--junit and --counterexample's timeline name one file/],
      [['matrix', '--out', noDir, '--junit', join(noDir, 'matrix.md')], /--junit '.*matrix\.md' is inside --out '.*', which the command writes/],
    ]);
  }, 300_000);

  it('a mistyped command or option names the one it is near', async () => {
    await expectBadArguments([
      [['chek', noHistory], /unknown command 'chek'; did you mean 'check'\?/],
      [['run', '--backend', 'nosuch', '--run', '5'], /unknown option '--run'; did you mean '--runs'\?/],
      [['run', '--backnd', 'nosuch'], /unknown option '--backnd'; did you mean '--backend'\?/],
      [['--bogus'], /Unknown option '--bogus'/],
    ]);
  }, 300_000);

  it('--ttl MIN-MAX: reversed is said to be reversed; equal is fine', async () => {
    await expectBadArguments([
      [['stress', '--backend', 'redis-single', '--ttl', '2000-500', '--out', noDir], /--ttl MIN-MAX: MIN 2000 is above MAX 500/],
      [['stress', '--backend', 'redis-single', '--ttl', '500-500', '--out', noDir], /cannot write the stress history into \(--out\)/],
    ]);
  }, 300_000);

  it('a backend name mistyped (case, white space, a typo) is said to be one, not loaded as a module path', async () => {
    await expectBadArguments([
      [['run', '--backend', ' redis-single/strict'], /unknown backend ' redis-single\/strict'; did you mean 'redis-single\/strict'\?/],
      [['run', '--backend', 'REDLOCK/STRICT'], /unknown backend 'REDLOCK\/STRICT'; did you mean 'redlock\/strict'\?/],
      [['stress', '--backend', 'Redis-Single'], /unknown stress backend 'Redis-Single'; did you mean 'redis-single'\?/],
      [['matrix', '--backend', 'redis-single/strikt', '--out', noDir], /unknown backend 'redis-single\/strikt' in --backend; did you mean 'redis-single\/strict'\?/],
      // A path to no file, or to a directory, is said plainly, not in the words of Node's resolver about lockcheck's own file.
      [['run', '--backend', './no/such/adapter.ts'], /cannot load adapter module '\.\/no\/such\/adapter\.ts': there is no file at .*no\/such\/adapter\.ts$/m, /backends\.ts|Cannot find module/],
      [['stress', '--backend', dir], /cannot load adapter module '.*': .* is a directory; give the module file/],
    ]);
  }, 300_000);

  it('--path: a malformed one, or one that names no case of the seed, is exit 2 naming it, not a crash', async () => {
    await expectBadArguments([
      [['run', '--backend', 'redis-single/strict', '--seed', '1', '--path', 'garbage', '--junit', noJunit], /--path must be a replay path like 12:0:3 .*got 'garbage'/],
      // A simulated backend: no server starts.
      [['run', '--backend', 'test/fixtures/brokenAdapter.ts', '--seed', '1', '--path', '0:99:99', '--runs', '5', '--counterexample', join(dir, 'ce.json')], /--path '0:99:99' with --seed 1 names no case fast-check can replay/],
    ]);
  }, 300_000);

  it('--redis and --pg: a port out of range is said to be, the expected form is not mangled, and no password means no password warning', async () => {
    const warning = /a password on the command line/;
    await expectBadArguments([
      [['run', '--backend', 'nosuch', '--redis', 'redis://127.0.0.1:70000'], /its port must be in \[1, 65535\], got 70000/, warning],
      [['run', '--backend', 'nosuch', '--pg', 'postgres://someone@127.0.0.1:99999/db'], /its port must be in \[1, 65535\], got 99999/, warning],
      [['run', '--backend', 'nosuch', '--redis', 'redis://127.0.0.1:0'], /'redis:\/\/127\.0\.0\.1:0': its port must be in \[1, 65535\], got 0/],
      [['run', '--backend', 'nosuch', '--redis', 'not a url'], /expected redis:\/\/\[user:password@\]host\[:port\]\[\/db\], or rediss:\/\/ for TLS/],
      // Text after a host's colon may be a password whose '@' was forgotten: it is not echoed.
      [['run', '--backend', 'nosuch', '--redis', 'redis://someone:sekrit'], /its port must be a number in \[1, 65535\]/, /sekrit/],
    ]);
  }, 300_000);

  it('a --redis or --pg server that takes the connection and never answers: exit 3, saying it had no answer within 5 s', async () => {
    // A host that does not answer, made real: a listener that accepts and stays silent (no server, no protocol).
    const sockets = new Set<Socket>();
    const silent = createServer((s) => {
      sockets.add(s);
      s.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as { port: number }).port;
    try {
      const [redis, pg] = await Promise.all([
        run(['run', '--backend', 'redis-single/strict', '--redis', `redis://127.0.0.1:${port}`], {}, 90_000),
        run(['run', '--backend', 'pg-session/strict', '--pg', `postgres://someone@127.0.0.1:${port}/db`], {}, 90_000),
      ]);
      expect(redis.code, redis.stderr).toBe(3);
      expect(redis.stderr).toMatch(new RegExp(`cannot reach the Redis server redis://127\\.0\\.0\\.1:${port}: no answer within 5 s`));
      expect(pg.code, pg.stderr).toBe(3);
      expect(pg.stderr).toMatch(new RegExp(`cannot reach the PostgreSQL database postgres://127\\.0\\.0\\.1:${port}/db: .*\\(no answer within 5 s\\)`));
    } finally {
      for (const s of sockets) s.destroy();
      silent.close();
    }
  }, 120_000);

  it('an adapter module whose top-level code never finishes is given up on, boundedly (LOCKCHECK_IMPORT_LIMIT_MS)', async () => {
    const r = await run(['run', '--backend', 'test/fixtures/hangingAdapter.mjs'], { LOCKCHECK_IMPORT_LIMIT_MS: '2000' }, 90_000);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/cannot load adapter module 'test\/fixtures\/hangingAdapter\.mjs': its top-level code did not finish within 2000 ms/);
    // Ended at once: the module's interval is not waited on for the exit grace, nor blamed on lockcheck's own pipes.
    expect(r.stderr).not.toMatch(/still open/);
  }, 120_000);

  it('Ctrl-C while a server command works: it says it is stopping, and ends by the signal (exit 130)', async () => {
    // Interrupted while it loads an adapter that never finishes: nothing else to wait for, and no server to start.
    const r = await run(['run', '--backend', 'test/fixtures/hangingAdapter.mjs'], {}, 90_000, 'hangingAdapter: loading');
    expect(r.signal, r.stderr).toBe('SIGINT');
    expect(r.stderr).toMatch(/lockcheck: SIGINT: stopping/);
  }, 120_000);
});

/** lockcheck with `env` added, killed at `timeoutMs`; with `interruptOn`, sent SIGINT once its stdout shows that text. */
function run(args: readonly string[], env: Record<string, string>, timeoutMs: number, interruptOn?: string): Promise<LockcheckProcess & { readonly signal: NodeJS.Signals | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['cli/lockcheck.mjs', ...args], { stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs, env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    let sent = false;
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
      if (interruptOn !== undefined && !sent && stdout.includes(interruptOn)) {
        sent = true;
        child.kill('SIGINT');
      }
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}
