// Mutation testing of the lock clients (impl/, all TypeScript), killed by the
// in-memory conformance suite (test/conformance.test.ts) and the quick
// real-server tests of impl/ (test/impl/, servers from mutation/servers.ts):
// see stryker.vitest.config.ts. `npm run mutation`; summary in docs/mutation.md.
// LOCKCHECK_MUTATE=glob,glob narrows or widens it (Stryker's `file:line-line`
// ranges too), e.g. to impl/postgres/*.ts or conformance/sim/*.ts. Lua and SQL
// are mutated by mutation/scriptMutants.ts.
// TypeScript 7 has no JS compiler API: no TypeScript checker, and type checks
// are not run (vitest strips types; a mutant that would not typecheck still runs).
// LOCKCHECK_MUTATION_OUT: where the reports go (default reports/mutation), so that runs of parts can go side by side.
const out = process.env.LOCKCHECK_MUTATION_OUT ?? 'reports/mutation';

export default {
  testRunner: 'vitest',
  vitest: { configFile: 'stryker.vitest.config.ts', related: false },
  mutate: process.env.LOCKCHECK_MUTATE ? process.env.LOCKCHECK_MUTATE.split(',') : ['impl/**/*.ts'],
  checkers: [],
  disableTypeChecks: false,
  // Stryker's tsconfig rewrite needs the TypeScript 5 API: point it at no file.
  tsconfigFile: 'tsconfig.stryker-absent.json',
  coverageAnalysis: 'perTest',
  ignoreStatic: true,
  concurrency: Number(process.env.LOCKCHECK_MUTATION_JOBS ?? 2),
  // Generous: on a loaded machine a run that is merely slow must not count as a hang (a timeout counts as killed).
  timeoutMS: 30_000,
  // The first, unmutated run of every test (with per-test coverage) takes minutes on a loaded machine; Stryker's default of 5 ended it.
  dryRunTimeoutMinutes: 30,
  timeoutFactor: 2,
  // The event recorder writes each mutant's result as it is known: a run cut short still has its numbers.
  reporters: ['clear-text', 'json', 'progress', 'event-recorder'],
  jsonReporter: { fileName: `${out}/mutation.json` },
  eventReporter: { baseDir: `${out}/events` },
  // Not copied into a sandbox: other runs' sandboxes, reports, scratch files.
  ignorePatterns: ['/.stryker-tmp*', '/reports', '/.scratch', '/.ci/out', '/dist'],
  tempDirName: `.stryker-tmp${process.env.LOCKCHECK_MUTATION_OUT ? `-${process.env.LOCKCHECK_MUTATION_OUT.replace(/\W/g, '_')}` : ''}`,
  cleanTempDir: 'always',
  // Reuses the results of mutants whose code and covering tests did not change (reports/mutation/incremental.json).
  incremental: true,
  incrementalFile: `${out}/incremental.json`,
};
