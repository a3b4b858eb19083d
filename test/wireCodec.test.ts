import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../model/errors.ts';
import { callMessage, MessageReader, startupMessage } from '../impl/postgres/wire/codec.ts';
import { readFields, serverError, WireConnectionError, WireProtocolError, WireServerError } from '../impl/postgres/wire/errors.ts';

/** Backend messages as bytes: a type byte, the length (itself included), the body. */
function frame(type: number, body: Uint8Array): Buffer {
  const b = Buffer.alloc(5 + body.length);
  b[0] = type;
  b.writeInt32BE(4 + body.length, 1);
  Buffer.from(body).copy(b, 5);
  return b;
}

/** Feeds `stream` cut at `cuts` (each read in a reused buffer, as a socket's onread does) and returns what the reader handed over. */
function read(stream: Buffer, cuts: readonly number[]): Array<[number, string]> {
  const got: Array<[number, string]> = [];
  const reader = new MessageReader((type, buf, start, end) => got.push([type, buf.toString('hex', start, end)]));
  const scratch = Buffer.alloc(stream.length);
  let from = 0;
  for (const to of [...cuts, stream.length]) {
    const n = stream.copy(scratch, 0, from, to);
    reader.push(scratch.subarray(0, n));
    // The socket reuses its buffer: anything the reader kept by reference would now read garbage.
    scratch.fill(0xee);
    from = to;
  }
  return got;
}

describe('wire codec: the reader splits a byte stream into backend messages', () => {
  it('however the stream is cut into reads, the same messages come out, in order', () => {
    const message = fc.record({ type: fc.integer({ min: 0x41, max: 0x7a }), body: fc.uint8Array({ maxLength: 300 }) });
    fc.assert(
      fc.property(fc.array(message, { minLength: 1, maxLength: 8 }), fc.array(fc.nat(), { maxLength: 40 }), (messages, rawCuts) => {
        const stream = Buffer.concat(messages.map((m) => frame(m.type, m.body)));
        const cuts = [...new Set(rawCuts.map((c) => c % (stream.length + 1)))].sort((a, b) => a - b);
        expect(read(stream, cuts)).toEqual(messages.map((m) => [m.type, Buffer.from(m.body).toString('hex')]));
      }),
      { seed: 20161010, numRuns: 300 },
    );
  });

  it('byte by byte: a long message is still whole', () => {
    const body = Buffer.from(Array.from({ length: 5000 }, (_v, i) => i % 251));
    const stream = Buffer.concat([frame(0x44, body), frame(0x5a, Buffer.from('I'))]);
    expect(read(stream, Array.from({ length: stream.length - 1 }, (_v, i) => i + 1))).toEqual([
      [0x44, body.toString('hex')],
      [0x5a, Buffer.from('I').toString('hex')],
    ]);
  });

  it('a length below 4 or beyond the bound is a WireProtocolError, also when the header is split', () => {
    for (const bad of [Buffer.from([0x52, 0, 0, 0, 3]), Buffer.from([0x52, 0x7f, 0xff, 0xff, 0xff])]) {
      expect(() => read(bad, [])).toThrow(WireProtocolError);
      expect(() => read(bad, [2])).toThrow(WireProtocolError);
    }
  });
});

describe('wire codec: the bounds of a message length, and ErrorResponse fields', () => {
  it('64 MiB is the largest message taken (its body awaited), one byte more is refused naming the length', () => {
    const header = (length: number): Buffer => {
      const b = Buffer.alloc(5);
      b[0] = 0x44;
      b.writeInt32BE(length, 1);
      return b;
    };
    const got: number[] = [];
    const reader = new MessageReader((type) => got.push(type));
    expect(() => reader.push(header(64 * 1024 * 1024))).not.toThrow();
    expect(got).toEqual([]);
    expect(() => read(header(64 * 1024 * 1024 + 1), [])).toThrow(new WireProtocolError(`a backend message of length ${64 * 1024 * 1024 + 1}`));
    expect(() => read(header(3), [])).toThrow(new WireProtocolError('a backend message of length 3'));
    // The smallest message, a length of 4 and no body, is one.
    expect(read(header(4), [])).toEqual([[0x44, '']]);
  });

  const body = (...parts: string[]): Buffer => Buffer.from(parts.join(''), 'latin1');
  it('fields are read up to the final zero, each by its type; a field without its zero, or a body without the final one, is named', () => {
    const whole = body('SERROR\0', 'VFATAL\0', 'C57P01\0', 'Mterminating connection\0', 'Dé\0', '\0');
    // A byte after the message that is not a zero must not be read as the final zero, nor as a field.
    const buf = Buffer.concat([whole, Buffer.from('Xjunk\0')]);
    expect(readFields(buf, 0, whole.length)).toEqual({ S: 'ERROR', V: 'FATAL', C: '57P01', M: 'terminating connection', D: Buffer.from('é', 'latin1').toString('utf8') });
    expect(readFields(body('\0'), 0, 1)).toEqual({});
    const noFinalZero = body('C22012\0', 'Mx\0');
    expect(() => readFields(Buffer.concat([noFinalZero, Buffer.from('X\0')]), 0, noFinalZero.length)).toThrow(new WireProtocolError('an error or notice without its final zero, or bytes after it'));
    // The field's zero lies past the message's end (in the next message's bytes): not this field's.
    const cut = body('Mabc');
    expect(() => readFields(Buffer.concat([cut, Buffer.from('\0\0')]), 0, cut.length)).toThrow(new WireProtocolError('an error field without its terminating zero'));
    expect(() => readFields(cut, 0, cut.length)).toThrow(new WireProtocolError('an error field without its terminating zero'));
    expect(() => readFields(body('Mabc\0', '\0', 'x'), 0, 7)).toThrow(new WireProtocolError('an error or notice without its final zero, or bytes after it'));
  });

  it("the server's error: SQLSTATE, the non-localised severity before the localised one, the message; defaults when a field is missing", () => {
    const e = serverError({ S: 'FEHLER', V: 'ERROR', C: '42P01', M: 'relation missing', H: 'hint' });
    expect(e).toBeInstanceOf(WireServerError);
    expect(e).toMatchObject({ name: 'WireServerError', code: '42P01', severity: 'ERROR', message: 'relation missing', fields: { H: 'hint' } });
    expect(serverError({ S: 'FATAL' })).toMatchObject({ code: '', severity: 'FATAL', message: 'error without a message' });
    expect(serverError({})).toMatchObject({ code: '', severity: 'ERROR', message: 'error without a message' });
    expect(new WireConnectionError('gone')).toMatchObject({ name: 'WireConnectionError', message: 'gone' });
  });
});

describe('wire codec: a call as Bind/Execute/Sync', () => {
  it('a NULL parameter is length -1 and no bytes; a text one its UTF-8 length and bytes', () => {
    const b = callMessage(Buffer.from('st'), [null, 'é', '']);
    // Bind: 'B', length, portal "", the statement's name, 0 format codes, 3 parameters.
    expect(b[0]).toBe(0x42);
    let o = 5;
    expect(b[o++]).toBe(0);
    expect(b.toString('latin1', o, o + 3)).toBe('st\0');
    o += 3;
    expect([b.readInt16BE(o), b.readInt16BE(o + 2)]).toEqual([0, 3]);
    o += 4;
    expect(b.readInt32BE(o)).toBe(-1);
    o += 4;
    expect(b.readInt32BE(o)).toBe(2);
    expect(b.toString('utf8', o + 4, o + 6)).toBe('é');
    o += 6;
    expect(b.readInt32BE(o)).toBe(0);
    o += 4;
    // No result format codes, then Execute ('E', 9, portal "", no row limit) and Sync ('S', 4), and nothing after.
    expect(b.readInt16BE(o)).toBe(0);
    o += 2;
    expect(b.subarray(o).toString('hex')).toBe('450000000900000000005300000004');
    // The Bind's length covers itself and its body, up to the Execute.
    expect(1 + b.readInt32BE(1)).toBe(o);
  });

  it('a NUL in a C string is refused with a message saying where it may not be', () => {
    expect(() => startupMessage({ user: 'a\0b' })).toThrow(new InvalidInputError('invalid-config', 'a NUL character in a string the protocol sends NUL-terminated (a start-up parameter, a user or database name, a statement)'));
  });
});
