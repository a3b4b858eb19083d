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
