/**
 * `matrix` with a library audit whose library is not installed: the
 * environment's lack, exit 3 with the install command, worded as `run` and
 * `stress` word it. It was exit 2 (a UsageError) blaming "the given servers",
 * with none given (found by an audit). The library is present in this
 * repository, so its absence is what missingLibrary reports here (mocked);
 * test/package.test.ts runs the real case in a project without it.
 */
import { describe, expect, it, vi } from 'vitest';
import { EnvironmentError } from '../conformance/env/faketime.ts';
import { UsageError } from '../cli/usage.ts';

vi.mock('../cli/backends.ts', async (importOriginal) => {
  const original = await importOriginal<typeof import('../cli/backends.ts')>();
  return {
    ...original,
    missingLibrary: async (b: { library?: string }) => (b.library === undefined ? null : `needs the npm package ${b.library}, which is not installed`),
  };
});

const { matrixCommand } = await import('../cli/matrix.ts');

const options = { runs: 1, seed: 1, out: 'unused-matrix-out', json: false, junit: undefined, faults: ['client-pause'], stressSeconds: 0 };

describe('matrix: no row can run', () => {
  it('one library audit whose library is missing: EnvironmentError (exit 3) with run\'s message and install command', async () => {
    const error = await matrixCommand({ ...options, backends: ['lib:redlock@5.0.0-beta.2'] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EnvironmentError);
    expect(error).not.toBeInstanceOf(UsageError);
    expect((error as Error).message).toBe('lib:redlock@5.0.0-beta.2 needs the npm package redlock, which is not installed\n  fix: npm install --save-dev redlock@5.0.0-beta.2');
  });

  it('two library audits whose libraries are missing: one install command for both, and no word of servers', async () => {
    const error = await matrixCommand({ ...options, backends: ['lib:redlock@5.0.0-beta.2', 'lib:redis-lock@1.0.0'] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EnvironmentError);
    expect((error as Error).message).not.toMatch(/given servers/);
    expect((error as Error).message).toMatch(/\n {2}fix: npm install --save-dev redlock@5\.0\.0-beta\.2 redis-lock@1\.0\.0$/);
  });
});
