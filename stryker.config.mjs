// Mutation testing of the lock clients (impl/) and the in-memory parts of the
// conformance engine, killed by the in-memory conformance suite only
// (test/conformance.test.ts). `npm run mutation`; summary in docs/mutation.md.
// Default scope: the TypeScript of impl/ that the in-memory suite reaches
// (impl/redis and impl/postgres talk to real servers: their scripts are
// mutated by mutation/scriptMutants.ts). LOCKCHECK_MUTATE=glob,glob widens it,
// e.g. to conformance/sim/*.ts.
// TypeScript 7 has no JS compiler API: no TypeScript checker, and type checks
// are not run (vitest strips types; a mutant that would not typecheck still runs).
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'stryker.vitest.config.ts', related: false },
  mutate: process.env.LOCKCHECK_MUTATE ? process.env.LOCKCHECK_MUTATE.split(',') : ['impl/*.ts'],
  checkers: [],
  disableTypeChecks: false,
  // Stryker's tsconfig rewrite needs the TypeScript 5 API: point it at no file.
  tsconfigFile: 'tsconfig.stryker-absent.json',
  coverageAnalysis: 'perTest',
  ignoreStatic: true,
  concurrency: 2,
  // Generous: on a loaded machine a run that is merely slow must not count as a hang (a timeout counts as killed).
  timeoutMS: 30_000,
  timeoutFactor: 2,
  // The event recorder writes each mutant's result as it is known: a run cut short still has its numbers.
  reporters: ['clear-text', 'json', 'progress', 'event-recorder'],
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  eventReporter: { baseDir: 'reports/mutation/events' },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
  // Reuses the results of mutants whose code and covering tests did not change (reports/mutation/incremental.json).
  incremental: true,
  incrementalFile: 'reports/mutation/incremental.json',
};
