import { describe, expect, it } from 'vitest';
import { CounterexampleFileError, parseCounterexample, replayDifferences } from '../cli/counterexample.ts';
import { UsageError } from '../cli/usage.ts';

/** `lockcheck replay` reads a file it did not necessarily write: every field is checked, with a typed error naming it. */
const good = { lockcheck: 'counterexample', backend: 'redis-single/strict', faults: ['advance', 'pause'], seed: 42, path: '3:0:1', runs: 100, verdict: 'property-violation', properties: ['STORE-1'], steps: ['{"kind":"acquire"}'] };
const parse = (value: unknown): unknown => parseCounterexample('ce.json', JSON.stringify(value));

describe('counterexample file schema', () => {
  it('accepts what run writes', () => {
    expect(parse(good)).toEqual(good);
    expect(parse({ ...good, faults: null })).toMatchObject({ faults: null });
    expect(parse({ ...good, modelSeeds: true })).toEqual({ ...good, modelSeeds: true });
    // The minimised schedule, which replay runs as it is.
    const schedule = { commands: [{ kind: 'acquire', client: 0, resource: 'r0', ttlMs: 5 }], tokenBase: '9223372036854774807', requestTimeoutMs: 12 };
    expect(parse({ ...good, schedule })).toEqual({ ...good, schedule });
  });

  it.each([
    ['null', null, /must hold a JSON object, got null/],
    ['an array', [good], /must hold a JSON object, got an array/],
    ['wrong marker', { ...good, lockcheck: 'x' }, /"lockcheck" must be "counterexample"/],
    ['backend null', { ...good, backend: null }, /"backend" must be a backend name or module path, got null/],
    ['backend number', { ...good, backend: 7 }, /"backend" must be .* got number/],
    ['faults string', { ...good, faults: 'advance' }, /"faults" must be null or a non-empty list/],
    ['unknown fault', { ...good, faults: ['earthquake'] }, /"faults" holds "earthquake", not a fault kind/],
    ['duplicate fault', { ...good, faults: ['pause', 'pause'] }, /"faults" lists a fault kind twice/],
    ['seed string', { ...good, seed: '42' }, /"seed" must be a 32-bit integer, got "42"/],
    ['seed fraction', { ...good, seed: 1.5 }, /"seed" must be a 32-bit integer/],
    ['seed too big', { ...good, seed: 2 ** 40 }, /"seed" must be a 32-bit integer/],
    ['path null', { ...good, path: null }, /"path" must be a replay path/],
    ['path garbage', { ...good, path: '1:x' }, /"path" must be a replay path like "12:0:3", got "1:x"/],
    ['runs "abc"', { ...good, runs: 'abc' }, /"runs" must be an integer in \[1, 1000000\], got "abc"/],
    ['runs negative', { ...good, runs: -5 }, /"runs" must be an integer in \[1, 1000000\], got number/],
    ['runs zero', { ...good, runs: 0 }, /"runs" must be an integer/],
    ['runs null', { ...good, runs: null }, /"runs" must be an integer/],
    ['verdict unknown', { ...good, verdict: 'pass' }, /"verdict" must be one of conformance-failure, property-violation/],
    ['properties null', { ...good, properties: null }, /"properties" must be a list of property IDs/],
    ['unknown property', { ...good, properties: ['EVIL-1'] }, /"properties" holds "EVIL-1", not a property ID/],
    ['steps object', { ...good, steps: {} }, /"steps" must be a list/],
    ['step number', { ...good, steps: [1] }, /"steps" holds number, not a string/],
    ['extra field', { ...good, module: './payload.mjs' }, /field "module" is not part of the format/],
    ['modelSeeds not a boolean', { ...good, modelSeeds: 'yes' }, /"modelSeeds" must be true or false/],
    ['schedule an array', { ...good, schedule: [] }, /"schedule" must be an object with commands and tokenBase, got an array/],
    ['schedule without commands', { ...good, schedule: { tokenBase: '0' } }, /"schedule.commands" must be a non-empty list/],
    ['schedule command without a kind', { ...good, schedule: { commands: [{ client: 0 }], tokenBase: '0' } }, /"schedule.commands\[0\]" must be a command/],
    ['schedule token base a number', { ...good, schedule: { commands: [{ kind: 'read', client: 0, resource: 'r0' }], tokenBase: 0 } }, /"schedule.tokenBase" must be a decimal string/],
    ['schedule token base 2^63', { ...good, schedule: { commands: [{ kind: 'read', client: 0, resource: 'r0' }], tokenBase: '9223372036854775808' } }, /"schedule.tokenBase" must be a decimal string/],
    ['schedule request timeout 0', { ...good, schedule: { commands: [{ kind: 'read', client: 0, resource: 'r0' }], tokenBase: '0', requestTimeoutMs: 0 } }, /"schedule.requestTimeoutMs" must be an integer/],
    ['schedule extra field', { ...good, schedule: { commands: [{ kind: 'read', client: 0, resource: 'r0' }], tokenBase: '0', module: 'x' } }, /"schedule" field "module" is not part of the format/],
  ])('rejects %s with a typed error (exit code 2)', (_name, value, message) => {
    let error: unknown;
    try {
      parse(value);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(CounterexampleFileError);
    expect(error).toBeInstanceOf(UsageError);
    expect((error as Error).message).toMatch(message);
  });

  it('rejects text that is not JSON', () => {
    expect(() => parseCounterexample('ce.json', '{"lockcheck":')).toThrow(CounterexampleFileError);
  });
});

describe('replaying on another backend than the file was found on', () => {
  const saved = { ...good, backend: './mylock.ts', settings: { name: 'my lock', design: {}, capabilities: {}, contract: null, faults: ['advance', 'pause', 'partition'] } } as Parameters<typeof replayDifferences>[0];
  it('names another backend and other faults (each changes what the seed and path generate)', () => {
    expect(replayDifferences(saved, { name: 'my lock', faults: ['partition', 'advance', 'pause'] })).toEqual([]);
    expect(replayDifferences(saved, { name: 'redis-semaphore@5.8.0 Mutex', faults: ['advance', 'pause'] })).toEqual([
      "it was found on 'my lock' (./mylock.ts), and this backend is 'redis-semaphore@5.8.0 Mutex'",
      'the backend takes other faults than when it was saved (then: advance, partition, pause; now: advance, pause)',
    ]);
  });
  it('says nothing for a file without settings (written before they were recorded)', () => {
    expect(replayDifferences({ ...good } as Parameters<typeof replayDifferences>[0], { name: 'x', faults: [] })).toEqual([]);
  });
});
