import { defineConfig } from 'vitest/config';

// The in-memory conformance suite alone: what kills mutants in `npm run mutation`.
export default defineConfig({
  test: {
    include: ['test/conformance.test.ts'],
    setupFiles: ['test/setup.ts'],
    testTimeout: 120_000,
    env: { LOCKCHECK_SIM_RUNS: '20', LOCKCHECK_FINDING_RUNS: '50' },
  },
});
