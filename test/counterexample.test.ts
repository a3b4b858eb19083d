import { describe, expect, it } from 'vitest';
import { CounterexampleFileError, counterexampleFile, parseCounterexample, replayDifferences } from '../cli/counterexample.ts';
import { checkConformance } from '../conformance/check.ts';
import { BROKEN } from './fixtures/broken.ts';
import { UsageError } from '../cli/usage.ts';

/** `lockcheck replay` reads a file it did not necessarily write: every field is checked, with a typed error naming it. */
const good = { lockcheck: 'counterexample', backend: 'redis-single/strict', faults: ['advance', 'pause'], seed: 42, path: '3:0:1', runs: 100, verdict: 'property-violation', properties: ['STORE-1'], steps: ['{"kind":"acquire"}'] };
const parse = (value: unknown): unknown => parseCounterexample('ce.json', JSON.stringify(value));
const settings = { name: 'redis-single', design: { kind: 'redis-single', failedExtend: { lease: 'dropped', keys: 'kept' } }, capabilities: { store: 'fenced' }, contract: null, options: null, faults: ['advance', 'pause'] };

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
    // Refused for its size: the message names how long it was (it said only "got an array").
    ['schedule with too many commands', { ...good, schedule: { commands: Array.from({ length: 100_001 }, () => ({ kind: 'read', client: 0, resource: 'r0' })), tokenBase: '0' } }, /"schedule.commands" must be a non-empty list of at most 100000 commands, got an array of 100001$/],
    ['too many steps', { ...good, steps: Array.from({ length: 100_001 }, () => 's') }, /"steps" must be a list of at most 100000 strings, got an array of 100001$/],
    ['schedule extra field', { ...good, schedule: { commands: [{ kind: 'read', client: 0, resource: 'r0' }], tokenBase: '0', module: 'x' } }, /"schedule" field "module" is not part of the format/],
    // The settings are data compared and shown on replay: checked as the rest (they were taken as any object).
    ['settings extra field', { ...good, settings: { ...settings, module: './payload.mjs' } }, /"settings" field "module" is not part of the format/],
    ['settings name with a control character', { ...good, settings: { ...settings, name: 'my\u001b[2Jlock' } }, /"settings.name" must be a backend name/],
    ['settings faults not fault kinds', { ...good, settings: { ...settings, faults: [[['pause']]] } }, /"settings.faults" holds an array of 1, not a fault kind/],
    ['settings nested deeper than saved settings are', { ...good, settings: { ...settings, options: { a: { b: { c: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]] } } } } }, /"settings" nests deeper than 32 levels/],
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

  // Every command of a saved schedule is checked when the file is read: replay crashed (exit 1, a stack) on a kind the model does not know.
  const withCommand = (command: unknown): unknown => ({ ...good, schedule: { commands: [command], tokenBase: '0' } });
  it.each([
    ['an unknown kind', { kind: 'bogus' }, /"schedule.commands\[0\]" has the kind "bogus", not a command kind \(acquire, /],
    ['kind "constructor"', { kind: 'constructor' }, /has the kind "constructor", not a command kind/],
    ['kind "toString"', { kind: 'toString' }, /has the kind "toString", not a command kind/],
    ['kind "__proto__"', { kind: '__proto__' }, /has the kind "__proto__", not a command kind/],
    ['a kind inherited, not its own', JSON.parse('{"__proto__":{"kind":"read"},"client":0,"resource":"r0"}'), /must be a command \(an object with a kind\), got one without a kind/],
    ['a field missing', { kind: 'acquire', client: 0 }, /\(acquire\) has no "resource"/],
    ['a field of another kind', { kind: 'read', client: 0, resource: 'r0', ms: 5 }, /\(read\) has the field "ms", which is not part of the command/],
    ['a field named "__proto__"', JSON.parse('{"kind":"read","client":0,"resource":"r0","__proto__":{"x":1}}'), /has the field "__proto__", which is not part of the command/],
    ['a client that is no index', { kind: 'resume', client: -1 }, /\(resume\) has "client" must be an index in \[0, 1000\], got -1/],
    ['a resource the model refuses', { kind: 'read', client: 0, resource: '' }, /\(read\) has "resource" resource must be a non-empty string/],
    ['a ttl the model refuses', { kind: 'extend', client: 0, resource: 'r0', ttlMs: 0 }, /\(extend\) has "ttlMs" ttl must be an integer number of ms/],
    ['advance by a string', { kind: 'advance', ms: '5' }, /\(advance\) has "ms" .*got "5"/],
    ['a write value not a string', { kind: 'write', client: 0, resource: 'r0', value: 5 }, /\(write\) has "value" value must be a string/],
    ['a clock-drift target of two', { kind: 'clock-drift', target: { node: 0, client: 0 }, driftPpm: 5 }, /\(clock-drift\) has "target" must be \{ "node": n \} or \{ "client": n \}/],
    ['a pause with an in-flight fault', { kind: 'pause', client: 0, inFlight: { kind: 'crash', node: 0 } }, /\(pause\) has "inFlight" has the kind "crash", not an operation/],
    ['node-delay of a word', { kind: 'node-delay', node: 0, ms: 'forever' }, /\(node-delay\) has "ms"/],
  ])('rejects a saved command with %s', (_name, command, message) => {
    expect(() => parse(withCommand(command))).toThrow(CounterexampleFileError);
    expect(() => parse(withCommand(command))).toThrow(message);
  });

  it('accepts every kind of command the model runs, with its optional fields', () => {
    const commands = [
      { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 5, latencyMs: 0, retries: 2, retryDelayMs: 3 },
      { kind: 'extend', client: 0, resource: 'r0', ttlMs: 5, latencyMs: 1 },
      { kind: 'release', client: 0, resource: 'r0' },
      { kind: 'write', client: 0, resource: 'r0', value: 'v', delayed: true },
      { kind: 'read', client: 0, resource: 'r0' },
      { kind: 'advance', ms: 5 },
      { kind: 'clock-step', node: 0, deltaMs: -5 },
      { kind: 'clock-drift', target: { client: 1 }, driftPpm: -5000 },
      { kind: 'pause', client: 0, inFlight: { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 5 } },
      { kind: 'pause', client: 0, pendingWrite: { resource: 'r0', value: 'v' } },
      { kind: 'resume', client: 0 },
      { kind: 'deliver', client: 0 },
      { kind: 'replicate', node: 0 },
      { kind: 'crash', node: 0 },
      { kind: 'restart', node: 0 },
      { kind: 'partition', client: 0, node: 1 },
      { kind: 'heal', client: 0, node: 1 },
      { kind: 'node-delay', node: 0, ms: 'never' },
      { kind: 'kill-connection', client: 0 },
    ];
    expect(parse({ ...good, schedule: { commands, tokenBase: '0' } })).toMatchObject({ schedule: { commands } });
  });

  it('rejects a path whose run the saved run count never reached (replay would say "no longer fails" of a case that never failed)', () => {
    expect(() => parse({ ...good, path: '99:99:99', runs: 1 })).toThrow(/"path" names run 99, but "runs" is 1/);
    expect(() => parse({ ...good, path: '1:0', runs: 1 })).toThrow(CounterexampleFileError);
    expect(parse({ ...good, path: '0:4', runs: 1 })).toMatchObject({ path: '0:4' });
  });

  it("settings nested past any stack (a hostile file): a typed error, not a stack overflow in replay's comparison (exit 4)", () => {
    const depth = 200_000;
    const text = JSON.stringify({ ...good, settings: { ...settings, design: '@' } }).replace('"@"', `${'['.repeat(depth)}${']'.repeat(depth)}`);
    let error: unknown;
    try {
      parseCounterexample('ce.json', text);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(CounterexampleFileError);
    expect((error as Error).message).toMatch(/"settings" nests deeper than 32 levels/);
    expect(parse({ ...good, settings })).toEqual({ ...good, settings });
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

describe('a real failing run saved to a file: tokens stay exact past 2^53', () => {
  it('the token base is a decimal string, no JSON number in the file is past 2^53, and replay reads back the same bigint', async () => {
    const broken = BROKEN.find((b) => b.id === 'drift-added')!;
    const found = await checkConformance(broken.backend, { runs: 50, seed: 1, faults: broken.faults, minimise: false });
    expect(found.failure).not.toBeNull();
    // The same schedule at a token base no double holds exactly (2^62 + 1 rounds to 2^62).
    const big = 2n ** 62n + 1n;
    const replayed = await checkConformance(broken.backend, { schedule: { ...found.failure!.schedule, tokenBase: big }, faults: broken.faults });
    expect(replayed.failure).not.toBeNull();
    // Saved as run saves a failure (a schedule replay has no fast-check path of its own: the run's is kept).
    const failure = { ...replayed.failure!, seed: found.failure!.seed, path: found.failure!.path };
    const text = JSON.stringify(counterexampleFile('broken', broken.backend, broken.faults, broken.faults, 50, failure));
    const unsafe: unknown[] = [];
    JSON.parse(text, (_key, value: unknown) => {
      if (typeof value === 'number' && Math.abs(value) > Number.MAX_SAFE_INTEGER) unsafe.push(value);
      return value;
    });
    expect(unsafe).toEqual([]);
    const saved = parseCounterexample('ce.json', text);
    expect(saved.schedule?.tokenBase).toBe(big.toString());
    expect(BigInt(saved.schedule!.tokenBase)).toBe(big);
  });
});
