import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { sourceAliases } from './test/sourceEntries.ts';

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
