import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The contract suites are imported by per-store test files, never run on their own.
    exclude: ['**/*.contract.ts', 'node_modules/**', 'dist/**'],
    globalSetup: ['test/support/global-redis.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two cores: integration files start servers; keep parallelism modest so event waits stay honest.
    maxWorkers: 2,
    // CI also writes a JSON report, from which .ci/run prints a plain "N passed, N failed" line.
    reporters: process.env.CI
      ? ['default', ['json', { outputFile: '.tmp/vitest-results.json' }]]
      : ['default'],
  },
});
