import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisServer } from '../conformance/env/redisServer.ts';

/**
 * Every local user can read a process's command line (ps, /proc/<pid>/cmdline):
 * a password given there is hidden as soon as the CLI starts, and can be given
 * in the environment instead (REDISCLI_AUTH for --redis, as redis-cli; PGPASSWORD
 * for --pg, as libpq and node-postgres).
 */
let server: RedisServer;
/** Accepts connections and never answers: the CLI's server check waits on it. */
let silent: Server;
const accepted: Socket[] = [];
let connected: Promise<void>;
beforeAll(async () => {
  server = await RedisServer.start({ persistence: 'none' });
  let onConnect!: () => void;
  connected = new Promise((resolve) => (onConnect = resolve));
  silent = createServer((socket) => {
    accepted.push(socket);
    onConnect();
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
}, 30_000);
afterAll(async () => {
  for (const s of accepted) s.destroy();
  await new Promise((resolve) => silent?.close(resolve));
  await server?.stop();
});

describe('passwords and the command line', () => {
  it('a password in --redis is gone from /proc/<pid>/cmdline once the CLI has started, with a warning', async () => {
    const port = (silent.address() as { port: number }).port;
    const child = spawn(process.execPath, ['cli/lockcheck.mjs', 'run', '--backend', 'redis-single/strict', '--redis', `redis://:s3cret@127.0.0.1:${port}`, '--runs', '1'], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    try {
      // The CLI connects to check the server only after its start-up: the command line is rewritten by then.
      await connected;
      const cmdline = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8');
      expect(cmdline).toContain(`redis://127.0.0.1:${port}`);
      expect(cmdline).not.toContain('s3cret');
    } finally {
      for (const s of accepted) s.destroy();
      child.kill('SIGTERM');
      await exited;
    }
    expect(stderr).toMatch(/warning: a password on the command line can be read by every local user/);
  }, 60_000);

  it('--redis without a password takes REDISCLI_AUTH', () => {
    const r = spawnSync(process.execPath, ['cli/lockcheck.mjs', 'run', '--backend', 'redis-single/strict', '--redis', `redis://${server.host}:${server.port}`, '--runs', '1', '--json'], {
      encoding: 'utf8',
      timeout: 120_000,
      env: { ...process.env, REDISCLI_AUTH: server.password },
    });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ backend: 'redis-single/strict', runs: 1, failure: null });
    expect(r.stderr).not.toMatch(/warning: a password on the command line/);
  }, 120_000);
});
