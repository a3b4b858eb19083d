import { randomUUID } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { Guard } from '../conformance/env/watchdog.ts';

/**
 * A temp dir for the tests of the file (or describe block) that calls this:
 * its path now (the tests' arguments are built as the file is collected),
 * the directory (0700) made before the first of those tests runs and
 * removed after the last. Made at collection instead, it stayed behind
 * whenever a filter (vitest -t, Stryker's per-test runs) ran none of them:
 * their afterAll never runs then. Should the run be killed before its
 * afterAll (Stryker ends its runners so, as does a CI job's timeout), the
 * watchdog removes it (conformance/env/watchdog.ts).
 */
export function testTempDir(prefix: string, parent = tmpdir()): string {
  const dir = join(parent, `${prefix}${randomUUID()}`);
  let guard: Guard | undefined;
  beforeAll(() => {
    mkdirSync(dir, { mode: 0o700 });
    guard = new Guard();
    guard.set({ processes: [], dirs: [dir] });
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
    guard?.release();
  });
  return dir;
}
