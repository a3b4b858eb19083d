/**
 * The Redis backends' starts make a directory of clock files before any
 * server: a clock file that cannot be written (a full disk) fails the start
 * with the directory removed, not left until the process exits.
 */
import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { FakeClockFile } from '../conformance/env/faketime.ts';
import { startRedisCluster } from '../conformance/env/redisBackend.ts';
import { ReplicatedServers } from '../conformance/env/replicatedBackend.ts';

afterEach(() => {
  vi.restoreAllMocks();
});

/** The `nth` clock file's first write fails; gives the directory it was to be written in. */
function writeFails(nth: number): { readonly dir: () => string | null; readonly failure: Error } {
  let dir: string | null = null;
  let writes = 0;
  const failure = new Error('no space left on device (injected)');
  const original = Object.getOwnPropertyDescriptor(FakeClockFile.prototype, 'set')!.value as (this: FakeClockFile, epochMs: number) => void;
  vi.spyOn(FakeClockFile.prototype, 'set').mockImplementation(function (this: FakeClockFile, epochMs) {
    if (++writes === nth) {
      dir = dirname(this.path);
      throw failure;
    }
    original.call(this, epochMs);
  });
  return { dir: () => dir, failure };
}

describe('a clock file that cannot be written fails the start with its directory removed', () => {
  it('startRedisCluster (the second node\'s clock)', async () => {
    const { dir, failure } = writeFails(2);
    await expect(startRedisCluster({ nodes: 2, persistence: 'none' })).rejects.toBe(failure);
    expect(dir()).not.toBeNull();
    expect(existsSync(dir()!), dir()!).toBe(false);
  });

  it('ReplicatedServers.start', async () => {
    const { dir, failure } = writeFails(1);
    await expect(ReplicatedServers.start()).rejects.toBe(failure);
    expect(dir()).not.toBeNull();
    expect(existsSync(dir()!), dir()!).toBe(false);
  });
});
