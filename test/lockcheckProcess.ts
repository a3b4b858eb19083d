import { spawn, spawnSync } from 'node:child_process';

/** What one `lockcheck` process did: its exit code (null when killed at its bound) and its output. */
export interface LockcheckProcess {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * The lockcheck command as a user runs it, as a child process, killed after `timeoutMs` (code null then).
 * The default stays under vitest's 120 s per test, and is generous: a start of the CLI (TypeScript loaded
 * through tsx) takes tens of seconds on a loaded 2-core machine.
 */
export function lockcheckSync(args: readonly string[], options: { readonly input?: string; readonly timeoutMs?: number } = {}): LockcheckProcess {
  const r = spawnSync(process.execPath, ['cli/lockcheck.mjs', ...args], { encoding: 'utf8', timeout: options.timeoutMs ?? 100_000, ...(options.input === undefined ? {} : { input: options.input }) });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The same without blocking, for several side by side (each start loads the TypeScript CLI). */
export function lockcheckAsync(args: readonly string[], timeoutMs = 100_000): Promise<LockcheckProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['cli/lockcheck.mjs', ...args], { stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
