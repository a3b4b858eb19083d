import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { dirname } from 'node:path';
import { connect } from 'node:net';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PostgresServer, StoppedWhileStarting, stopAllPostgresServers } from '../conformance/env/postgresServer.ts';
import { guardedTempDir } from '../conformance/env/tempDir.ts';
import { alive, descendantsNamed } from './probes.ts';

const servers: PostgresServer[] = [];
const CALLER_SECRET = 'LOCKCHECK_TEST_CALLER_SECRET';
const clients: pg.Client[] = [];

async function startServer(): Promise<PostgresServer> {
  const server = await PostgresServer.start();
  servers.push(server);
  return server;
}

/** A connected client with every wait bounded. Errors after connect are recorded, never thrown. */
async function connectClient(server: PostgresServer): Promise<{ client: pg.Client; errors: Error[] }> {
  const client = new pg.Client({
    connectionString: server.url,
    connectionTimeoutMillis: 5_000,
    statement_timeout: 5_000,
    query_timeout: 6_000,
  });
  const errors: Error[] = [];
  client.on('error', (error) => errors.push(error));
  clients.push(client);
  await client.connect();
  return { client, errors };
}

async function endClient(client: pg.Client): Promise<void> {
  // end() on a dead connection can wait for a close that never comes: bound it.
  await Promise.race([client.end().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 1_000))]);
}

function portAccepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    const timer = setTimeout(() => finish(false), 500);
    function finish(result: boolean): void {
      clearTimeout(timer);
      socket.destroy();
      resolve(result);
    }
    socket.once('connect', () => finish(true));
    socket.once('error', () => finish(false));
  });
}

/** Sends a bare StartupMessage (user postgres, no password) and returns the authentication request code the server answers with. */
function firstAuthRequest(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const params = Buffer.from('user\0postgres\0database\0postgres\0\0');
    const startup = Buffer.alloc(8);
    startup.writeInt32BE(8 + params.length, 0);
    startup.writeInt32BE(196608, 4); // protocol 3.0
    const socket = connect({ host: '127.0.0.1', port });
    const timer = setTimeout(() => finish(new Error('no authentication request within 5 s')), 5_000);
    let data = Buffer.alloc(0);
    function finish(result: number | Error): void {
      clearTimeout(timer);
      socket.destroy();
      if (typeof result === 'number') resolve(result);
      else reject(result);
    }
    socket.once('connect', () => socket.write(Buffer.concat([startup, params])));
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      if (data.length < 9) return;
      if (String.fromCharCode(data[0]!) !== 'R') finish(new Error(`unexpected first message ${String.fromCharCode(data[0]!)}`));
      else finish(data.readInt32BE(5));
    });
    socket.once('error', (error) => finish(error));
  });
}

function waitFor<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

afterEach(async () => {
  await Promise.all(clients.splice(0).map(endClient));
  await Promise.all(servers.splice(0).map((server) => server.stop()));
});

afterAll(async () => {
  await stopAllPostgresServers();
});

describe('PostgresServer (real PostgreSQL 15): one shared running cluster', () => {
  let shared: PostgresServer;

  beforeAll(async () => {
    // Not in `servers`: the per-test afterEach must leave it running. A variable of the caller's, which a server run as another OS user must not be given.
    process.env[CALLER_SECRET] = 'caller-secret-value';
    try {
      shared = await PostgresServer.start();
    } finally {
      delete process.env[CALLER_SECRET];
    }
  });

  afterAll(async () => {
    await shared?.stop();
  });

  it('starts a throwaway cluster on a loopback port and answers SELECT 1', async () => {
    const server = shared;
    expect(server.host).toBe('127.0.0.1');
    expect(server.user).toBe('postgres');
    expect(server.database).toBe('postgres');
    expect(server.port).toBeGreaterThan(0);
    expect(server.url).toBe(`postgres://postgres:${server.password}@127.0.0.1:${server.port}/postgres`);
    expect(server.binDir).toBe('/usr/lib/postgresql/15/bin');
    expect(existsSync(server.dir)).toBe(true);
    expect(server.pid).toBeGreaterThan(0);
    expect(server.pids()).toContain(server.pid);
    expect(server.timings.initdbMs).toBeGreaterThan(0);
    const { client } = await connectClient(server);
    expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    const settings = await client.query<{ name: string; setting: string }>(
      "SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'full_page_writes', 'synchronous_commit', 'listen_addresses') ORDER BY name",
    );
    expect(Object.fromEntries(settings.rows.map((row) => [row.name, row.setting]))).toEqual({
      fsync: 'off',
      full_page_writes: 'off',
      listen_addresses: '127.0.0.1',
      synchronous_commit: 'on',
    });
  });

  // Run by root, the cluster runs as OS user postgres, whose every process may read /proc/<pid>/environ: it had the
  // caller's whole environment (REDISCLI_AUTH, tokens), all but PG*.
  it.runIf(process.getuid?.() === 0)('run as another OS user, its processes are given none of the caller\'s variables beyond PATH and LD_LIBRARY_PATH', () => {
    const names = shared.pids().flatMap((pid) => {
      try {
        return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter((v) => v !== '').map((v) => v.slice(0, v.indexOf('=')));
      } catch {
        return []; // a backend that ended meanwhile
      }
    });
    expect(names.length).toBeGreaterThan(0);
    expect([...new Set(names)].filter((name) => !['PATH', 'LD_LIBRARY_PATH', 'TZ', 'LC_ALL', 'HOME', 'USER', 'LOGNAME'].includes(name))).toEqual([]);
  });

  it('is reachable only with its per-cluster password: no password, a wrong one and the Unix socket without one are refused', async () => {
    const server = shared;
    expect(server.password).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(statSync(server.dir).mode & 0o077).toBe(0);
    const refused = async (config: pg.ClientConfig): Promise<unknown> => {
      const client = new pg.Client({ ...config, connectionTimeoutMillis: 5_000 });
      client.on('error', () => undefined);
      try {
        await client.connect();
        return 'connected';
      } catch (error) {
        return error;
      } finally {
        await endClient(client);
      }
    };
    const tcp = { host: server.host, port: server.port, user: 'postgres', database: 'postgres' };
    // Without a password a client gets no further than the server's SASL challenge (trust would answer AuthenticationOk, 0).
    expect(await firstAuthRequest(server.port)).toBe(10);
    expect(await refused({ ...tcp, password: 'postgres' })).toMatchObject({ code: '28P01' });
    expect(await refused({ ...tcp, host: server.socketDir, password: 'wrong' })).toMatchObject({ code: '28P01' });
    const { client } = await connectClient(server);
    expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });

  it('advisory locks exclude across sessions; pg_terminate_backend drops the holder (57P01) and frees the lock', async () => {
    const server = shared;
    const holder = await connectClient(server);
    const other = await connectClient(server);
    await holder.client.query('SELECT pg_advisory_lock(42)');
    const holderPid = (await holder.client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;
    expect(holderPid).toBeGreaterThan(0);
    expect((await other.client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(42) AS ok')).rows[0]?.ok).toBe(false);

    const holderError = new Promise<Error & { code?: string }>((resolve) => holder.client.once('error', resolve));
    // With a timeout, pg_terminate_backend waits until the backend has exited (PostgreSQL 14+).
    const terminated = await other.client.query<{ done: boolean }>('SELECT pg_terminate_backend($1, 5000) AS done', [holderPid]);
    expect(terminated.rows[0]?.done).toBe(true);
    const error = await waitFor(holderError, 5_000, "the holder's 'error' event");
    expect(error.code).toBe('57P01');
    expect((await other.client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(42) AS ok')).rows[0]?.ok).toBe(true);
    await other.client.query('SELECT pg_advisory_unlock(42)');
  });

  it('pause() freezes the cluster and resume() thaws it', async () => {
    const server = shared;
    const { client } = await connectClient(server);
    server.pause();
    try {
      expect(server.paused).toBe(true);
      let answered = false;
      const pending = client.query('SELECT 2 AS two').then((result) => {
        answered = true;
        return result;
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(answered).toBe(false);
      server.resume();
      expect((await waitFor(pending, 5_000, 'the query after resume()')).rows).toEqual([{ two: 2 }]);
    } finally {
      if (server.paused) server.resume();
    }
  });
});

describe('PostgresServer (real PostgreSQL 15): restart, crash, stop', () => {
  it('restart() keeps a committed row, the port and the directory', async () => {
    const server = await startServer();
    const first = await connectClient(server);
    await first.client.query('CREATE TABLE fence (id int PRIMARY KEY, token bigint NOT NULL)');
    await first.client.query('INSERT INTO fence VALUES (1, 7)');
    const { port, dir, pid } = server;

    await server.restart();
    expect(server.port).toBe(port);
    expect(server.dir).toBe(dir);
    expect(server.pid).not.toBe(pid);
    expect(alive(pid)).toBe(false);
    const second = await connectClient(server);
    expect((await second.client.query('SELECT token FROM fence WHERE id = 1')).rows).toEqual([{ token: '7' }]);
    await expect(first.client.query('SELECT 1')).rejects.toThrow();
  });

  // Run by root, the cluster's directory is OS user postgres's: a link put at its log had root open any file for the
  // server's processes to append to, and a link at the log or postmaster.pid had root read any file into a message.
  it('a link at the log in its directory is never followed: restart() refuses it, the file it names is left as it was, logTail() does not read it', async () => {
    const server = await startServer();
    const elsewhere = guardedTempDir('lockcheck-pg-link-test-');
    try {
      const victim = join(elsewhere.dir, 'victim');
      writeFileSync(victim, 'root only\n', { mode: 0o600 });
      await server.crash();
      rmSync(server.logFile, { force: true });
      symlinkSync(victim, server.logFile);
      await expect(server.restart()).rejects.toThrow(/cannot open its log/);
      expect(readFileSync(victim, 'utf8')).toBe('root only\n');
      expect(server.logTail()).toBe('(no log)');
    } finally {
      elsewhere.remove();
    }
  });

  // The cluster's socket lives in its directory: one too deep for a Unix socket's path failed at the postmaster's start,
  // its reason only in the log tail. Refused by name before anything is made.
  it('a parentDir too long for the cluster\'s Unix socket is refused before anything is made', async () => {
    const parentDir = join('/tmp', 'x'.repeat(80));
    await expect(PostgresServer.start({ parentDir })).rejects.toThrow(/^invalid-config: PostgresServer: parentDir .* is too long: the cluster's Unix socket \(1\d\d bytes\) must fit in 107$/);
    expect(existsSync(parentDir)).toBe(false);
  });

  // Run by root, the cluster's directory is OS user postgres's: in the shared temp dir they could rename it away and put
  // a link to any directory in its place, and restart() then created its log there (root's file, postgres's output).
  it.runIf(process.getuid?.() === 0)('its owner cannot swap the cluster\'s directory, or its data directory, for a link: restart() creates nothing through one, stop() removes only its own', async () => {
    const server = await startServer();
    const elsewhere = guardedTempDir('lockcheck-pg-link-test-');
    try {
      const owner = statSync(server.dir);
      const asOwner = (script: string, ...args: string[]) => spawnSync('sh', ['-c', script, 'sh', ...args], { uid: owner.uid, gid: owner.gid, encoding: 'utf8', timeout: 10_000 });
      await server.crash();
      const swap = asOwner('mv "$1" "$1.moved" && ln -s "$2" "$1"', server.dir, elsewhere.dir);
      expect(swap.status, swap.stderr).not.toBe(0);
      expect(lstatSync(server.dir).isDirectory()).toBe(true);
      // Their data directory is theirs to replace: root reads postmaster.pid in it through no link either.
      writeFileSync(join(elsewhere.dir, 'postmaster.pid'), `${server.pid}\n`);
      expect(asOwner('mv "$1" "$1.moved" && ln -s "$2" "$1"', server.dataDir, elsewhere.dir).status).toBe(0);
      await expect(server.restart()).rejects.toThrow();
      expect(readdirSync(elsewhere.dir)).toEqual(['postmaster.pid']);
    } finally {
      await server.stop();
      expect(existsSync(server.dir)).toBe(false);
      expect(existsSync(dirname(server.dir))).toBe(false);
      elsewhere.remove();
    }
  });

  it('crash() kills every process of the cluster and closes the port; restart() recovers committed data', async () => {
    const server = await startServer();
    const before = await connectClient(server);
    await before.client.query('CREATE TABLE fence (id int PRIMARY KEY, token bigint NOT NULL)');
    await before.client.query('INSERT INTO fence VALUES (1, 8)');
    const pids = server.pids();
    expect(pids.length).toBeGreaterThan(2); // postmaster, checkpointer, walwriter, the backend, ...

    await server.crash();
    expect(server.running).toBe(false);
    for (const pid of pids) expect(alive(pid), `pid ${pid}`).toBe(false);
    expect(await portAccepts(server.port)).toBe(false);
    await expect(before.client.query('SELECT 1')).rejects.toThrow();

    await server.restart();
    expect(server.running).toBe(true);
    const after = await connectClient(server);
    expect((await after.client.query('SELECT token FROM fence WHERE id = 1')).rows).toEqual([{ token: '8' }]);
  });

  it('stop() removes the directory, leaves no process of the cluster, and is idempotent', async () => {
    const server = await startServer();
    const { client } = await connectClient(server);
    await client.query('SELECT 1');
    const pids = server.pids();
    expect(pids).toContain(server.pid);

    await Promise.all([server.stop(), server.stop()]);
    expect(server.stopped).toBe(true);
    expect(existsSync(server.dir)).toBe(false);
    // An immediate shutdown is reaped completely: not even a zombie is left.
    for (const pid of pids) expect(existsSync(`/proc/${pid}`), `pid ${pid}`).toBe(false);
    expect(await portAccepts(server.port)).toBe(false);
    await server.stop();
    await expect(server.restart()).rejects.toThrow(/stopped/);
  });
});

describe('PostgresServer: stopped while it starts', () => {
  it('a stop during initdb kills initdb, removes the directory, and start() rejects StoppedWhileStarting', async () => {
    const starting = PostgresServer.start({ parentDir: '/dev/shm' });
    const settled = starting.then(
      () => null,
      (error: unknown) => error,
    );
    // Polled, not slept: initdb runs for a second or more, its process is seen long before it ends.
    let initdb: number[] = [];
    const until = Date.now() + 30_000;
    while (initdb.length === 0 && Date.now() < until) {
      initdb = descendantsNamed('initdb');
      if (initdb.length === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    expect(initdb.length, 'initdb was seen running').toBe(1);
    const dataDir = readFileSync(`/proc/${initdb[0]}/cmdline`, 'utf8').split('\0')[2]!;
    await stopAllPostgresServers();
    // stop() waited for initdb: it is gone (reaped) once the stop resolves, and so is the directory.
    expect(existsSync(`/proc/${initdb[0]}`), `initdb ${initdb[0]} after stop`).toBe(false);
    expect(existsSync(dirname(dataDir))).toBe(false);
    const error = await waitFor(settled, 30_000, 'start() to settle');
    expect(error).toBeInstanceOf(StoppedWhileStarting);
    expect(String((error as Error).message)).toMatch(/stop\(\) came while it was starting/);
  }, 60_000);

  it('a stop as its directory is made (before the server exists) is not missed: nothing is spawned, the directory is removed, start() rejects StoppedWhileStarting', async () => {
    const { dir: parent, remove } = guardedTempDir('lockcheck-pgstop-', '/dev/shm');
    try {
      const settled = PostgresServer.start({ parentDir: parent }).then(
        async (server) => {
          await server.stop();
          return null;
        },
        (error: unknown) => error,
      );
      // Once per turn of the event loop (not a sleep): the directory is seen as soon as mkdtemp made it.
      const until = Date.now() + 30_000;
      while (readdirSync(parent).length === 0 && Date.now() < until) await new Promise((resolve) => setImmediate(resolve));
      expect(readdirSync(parent).length, 'the cluster directory was made').toBe(1);
      await stopAllPostgresServers();
      const error = await waitFor(settled, 30_000, 'start() to settle');
      expect([...descendantsNamed('initdb'), ...descendantsNamed('postgres')], 'processes left').toEqual([]);
      expect(error).toBeInstanceOf(StoppedWhileStarting);
      expect(readdirSync(parent)).toEqual([]);
    } finally {
      remove();
    }
  }, 60_000);

  it('a stop while the postmaster comes up kills it, frees its port, removes the directory, and start() rejects StoppedWhileStarting', async () => {
    const settled = PostgresServer.start({ parentDir: '/dev/shm' }).then(
      async (server) => {
        await server.stop();
        return null;
      },
      (error: unknown) => error,
    );
    let postmaster: number[] = [];
    const until = Date.now() + 30_000;
    while (postmaster.length === 0 && Date.now() < until) {
      // initdb runs postgres processes of its own: the postmaster is one seen once initdb is gone.
      postmaster = descendantsNamed('initdb').length === 0 ? descendantsNamed('postgres') : [];
      if (postmaster.length === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    expect(postmaster.length, 'the postmaster was seen running').toBeGreaterThan(0);
    const args = readFileSync(`/proc/${postmaster[0]}/cmdline`, 'utf8').split('\0');
    const dataDir = args[args.indexOf('-D') + 1]!;
    await stopAllPostgresServers();
    expect(descendantsNamed('postgres'), 'postgres processes after the stop').toEqual([]);
    expect(existsSync(dirname(dataDir))).toBe(false);
    const error = await waitFor(settled, 30_000, 'start() to settle');
    expect(error).toBeInstanceOf(StoppedWhileStarting);
  }, 60_000);
});
