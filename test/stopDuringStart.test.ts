/**
 * A stop() that comes while a server (or a group of them) is starting: once
 * the stop resolves nothing of it runs (each process it spawned is gone),
 * nothing listens on its ports, its temporary directory is removed, and
 * start() rejects StoppedWhileStarting, whichever await of the start the stop
 * met. PostgreSQL's own case is in postgresServer.test.ts.
 */
import { appendFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedisReplicated } from '../conformance/env/redisReplicated.ts';
import { RedisServer, stopAllRedisServers } from '../conformance/env/redisServer.ts';
import { StoppedWhileStarting } from '../conformance/env/stoppedWhileStarting.ts';
import { alive, descendantsNamed, listening, pollFor, settledOf } from './probes.ts';

beforeAll(async () => {
  // The watchdog (watchdog.ts) makes its directory in the temp dir of its first server: here, not in a test's TMPDIR below.
  await (await RedisServer.start({ persistence: 'none' })).stop();
});

// A failed test's servers go with it: the next test looks for this process's redis-server processes.
afterEach(async () => {
  await stopAllRedisServers();
});

afterAll(async () => {
  await stopAllRedisServers();
});

/**
 * The port and directory of a redis-server process, once it listens: it then
 * shows 'redis-server 127.0.0.1:PORT' as its command line (its title) and
 * runs in its --dir (redis chdirs there); before, null.
 */
function listeningRedis(pid: number): { readonly port: number; readonly dir: string } | null {
  try {
    const title = /127\.0\.0\.1:(\d+)/.exec(readFileSync(`/proc/${pid}/cmdline`, 'utf8'));
    return title === null ? null : { port: Number(title[1]), dir: readlinkSync(`/proc/${pid}/cwd`) };
  } catch {
    return null;
  }
}

/** The one process named `comm` this process started, once there is one. */
function oneProcess(comm: string): Promise<number> {
  return pollFor(() => descendantsNamed(comm)[0] ?? null, 20_000, `a ${comm} process of this test`);
}

describe('RedisServer: stopped while it starts', () => {
  // Polled once per turn of the event loop: the stop lands in the config's write, or in the port's claim.
  it.each([
    ['its directory just made', (dir: string) => dir],
    ['its config just written', (dir: string) => (existsSync(join(dir, 'redis.conf')) ? dir : null)],
  ] as const)('a stop before redis-server is spawned (%s) spawns nothing after, removes the directory, and start() rejects StoppedWhileStarting', async (_when, ready) => {
    const parent = mkdtempSync(join(tmpdir(), 'lockcheck-stopstart-'));
    const before = process.env['TMPDIR'];
    process.env['TMPDIR'] = parent;
    try {
      const settled = settledOf(RedisServer.start({ persistence: 'none' }), (s) => s.stop());
      const dir = await pollFor(
        () => {
          const name = readdirSync(parent).find((n) => n.startsWith('lockcheck-redis-'));
          return name === undefined ? null : ready(join(parent, name));
        },
        10_000,
        'the server directory',
      );
      // Restored at once: only this start's mkdtemp was to land in `parent`.
      process.env['TMPDIR'] = before;
      await stopAllRedisServers();
      const error = await settled;
      expect(descendantsNamed('redis-server'), 'redis-server processes left').toEqual([]);
      expect(error).toBeInstanceOf(StoppedWhileStarting);
      expect(existsSync(dir)).toBe(false);
    } finally {
      if (before === undefined) delete process.env['TMPDIR'];
      else process.env['TMPDIR'] = before;
      rmSync(parent, { recursive: true, force: true });
    }
  }, 30_000);

  it('a stop while redis-server runs and does not answer yet kills it, frees its port, removes the directory, and start() rejects StoppedWhileStarting (not a start-up failure, no further port tried)', async () => {
    // A later requirepass wins: the server runs but refuses the start's AUTH, so it is never ready and the start keeps polling.
    const settled = settledOf(RedisServer.start({ persistence: 'none', config: ['requirepass not-the-one-start-knows'], startTimeoutMs: 60_000 }), (s) => s.stop());
    const pid = await oneProcess('redis-server');
    const { port, dir } = await pollFor(() => listeningRedis(pid), 20_000, `redis-server ${pid} listening`);
    await stopAllRedisServers();
    expect(alive(pid), `redis-server ${pid} after the stop`).toBe(false);
    const error = await settled;
    expect(error).toBeInstanceOf(StoppedWhileStarting);
    expect(descendantsNamed('redis-server'), 'redis-server processes left').toEqual([]);
    expect(await listening(port)).toBe(false);
    expect(existsSync(dir)).toBe(false);
  }, 30_000);

  it('a stop during restart() kills the restarted process, spawns no other, and restart() rejects StoppedWhileStarting', async () => {
    const server = await RedisServer.start({ persistence: 'none', startTimeoutMs: 60_000 });
    const first = server.pid;
    // The restarted process refuses the restart's AUTH: it is never ready.
    appendFileSync(join(server.dir, 'redis.conf'), 'requirepass not-the-one-restart-knows\n');
    const settled = settledOf(server.restart(), async () => undefined);
    const pid = await pollFor(() => descendantsNamed('redis-server').find((p) => p !== first) ?? null, 20_000, 'the restarted redis-server');
    await server.stop();
    expect(alive(pid)).toBe(false);
    const error = await settled;
    expect(error).toBeInstanceOf(StoppedWhileStarting);
    expect(descendantsNamed('redis-server')).toEqual([]);
    expect(await listening(server.port)).toBe(false);
    expect(existsSync(server.dir)).toBe(false);
  }, 30_000);
});

describe('RedisReplicated: stopped while it starts', () => {
  it('a stopAllRedisServers() while the start waits for Sentinel to know the replica ends the start at once (the wait is not run to its bound): nothing left, StoppedWhileStarting', async () => {
    const settled = settledOf(RedisReplicated.start({ timeoutMs: 60_000 }), (r) => r.stop());
    // Sentinel is up within ms, then the start waits a second or so for it to know the replica: the stop lands in that wait.
    const sentinel = await pollFor(() => descendantsNamed('redis-sentinel')[0] ?? null, 20_000, 'Sentinel');
    expect(alive(sentinel)).toBe(true);
    // Timed from the stop, not from the start (whose servers a loaded machine starts slowly): a wait run to its 60 s
    // bound ends most of a minute after the stop.
    const stoppedAt = Date.now();
    await stopAllRedisServers();
    const error = await settled;
    expect(Date.now() - stoppedAt, 'the start ended well before its 60 s bound').toBeLessThan(30_000);
    expect(error).toBeInstanceOf(StoppedWhileStarting);
    expect([...descendantsNamed('redis-server'), ...descendantsNamed('redis-sentinel')], 'processes left').toEqual([]);
  }, 90_000);
});
