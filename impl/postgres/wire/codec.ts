import { InvalidInputError } from '../../../model/errors.ts';
import { WireProtocolError } from './errors.ts';

/**
 * Frontend messages of protocol 3.0 as bytes, and the framing of backend
 * messages. Every message a call sends is encoded into one Buffer sized
 * before it is written (no intermediate arrays, no growth); replies are read
 * in place from the socket's read buffer.
 */

/** A parameter as sent: text format, or SQL NULL. */
export type Param = string | null;

const PROTOCOL_3_0 = 196608;

/** StartupMessage: protocol 3.0 and the parameters (user, database, statement_timeout, ...). */
export function startupMessage(params: Readonly<Record<string, string>>): Buffer {
  let size = 4 + 4 + 1;
  for (const [k, v] of Object.entries(params)) size += Buffer.byteLength(k) + 1 + Buffer.byteLength(v) + 1;
  const b = Buffer.allocUnsafe(size);
  b.writeInt32BE(size, 0);
  b.writeInt32BE(PROTOCOL_3_0, 4);
  let o = 8;
  for (const [k, v] of Object.entries(params)) {
    o = cstring(b, o, k);
    o = cstring(b, o, v);
  }
  b[o] = 0;
  return b;
}

/** PasswordMessage (cleartext or md5) / SASLResponse: 'p' and the body. */
export function passwordMessage(body: string | Buffer, cString: boolean): Buffer {
  const data = typeof body === 'string' ? Buffer.from(body) : body;
  const size = 4 + data.length + (cString ? 1 : 0);
  const b = Buffer.allocUnsafe(1 + size);
  b[0] = 0x70;
  b.writeInt32BE(size, 1);
  data.copy(b, 5);
  if (cString) b[5 + data.length] = 0;
  return b;
}

/** SASLInitialResponse: 'p', the mechanism, the client-first-message. */
export function saslInitialResponse(mechanism: string, first: string): Buffer {
  const data = Buffer.from(first);
  const size = 4 + Buffer.byteLength(mechanism) + 1 + 4 + data.length;
  const b = Buffer.allocUnsafe(1 + size);
  b[0] = 0x70;
  b.writeInt32BE(size, 1);
  let o = cstring(b, 5, mechanism);
  b.writeInt32BE(data.length, o);
  data.copy(b, o + 4);
  return b;
}

/** Query (simple protocol): for the schema, once per connection. */
export function queryMessage(sql: string): Buffer {
  const size = 4 + Buffer.byteLength(sql) + 1;
  const b = Buffer.allocUnsafe(1 + size);
  b[0] = 0x51;
  b.writeInt32BE(size, 1);
  cstring(b, 5, sql);
  return b;
}

/** Parse of each named statement (parameter types left to the server), then one Sync. */
export function parseMessages(statements: ReadonlyArray<{ readonly name: string; readonly text: string }>): Buffer {
  let size = 5;
  for (const s of statements) size += 1 + 4 + Buffer.byteLength(s.name) + 1 + Buffer.byteLength(s.text) + 1 + 2;
  const b = Buffer.allocUnsafe(size);
  let o = 0;
  for (const s of statements) {
    const start = o;
    b[o] = 0x50;
    o = cstring(b, o + 5, s.name);
    o = cstring(b, o, s.text);
    b.writeInt16BE(0, o);
    o += 2;
    b.writeInt32BE(o - start - 1, start + 1);
  }
  sync(b, o);
  return b;
}

/** Bind (unnamed portal, text parameters and results), Execute (all rows) and Sync of a prepared statement, in one Buffer. */
export function callMessage(name: Buffer, params: readonly Param[]): Buffer {
  let bindSize = 4 + 1 + name.length + 1 + 2 + 2 + 2;
  for (const p of params) bindSize += 4 + (p === null ? 0 : Buffer.byteLength(p));
  const b = Buffer.allocUnsafe(1 + bindSize + 10 + 5);
  b[0] = 0x42;
  b.writeInt32BE(bindSize, 1);
  b[5] = 0;
  name.copy(b, 6);
  let o = 6 + name.length;
  b[o++] = 0;
  b.writeInt16BE(0, o);
  b.writeInt16BE(params.length, o + 2);
  o += 4;
  for (const p of params) {
    if (p === null) {
      b.writeInt32BE(-1, o);
      o += 4;
      continue;
    }
    const n = b.write(p, o + 4, 'utf8');
    b.writeInt32BE(n, o);
    o += 4 + n;
  }
  b.writeInt16BE(0, o);
  o += 2;
  // Execute: unnamed portal, no row limit.
  b[o] = 0x45;
  b.writeInt32BE(9, o + 1);
  b[o + 5] = 0;
  b.writeInt32BE(0, o + 6);
  sync(b, o + 10);
  return b;
}

export const TERMINATE = Buffer.from([0x58, 0, 0, 0, 4]);

function sync(b: Buffer, o: number): void {
  b[o] = 0x53;
  b.writeInt32BE(4, o + 1);
}

function cstring(b: Buffer, o: number, s: string): number {
  // A NUL would end the string early and let the rest be read as the next field or message.
  if (s.includes('\0')) throw new InvalidInputError('invalid-config', 'a NUL character in a string the protocol sends NUL-terminated (a start-up parameter, a user or database name, a statement)');
  const n = b.write(s, o, 'utf8');
  b[o + n] = 0;
  return o + n + 1;
}

/** Bound on one backend message: the lock's replies are a few bytes; a larger length is a stream out of step. */
const MAX_MESSAGE = 64 * 1024 * 1024;

/**
 * Splits the byte stream into backend messages: `onMessage(type, buf, start,
 * end)` with the body in buf[start, end), valid only during the call.
 * Chunks are read in place; only a message split across chunks is copied,
 * into one buffer of its declared size (a long message arriving in many
 * small reads is copied once, not once per read).
 */
export class MessageReader {
  /** A message header split across reads (under 5 bytes). */
  #head: Buffer | null = null;
  /** A message whose header is known, being filled: `#filled` bytes so far. */
  #partial: Buffer | null = null;
  #filled = 0;

  constructor(private readonly onMessage: (type: number, buf: Buffer, start: number, end: number) => void) {}

  /** The bytes chunk[0, length): a read into a buffer reused for every read passes its count, with no view made per read. */
  push(chunk: Buffer, length = chunk.length): void {
    let buf = chunk;
    let size = length;
    let o = 0;
    if (this.#partial !== null) {
      const partial = this.#partial;
      const n = Math.min(partial.length - this.#filled, size);
      chunk.copy(partial, this.#filled, 0, n);
      this.#filled += n;
      if (this.#filled < partial.length) return;
      this.#partial = null;
      this.onMessage(partial[0]!, partial, 5, partial.length);
      o = n;
    } else if (this.#head !== null) {
      buf = Buffer.concat([this.#head, chunk.subarray(0, size)]);
      size = buf.length;
      this.#head = null;
    }
    while (size - o >= 5) {
      const end = o + 1 + messageLength(buf, o);
      if (end > size) {
        // The rest of this message comes in later reads: one buffer of its size (the chunk's memory is the socket's read buffer, reused by the next read).
        this.#partial = Buffer.allocUnsafe(end - o);
        this.#filled = buf.copy(this.#partial, 0, o, size);
        return;
      }
      this.onMessage(buf[o]!, buf, o + 5, end);
      o = end;
    }
    if (o < size) this.#head = Buffer.from(buf.subarray(o, size));
  }
}

function messageLength(buf: Buffer, o: number): number {
  const length = buf.readInt32BE(o + 1);
  if (length < 4 || length > MAX_MESSAGE) throw new WireProtocolError(`a backend message of length ${length}`);
  return length;
}
