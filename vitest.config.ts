import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { sourceAliases } from './test/sourceEntries.ts';

// `npx vitest` run directly (not through npm test's scripts/setup.sh): the tests' child processes load tsx, which runs
// the code in its cache <temp dir>/tsx-<uid>, a directory another local user may have made first. One not this user's
// alone turns tsx's cache off (said on stderr) for every worker and child, which inherit this environment.
// And the repository's tsconfig is the one tsx reads, never one above a child's working directory (/tmp/tsconfig.json: anyone's).
const tsxGuards = (await import(new URL('./conformance/env/tsxCache.mjs', import.meta.url).href)) as { guardTsxCache: () => void; pinTsconfig: (file: string) => void };
tsxGuards.guardTsxCache();
tsxGuards.pinTsconfig(fileURLToPath(new URL('./tsconfig.json', import.meta.url)));

export default defineConfig({
  // The shipped examples import lockcheck/… as a user's project does: here those are the sources (test/sourceEntries.ts).
  resolve: { alias: sourceAliases(fileURLToPath(new URL('.', import.meta.url))) },
  test: {
    include: ['test/**/*.test.ts'],
    // Two test files at a time on the two cores: most real-server files spend
    // their time waiting on real time (paced runs, failovers, etcd leases),
    // which one worker would serialise (vitest's default is cores - 1 = 1).
    maxWorkers: 2,
    setupFiles: ['test/setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // Tests that start servers clean up in afterAll; never leave a worker behind.
    teardownTimeout: 30_000,
  },
});
