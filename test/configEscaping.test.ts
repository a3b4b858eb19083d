// Text of the caller's (a parentDir, TMPDIR, RedisServer's password) reaching a server's config: escaped as that
// server reads it, so the server takes exactly that text and nothing more (conformance/env/configText.ts).
import { chmodSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidInputError } from '../impl/errors.ts';
import { PostgresServer, stopAllPostgresServers } from '../conformance/env/postgresServer.ts';
import { RedisServer, stopAllRedisServers } from '../conformance/env/redisServer.ts';
import { sendCommand } from '../conformance/env/resp.ts';
import { stopAllZookeeperEnsembles, ZookeeperEnsemble } from '../conformance/env/zookeeperEnsemble.ts';
import { testTempDir } from './tempDirs.ts';

const parent = testTempDir('lc-cfg-');

afterAll(async () => {
  await Promise.all([stopAllRedisServers(), stopAllPostgresServers(), stopAllZookeeperEnsembles()]);
});

/** A directory under the test's own with `name`, reachable by OS user postgres when the tests run as root. */
function hostileDir(name: string): string {
  chmodSync(parent, 0o711);
  const dir = join(parent, name);
  mkdirSync(dir, { mode: 0o711 });
  return dir;
}

describe('RedisServer: the password is one requirepass argument, whatever its text', () => {
  it('a password with a space, quotes, a backslash, a line break and non-ASCII starts the server, is the password, and adds no directive', async () => {
    const password = 'two words "quoted" back\\slash\nenable-debug-command yes\té';
    const server = await RedisServer.start({ persistence: 'none', password });
    try {
      expect(await server.command(['PING'])).toBe('PONG');
      // Before: the newline made a line of its own (debug commands on), and the requirepass was 'x' of the first line.
      expect(await server.command(['CONFIG', 'GET', 'enable-debug-command'])).toEqual(['enable-debug-command', 'no']);
      await expect(sendCommand(server.host, server.port, ['PING'], 2000, 'two')).rejects.toThrow();
    } finally {
      await server.stop();
    }
  });

  it('an empty password is refused: requirepass "" is no password at all', async () => {
    await expect(RedisServer.start({ persistence: 'none', password: '' })).rejects.toThrow(InvalidInputError);
  });
});

describe('ZookeeperEnsemble: dataDir is the ensemble\'s own directory, whatever the parentDir', () => {
  it('a parentDir with a backslash, a line break and non-ASCII keeps the data inside the ensemble\'s private directory', async () => {
    const dir = hostileDir('zk\\b\né');
    const ensemble = await ZookeeperEnsemble.start({ members: 1, parentDir: dir });
    try {
      // Before: Properties.load read '\b' as 'b' and the data went to <parent>/zkb..., 0755, left after stop().
      expect(readdirSync(join(ensemble.dir, 'm1'))).toContain('version-2');
      expect(readdirSync(parent).filter((n) => n.startsWith('zk'))).toEqual(['zk\\b\né']);
    } finally {
      await ensemble.stop();
    }
    expect(readdirSync(parent).filter((n) => n.startsWith('zk'))).toEqual(['zk\\b\né']);
  }, 120_000);
});

describe('PostgresServer: the Unix socket goes in the cluster\'s directory, whatever the parentDir', () => {
  it('a parentDir with a comma, a space and a double quote: the socket is in dir, none made elsewhere', async () => {
    const dir = hostileDir('pg,a "b');
    const split = join(parent, 'pg');
    mkdirSync(split, { mode: 0o777 });
    chmodSync(split, 0o777);
    const server = await PostgresServer.start({ parentDir: dir });
    try {
      // Before: the list split at the comma and postgres made its socket and lock in <parent>/pg, or failed to start.
      expect(existsSync(join(server.socketDir, `.s.PGSQL.${server.port}`))).toBe(true);
      expect(readdirSync(split)).toEqual([]);
      const client = new pg.Client({ ...server.connection, connectionTimeoutMillis: 30_000 });
      await client.connect();
      try {
        expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      } finally {
        await client.end();
      }
    } finally {
      await server.stop();
    }
  }, 180_000);
});
