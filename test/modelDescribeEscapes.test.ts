import { describe, expect, it } from 'vitest';
import * as model from '../model/index.ts';
import { designs, initialWorld } from '../model/index.ts';

/**
 * Text lockcheck/model writes for people (describeCommand, describeOutcome,
 * the properties' violation messages, and the timelines built from them)
 * shows the control characters of user-given names and values escaped:
 * before, a resource name's ESC, newline or right-to-left override reached a
 * terminal or a report raw. Pure and fast.
 */
describe('text the model writes for people shows control characters in names and values, never passes them raw', () => {
  // oxlint-disable-next-line no-control-regex -- the control characters are what it looks for
  const RAW = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
  const hostile = 'a\u001b[2J\nb\u202ec\u0085d\u2028';

  it.each([
    ['acquire', { kind: 'acquire', client: 0, resource: hostile, ttlMs: 10 }],
    ['release', { kind: 'release', client: 0, resource: hostile }],
    ['write resource', { kind: 'write', client: 0, resource: hostile, value: 'v' }],
    ['write value', { kind: 'write', client: 0, resource: 'r', value: hostile }],
    ['pause pending write', { kind: 'pause', client: 0, pendingWrite: { resource: hostile, value: hostile } }],
    ['pause in flight', { kind: 'pause', client: 0, inFlight: { kind: 'read', client: 0, resource: hostile } }],
    ['a client index given as text', { kind: 'resume', client: hostile }],
  ])('describeCommand: %s', (_what, command) => {
    const text = model.describeCommand(command as never);
    expect(text).not.toMatch(RAW);
    expect(text).toContain('\\u001b[2J\\nb\\u202ec\\u0085d\\u2028');
  });

  it('describeOutcome: a value read back', () => {
    const text = model.describeOutcome({ kind: 'value', value: hostile, token: 1n });
    expect(text).not.toMatch(RAW);
    expect(text).toContain('\\u202e');
  });

  it('plain names read as before, and a quote or backslash in one is escaped so it cannot end the name early', () => {
    expect(model.describeCommand({ kind: 'acquire', client: 0, resource: 'order-42', ttlMs: 10 })).toBe("client 0 acquire 'order-42' ttl 10ms");
    expect(model.describeCommand({ kind: 'write', client: 1, resource: 'r', value: 'v1' })).toBe('client 1 write \'r\' := "v1"');
    expect(model.describeCommand({ kind: 'release', client: 0, resource: "it's\\" })).toBe("client 0 release 'it\\'s\\\\'");
    expect(model.describeCommand({ kind: 'read', client: 0, resource: 'ünïcödé ✓' })).toBe("client 0 read 'ünïcödé ✓'");
  });

  it("a violation's message shows the resource's control characters escaped", () => {
    const d = designs.redisSingle();
    const r = 'x\u001b[31m\ny';
    const run = model.runSchedule(initialWorld({ design: d, store: 'strict', clients: 2 }), [
      { kind: 'clock-drift', target: { client: 0 }, driftPpm: -500_000 },
      { kind: 'acquire', client: 0, resource: r, ttlMs: 100 },
      { kind: 'advance', ms: 150 },
      { kind: 'acquire', client: 1, resource: r, ttlMs: 100 },
    ]);
    const mutex = run.violations.find((v) => v.property === 'MUTEX-1')!;
    expect(mutex.resource).toBe(r);
    expect(mutex.message).not.toMatch(RAW);
    expect(mutex.message).toContain("'x\\u001b[31m\\ny'");
  });
});
