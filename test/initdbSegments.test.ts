/**
 * initdb's `postgres --boot` and `postgres --single` keep their dynamic shared
 * memory in POSIX segments (/dev/shm/PostgreSQL.<handle>), and one SIGKILLed
 * never unlinks them: a Ctrl-C during a cluster's set-up left about 1 MiB in
 * /dev/shm for good (found by an audit). Each way a set-up ends early must
 * remove exactly those: stop() (stopAll, a command's interrupt), the exit
 * handlers (a SIGTERM to the process), the watchdog (a SIGKILLed process),
 * and the CLI on Ctrl-C.
 *
 * Deterministic: the test waits (polling /proc, no sleep) until one of
 * initdb's postgres processes has a segment mapped, and freezes it (SIGSTOP)
 * there: it can then neither finish nor clean up by itself, so what removes
 * its segments is the code under test. Only the segments that process had
 * are looked at (a concurrent test's are none of ours).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { PostgresServer, StoppedWhileStarting, stopAllPostgresServers } from '../conformance/env/postgresServer.ts';
import { alive, until } from './probes.ts';

/** The live descendants of `root` (through each process's parent in /proc). */
function descendantsOf(root: number): number[] {
  const childrenOf = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] === 'Z' || fields[0] === 'X') continue;
      const ppid = Number(fields[1]);
      childrenOf.set(ppid, [...(childrenOf.get(ppid) ?? []), Number(entry)]);
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  for (const queue = [root]; queue.length > 0; ) {
    for (const child of childrenOf.get(queue.shift()!) ?? []) {
      out.push(child);
      queue.push(child);
    }
  }
  return out;
}

function commandLine(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  } catch {
    return [];
  }
}

/** The PostgreSQL segments `pid` has mapped. */
function segmentsMappedBy(pid: number): string[] {
  try {
    const paths = readFileSync(`/proc/${pid}/maps`, 'utf8').split('\n').map((line) => /(\/dev\/shm\/PostgreSQL\.\d+)$/.exec(line)?.[1]);
    return [...new Set(paths.filter((p): p is string => p !== undefined))];
  } catch {
    return [];
  }
}

interface Frozen {
  /** initdb's postgres (--boot or --single), stopped. */
  readonly pid: number;
  readonly mode: string;
  /** Its segments, as it was stopped. */
  readonly segments: readonly string[];
}

/**
 * Waits (a turn of the event loop per look, at most 60 s) until a `postgres
 * --boot` or `--single` under `root` has a PostgreSQL segment mapped, and
 * SIGSTOPs it there.
 */
async function freezeInitdbPostgres(root: number): Promise<Frozen> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    for (const pid of descendantsOf(root)) {
      const args = commandLine(pid);
      const mode = args[1];
      if (!args[0]?.endsWith('/postgres') || (mode !== '--boot' && mode !== '--single') || segmentsMappedBy(pid).length === 0) continue;
      process.kill(pid, 'SIGSTOP');
      const segments = segmentsMappedBy(pid);
      if (segments.length > 0) return { pid, mode, segments };
      process.kill(pid, 'SIGCONT');
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
  throw new Error('no postgres --boot/--single of initdb with a mapped segment was seen within 60 s');
}

/** After a failed expectation: nothing of the frozen process is left behind by the test itself. */
function cleanUp(frozen: Frozen | undefined, child?: ChildProcess): void {
  child?.kill('SIGKILL');
  if (frozen === undefined) return;
  if (alive(frozen.pid)) process.kill(frozen.pid, 'SIGKILL');
  for (const path of frozen.segments) rmSync(path, { force: true });
}

function spawnFixture(): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('./fixtures/startPostgresOnly.ts', import.meta.url))], { stdio: 'ignore' });
}

function exitOf(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve({ code: child.exitCode, signal: child.signalCode });
    else child.once('exit', (code, signal) => resolve({ code, signal }));
  });
}

describe('a cluster set-up ended during initdb leaves no PostgreSQL segment in /dev/shm', () => {
  it('stop() (stopAllPostgresServers) during initdb: its postgres is killed, the segments it had are removed, start() rejects StoppedWhileStarting', async () => {
    let frozen: Frozen | undefined;
    const settled = PostgresServer.start({ parentDir: '/dev/shm' }).then(
      async (server) => {
        await server.stop();
        return null;
      },
      (error: unknown) => error,
    );
    try {
      frozen = await freezeInitdbPostgres(process.pid);
      await stopAllPostgresServers();
      expect(await settled).toBeInstanceOf(StoppedWhileStarting);
      expect({ alive: alive(frozen.pid), left: frozen.segments.filter((path) => existsSync(path)) }, `postgres ${frozen.mode}`).toEqual({ alive: false, left: [] });
    } finally {
      await stopAllPostgresServers();
      cleanUp(frozen);
    }
  }, 90_000);

  it('stop() during initdb, its postgres not held: initdb is interrupted (not SIGKILLed) and nothing is left', async () => {
    let seen: { pid: number; segments: string[] } | undefined;
    const settled = PostgresServer.start({ parentDir: '/dev/shm' }).then(
      async (server) => {
        await server.stop();
        return null;
      },
      (error: unknown) => error,
    );
    try {
      const found = await until(() => {
        const pid = descendantsOf(process.pid).find((p) => ['--boot', '--single'].includes(commandLine(p)[1] ?? '') && segmentsMappedBy(p).length > 0);
        if (pid !== undefined) seen = { pid, segments: segmentsMappedBy(pid) };
        return seen !== undefined;
      }, 60_000);
      expect(found, 'initdb postgres with a segment seen').toBe(true);
      await stopAllPostgresServers();
      expect(await settled).toBeInstanceOf(StoppedWhileStarting);
      expect({ alive: alive(seen!.pid), left: seen!.segments.filter((path) => existsSync(path)) }).toEqual({ alive: false, left: [] });
    } finally {
      await stopAllPostgresServers();
      if (seen !== undefined) cleanUp({ pid: seen.pid, mode: '', segments: seen.segments });
    }
  }, 90_000);

  it('SIGTERM to the process during initdb (its exit handlers, synchronous): the segments are removed', async () => {
    const child = spawnFixture();
    let frozen: Frozen | undefined;
    try {
      frozen = await freezeInitdbPostgres(child.pid!);
      const exited = exitOf(child);
      child.kill('SIGTERM');
      expect((await exited).signal).toBe('SIGTERM');
      expect({ alive: alive(frozen.pid), left: frozen.segments.filter((path) => existsSync(path)) }, `postgres ${frozen.mode}`).toEqual({ alive: false, left: [] });
    } finally {
      cleanUp(frozen, child);
    }
  }, 90_000);

  it('SIGKILL of the process during initdb (the watchdog): the segments are removed', async () => {
    const child = spawnFixture();
    let frozen: Frozen | undefined;
    try {
      frozen = await freezeInitdbPostgres(child.pid!);
      const exited = exitOf(child);
      child.kill('SIGKILL');
      await exited;
      const pid = frozen.pid;
      const segments = frozen.segments;
      // The watchdog looks every 100 ms: polled until it has acted, bounded.
      await until(() => !alive(pid) && segments.every((path) => !existsSync(path)), 15_000);
      expect({ alive: alive(pid), left: segments.filter((path) => existsSync(path)) }, `postgres ${frozen.mode}`).toEqual({ alive: false, left: [] });
    } finally {
      cleanUp(frozen, child);
    }
  }, 90_000);

  it('Ctrl-C (SIGINT) to `lockcheck run` on pg-session while initdb runs: exit 130, the segments are removed', async () => {
    const child = spawn(process.execPath, ['cli/lockcheck.mjs', 'run', '--backend', 'pg-session/unfenced', '--runs', '500'], { stdio: 'ignore' });
    let frozen: Frozen | undefined;
    try {
      frozen = await freezeInitdbPostgres(child.pid!);
      const exited = exitOf(child);
      child.kill('SIGINT');
      expect(await exited).toEqual({ code: null, signal: 'SIGINT' });
      expect({ alive: alive(frozen.pid), left: frozen.segments.filter((path) => existsSync(path)) }, `postgres ${frozen.mode}`).toEqual({ alive: false, left: [] });
    } finally {
      cleanUp(frozen, child);
    }
  }, 120_000);
});
