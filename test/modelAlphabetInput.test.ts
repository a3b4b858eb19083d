import { describe, expect, it } from 'vitest';
import * as model from '../model/index.ts';
import type { Command, World } from '../model/index.ts';
import { designs, initialWorld, InvalidInputError, MATRIX_ROWS } from '../model/index.ts';

/**
 * Commands in an exploration's alphabet that no reached state enabled were
 * never checked (explored as nothing, silently, or a TypeError from the
 * enabled test); a command's misspelt field was read as absent; a pause's
 * pending write value and operation in flight were not checked as the
 * command they stand for; explorer options had no key check, and a cell's
 * no required state bound. Pure and fast: nothing here waits on time.
 */
const refusal = (f: () => unknown): InvalidInputError => {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(InvalidInputError);
    return e as InvalidInputError;
  }
  throw new Error('not refused');
};

const redlock3 = designs.redlock({ nodes: 3 });
const world = (): World => initialWorld({ design: redlock3, store: 'strict', clients: 2 });
const acquire: Command = { kind: 'acquire', client: 0, resource: 'r', ttlMs: 100 };
const advance: Command = { kind: 'advance', ms: 5 };
/** A world as JSON, bigints kept: a call that failed must leave it as it was. */
const snapshot = (w: World): string => JSON.stringify(w, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v));

describe('an exploration checks every command of its alphabet up front, not only those a reached state enables', () => {
  it.each([
    ['a command of an unknown kind', { kind: 'teleport', client: 0 }, 'teleport'],
    ['an acquire by a client that does not exist', { kind: 'acquire', client: 7, resource: 'r', ttlMs: 100 }, 'no client 7'],
    ['a client index that is a string', { kind: 'release', client: '0', resource: 'r' }, 'no client'],
    ['a crash of a node that does not exist', { kind: 'crash', node: 3 }, 'no node 3'],
    ['a resume of a client that does not exist', { kind: 'resume', client: 2 }, 'no client 2'],
    ['a deliver of a client that does not exist', { kind: 'deliver', client: -1 }, 'no client -1'],
    ['a restart of a node that does not exist', { kind: 'restart', node: 1.5 }, 'no node 1.5'],
    ['a clock-drift whose target is null', { kind: 'clock-drift', target: null, driftPpm: 0 }, 'target'],
    ['a clock-drift whose target is a number', { kind: 'clock-drift', target: 3, driftPpm: 0 }, 'target'],
    ['a pause whose operation in flight has an empty resource', { kind: 'pause', client: 0, inFlight: { kind: 'release', client: 0, resource: '' } }, 'resource'],
  ])('%s', (_what, command, text) => {
    for (const [name, f] of [['explore', model.explore], ['startExploration', model.startExploration]] as const) {
      const e = refusal(() => f(world(), [advance, command as Command], { maxDepth: 2 }));
      expect(e.message).toContain(`${name} alphabet[1]`);
      expect(e.message).toContain(text);
    }
  });

  it('commands a later state enables (a resume, a deliver, a restart) are valid in the alphabet and explored', () => {
    const w = initialWorld({ design: designs.redisSingle(), store: 'strict', clients: 2 });
    const alphabet: Command[] = [
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 10 },
      { kind: 'pause', client: 0, pendingWrite: { resource: 'r', value: 'late' } },
      { kind: 'resume', client: 0 },
      { kind: 'write', client: 1, resource: 'r', value: 'v', delayed: true },
      { kind: 'deliver', client: 1 },
      { kind: 'crash', node: 0 },
      { kind: 'restart', node: 0 },
      { kind: 'clock-drift', target: { client: 0 }, driftPpm: -500_000 },
    ];
    const r = model.explore(w, alphabet, { maxDepth: 3 });
    expect(r.depthCompleted).toBe(3);
    expect(r.states).toBeGreaterThan(10);
  });

  it('the functions that read an alphabet for its symmetries refuse a clock-drift without a target object, not with a TypeError', () => {
    const bad = [{ kind: 'clock-drift', target: null, driftPpm: 0 }] as unknown as Command[];
    expect(refusal(() => model.nodeSymmetric(bad, 3)).message).toContain('nodeSymmetric alphabet[0].target');
    expect(refusal(() => model.fingerprintOptionsFor(world(), bad)).message).toContain('fingerprintOptionsFor alphabet[0].target');
  });
});

describe("an exploration's options and a command's fields are refused by name when the model does not know them", () => {
  it.each([
    ['explore', () => model.explore(world(), [acquire], { maxDepth: 1, maxstates: 10 } as never), 'explore options', 'maxstates', 'maxStates'],
    ['startExploration', () => model.startExploration(world(), [acquire], { maxDepth: 1, seconds: 5 } as never), 'startExploration options', 'seconds', undefined],
    ['exploreCell', () => model.exploreCell(MATRIX_ROWS[0]!, 'strict', 'none', { maxDepth: 1, maxStates: 10, budget: 5 } as never), 'exploreCell options', 'budget', 'budgetMs'],
    ['fingerprintOptionsFor', () => model.fingerprintOptionsFor(world(), [acquire], { nodeSym: false } as never), 'fingerprintOptionsFor options', 'nodeSym', 'nodeSymmetry'],
    ['step: an acquire with a misspelt latency', () => model.step(world(), { ...acquire, latency: 5 } as never), 'acquire', 'latency', 'latencyMs'],
    ['step: a pause with a misspelt pending write', () => model.step(world(), { kind: 'pause', client: 0, pendingwrite: { resource: 'r', value: 'v' } } as never), 'pause', 'pendingwrite', 'pendingWrite'],
    ['step: a pending write with an extra field', () => model.step(world(), { kind: 'pause', client: 0, pendingWrite: { resource: 'r', value: 'v', token: 1n } } as never), 'pendingWrite', 'token', undefined],
    ['step: an advance with a misspelt ms', () => model.step(world(), { kind: 'advance', ms: 5, msec: 5 } as never), 'advance', 'msec', undefined],
    ['explore: an alphabet command with a misspelt field', () => model.explore(world(), [{ ...acquire, retryDelay: 5 } as never], { maxDepth: 1 }), 'explore alphabet[0]', 'retryDelay', 'retryDelayMs'],
  ])('%s', (_what, f, where, key, near) => {
    const e = refusal(f);
    expect(e.code).toMatch(/invalid-config|precondition/);
    expect(e.message).toContain(where);
    expect(e.message).toContain(`"${key}"`);
    if (near !== undefined) expect(e.message).toContain(`did you mean ${near}?`);
  });

  it('the commands the model itself makes pass: every matrix cell alphabet starts, every scenario runs', () => {
    for (const row of MATRIX_ROWS) {
      for (const fc of model.FAULT_CLASSES) expect(model.startCell(row, row.stores[0]!, fc, { maxDepth: 1, maxStates: 10 }).depthCompleted).toBe(0);
    }
    for (const sc of model.SCENARIOS) expect(model.runScenario(sc, Object.keys(sc.breaks)[0] as never).steps.length).toBe(sc.steps.length);
  });
});

describe('the fields a later step reads are checked when the command is stepped', () => {
  const held = (): World => model.step(world(), acquire)[0]!.next;

  it.each([
    ['NUL', 'a\0b'],
    ['a lone surrogate', 'a\uD800b'],
  ])("a pause's pending write value with %s is refused as a write's is, and nothing changes", (_what, value) => {
    const w = held();
    const before = snapshot(w);
    const e = refusal(() => model.step(w, { kind: 'pause', client: 0, pendingWrite: { resource: 'r', value } }));
    expect(e.message).toContain('value must be well-formed Unicode without NUL');
    expect(snapshot(w)).toBe(before);
  });

  it.each([
    ['kill-connection', { kind: 'kill-connection', client: 0 }],
    ['pause', { kind: 'pause', client: 0 }],
    ['advance', { kind: 'advance', ms: 5 }],
    ['crash', { kind: 'crash', node: 0 }],
    ['clock-drift', { kind: 'clock-drift', target: { client: 0 }, driftPpm: 0 }],
  ])('an operation in flight of kind %s (not an operation) is refused by name, not a TypeError', (kind, inFlight) => {
    const e = refusal(() => model.step(held(), { kind: 'pause', client: 0, inFlight } as never));
    expect(e.message).toContain(`pause inFlight must be an operation (acquire, extend, release, write, read), got "${kind}"`);
  });

  it.each([
    ['both a node and a client', { node: 0, client: 7 }],
    ['neither', {}],
    ['a node and an unknown field', { node: 0, nodes: 1 }],
  ])('a clock-drift target naming %s is refused', (_what, target) => {
    const e = refusal(() => model.step(world(), { kind: 'clock-drift', target, driftPpm: 0 } as never));
    expect(e.message).toContain('clock-drift target must be an object { node } or { client }');
  });
});

describe('explorer bounds', () => {
  it('a cell is bounded: exploreCell and startCell refuse options without maxStates', () => {
    for (const f of [model.exploreCell, model.startCell]) {
      expect(refusal(() => f(MATRIX_ROWS[0]!, 'strict', 'none', { maxDepth: 1 } as never)).message).toContain('options.maxStates must be an integer in [1, 2147483647]');
    }
  });

  it('maxStates beyond what the parent links index (2^31-1) is refused', () => {
    expect(refusal(() => model.explore(world(), [acquire], { maxDepth: 1, maxStates: 2 ** 31 })).message).toContain('explore options.maxStates must be an integer in [1, 2147483647], got 2147483648');
    expect(model.explore(world(), [acquire], { maxDepth: 1, maxStates: 2 ** 31 - 1 }).depthCompleted).toBe(1);
  });

  it('preferOutcome refuses an outcome kind the model has none of (a typo would prefer nothing)', () => {
    expect(refusal(() => model.preferOutcome('grantd' as never)).message).toContain("preferOutcome kind must be one of 'granted'");
    expect(typeof model.preferOutcome('granted')).toBe('function');
  });
});
