import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { until } from './probes.ts';
import { testTempDir } from './tempDirs.ts';

/**
 * A process SIGKILLed (the OOM killer, a CI job's timeout) runs no handler:
 * what it made is left to the watchdog (conformance/env/watchdog.ts). The
 * servers' directories always were; the clock files' directories
 * (lockcheck-clocks-*, and the stress and replicated ones, and faketime's
 * shim dir) were removed only by an exit handler, so they stayed for good.
 * The child runs with TMPDIR a directory of this test's own.
 */
const root = testTempDir('lockcheck-killed-test-');

const backend = JSON.stringify(pathToFileURL(resolve('conformance/env/redisBackend.ts')).href);

/** What lockcheck made in `tmp`, but the port claims: a killed process's claim is swept by the next claim (docs/ci.md), not by the watchdog. */
function lockcheckEntries(tmp: string): string[] {
  return readdirSync(tmp).filter((name) => name.startsWith('lockcheck') && name !== 'lockcheck-ports');
}

describe('a process SIGKILLed with a Redis cluster on faked clocks', () => {
  it('leaves nothing in the temp dir once the watchdog has seen it gone: the clock files\' directory goes too', async () => {
    const tmp = join(root, 'tmp');
    mkdirSync(tmp);
    const code = `const { startRedisCluster } = await import(${backend}); await startRedisCluster({ nodes: 1, persistence: 'none' }); console.log('ready'); setInterval(() => undefined, 1_000);`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 90_000, env: { ...process.env, TMPDIR: tmp } });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    let made: string[] = [];
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      if (d.includes('ready') && made.length === 0) {
        made = lockcheckEntries(tmp);
        child.kill('SIGKILL');
      }
    });
    const signal = await new Promise<NodeJS.Signals | null>((done) => child.on('close', (_code, s) => done(s)));
    expect(signal, stderr).toBe('SIGKILL');
    expect(made.some((n) => n.startsWith('lockcheck-clocks-')), made.join(', ')).toBe(true);
    expect(await until(() => lockcheckEntries(tmp).length === 0, 10_000), lockcheckEntries(tmp).join(', ')).toBe(true);
  }, 120_000);
});

describe('a test run SIGKILLed while a test holds a testTempDir', () => {
  it('leaves no directory: the watchdog removes it (a killed mutation run used to leave its /dev/shm dirs)', async () => {
    const parent = join(root, 'held');
    mkdirSync(parent);
    // Its own process group, so that the vitest process and its fork die together, as under Stryker or a job's timeout.
    const child = spawn(process.execPath, ['node_modules/vitest/vitest.mjs', 'run', '--config', 'test/fixtures/killedTempDir/vitest.config.ts'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      timeout: 150_000,
      env: { ...process.env, LOCKCHECK_FIXTURE_PARENT: parent },
    });
    let output = '';
    const held = new Promise<boolean>((done) => {
      const see = (d: string): void => {
        output += d;
        if (output.includes('holding ')) done(true);
      };
      child.stdout.setEncoding('utf8').on('data', see);
      child.stderr.setEncoding('utf8').on('data', see);
      child.on('close', () => done(false));
    });
    expect(await held, output).toBe(true);
    const made = readdirSync(parent);
    process.kill(-child.pid!, 'SIGKILL');
    await new Promise((done) => child.on('close', done));
    expect(made.filter((n) => n.startsWith('lockcheck-held-fixture-')), output).toHaveLength(1);
    expect(await until(() => readdirSync(parent).length === 0, 10_000), readdirSync(parent).join(', ')).toBe(true);
  }, 180_000);
});
