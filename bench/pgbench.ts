/** pgbench against a benchmark's own PostgreSQL, for the scripts that compare with it. */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { PostgresServer } from '../conformance/env/postgresServer.ts';

/** One pgbench run's figures. */
export interface PgbenchRun {
  /** Transactions per second, without the initial connection time. */
  readonly tps: number;
  /** Transactions actually processed. */
  readonly processed: number;
}

/**
 * Runs `script` under pgbench -M prepared for `seconds` (-T) with `clients` clients (-c; -j `threads` when
 * given), the server's password in the environment and no other PG* variable but `pgOptions` (PGOPTIONS) when
 * given; killed 30 s past its time. Rejects when it exits non-zero, with the end of its output.
 */
export async function runPgbench(server: PostgresServer, o: { readonly script: string; readonly seconds: number; readonly clients: number; readonly threads?: number; readonly pgOptions?: string }): Promise<PgbenchRun> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('PG')) env[k] = v;
  env.PGPASSWORD = server.password;
  if (o.pgOptions !== undefined) env.PGOPTIONS = o.pgOptions;
  const threads = o.threads === undefined ? [] : ['-j', String(o.threads)];
  const args = ['-h', server.host, '-p', String(server.port), '-U', server.user, '-n', '-M', 'prepared', '-T', String(o.seconds), '-c', String(o.clients), ...threads, '-f', o.script, server.database];
  const output = await new Promise<string>((resolve, reject) => {
    const child = spawn(join(server.binDir, 'pgbench'), args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout.on('data', (c: Buffer) => (text += c.toString()));
    child.stderr.on('data', (c: Buffer) => (text += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), o.seconds * 1000 + 30_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(text);
      else reject(new Error(`pgbench exited with ${String(code)}: ${text.slice(-1000)}`));
    });
  });
  const tps = Number(/tps = ([\d.]+) \(without initial connection time\)/.exec(output)?.[1]);
  const processed = Number(/number of transactions actually processed: (\d+)/.exec(output)?.[1]);
  return { tps, processed };
}
