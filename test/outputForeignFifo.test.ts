import { spawnSync } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';

/**
 * A FIFO another user made at an output path (in a shared directory) is
 * refused: opened for writing it waited for a reader that user controls, so
 * lockcheck hung at the end of its run, after all the work. Run in a child
 * process: without the refusal the open blocks its thread, which no test
 * timeout can interrupt. The user's own FIFO and the system's devices are
 * written through as before.
 */
const script = (path: string): string =>
  `import('./conformance/env/outputFile.ts').then(({ writeRedacted }) => { try { writeRedacted(${JSON.stringify(path)}, 'x', 'the report'); console.log('written'); } catch (e) { console.log(e.problem + ': ' + e.message); } });`;

it.skipIf(process.getuid?.() !== 0)("writeRedacted refuses a FIFO another user made at the path instead of waiting for that user's reader", () => {
  const dir = mkdtempSync(join(tmpdir(), 'lockcheck-fifo-'));
  try {
    const fifo = join(dir, 'history.html');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    chownSync(fifo, 65534, 65534);
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script(fifo)], { encoding: 'utf8', timeout: 20_000 });
    expect(r.signal, 'the write waited on the FIFO').toBeNull();
    expect(r.stdout).toMatch(/^foreign-file: refusing to write the report .*a FIFO made by another user/);
    // /dev/null is root's: written through as before.
    const ok = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script('/dev/null')], { encoding: 'utf8', timeout: 20_000 });
    expect(ok.stdout.trim()).toBe('written');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);
