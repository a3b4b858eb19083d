import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { FakeClockFile, formatFaketime } from '../conformance/env/faketime.ts';
import { RedisServer, type RedisServerOptions, stopAllRedisServers } from '../conformance/env/redisServer.ts';
import { claimPort, PORT_CLAIMS, restartPorts } from '../conformance/env/processes.ts';
import { RespAuthError, RespError, RespTimeoutError, type RespValue, sendCommand } from '../conformance/env/resp.ts';

const servers: RedisServer[] = [];
const clockDirs: string[] = [];

async function startServer(options: RedisServerOptions): Promise<RedisServer> {
  const server = await RedisServer.start(options);
  servers.push(server);
  return server;
}

function newClock(epochMs: number): FakeClockFile {
  const dir = mkdtempSync(join(tmpdir(), 'lockcheck-clock-'));
  clockDirs.push(dir);
  const clock = new FakeClockFile(dir);
  clock.set(epochMs);
  return clock;
}

function cmd(server: RedisServer, ...args: string[]): Promise<RespValue> {
  return server.command(args, 2000);
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.stop()));
  for (const dir of clockDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

afterAll(async () => {
  await stopAllRedisServers();
});

const T0 = Date.UTC(2030, 0, 1, 0, 0, 5, 250);

describe('RedisServer (real redis-server)', () => {
  it('starts without persistence and answers PING on a raw socket', async () => {
    const server = await startServer({ persistence: 'none' });
    expect(server.host).toBe('127.0.0.1');
    expect(server.port).toBeGreaterThan(0);
    expect(server.pid).toBeGreaterThan(0);
    expect(existsSync(server.dir)).toBe(true);
    expect(await cmd(server, 'PING')).toBe('PONG');
  });

  it('is reachable only with its per-server password: unauthenticated and wrong-password commands are refused, protected mode is on', async () => {
    const server = await startServer({ persistence: 'none' });
    expect(server.password).toMatch(/^[A-Za-z0-9_-]{32}$/);
    const refused = await sendCommand(server.host, server.port, ['GET', 'k'], 2000);
    expect(refused).toBeInstanceOf(RespError);
    expect((refused as RespError).message).toMatch(/^NOAUTH/);
    await expect(sendCommand(server.host, server.port, ['PING'], 2000, 'wrong')).rejects.toBeInstanceOf(RespAuthError);
    expect(await cmd(server, 'CONFIG', 'GET', 'protected-mode')).toEqual(['protected-mode', 'yes']);
    // Not on the command line, where every local user could read it.
    expect(readFileSync(`/proc/${server.pid}/cmdline`, 'utf8')).not.toContain(server.password);
  });

  it('formats the clock file as a UTC libfaketime timestamp', () => {
    expect(formatFaketime(T0)).toBe('2030-01-01 00:00:05.2500000005');
    expect(formatFaketime(Date.UTC(2030, 0, 1, 0, 0, 6, 249))).toBe('2030-01-01 00:00:06.2490000005');
  });

  it('runs under a FakeClockFile: TIME follows the file exactly', async () => {
    const clock = newClock(T0);
    const server = await startServer({ persistence: 'none', clockFile: clock });
    expect(await cmd(server, 'TIME')).toEqual(['1893456005', '250000']);
    // Frozen: no drift between calls while the file stands still.
    expect(await cmd(server, 'TIME')).toEqual(['1893456005', '250000']);
    clock.set(T0 + 1000);
    expect(await cmd(server, 'TIME')).toEqual(['1893456006', '250000']);
    // Milliseconds with no exact binary fraction (libfaketime parses a double) land exactly too.
    for (let ms = 1; ms < 1000; ms += 37) {
      clock.set(Date.UTC(2030, 0, 1, 0, 0, 9, ms));
      expect(await cmd(server, 'TIME')).toEqual(['1893456009', String(ms * 1000)]);
    }
  });

  it('expires a PX key by the faked clock: present at +999 ms, gone at +1001 ms, still gone after moving back', async () => {
    const clock = newClock(T0);
    const server = await startServer({ persistence: 'none', clockFile: clock });
    expect(await cmd(server, 'SET', 'k', 'v', 'PX', '1000')).toBe('OK');
    expect(await cmd(server, 'PTTL', 'k')).toBe(1000);
    // Order matters: a lookup after the expiry deletes the key for good.
    clock.set(T0 + 999);
    expect(await cmd(server, 'GET', 'k')).toBe('v');
    expect(await cmd(server, 'PTTL', 'k')).toBe(1);
    clock.set(T0 + 1001);
    expect(await cmd(server, 'GET', 'k')).toBeNull();
    clock.set(T0 + 999);
    expect(await cmd(server, 'GET', 'k')).toBeNull();
    // Backwards jumps do extend live keys: a key set now expires by the file too.
    expect(await cmd(server, 'SET', 'k2', 'v', 'PX', '1000')).toBe('OK');
    clock.set(T0 + 500);
    expect(await cmd(server, 'PTTL', 'k2')).toBe(1499);
  });

  it('crash + restart keeps keys with aof-always and loses them without persistence', async () => {
    const durable = await startServer({ persistence: 'aof-always' });
    const volatile = await startServer({ persistence: 'none' });
    for (const server of [durable, volatile]) expect(await cmd(server, 'SET', 'k', 'kept')).toBe('OK');

    for (const server of [durable, volatile]) {
      const { port, dir, pid } = server;
      await server.crash();
      expect(server.running).toBe(false);
      expect(processExists(pid)).toBe(false);
      await server.restart();
      expect(server.port).toBe(port);
      expect(server.dir).toBe(dir);
      expect(server.pid).not.toBe(pid);
    }
    expect(await cmd(durable, 'GET', 'k')).toBe('kept');
    expect(await cmd(volatile, 'GET', 'k')).toBeNull();
  });

  it('pause() stops answers (connections still accepted), resume() brings them back', async () => {
    const server = await startServer({ persistence: 'none' });
    server.pause();
    expect(server.paused).toBe(true);
    await expect(server.command(['PING'], 200)).rejects.toBeInstanceOf(RespTimeoutError);
    server.resume();
    expect(await cmd(server, 'PING')).toBe('PONG');
  });

  it('stop() kills the process, removes the directory and is idempotent', async () => {
    const server = await startServer({ persistence: 'aof-always' });
    const { pid, dir } = server;
    expect(processExists(pid)).toBe(true);
    await server.stop();
    expect(processExists(pid)).toBe(false);
    expect(existsSync(dir)).toBe(false);
    await server.stop();
    await expect(server.restart()).rejects.toThrow(/stopped/);
  });

  // A restart leaves the port free for a moment; a port the kernel hands out could be taken then (a Sentinel answered the lock's script: ServerRefusedError).
  it('keeps its port across a restart: one below the kernel\'s ephemeral range, claimed until stop()', async () => {
    const range = restartPorts()!;
    const server = await startServer({ persistence: 'none' });
    const { port } = server;
    expect(port).toBeGreaterThanOrEqual(range.from);
    expect(port).toBeLessThanOrEqual(range.to);
    const claim = join(PORT_CLAIMS, String(port));
    expect(readFileSync(claim, 'utf8')).toBe(String(process.pid));
    await server.crash();
    expect(existsSync(claim)).toBe(true);
    await server.restart();
    expect(server.port).toBe(port);
    await server.stop();
    expect(existsSync(claim)).toBe(false);
  });

  it('leaves no claim behind: a process that exits holding claims drops them, and a dead process\'s claims go at the next claim', async () => {
    // A process that claims two ports and exits without releasing them (as when its servers are killed at exit): its exit drops them.
    const code = `const { claimPort } = await import(${JSON.stringify(pathToFileURL(resolve('conformance/env/processes.ts')).href)}); const a = await claimPort(); const b = await claimPort(); console.log(a.port + ' ' + b.port);`;
    const printed = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { encoding: 'utf8', timeout: 60_000 });
    const ports = printed.trim().split(' ').map(Number);
    expect(ports).toHaveLength(2);
    for (const port of ports) expect(existsSync(join(PORT_CLAIMS, String(port)))).toBe(false);
    // A claim whose process is gone (killed: no exit handler ran) is swept by the next claim.
    const dead = spawnSync('true').pid!;
    // The directory made as lockcheck makes it (1777), by a claim held meanwhile: a mkdir here left it 0755, which another user's runs would not trust.
    const holder = await claimPort();
    try {
      const stale = join(PORT_CLAIMS, holder.port === 20001 ? '20002' : '20001');
      writeFileSync(stale, String(dead));
      const claim = await claimPort();
      expect(existsSync(stale)).toBe(false);
      claim.release();
      expect(existsSync(join(PORT_CLAIMS, String(claim.port)))).toBe(false);
    } finally {
      holder.release();
    }
  });

  it('takes restart ports from 20000 to just below the ephemeral range, or none when that leaves too little room', () => {
    expect(restartPorts({ from: 32768 })).toEqual({ from: 20000, to: 32767 });
    expect(restartPorts({ from: 20500 })).toBeNull();
    expect(restartPorts(null)).toEqual({ from: 20000, to: 32767 });
  });

  it('stops a paused faked server too (SIGKILL, no clock needed)', async () => {
    const clock = newClock(T0);
    const server = await startServer({ persistence: 'aof-always', clockFile: clock });
    server.pause();
    const { pid, dir } = server;
    // libfaketime's per-process semaphore and segment: it would unlink them only at a normal exit.
    const shm = [`/dev/shm/faketime_shm_${pid}`, `/dev/shm/sem.faketime_sem_${pid}`];
    expect(shm.map(existsSync)).toEqual([true, true]);
    await server.stop();
    expect(processExists(pid)).toBe(false);
    expect(existsSync(dir)).toBe(false);
    expect(shm.map(existsSync)).toEqual([false, false]);
  });
});
