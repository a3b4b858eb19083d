import { chmodSync, readdirSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { startPostgres } from './postgresFixture.ts';
import { testTempDir } from './tempDirs.ts';

/**
 * The PostgreSQL fixture the test files share (test/postgresFixture.ts):
 * when its setup fails, what it started is stopped before the error goes
 * on (before, each file's beforeAll left that to its afterAll, file by file).
 * Its server's directory is made here, in a directory of this test's own
 * (0755: the postgres user must reach it when we are root), so what is
 * left is this test's alone to see.
 */
const parentDir = testTempDir('lockcheck-fixture-test-', '/dev/shm');
beforeAll(() => chmodSync(parentDir, 0o755));

describe('the PostgreSQL test fixture', () => {
  it('a setup that fails: the error goes on, the admin client is ended and the server stopped (its directory gone)', async () => {
    await expect(
      startPostgres({ parentDir }, async (admin) => {
        await admin.query('SELECT no_such_function()');
      }),
    ).rejects.toThrow(/no_such_function/);
    expect(readdirSync(parentDir)).toEqual([]);
  }, 90_000);

  it('started and stopped: nothing left', async () => {
    const db = await startPostgres({ parentDir });
    try {
      expect((await db.admin.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      expect(readdirSync(parentDir)).toHaveLength(1);
    } finally {
      await db.stop();
    }
    expect(readdirSync(parentDir)).toEqual([]);
  }, 90_000);
});
