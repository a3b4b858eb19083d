import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { testTempDir } from './tempDirs.ts';
import { withPostgres } from './postgresFixture.ts';
import { alive, until } from './probes.ts';

/**
 * A second Ctrl-C while the first one's clean-up waits (on a user's server
 * that does not answer: up to INTERRUPT_CLEANUP_MS) used to end the process
 * at once by the signal's default action: no synchronous clean-up ran, so
 * its temp dirs (lockcheck-clocks-*) stayed, and child processes it would
 * have SIGKILLed (a paused client, a server the watchdog does not know)
 * lived on. The child here registers a temp dir and a child process the way
 * the environment does (atExit), and an interrupt clean-up that never
 * settles, which stands for the user's server that does not answer.
 */
const root = testTempDir('lockcheck-signal-test-');

const processes = JSON.stringify(pathToFileURL(resolve('conformance/env/processes.ts')).href);

/** The child: prints `ready <dir> <pid of its own child>` once set up, and `stopping` at the first signal. */
function childCode(dir: string): string {
  return `const { atExit, onInterrupt } = await import(${processes}); const { spawn } = await import('node:child_process'); const { mkdirSync, rmSync } = await import('node:fs');
const dir = ${JSON.stringify(dir)}; mkdirSync(dir);
atExit(() => rmSync(dir, { recursive: true, force: true }));
const sleeper = spawn('sleep', ['600'], { stdio: 'ignore' });
atExit(() => sleeper.kill('SIGKILL'));
onInterrupt(() => new Promise(() => undefined));
process.once('SIGINT', () => console.log('stopping'));
console.log('ready ' + sleeper.pid);
setInterval(() => undefined, 1_000);`;
}


describe('a second signal while the first one\'s clean-up waits', () => {
  it('still kills the children and removes the temp dirs, then ends the process by the signal at once', async () => {
    const dir = join(root, 'clocks');
    // Bounded: the async clean-up never settles, so only INTERRUPT_CLEANUP_MS (5 s) or the second signal ends it; 60 s is the test's own bound.
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', childCode(dir)], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
    let stdout = '';
    let stderr = '';
    let sleeper = 0;
    const sent: string[] = [];
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
      const ready = /ready (\d+)\n/.exec(stdout);
      // The first signal once it is set up; the second once the first's handling has begun (its clean-up now waits).
      if (ready !== null && sent.length === 0) {
        sleeper = Number(ready[1]);
        sent.push('first');
        child.kill('SIGINT');
      }
      if (stdout.includes('stopping\n') && sent.length === 1) {
        sent.push('second');
        child.kill('SIGINT');
      }
    });
    const signal = await new Promise<NodeJS.Signals | null>((done) => child.on('close', (_code, s) => done(s)));
    try {
      expect(sent, stderr).toEqual(['first', 'second']);
      expect(signal, stderr).toBe('SIGINT');
      expect(existsSync(dir)).toBe(false);
      expect(alive(sleeper)).toBe(false);
      expect(stderr).toMatch(/SIGINT again: ending now/);
    } finally {
      if (sleeper > 0 && alive(sleeper)) process.kill(sleeper, 'SIGKILL');
    }
  }, 90_000);
});

/** What lockcheck made in `tmp` (tsx keeps its cache there too). */
function lockcheckEntries(tmp: string): string[] {
  return readdirSync(tmp).filter((name) => name.startsWith('lockcheck'));
}

/** Processes whose command line names `path` (the servers lockcheck started keep their data under it). */
function processesUnder(path: string): number[] {
  return readdirSync('/proc').flatMap((name) => {
    if (!/^\d+$/.test(name)) return [];
    try {
      return readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(path) && alive(Number(name)) ? [Number(name)] : [];
    } catch {
      return [];
    }
  });
}


describe('lockcheck matrix: Ctrl-C twice', () => {
  // The user's PostgreSQL, paused once the pg cell runs: the first Ctrl-C's clean-up (end the run's sessions, delete its rows) then waits on it, up to 5 s.
  const db = withPostgres();

  it('while the first one waits on a server of the user\'s: the servers it started and its temp dirs (clocks, shim, claims) are gone, and it ends by SIGINT', async () => {
    // Its own temp dir: everything the CLI makes there is its alone to look at on a shared machine.
    const tmp = join(root, 'cli-tmp');
    mkdirSync(tmp);
    const out = join(root, 'cli-out');
    // redis-single on servers it starts (its clock files in tmp), then pg-session on the user's server, which is then paused.
    const args = ['matrix', '--pg', db.server.url, '--backend', 'redis-single/unfenced,pg-session/strict', '--faults', 'client-pause', '--runs', '20', '--stress-seconds', '0', '--out', out];
    const child = spawn(process.execPath, ['cli/lockcheck.mjs', ...args], { stdio: ['ignore', 'ignore', 'pipe'], timeout: 200_000, env: { ...process.env, TMPDIR: tmp } });
    let stderr = '';
    const sent: string[] = [];
    let clocksMade = false;
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
      if (sent.length === 0 && stderr.includes('pg-session/strict x client-pause: run ')) {
        sent.push('first');
        clocksMade = lockcheckEntries(tmp).some((n) => n.startsWith('lockcheck-clocks-'));
        db.server.pause();
        child.kill('SIGINT');
      }
      if (sent.length === 1 && stderr.includes('lockcheck: SIGINT: stopping')) {
        sent.push('second');
        child.kill('SIGINT');
      }
    });
    try {
      const signal = await new Promise<NodeJS.Signals | null>((done) => child.on('close', (_code, s) => done(s)));
      expect(sent, stderr).toEqual(['first', 'second']);
      // What a second signal used to leave: the redis cell's clock files, there while the pg cell ran.
      expect(clocksMade).toBe(true);
      expect(signal, stderr).toBe('SIGINT');
      // The watchdog removes its own registry once it sees the CLI gone (it polls every 100 ms); nothing else may be left.
      expect(await until(() => lockcheckEntries(tmp).length === 0, 10_000), lockcheckEntries(tmp).join(', ')).toBe(true);
      expect(await until(() => processesUnder(tmp).length === 0, 10_000)).toBe(true);
      expect(stderr).toMatch(/SIGINT again: ending now/);
    } finally {
      child.kill('SIGKILL');
      if (sent.length > 0) db.server.resume();
      for (const pid of processesUnder(tmp)) process.kill(pid, 'SIGKILL');
    }
  }, 240_000);
});
