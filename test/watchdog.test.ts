import { spawn } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { processStartTime, sweepOrphanedRegistries } from '../conformance/env/watchdog.ts';
import { removeTree, removeTreeSync } from '../conformance/env/tempDir.ts';
import { alive, until } from './probes.ts';

interface Started {
  redis: { pid: number; dir: string };
  postgres: { pids: number[]; dir: string };
  clockDir: string;
}

// Paused too: a PostgreSQL backend is a process group of its own (it calls setsid), so the kill of the postmaster's group
// missed it, and a backend stopped by pause() never saw its postmaster die: it stayed, stopped, for ever.
it.each([
  ['running', []],
  ['paused (SIGSTOP)', ['--paused']],
] as const)('servers die with their parent: after SIGKILL of the process that started them (its servers %s), the watchdog kills them and removes their directories', async (_state, args) => {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('./fixtures/startServers.ts', import.meta.url)), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  let started: Started | undefined;
  try {
    started = await new Promise<Started>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`the child started no servers within 60 s\n${stderr}`)), 60_000);
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const line = out.split('\n').find((l) => l.startsWith('{'));
        if (line !== undefined && out.includes('\n')) {
          clearTimeout(timer);
          resolve(JSON.parse(line) as Started);
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`the child exited (${String(code)}) before starting its servers\n${stderr}`));
      });
    });
    const pids = [started.redis.pid, ...started.postgres.pids];
    // The servers are up: redis-server and the postmaster. Its children may come and go (a backend that served the readiness check ends), so only they must be gone afterwards.
    expect([started.redis.pid, started.postgres.pids[0]!].every(alive)).toBe(true);
    child.kill('SIGKILL');
    const gone = await until(() => !pids.some(alive) && !existsSync(started!.redis.dir) && !existsSync(started!.postgres.dir), 15_000);
    expect({ alive: pids.filter(alive), redisDir: existsSync(started.redis.dir), postgresDir: existsSync(started.postgres.dir) }).toEqual({ alive: [], redisDir: false, postgresDir: false });
    expect(gone).toBe(true);
  } finally {
    child.kill('SIGKILL');
    if (started !== undefined) {
      // If the watchdog failed, do not leave the servers running.
      for (const pid of [started.redis.pid, ...started.postgres.pids]) if (alive(pid)) process.kill(pid, 'SIGKILL');
      for (const dir of [started.redis.dir, started.postgres.dir, started.clockDir]) rmSync(dir, { recursive: true, force: true });
    }
  }
}, 90_000);

it('the watchdog removes what its registry names as absolute paths only, and junk in the registry keeps it from nothing', async () => {
  // A registry written with junk (null, a number, a relative 'x', an object) made the watchdog throw on its first
  // rmSync, so the registry and the good directories after it stayed in /tmp; a relative path would have been
  // removed from the watchdog's working directory.
  const base = mkdtempSync(join(tmpdir(), 'lockcheck-watchdog-test-'));
  const registry = join(base, 'registry');
  const cwd = join(base, 'cwd');
  const kept = join(base, 'kept');
  mkdirSync(registry);
  mkdirSync(join(cwd, 'x'), { recursive: true });
  mkdirSync(kept);
  writeFileSync(join(registry, '1-0.json'), JSON.stringify({ processes: [{ pid: 'x' }, { files: [null, 'x'] }, null], dirs: [null, 42, 'x', {}, kept] }));
  writeFileSync(join(registry, '1-1.json'), 'not json');
  writeFileSync(join(registry, '1-2.json'), JSON.stringify(null));
  // The "parent": a process of our own, ended below.
  const parent = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
  const watchdog = spawn(process.execPath, [fileURLToPath(new URL('../conformance/env/watchdog.mjs', import.meta.url)), String(parent.pid), processStartTime(parent.pid!)!, registry], { cwd, stdio: 'ignore' });
  try {
    const exited = new Promise<number | null>((resolve) => watchdog.once('exit', resolve));
    parent.kill('SIGKILL');
    const code = await Promise.race([exited, new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), 15_000))]);
    expect(code).toBe(0);
    expect({ registry: existsSync(registry), kept: existsSync(kept), relative: existsSync(join(cwd, 'x')) }).toEqual({ registry: false, kept: false, relative: true });
  } finally {
    parent.kill('SIGKILL');
    watchdog.kill('SIGKILL');
    rmSync(base, { recursive: true, force: true });
  }
}, 30_000);

it('a registry left by a process killed together with its watchdog is cleaned up by the next sweep: its server killed, its directories removed; a live process\'s registry stays', async () => {
  // What a tree kill (Stryker ending a test runner, a CI job's timeout) leaves: the registry, a server still up, its directory.
  const base = mkdtempSync(join(tmpdir(), 'lockcheck-watchdog-test-'));
  const dead = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
  const server = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore', detached: true });
  try {
    const deadStart = processStartTime(dead.pid!)!;
    const exited = new Promise((resolve) => dead.once('exit', resolve));
    dead.kill('SIGKILL');
    await exited;
    const orphan = join(base, `lockcheck-watch-${dead.pid!}-${deadStart}-abc`);
    const data = join(base, 'server-data');
    mkdirSync(orphan);
    mkdirSync(data);
    writeFileSync(join(orphan, `${dead.pid!}-0.json`), JSON.stringify({ processes: [{ pid: server.pid, start: processStartTime(server.pid!), group: true, files: [] }], dirs: [data] }));
    const live = join(base, `lockcheck-watch-${process.pid}-${processStartTime(process.pid)!}-def`);
    const other = join(base, 'lockcheck-watch-unnamed');
    mkdirSync(live);
    mkdirSync(other);
    expect(sweepOrphanedRegistries(base)).toBe(1);
    const cleaned = await until(() => !alive(server.pid!) && !existsSync(orphan) && !existsSync(data), 15_000);
    expect({ server: alive(server.pid!), orphan: existsSync(orphan), data: existsSync(data), live: existsSync(live), other: existsSync(other) }).toEqual({ server: false, orphan: false, data: false, live: true, other: true });
    expect(cleaned).toBe(true);
    expect(sweepOrphanedRegistries(base)).toBe(0);
  } finally {
    dead.kill('SIGKILL');
    server.kill('SIGKILL');
    rmSync(base, { recursive: true, force: true });
  }
}, 30_000);

it('a sweep hands over at most 8 orphans (a node process each); the next sweep takes the rest', async () => {
  const base = mkdtempSync(join(tmpdir(), 'lockcheck-watchdog-test-'));
  const dead = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
  try {
    const start = processStartTime(dead.pid!)!;
    const exited = new Promise((resolve) => dead.once('exit', resolve));
    dead.kill('SIGKILL');
    await exited;
    for (let i = 0; i < 10; i++) mkdirSync(join(base, `lockcheck-watch-${dead.pid!}-${start}-${i}`));
    expect(sweepOrphanedRegistries(base)).toBe(8);
    expect(await until(() => readdirSync(base).length === 2, 15_000)).toBe(true);
    expect(sweepOrphanedRegistries(base)).toBe(2);
    expect(await until(() => readdirSync(base).length === 0, 15_000)).toBe(true);
  } finally {
    dead.kill('SIGKILL');
    rmSync(base, { recursive: true, force: true });
  }
}, 45_000);

// The temp dir is shared: a registry, or an entry in one, that another user made named what this user's watchdog
// would kill and remove. Planted as /tmp/lockcheck-watch-<dead pid>-0-x/a.json {"dirs": ["/home/you"]}, the next
// run's sweep removed that directory (and, run as root, anything). Another user is played by chown, which needs root.
it.runIf(process.getuid?.() === 0)('a registry or registry entry another user made is never acted on: not swept, and a watchdog given it removes nothing', async () => {
  const base = mkdtempSync(join(tmpdir(), 'lockcheck-watchdog-test-'));
  const kept = join(base, 'kept');
  const keptToo = join(base, 'kept-too');
  mkdirSync(kept);
  mkdirSync(keptToo);
  const NOBODY = 65534;
  // Another user's registry, named as an orphan (pid 1 never has start time 0).
  const planted = join(base, 'lockcheck-watch-1-0-planted');
  mkdirSync(planted);
  writeFileSync(join(planted, 'a.json'), JSON.stringify({ processes: [], dirs: [kept] }));
  chownSync(join(planted, 'a.json'), NOBODY, NOBODY);
  chownSync(planted, NOBODY, NOBODY);
  // This user's registry holding another user's entry.
  const own = join(base, 'registry');
  mkdirSync(own);
  writeFileSync(join(own, 'b.json'), JSON.stringify({ processes: [], dirs: [keptToo] }));
  chownSync(join(own, 'b.json'), NOBODY, NOBODY);
  const parent = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
  const watchdogs = [planted, own].map((registry) => spawn(process.execPath, [fileURLToPath(new URL('../conformance/env/watchdog.mjs', import.meta.url)), String(parent.pid), processStartTime(parent.pid!)!, registry], { stdio: 'ignore' }));
  try {
    expect(sweepOrphanedRegistries(base)).toBe(0);
    const exited = watchdogs.map((w) => new Promise<number | null>((resolve) => w.once('exit', resolve)));
    parent.kill('SIGKILL');
    const codes = await Promise.race([Promise.all(exited), new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), 15_000))]);
    expect(codes).toEqual([0, 0]);
    expect({ kept: existsSync(kept), keptToo: existsSync(keptToo), planted: existsSync(join(planted, 'a.json')) }).toEqual({ kept: true, keptToo: true, planted: true });
  } finally {
    parent.kill('SIGKILL');
    for (const w of watchdogs) w.kill('SIGKILL');
    rmSync(base, { recursive: true, force: true });
  }
}, 30_000);

// Run as root, a PostgreSQL cluster's directory belongs to OS user postgres, who can swap a link to /etc in for one of
// its directories while root's recursive removal lists it: root then emptied /etc. Another user's tree is removed as
// that user, so it reaches only what they could remove: here a directory of root's inside theirs stays.
it.runIf(process.getuid?.() === 0)("another user's directory is removed as that user, by stop()'s removal and by the watchdog", async () => {
  // 0700: the directory around theirs is closed to them, as a guarded temp dir holding a cluster's is.
  const base = mkdtempSync(join(tmpdir(), 'lockcheck-watchdog-test-'));
  const NOBODY = 65534;
  const theirs = (name: string): { dir: string; rootOwned: string } => {
    const dir = join(base, name);
    mkdirSync(join(dir, 'data'), { recursive: true });
    writeFileSync(join(dir, 'data', 'f'), 'x');
    for (const path of [dir, join(dir, 'data'), join(dir, 'data', 'f')]) chownSync(path, NOBODY, NOBODY);
    // Root's, inside theirs: they cannot remove its file, so neither may the removal of their tree.
    const rootOwned = join(dir, 'root-owned');
    mkdirSync(rootOwned, { mode: 0o755 });
    writeFileSync(join(rootOwned, 'f'), 'x');
    return { dir, rootOwned };
  };
  const bySync = theirs('sync');
  const byAsync = theirs('async');
  const byWatchdog = theirs('watchdog');
  const registry = join(base, 'registry');
  mkdirSync(registry);
  writeFileSync(join(registry, 'a.json'), JSON.stringify({ processes: [], dirs: [byWatchdog.dir] }));
  const parent = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
  const watchdog = spawn(process.execPath, [fileURLToPath(new URL('../conformance/env/watchdog.mjs', import.meta.url)), String(parent.pid), processStartTime(parent.pid!)!, registry], { stdio: 'ignore' });
  try {
    removeTreeSync(bySync.dir);
    await removeTree(byAsync.dir);
    const exited = new Promise<number | null>((resolve) => watchdog.once('exit', resolve));
    parent.kill('SIGKILL');
    expect(await Promise.race([exited, new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), 15_000))])).toBe(0);
    for (const { dir, rootOwned } of [bySync, byAsync, byWatchdog]) {
      expect({ data: existsSync(join(dir, 'data')), rootOwned: existsSync(join(rootOwned, 'f')) }).toEqual({ data: false, rootOwned: true });
    }
    // Theirs with nothing of root's in it is removed whole, the directory too.
    const whole = theirs('whole');
    rmSync(whole.rootOwned, { recursive: true });
    await removeTree(whole.dir);
    expect(existsSync(whole.dir)).toBe(false);
    // This user's own tree is removed whole, as before.
    const own = join(base, 'own');
    mkdirSync(join(own, 'x'), { recursive: true });
    removeTreeSync(own);
    expect(existsSync(own)).toBe(false);
  } finally {
    parent.kill('SIGKILL');
    watchdog.kill('SIGKILL');
    rmSync(base, { recursive: true, force: true });
  }
}, 30_000);

// A PostgreSQL cluster's directory sits in one of root's (PostgresServer's wrapper, so postgres cannot rename it away
// and plant a link for root's paths to follow). Removing root's directory must not list theirs as root either: root's
// directories are walked, theirs inside handed to them (what root keeps in theirs stays, as above).
it.runIf(process.getuid?.() === 0)("a directory of root's holding another user's: theirs is removed as that user, by stop()'s removal and by the watchdog", async () => {
  const base = mkdtempSync(join(tmpdir(), 'lockcheck-watchdog-test-'));
  const NOBODY = 65534;
  const wrapped = (name: string): { wrapper: string; theirs: string; rootOwned: string } => {
    const wrapper = join(base, name);
    const theirs = join(wrapper, 'cluster');
    mkdirSync(join(theirs, 'data'), { recursive: true, mode: 0o711 });
    for (const path of [theirs, join(theirs, 'data')]) chownSync(path, NOBODY, NOBODY);
    const rootOwned = join(theirs, 'root-owned');
    mkdirSync(rootOwned, { mode: 0o755 });
    writeFileSync(join(rootOwned, 'f'), 'x');
    writeFileSync(join(wrapper, 'root-file'), 'x');
    // Root's, sticky and open to all (as a shared temp dir): no one else can move root's entries, so it is walked too.
    const sticky = join(wrapper, 'sticky');
    mkdirSync(join(sticky, 'sub'), { recursive: true });
    writeFileSync(join(sticky, 'sub', 'f'), 'x');
    chmodSync(sticky, 0o1777);
    return { wrapper, theirs, rootOwned };
  };
  const bySync = wrapped('sync');
  const byAsync = wrapped('async');
  const byWatchdog = wrapped('watchdog');
  const registry = join(base, 'registry');
  mkdirSync(registry);
  writeFileSync(join(registry, 'a.json'), JSON.stringify({ processes: [], dirs: [byWatchdog.wrapper] }));
  const parent = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
  const watchdog = spawn(process.execPath, [fileURLToPath(new URL('../conformance/env/watchdog.mjs', import.meta.url)), String(parent.pid), processStartTime(parent.pid!)!, registry], { stdio: 'ignore' });
  try {
    removeTreeSync(bySync.wrapper);
    await removeTree(byAsync.wrapper);
    const exited = new Promise<number | null>((resolve) => watchdog.once('exit', resolve));
    parent.kill('SIGKILL');
    expect(await Promise.race([exited, new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), 15_000))])).toBe(0);
    for (const { wrapper, theirs, rootOwned } of [bySync, byAsync, byWatchdog]) {
      expect({ rootFile: existsSync(join(wrapper, 'root-file')), sticky: existsSync(join(wrapper, 'sticky')), data: existsSync(join(theirs, 'data')), rootOwned: existsSync(join(rootOwned, 'f')) }).toEqual({ rootFile: false, sticky: false, data: false, rootOwned: true });
    }
    // With nothing of root's kept in theirs, all of it goes, root's directory too.
    const whole = wrapped('whole');
    rmSync(whole.rootOwned, { recursive: true });
    await removeTree(whole.wrapper);
    expect(existsSync(whole.wrapper)).toBe(false);
  } finally {
    parent.kill('SIGKILL');
    watchdog.kill('SIGKILL');
    rmSync(base, { recursive: true, force: true });
  }
}, 30_000);
