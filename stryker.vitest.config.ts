import { defineConfig } from 'vitest/config';

// What kills mutants in `npm run mutation`: the in-memory conformance suite, and
// the quick real-server tests of impl/ (test/impl/), whose servers
// mutation/servers.ts starts once per Stryker worker.
export default defineConfig({
  test: {
    include: ['test/conformance.test.ts', 'test/impl/*.test.ts'],
    setupFiles: ['test/setup.ts'],
    globalSetup: ['mutation/servers.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    env: { LOCKCHECK_SIM_RUNS: '20', LOCKCHECK_FINDING_RUNS: '50' },
  },
});
