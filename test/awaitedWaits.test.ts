import { spawn } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * A wait that a caller awaits holds the process open on the system clock:
 * a retry pause between denied attempts, and the public sleep and
 * withTimeout. Their timers were unref'd like a lease's deadline, so when a
 * server was unreachable (no socket left open) the process exited with code
 * 0 in the middle of an acquire, which never settled. Each case runs in a
 * child process with nothing else to keep it open, and prints when its
 * promise settles.
 */
const root = (path: string): string => pathToFileURL(`${process.cwd()}/${path}`).href;

const cases: ReadonlyArray<readonly [string, string, RegExp]> = [
  ['sleep', `import { sleep, systemClock } from '${root('impl/index.ts')}';
    sleep(systemClock, 150).then(() => console.log('settled: slept'));`, /^settled: slept$/m],
  ['withTimeout of a promise that never settles', `import { withTimeout, systemClock } from '${root('impl/index.ts')}';
    withTimeout(systemClock, 150, 'work', new Promise(() => {})).catch((e) => console.log('settled: ' + e.name));`, /^settled: TimeoutError$/m],
  ['a PostgreSQL session lock retrying against an unreachable server', `import { PostgresSessionLock } from '${root('impl/postgres/index.ts')}';
    const lock = new PostgresSessionLock({ connection: { host: '127.0.0.1', port: 1, user: 'u', password: 'p', database: 'd' } });
    lock.acquire('r', { retries: 2, retryDelayMs: 150 }).then((r) => console.log('settled: ' + JSON.stringify(r)));`, /^settled: \{"kind":"denied","reason":"no-quorum"\}$/m],
  ['a Redis lock retrying against an unreachable node', `import Redis from 'ioredis';
    import { createRedisLock } from '${root('impl/redis/index.ts')}';
    const redis = new Redis({ host: '127.0.0.1', port: 1, lazyConnect: true, enableOfflineQueue: false, retryStrategy: () => null });
    redis.on('error', () => undefined);
    createRedisLock({ nodes: [redis] }).acquire('r', { ttlMs: 1000, retries: 2, retryDelayMs: 150 }).then((r) => console.log('settled: ' + JSON.stringify(r)));`, /^settled: \{"kind":"denied","reason":"no-quorum"\}$/m],
];

function run(code: string): Promise<{ status: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, out }));
  });
}

describe('a wait a caller awaits holds the process open until it settles', () => {
  it.each(cases)('%s', async (_name, code, settled) => {
    const { status, out } = await run(code);
    expect(out).toMatch(settled);
    expect(status).toBe(0);
  });
});
