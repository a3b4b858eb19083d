import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MessageReader } from '../impl/postgres/wire/codec.ts';
import { WireProtocolError } from '../impl/postgres/wire/errors.ts';

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
