import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import type { History } from '../conformance/history/event.ts';
import { checkHistory } from '../conformance/history/check.ts';
import { formatHistory } from '../conformance/history/format.ts';
import { historyReportHtml } from '../conformance/history/report.ts';
import { decodeHistory, HistoryFormatError, parseHistory } from '../conformance/history/parse.ts';

/** The history format's reader (spec 10.2, 10.3): typed history or a typed error naming line and field; never a crash. */
const jsonl = (...events: object[]) => events.map((e) => JSON.stringify(e)).join('\n') + '\n';

const VALID = jsonl(
  { type: 'meta', store: 'strict', backend: 'redis-single', extra: 'ignored' },
  { type: 'invoke', process: 0, time: 0, op: 'acquire', resource: 'r', ttlMs: 100 },
  { type: 'invoke', process: 'nemesis', time: 1, op: 'fault', fault: 'pause-client', target: 'client 1' },
  { type: 'ok', process: 0, time: 2, op: 'acquire', resource: 'r', owner: 'o0', token: '9223372036854775807', validUntil: 90 },
  { type: 'invoke', process: 0, time: 3, op: 'write', resource: 'r', key: 'x', value: '1', prev: null, token: '9223372036854775807' },
  { type: 'ok', process: 0, time: 4, op: 'write', resource: 'r', key: 'x' },
  { type: 'signal', process: 0, time: 5, resource: 'r', owner: 'o0', reason: 'expired' },
  { type: 'ok', process: 'nemesis', time: 6, op: 'fault', fault: 'pause-client', target: 'client 1' },
  { type: 'invoke', process: 1, time: 6, op: 'read', resource: 'r', key: 'x' },
  { type: 'info', process: 1, time: 7, op: 'read', resource: 'r', key: 'x', reason: 'timeout' },
  { type: 'invoke', process: 1, time: 8, op: 'release', resource: 'r', owner: 'o1' },
);

function parsed(text: string): History {
  const h = parseHistory(text);
  if (h instanceof HistoryFormatError) throw h;
  return h;
}

describe('decodeHistory', () => {
  it('drops a UTF-8 byte-order mark and names UTF-16 instead of failing as not JSON', () => {
    const line = JSON.stringify({ type: 'invoke', process: 0, time: 0, op: 'read', resource: 'r', key: 'k' });
    const withBom = decodeHistory(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(line)]));
    expect(parsed(withBom as string)).toHaveLength(1);
    for (const bytes of [Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(line, 'utf16le')]), Buffer.from([0xfe, 0xff, 0, 0x7b])]) {
      const r = decodeHistory(bytes);
      expect(r).toBeInstanceOf(HistoryFormatError);
      expect((r as HistoryFormatError).message).toMatch(/^line 1: the file is UTF-16 .* a history is UTF-8/);
    }
  });

  it('refuses bytes that are not UTF-8 with the line they are on, instead of replacing them (caf\\xe9 and caf\\xe8 would be one name)', () => {
    const r = decodeHistory(Buffer.concat([Buffer.from('{"type":"meta"}\n{"resource":"caf'), Buffer.from([0xe9]), Buffer.from('"}\n')]));
    expect(r).toBeInstanceOf(HistoryFormatError);
    expect((r as HistoryFormatError).message).toMatch(/^line 2: not UTF-8 .* a history is UTF-8 text/);
    // A sequence cut short at the end of the file is no UTF-8 either.
    expect(decodeHistory(Buffer.from([0x7b, 0x7d, 0x0a, 0xc3]))).toMatchObject({ line: 2 });
  });

  it('refuses a file larger than one string can hold with a typed error, not a throw from the decoder', () => {
    const r = decodeHistory(Buffer.from('{"type":"meta"}\n'.repeat(10)), 100);
    expect(r).toBeInstanceOf(HistoryFormatError);
    expect((r as HistoryFormatError).message).toMatch(/^line 1: the file has 160 bytes; a history is read whole, as one string of at most 100 characters: split it/);
    expect(decodeHistory(Buffer.from('{"type":"meta"}'), 100)).toBe('{"type":"meta"}');
  });
});

describe('parseHistory', () => {
  it('reads tokens with leading zeros as the same token (a release of token 7 ends the grant of token 07)', () => {
    const h = parsed(
      jsonl(
        { type: 'invoke', process: 0, time: 0, op: 'acquire', resource: 'r', ttlMs: 1000 },
        { type: 'ok', process: 0, time: 1, op: 'acquire', resource: 'r', owner: 'a', token: '007', validUntil: 900 },
        { type: 'invoke', process: 0, time: 2, op: 'release', resource: 'r', owner: 'a', token: '7' },
        { type: 'ok', process: 0, time: 3, op: 'release', resource: 'r', owner: 'a', token: '0007' },
        { type: 'invoke', process: 1, time: 4, op: 'acquire', resource: 'r', ttlMs: 1000 },
        { type: 'ok', process: 1, time: 5, op: 'acquire', resource: 'r', owner: 'b', token: '8', validUntil: 900 },
      ),
    );
    expect(h[1]).toMatchObject({ token: '7' });
    const report = checkHistory(h);
    expect(report.checks.find((c) => c.check === 'overlapping-holds')?.verdict).toBe('safe');
    expect(report.verdict).toBe('safe');
  });

  it('accepts a completion that repeats its invoke, and one that adds what the invoke could not know', () => {
    const h = parsed(
      jsonl(
        { type: 'invoke', process: 0, time: 0, op: 'acquire', resource: 'r', owner: 'a', ttlMs: 100 },
        { type: 'ok', process: 0, time: 1, op: 'acquire', resource: 'r', owner: 'a', ttlMs: 100, token: '3', validUntil: 90 },
        { type: 'invoke', process: 0, time: 2, op: 'extend', resource: 'r', owner: 'a', token: '3', ttlMs: 100 },
        { type: 'fail', process: 0, time: 3, op: 'extend', resource: 'r', owner: 'a', token: '3', reason: 'expired' },
      ),
    );
    expect(h[3]).toMatchObject({ type: 'fail', owner: 'a', token: '3', ttlMs: 100, reason: 'expired' });
  });

  it('accepts a completion that leaves out op, resource and key (docs/histories.md): it completes its open invoke', () => {
    const h = parsed(
      jsonl(
        { type: 'invoke', process: 0, time: 0, op: 'write', resource: 'r', key: 'x', value: '1', prev: null },
        { type: 'ok', process: 0, time: 1 },
        { type: 'invoke', process: 0, time: 2, op: 'acquire', resource: 'r' },
        { type: 'ok', process: 0, time: 3, owner: 'a', token: '1' },
      ),
    );
    expect(h[1]).toEqual({ type: 'ok', process: 0, time: 1, op: 'write', resource: 'r', key: 'x', value: '1', prev: null });
    expect(h[3]).toMatchObject({ type: 'ok', op: 'acquire', resource: 'r', owner: 'a', token: '1' });
    // With nothing in flight there is nothing to complete.
    expect(parseHistory(jsonl({ type: 'ok', process: 0, time: 1 }))).toMatchObject({ line: 1, field: 'type', problem: expect.stringMatching(/ok of an operation for process 0, which has no operation in flight/) });
  });

  it('reads a valid history: typed events, completions carry their invoke fields, unknown fields dropped', () => {
    const h = parsed(VALID);
    expect(h).toHaveLength(11);
    expect(h[0]).toEqual({ type: 'meta', store: 'strict', backend: 'redis-single' });
    expect(h[5]).toEqual({ type: 'ok', process: 0, time: 4, op: 'write', resource: 'r', key: 'x', value: '1', prev: null, token: '9223372036854775807' });
    expect(h[9]).toMatchObject({ type: 'info', op: 'read', reason: 'timeout' });
    // CRLF line ends and trailing blank lines are fine; the formatter round-trips.
    expect(parsed(VALID.replaceAll('\n', '\r\n') + '\n\n')).toEqual(h);
    expect(parsed(formatHistory(h))).toEqual(h);
    expect(parsed('')).toEqual([]);
  });

  it('accepts times up to 2^53-1 in magnitude, the last a double tells apart from its neighbour', () => {
    const h = parseHistory(jsonl({ type: 'invoke', process: 0, time: -Number.MAX_SAFE_INTEGER, op: 'acquire', resource: 'r' }, { type: 'ok', process: 0, time: Number.MAX_SAFE_INTEGER, op: 'acquire', resource: 'r', validUntil: Number.MAX_SAFE_INTEGER }));
    expect(h).not.toBeInstanceOf(HistoryFormatError);
  });

  // Checked as it is read: a hostile file refused at line 2 was held whole first (every line, every value: 114 MiB of '{}' lines took 3.9 GB), so the first error said was a later line's.
  it('refuses at the first bad line, before reading the lines after it', () => {
    const e = parseHistory('{"type":"meta"}\n{}\nnot JSON at all\n');
    expect(e).toBeInstanceOf(HistoryFormatError);
    expect(e).toMatchObject({ line: 2, field: 'type' });
    // Lines end with \n or \r\n, blank lines at the end are dropped, one inside is refused.
    expect(parseHistory('{"type":"meta"}\r\n{"type":"invoke","process":0,"time":0,"op":"acquire","resource":"r","ttlMs":5}\r\n \n\n')).toHaveLength(2);
    expect(parseHistory('{"type":"meta"}\n\r\n{"type":"meta"}')).toMatchObject({ line: 2, message: expect.stringMatching(/blank line inside the history/) as string });
  });

  it('names the line and the field of what is wrong', () => {
    const inv = { type: 'invoke', process: 0, time: 10, op: 'acquire', resource: 'r' };
    const cases: [string, number, string | undefined, RegExp][] = [
      [jsonl(inv) + '{oops\n', 2, undefined, /not JSON/],
      [jsonl(inv, ['x']), 2, undefined, /must be a JSON object/],
      [jsonl(inv, { ...inv, process: 1, time: 'soon' }), 2, 'time', /finite number/],
      // Past 2^53 doubles cannot tell t from t+1 (a register's verdict flipped there): refused, not judged wrongly.
      [jsonl({ ...inv, time: 2 ** 53 }), 1, 'time', /at most 2\^53-1/],
      [jsonl({ ...inv, time: -(2 ** 53) }), 1, 'time', /at most 2\^53-1/],
      [jsonl(inv, { ...inv, type: 'ok', validUntil: 2 ** 60 }), 2, 'validUntil', /at most 2\^53-1/],
      [jsonl({ ...inv, ttlMs: 2 ** 53 }), 1, 'ttlMs', /at most 2\^53-1/],
      [jsonl(inv, { ...inv, process: 0, time: 9, type: 'ok' }), 2, 'time', /goes backwards for process 0/],
      [jsonl(inv, { ...inv, time: 11 }), 2, 'type', /still in flight/],
      [jsonl({ ...inv, type: 'ok' }), 1, 'type', /no operation in flight/],
      [jsonl(inv, { ...inv, type: 'ok', op: 'release', owner: 'o' }), 2, 'op', /completes process 0's acquire of line 1/],
      [jsonl(inv, { ...inv, type: 'ok', resource: 's' }), 2, 'resource', /the invoke of line 1 says 'r'/],
      [jsonl(inv, { ...inv, type: 'ok', token: 12 }), 2, 'token', /never JSON numbers/],
      // A completion that contradicts its invoke on a field both carry: which one would the checks believe?
      [jsonl({ ...inv, owner: 'a' }, { ...inv, type: 'ok', owner: 'b' }), 2, 'owner', /is 'b' but the invoke of line 1 says 'a'/],
      [jsonl({ ...inv, op: 'write', key: 'k', value: '1' }, { ...inv, op: 'write', key: 'k', type: 'ok', value: '2' }), 2, 'value', /is '2' but the invoke of line 1 says '1'/],
      [jsonl({ ...inv, op: 'write', key: 'k', value: '1', prev: null }, { ...inv, op: 'write', key: 'k', type: 'fail', prev: '0' }), 2, 'prev', /is '0' but the invoke of line 1 says null/],
      [jsonl({ ...inv, op: 'release', owner: 'a', token: '7' }, { ...inv, op: 'release', owner: 'a', type: 'ok', token: '8' }), 2, 'token', /is '8' but the invoke of line 1 says '7'/],
      [jsonl(inv, { ...inv, type: 'ok', token: '9223372036854775808' }), 2, 'token', /at most 2\^63-1/],
      [jsonl(inv, { ...inv, type: 'ok', token: '-1' }), 2, 'token', /decimal digits/],
      [jsonl({ ...inv, process: -1 }), 1, 'process', /non-negative integer/],
      [jsonl({ ...inv, op: 'lock' }), 1, 'op', /must be one of acquire/],
      [jsonl({ ...inv, resource: '' }), 1, 'resource', /non-empty/],
      [jsonl({ ...inv, ttlMs: 0 }), 1, 'ttlMs', /positive/],
      [jsonl({ type: 'invoke', process: 0, time: 1, op: 'release', resource: 'r' }), 1, 'owner', /missing/],
      [jsonl({ type: 'invoke', process: 0, time: 1, op: 'write', resource: 'r', key: 'x' }), 1, 'value', /missing/],
      [jsonl({ type: 'invoke', process: 0, time: 1, op: 'read', resource: 'r', key: 'x' }, { type: 'ok', process: 0, time: 2, op: 'read', resource: 'r', key: 'x' }), 2, 'value', /missing/],
      [jsonl(inv, { type: 'meta' }), 2, 'type', /only be the first line/],
      [jsonl({ type: 'meta', store: 'fenced' }), 1, 'store', /unfenced, strict, monotonic, transactional/],
      [jsonl({ type: 'signal', process: 0, time: 1, resource: 'r', owner: 'o' }), 1, 'reason', /missing/],
      [jsonl({ type: 'ok', process: 'nemesis', time: 1, op: 'fault', fault: 'partition' }), 1, 'fault', /not begun/],
      [jsonl({ type: 'invoke', process: 'nemesis', time: 1, op: 'acquire', resource: 'r' }), 1, 'op', /only op 'fault'/],
      [jsonl({ type: 'begin', process: 0, time: 1, op: 'acquire', resource: 'r' }), 1, 'type', /must be invoke, ok, fail, info/],
      [jsonl(inv) + '\n' + jsonl(inv), 2, undefined, /blank line/],
    ];
    for (const [text, line, field, problem] of cases) {
      const r = parseHistory(text);
      expect(r, text).toBeInstanceOf(HistoryFormatError);
      const e = r as HistoryFormatError;
      expect({ line: e.line, field: e.field }, `${text} -> ${e.message}`).toEqual({ line, field });
      expect(e.message).toMatch(problem);
      expect(e.message).toMatch(new RegExp(`^line ${line}`));
    }
  });
});

/** Anything at all: the answer is a History or a HistoryFormatError, never an exception. */
function neverThrows(text: string): void {
  const r = parseHistory(text);
  expect(Array.isArray(r) || r instanceof HistoryFormatError).toBe(true);
}

const validLines = VALID.trimEnd().split('\n');
const jsonValue = fc.jsonValue({ maxDepth: 3 });
const mutation = fc.oneof(
  fc.record({ kind: fc.constant('drop' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('swap' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('field' as const), at: fc.nat(), field: fc.constantFrom('type', 'process', 'time', 'op', 'resource', 'key', 'value', 'prev', 'token', 'owner', 'validUntil', 'ttlMs', 'fault', 'store', '__proto__'), value: jsonValue }),
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat(), cut: fc.nat() }),
);

type Mutation = { kind: string; at: number; field?: string; value?: unknown; cut?: number };

function mutate(lines: string[], m: Mutation): string[] {
  const out = [...lines];
  const i = m.at % out.length;
  if (m.kind === 'drop') out.splice(i, 1);
  else if (m.kind === 'swap' && i + 1 < out.length) [out[i], out[i + 1]] = [out[i + 1]!, out[i]!];
  else if (m.kind === 'field') {
    let event: unknown;
    try {
      event = JSON.parse(out[i]!);
    } catch {
      return out; // an earlier truncation: nothing to set a field on
    }
    out[i] = JSON.stringify({ ...(event as object), [m.field!]: m.value });
  }
  else if (m.kind === 'truncate') out[i] = out[i]!.slice(0, m.cut! % (out[i]!.length + 1));
  return out;
}

describe('parseHistory never crashes', () => {
  test.prop([fc.string({ unit: 'binary', maxLength: 300 })])('on random text', (text) => neverThrows(text));
  test.prop([fc.array(jsonValue, { maxLength: 8 })])('on random JSON lines', (values) => neverThrows(values.map((v) => JSON.stringify(v)).join('\n')));
  test.prop([fc.array(mutation, { minLength: 1, maxLength: 4 })])('on mutated valid histories, and what it accepts is checked and drawn without a throw', (ms) => {
    let lines = validLines;
    for (const m of ms) if (lines.length > 0) lines = mutate(lines, m);
    neverThrows(lines.join('\n'));
    const h = parseHistory(lines.join('\n'));
    if (h instanceof HistoryFormatError) return;
    const report = checkHistory(h, { timeoutMs: 0 });
    expect(['safe', 'violation', 'unknown']).toContain(report.verdict);
    expect(historyReportHtml(h, report)).toMatch(/<svg id="timeline"/);
  });
  test.prop([fc.uint8Array({ maxLength: 200 })])('on random bytes', (bytes) => neverThrows(new TextDecoder().decode(bytes)));
});

describe('parseHistory: a key given twice in an event', () => {
  const line = (rest: string) => `{"type":"invoke","process":0,"time":10,"op":"acquire",${rest}}`;

  it('is refused naming the key, also spelt with escapes (JSON.parse kept the last silently)', () => {
    for (const [rest, key] of [
      ['"resource":"r","resource":"s"', 'resource'],
      ['"resource":"r","\\u0072esource":"s"', 'resource'],
      ['"resource":"r", "time" :3', 'time'],
    ] as const) {
      const h = parseHistory(line(rest));
      expect(h, rest).toBeInstanceOf(HistoryFormatError);
      expect((h as HistoryFormatError).field, rest).toBe(key);
      expect((h as HistoryFormatError).line).toBe(1);
    }
  });

  it("is not looked for inside a recorder's own fields or in values", () => {
    const h = parseHistory(line('"resource":"r","mine":{"a":1,"a":[{"resource":2}]},"x":"\\"resource\\":","y":["resource","resource"]'));
    expect(h).not.toBeInstanceOf(HistoryFormatError);
  });
});
