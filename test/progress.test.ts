import { afterEach, describe, expect, it, vi } from 'vitest';
import { progressDone } from '../cli/progress.ts';

// What a matrix cell's closing line writes to stderr: in a log (CI, a file) the line alone, on a
// terminal the status line blanked across its whole width first.
describe('progressDone', () => {
  const tty = Object.getOwnPropertyDescriptor(process.stderr, 'isTTY');
  const columns = Object.getOwnPropertyDescriptor(process.stderr, 'columns');
  afterEach(() => {
    vi.restoreAllMocks();
    if (tty === undefined) delete (process.stderr as { isTTY?: boolean }).isTTY;
    else Object.defineProperty(process.stderr, 'isTTY', tty);
    if (columns === undefined) delete (process.stderr as { columns?: number }).columns;
    else Object.defineProperty(process.stderr, 'columns', columns);
  });

  function written(isTTY: boolean, width?: number): string {
    Object.defineProperty(process.stderr, 'isTTY', { value: isTTY, configurable: true, writable: true });
    Object.defineProperty(process.stderr, 'columns', { value: width, configurable: true, writable: true });
    const out: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => (out.push(String(chunk)), true));
    progressDone('redis-single/unfenced x client-pause: 5 runs; breaks STORE-1');
    return out.join('');
  }

  it('writes only the line when stderr is not a terminal (no carriage return or padding in a log)', () => {
    expect(written(false)).toBe('redis-single/unfenced x client-pause: 5 runs; breaks STORE-1\n');
  });

  it('blanks the whole status line on a terminal, however wide', () => {
    const out = written(true, 200);
    expect(out).toBe(`\r${' '.repeat(199)}\rredis-single/unfenced x client-pause: 5 runs; breaks STORE-1\n`);
  });
});
