import { describe, expect, it } from 'vitest';
import { HistoryFormatError, parseHistory, validateHistory } from '../conformance/history/parse.ts';
import { Recorder } from '../conformance/stress/recorder.ts';
import type { RecordedEvent } from '../conformance/stress/protocol.ts';

/**
 * Text in a history must be what a UTF-8 file can hold: JSON's \u escapes
 * could still give a lone surrogate (written out, every one becomes U+FFFD,
 * so two names merged in the report). A NUL, which UTF-8 holds, is kept (the
 * checks keep names with one apart: history.check.test).
 */
const line = (fields: Record<string, unknown>): string => JSON.stringify({ type: 'invoke', process: 0, time: 0, op: 'acquire', resource: 'r', ttlMs: 100, ...fields });

describe('parseHistory: names and text are well-formed Unicode', () => {
  it.each([
    ['a lone surrogate in a resource', { resource: 'a\ud800b' }, 'resource'],
    ['a lone surrogate in an owner', { op: 'release', owner: 'o\udc00', token: '1' }, 'owner'],
    ['a lone surrogate in a key', { op: 'write', key: 'k\udbff', value: 'v' }, 'key'],
    ['a lone surrogate in a value', { op: 'write', key: 'k', value: 'v\ud800' }, 'value'],
  ])('%s is refused naming the field', (_what, fields, field) => {
    const parsed = parseHistory(line(fields));
    expect(parsed).toBeInstanceOf(HistoryFormatError);
    expect((parsed as HistoryFormatError).message).toContain(`'${field}'`);
  });

  it('well-formed text outside the BMP, and a NUL in a name or a value, are kept', () => {
    const parsed = parseHistory([line({ resource: 'r\u{1F512}' }), line({ process: 1, op: 'write', resource: 'a\u0000b', key: 'k', value: 'a\u0000b' })].join('\n'));
    expect(parsed).not.toBeInstanceOf(Error);
  });
});

describe("stress: a client's text is recorded as its file holds it", () => {
  it('a lone surrogate in a reason (a library error message) is recorded as U+FFFD, so the recording stays a valid history', () => {
    const recorder = new Recorder();
    recorder.add([
      { type: 'invoke', process: 0, time: 0, op: 'acquire', resource: 'r', ttlMs: 100 },
      { type: 'fail', process: 0, time: 1, op: 'acquire', resource: 'r', reason: 'refused \ud800 by x' },
    ] as RecordedEvent[]);
    const recorded = recorder.history();
    expect(recorded[1]).toMatchObject({ reason: 'refused \ufffd by x' });
    expect(validateHistory(recorded)).not.toBeInstanceOf(Error);
  });
});
