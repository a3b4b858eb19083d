import { describe, expect, it } from 'vitest';
import { parseHistory } from '../conformance/history/parse.ts';
import { parseCounterexample } from '../cli/counterexample.ts';

/**
 * A refused history line or counterexample file is quoted in the message: a
 * reason, a resource or a snippet of the line. What may hold a password
 * (a client's error message as reason) is redacted before it is cut short,
 * and no control character, separator or bidirectional control is raw.
 */
// oxlint-disable-next-line no-control-regex -- the control characters are what it looks for
const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const invoke = { type: 'invoke', process: 0, time: 0, op: 'acquire', resource: 'r', ttlMs: 100 };

function problem(lines: readonly string[]): string {
  const h = parseHistory(lines.join('\n'));
  if (!(h instanceof Error)) throw new Error('parsed');
  return h.message;
}

describe('history parse errors quote no password and no raw control', () => {
  it('a reason holding a password, refused for a lone surrogate', () => {
    const m = problem([JSON.stringify(invoke), `{"type":"info","process":0,"time":5,"op":"acquire","resource":"r","reason":"auth: password=Xq7zzXq7zz \\ud800"}`]);
    expect(m).toMatch(/field 'reason'/);
    expect(m).not.toMatch(/Xq7/);
    expect(m).not.toMatch(RAW);
  });

  it('a reason whose password the 40-character cut would leave without its closing quote', () => {
    const m = problem([JSON.stringify(invoke), `{"type":"info","process":0,"time":5,"op":"acquire","resource":"r","reason":"connect failed: {\\"password\\":\\"Xq7zzXq7zzXq7zz\\"} \\udc00"}`]);
    expect(m).not.toMatch(/Xq7/);
  });

  it('a field quoted with control characters and bidirectional controls escaped', () => {
    const m = problem([JSON.stringify({ ...invoke, op: 'acq\u202eu\u001bire\u2028' })]);
    expect(m).toMatch(/field 'op'/);
    expect(m).not.toMatch(RAW);
  });

  it("JSON.parse's snippet of the line (V8 quotes the input) is not shown raw", () => {
    const m = problem([`x{"password":"Xq7zz"}`]);
    expect(m).toMatch(/^line 1: not JSON/);
    expect(m).not.toMatch(/passwor|Xq7/);
    const n = problem([`'auth s3cret\u202eXq7zz'`]);
    expect(n).not.toMatch(/Xq7/);
    expect(n).not.toMatch(RAW);
  });
});

describe('counterexample files quote no password and no raw control', () => {
  it("JSON.parse's snippet and a field's value", () => {
    const quoted = (text: string): string => {
      try {
        parseCounterexample('c.json', text);
      } catch (e) {
        return (e as Error).message;
      }
      throw new Error('parsed');
    };
    expect(quoted(`x{"password":"Xq7zz"}`)).not.toMatch(/passwor|Xq7/);
    const m = quoted(JSON.stringify({ lockcheck: 'redis://u:Xq7zz@h:1 \u202e' }));
    expect(m).not.toMatch(/Xq7/);
    expect(m).not.toMatch(RAW);
  });
});

it('an op of a completion with nothing in flight is quoted as every field is', () => {
  const m = problem([JSON.stringify({ type: 'ok', process: 0, time: 0, op: 'x\u202ey\u001b', resource: 'r' })]);
  expect(m).toMatch(/which has no operation in flight/);
  expect(m).not.toMatch(RAW);
});
