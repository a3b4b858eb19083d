import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// node-zookeeper-client's close() is a request it reconnects to send: a client whose connect never
// finished went on reconnecting for ever and kept `lockcheck run` alive after a ZooKeeper run. The
// child process must end by itself once its calls timed out and the node is closed.
describe('a ZooKeeper client whose connect never finishes is ended', () => {
  it('leaves nothing that keeps the process alive', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('./fixtures/zookeeperUnreachable.ts', import.meta.url))], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    let timer: NodeJS.Timeout | undefined;
    const exited = await Promise.race([
      new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code))),
      new Promise<'still running'>((resolve) => (timer = setTimeout(() => resolve('still running'), 30_000))),
    ]);
    clearTimeout(timer);
    if (exited === 'still running') child.kill('SIGKILL');
    expect({ exited, err }).toEqual({ exited: 0, err: '' });
    expect(JSON.parse(out.trim())).toEqual({ done: true, rejected: [true, true] });
  }, 60_000);
});
