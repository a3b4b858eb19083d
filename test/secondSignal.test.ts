import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { processStartTime } from '../conformance/env/watchdog.ts';

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
const root = mkdtempSync(join(tmpdir(), 'lockcheck-signal-test-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

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

/** Still running: neither gone nor a zombie (SIGKILLed, its parent gone: it waits there for init to reap it). */
function alive(pid: number): boolean {
  return processStartTime(pid) !== null;
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
        expect(existsSync(dir)).toBe(true);
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
