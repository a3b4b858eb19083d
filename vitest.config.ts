import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    setupFiles: ['test/setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // Tests that start servers clean up in afterAll; never leave a worker behind.
    teardownTimeout: 30_000,
  },
});
