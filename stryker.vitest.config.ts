import { readdirSync, readFileSync } from 'node:fs';
import { configDefaults, defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { fileURLToPath } from 'node:url';
import { sourceAliases } from './test/sourceEntries.ts';

/** In-memory tests of impl/*.ts (using(), the lease handle, Redlock at the quorum on simulated nodes): milliseconds. */
const IN_MEMORY = ['test/lease.test.ts', 'test/redlockQuorum.test.ts'];

/**
 * The main suite's tests that reach the clients of impl/ in seconds: every test/*.test.ts that imports from impl/ (statically or not),
 * less the slow ones below. Found, not listed: a hand-kept list missed every test written after it (session h33: the
 * wire client's own tests, the lease's refusals and tokens, the store's close, ...), and so did the mutation run;
 * without the main suite's quick tests impl/redis scored 68.0 % (session h29), with them 82.9 %.
 */
const SLOW = [
  // Real-server conformance and fault runs of a minute or more each (test/conformance.test.ts is the in-memory suite,
  // included by name below): run for every mutant they cover they would cost minutes a mutant.
  'test/conformance.test.ts',
  'test/etcd.test.ts',
  'test/ledger.test.ts',
  'test/postgres.conformance.test.ts',
  'test/redis.conformance.test.ts',
  'test/userTiming.test.ts',
  'test/zookeeper.partition.test.ts',
  'test/zookeeper.test.ts',
];

const QUICK_MAIN = readdirSync('test')
  .filter((name) => name.endsWith('.test.ts'))
  .map((name) => `test/${name}`)
  .filter((path) => !SLOW.includes(path) && !IN_MEMORY.includes(path) && /'\.\.\/impl\//.test(readFileSync(path, 'utf8')));

/**
 * The quick real-server tests of impl/ (and the in-memory ones above) before the conformance suite: a
 * mutant's run stops at its first failing test (Stryker bails), so a mutant
 * those tests kill costs seconds, not a conformance run.
 */
class QuickFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const quick = (f: TestSpecification): boolean => f.moduleId.includes('/test/impl/') || [...IN_MEMORY, ...QUICK_MAIN].some((name) => f.moduleId.endsWith(name));
    return [...sorted.filter(quick), ...sorted.filter((f) => !quick(f))];
  }
}

/**
 * LOCKCHECK_MUTATION_TESTS: unset, the quick tests and the in-memory conformance suite; `impl`, the quick tests alone
 * (for the folders the in-memory suite never reaches); otherwise a comma-separated list of test files or globs, for a
 * run aimed at a few files (each mutant's covering tests rerun their file's beforeAll: a file that starts its own
 * server costs seconds a mutant).
 */
function testSet(tests: string | undefined): string[] {
  if (tests === undefined || tests === '') return ['test/conformance.test.ts', 'test/impl/*.test.ts', ...IN_MEMORY, ...QUICK_MAIN];
  if (tests === 'impl') return ['test/impl/*.test.ts', ...QUICK_MAIN];
  return tests.split(',').map((t) => t.trim()).filter((t) => t !== '');
}

const tests = testSet(process.env.LOCKCHECK_MUTATION_TESTS);

// What kills mutants in `npm run mutation`: the quick real-server tests of
// impl/ (test/impl/, whose servers mutation/servers.ts starts once per Stryker
// worker) and the in-memory conformance suite.
export default defineConfig({
  // As vitest.config.ts: lockcheck/… (the shipped examples' imports) are the sources.
  resolve: { alias: sourceAliases(fileURLToPath(new URL('.', import.meta.url))) },
  test: {
    include: tests,
    // The cut-point sweeps (a silent server at every byte of a connection's start) take minutes a file: run for every
    // mutant they cover they would cost minutes each, and with them the first run outlasted Stryker's dry-run timeout.
    exclude: [...configDefaults.exclude, 'test/impl/blackhole.cut*.test.ts'],
    setupFiles: ['test/setup.ts'],
    // Only test/impl/ takes the shared servers (the others start their own or none): a run aimed at the engine's in-memory
    // tests (LOCKCHECK_MUTATE=conformance/...) starts no Redis, PostgreSQL, etcd and ZooKeeper per worker.
    globalSetup: tests.some((t) => t.startsWith('test/impl/')) ? ['mutation/servers.ts'] : [],
    sequence: { sequencer: QuickFirst },
    // A mutant that makes a test hang fails it here, not at Stryker's timeout (30 s plus twice the covering tests' time,
    // minutes for the conformance suite); the slowest test takes about 15 s on the loaded machine.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    env: { LOCKCHECK_SIM_RUNS: '20', LOCKCHECK_FINDING_RUNS: '50' },
  },
});
