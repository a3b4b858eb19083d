import { defineConfig } from 'vitest/config';

export default defineConfig({
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
