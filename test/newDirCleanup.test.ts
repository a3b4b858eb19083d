/**
 * A start that has made its directory and then fails to build the object
 * that owns it (the watchdog's record cannot be written: a full disk, a
 * registry gone) removes the directory: no one else knows of it, and the
 * watchdog was not told of it either.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EtcdCluster } from '../conformance/env/etcdCluster.ts';
import { PostgresServer } from '../conformance/env/postgresServer.ts';
import { RedisServer } from '../conformance/env/redisServer.ts';
import { guardedTempDir } from '../conformance/env/tempDir.ts';
import { Guard } from '../conformance/env/watchdog.ts';
import { ZookeeperEnsemble } from '../conformance/env/zookeeperEnsemble.ts';

const parents: string[] = [];

afterEach(() => {
  vi.restoreAllMocks();
  for (const p of parents.splice(0)) rmSync(p, { recursive: true, force: true });
});

/** The first watchdog record of a directory named `prefix`… fails; resolves the directory it named. */
function recordFails(prefix: string): { readonly dir: () => string | null; readonly failure: Error } {
  let named: string | null = null;
  const failure = new Error('the watchdog record could not be written (injected)');
  // The method itself, called on each guard: every other record is written as usual.
  const original = Object.getOwnPropertyDescriptor(Guard.prototype, 'set')!.value as (this: Guard, guarded: Parameters<Guard['set']>[0]) => void;
  vi.spyOn(Guard.prototype, 'set').mockImplementation(function (this: Guard, guarded) {
    const dir = guarded.dirs.find((d) => d.split('/').pop()!.startsWith(prefix));
    if (named === null && dir !== undefined) {
      named = dir;
      throw failure;
    }
    original.call(this, guarded);
  });
  return { dir: () => named, failure };
}

function parent(): string {
  const p = mkdtempSync(join('/dev/shm', 'lockcheck-newdir-'));
  parents.push(p);
  return p;
}

describe('a directory made for a server that cannot be built is removed', () => {
  it('RedisServer.start', async () => {
    const { dir, failure } = recordFails('lockcheck-redis-');
    await expect(RedisServer.start({ persistence: 'none' })).rejects.toBe(failure);
    expect(dir()).not.toBeNull();
    expect(existsSync(dir()!), dir()!).toBe(false);
  });

  it('PostgresServer.start', async () => {
    const { dir, failure } = recordFails('lockcheck-pg-');
    await expect(PostgresServer.start({ parentDir: parent() })).rejects.toBe(failure);
    expect(dir()).not.toBeNull();
    expect(existsSync(dir()!), dir()!).toBe(false);
  });

  it('EtcdCluster.start (its CA made)', async () => {
    const { dir, failure } = recordFails('lockcheck-etcd-');
    await expect(EtcdCluster.start({ members: 1, parentDir: parent() })).rejects.toBe(failure);
    expect(dir()).not.toBeNull();
    expect(existsSync(dir()!), dir()!).toBe(false);
  }, 30_000);

  it('ZookeeperEnsemble.start', async () => {
    const { dir, failure } = recordFails('lockcheck-zk-');
    await expect(ZookeeperEnsemble.start({ members: 1, parentDir: parent() })).rejects.toBe(failure);
    expect(dir()).not.toBeNull();
    expect(existsSync(dir()!), dir()!).toBe(false);
  });

  it('guardedTempDir', () => {
    const { dir, failure } = recordFails('lockcheck-guarded-');
    expect(() => guardedTempDir('lockcheck-guarded-')).toThrow(failure);
    expect(dir()).not.toBeNull();
    expect(existsSync(dir()!), dir()!).toBe(false);
  });
});
