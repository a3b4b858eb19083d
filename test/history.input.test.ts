import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkHistory } from '../conformance/history/check.ts';
import type { History } from '../conformance/history/event.ts';
import { HistoryFormatError, parseHistory, validateHistory } from '../conformance/history/parse.ts';
import { InvalidInputError } from '../model/errors.ts';

/**
 * `lockcheck/history` takes histories from code as well as from files: a recorder's events, a hand-built array,
 * parseHistory's answer passed on unchecked. Whatever arrives, the answer is a verdict on a well-formed history or
 * a typed error naming what is wrong; never a TypeError, and never a "safe" verdict on something that is not a
 * history (validateHistory({}) answered [] and checkHistory([{}]) threw "Cannot read properties of undefined").
 */
const thrown = (f: () => unknown): unknown => {
  try {
    f();
  } catch (e) {
    return e;
  }
  throw new Error('did not throw');
};

const overlapping = [
  { type: 'invoke', process: 0, time: 0, op: 'acquire', resource: 'r', ttlMs: 100 },
  { type: 'ok', process: 0, time: 1, op: 'acquire', resource: 'r', owner: 'a', token: '1' },
  { type: 'invoke', process: 1, time: 2, op: 'acquire', resource: 'r', ttlMs: 100 },
  { type: 'ok', process: 1, time: 3, op: 'acquire', resource: 'r', owner: 'b', token: '2' },
];

describe('checkHistory on whatever it is given', () => {
  it.each([
    ['a number', 42, 'the history: must be an array of events, got 42'],
    ['an object', { events: [] }, 'the history: must be an array of events, got an object'],
    ['null', null, 'the history: must be an array of events, got null'],
    ['a string', 'x', "the history: must be an array of events, got 'x'"],
  ])('%s is a HistoryFormatError, line 0', (_what, value, message) => {
    const e = thrown(() => checkHistory(value as never));
    expect(e).toBeInstanceOf(HistoryFormatError);
    expect((e as HistoryFormatError).line).toBe(0);
    expect((e as Error).message).toBe(message);
    expect(validateHistory(value as never)).toEqual(e);
  });

  it('an array of malformed events names the first bad one', () => {
    const cases: ReadonlyArray<readonly [unknown[], string]> = [
      [[{}], "line 1, field 'type': is missing or not a string (undefined)"],
      [[overlapping[0], { ...overlapping[1], token: 2 }], "line 2, field 'token': must be a string of decimal digits (tokens are never JSON numbers), got 2"],
      [[overlapping[1]], "line 1, field 'type': ok of acquire for process 0, which has no operation in flight"],
      [[...overlapping, 7], 'line 5: each line must be a JSON object, got 7'],
    ];
    for (const [events, message] of cases) {
      const e = thrown(() => checkHistory(events as History));
      expect(e).toBeInstanceOf(HistoryFormatError);
      expect((e as Error).message).toBe(message);
    }
  });

  it("parseHistory's error passed on unchecked is thrown as it is", () => {
    const parsed = parseHistory('not json');
    expect(parsed).toBeInstanceOf(HistoryFormatError);
    expect(thrown(() => checkHistory(parsed as History))).toBe(parsed);
  });

  it('parseHistory of bytes says to decode them first', () => {
    const e = parseHistory(Buffer.from('{}') as never);
    expect(e).toBeInstanceOf(HistoryFormatError);
    expect((e as Error).message).toMatch(/^the history: must be text \(JSON lines\), got an object: decodeHistory turns bytes into text$/);
  });

  it('a hand-built history gets the verdict its parsed form gets', () => {
    const byHand = checkHistory(overlapping as History);
    const parsed = checkHistory(parseHistory(overlapping.map((e) => JSON.stringify(e)).join('\n')) as History);
    expect(byHand.verdict).toBe('violation');
    expect(byHand).toEqual(parsed);
  });

  it('validateHistory reads its own answer to the same answer (every recorded fixture)', () => {
    const dir = join(import.meta.dirname, 'fixtures', 'histories');
    const files = readdirSync(dir).filter((f) => f.endsWith('.jsonl'));
    expect(files.length).toBeGreaterThan(0);
    for (const f of files) {
      const once = parseHistory(readFileSync(join(dir, f), 'utf8'));
      if (once instanceof HistoryFormatError) continue;
      expect(validateHistory([...once]), f).toEqual(once);
    }
  });
});

describe('checkHistory options, every value checked', () => {
  it.each([
    [{ maxFindings: -1 }, 'maxFindings must be an integer in [0, 1000000], got -1'],
    [{ maxFindings: 1.5 }, 'maxFindings must be an integer in [0, 1000000], got 1.5'],
    [{ timeoutMs: 'x' }, 'timeoutMs must be an integer number of ms in [0, 86400000], got "x"'],
    [{ timeoutMs: -5 }, 'timeoutMs must be an integer number of ms in [0, 86400000], got -5'],
    [{ timeoutMs: Number.NaN }, 'timeoutMs must be an integer number of ms in [0, 86400000], got NaN'],
    [{ storePolicy: 'bogus' }, 'storePolicy must be one of unfenced, strict, monotonic, transactional, got "bogus"'],
    [{ maxMemoryBytes: 0 }, 'maxMemoryBytes must be a positive integer number of bytes, got 0'],
    [{ maxMemoryBytes: Number.POSITIVE_INFINITY }, 'maxMemoryBytes must be a positive integer number of bytes, got Infinity'],
  ])('%j', (options, message) => {
    const e = thrown(() => checkHistory([], options as never));
    expect(e).toBeInstanceOf(InvalidInputError);
    expect((e as InvalidInputError).code).toBe('invalid-config');
    expect((e as Error).message).toBe(`invalid-config: checkHistory options.${message}`);
  });

  it('the defaults and the edges are taken', () => {
    expect(checkHistory(overlapping as History, { timeoutMs: 0, maxFindings: 0, maxMemoryBytes: 1, storePolicy: 'strict' }).verdict).toBe('violation');
  });
});
