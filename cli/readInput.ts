import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { match } from 'ts-pattern';
import { decodeUtf8Text } from '../conformance/utf8Text.ts';
import { UsageError } from './usage.ts';

/**
 * Reading a file the user names (a history, a counterexample): bounded, so
 * that a huge file, /dev/zero or a FIFO nobody writes to is refused with a
 * usage error (exit 2) instead of exhausting memory or hanging the CLI.
 */

/** A file the CLI refused to read: too large, not a regular file, or unreadable. */
export class InputFileError extends UsageError {
  constructor(
    readonly file: string,
    problem: string,
  ) {
    super(`cannot read ${file}: ${problem}`);
  }
}

/** How much of a file or stream one read asks for. */
const CHUNK_BYTES = 1 << 20;

/** Reads `fd` to its end, refusing more than `maxBytes`. */
function readAll(fd: number, file: string, maxBytes: number, what: string): Buffer {
  const chunks: Buffer[] = [];
  let total = 0;
  for (;;) {
    const chunk = Buffer.allocUnsafe(Math.min(CHUNK_BYTES, maxBytes + 1 - total));
    let n: number;
    try {
      n = readSync(fd, chunk, 0, chunk.length, null);
    } catch (e) {
      // A non-blocking stdin (some terminals) has nothing yet: wait for it, briefly, without spinning.
      if ((e as NodeJS.ErrnoException).code === 'EAGAIN') {
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
        continue;
      }
      throw new InputFileError(file, (e as Error).message);
    }
    if (n === 0) break;
    chunks.push(chunk.subarray(0, n));
    total += n;
    if (total > maxBytes) throw new InputFileError(file, `${what} larger than ${maxBytes} bytes is refused`);
  }
  return Buffer.concat(chunks, total);
}

/**
 * The bytes of `file` (`-`: stdin), at most `maxBytes`. A path must name a
 * regular file: it is opened without blocking and checked before any read,
 * so a FIFO, a device or a directory is refused rather than read.
 */
export function readInputBytes(file: string, maxBytes: number, what: string): Buffer {
  if (file === '-') return readAll(0, 'stdin', maxBytes, what);
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    throw new InputFileError(file, (e as Error).message);
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw new InputFileError(file, `${what} must be a regular file`);
    if (stat.size > maxBytes) throw new InputFileError(file, `${what} larger than ${maxBytes} bytes is refused (${stat.size} bytes)`);
    return readAll(fd, file, maxBytes, what);
  } finally {
    closeSync(fd);
  }
}

/**
 * readInputBytes as UTF-8 text, as `check` reads a history: a leading
 * byte-order mark dropped (Notepad writes one; JSON.parse failed on it as
 * "not JSON"), UTF-16 (PowerShell's `>`) and bytes that are not UTF-8 (a
 * binary file) named as such.
 */
export function readInputText(file: string, maxBytes: number, what: string): string {
  const bytes = readInputBytes(file, maxBytes, what);
  const name = file === '-' ? 'stdin' : file;
  return match(decodeUtf8Text(bytes))
    .with({ kind: 'text' }, ({ text }) => text)
    .with({ kind: 'utf-16' }, () => {
      throw new InputFileError(name, `${what} must be UTF-8 text; this is UTF-16 (it starts with a UTF-16 byte-order mark; PowerShell: Out-File -Encoding utf8)`);
    })
    .with({ kind: 'not-utf-8' }, ({ line }) => {
      throw new InputFileError(name, `${what} must be UTF-8 text; this is not (a binary file?): line ${line} has bytes that are not UTF-8`);
    })
    .exhaustive();
}
