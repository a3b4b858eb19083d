import { describe, expect, it } from 'vitest';
import * as model from '../model/index.ts';
import type { World } from '../model/index.ts';
import { designs, initialWorld, InvalidInputError, MATRIX_ROWS, MAX_TTL_MS } from '../model/index.ts';

/**
 * Keys lockcheck/model did not know were read as absent: a misspelt
 * `tokenbase`, `node` or `driftRouding` ran the model with the default,
 * silently. And a design's restartDelayMs had no upper bound, so a restart
 * stepped into a world the next public step refused. Pure and fast.
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

describe('option and field keys the model does not know are refused by name, not read as the default', () => {
  it.each([
    ['initialWorld', () => initialWorld({ design: redlock3, store: 'strict', clients: 2, tokenbase: 5n } as never), 'initialWorld config', 'tokenbase', 'tokenBase'],
    ['step, a world whose config was edited', () => model.step({ ...world(), config: { ...world().config, requestTimeout: 5 } } as never, { kind: 'advance', ms: 1 }), 'step world.config', 'requestTimeout', 'requestTimeoutMs'],
    ['designs.redlock', () => designs.redlock({ node: 3 } as never), 'designs.redlock options', 'node', 'nodes'],
    ['designs.pgSession', () => designs.pgSession({ statementTimeout: 100 } as never), 'designs.pgSession options', 'statementTimeout', 'statementTimeoutMs'],
    ['validateDesign', () => model.validateDesign({ ...designs.redisSingle(), driftRouding: 'round' } as never), 'design', 'driftRouding', 'driftRounding'],
    ['validateDesign failedExtend', () => model.validateDesign({ ...designs.redisSingle(), failedExtend: { lease: 'kept', keys: 'kept', key: 'x' } } as never), 'failedExtend', 'key', undefined],
    ['alphabetFor', () => model.alphabetFor(redlock3, 'none', { ...model.DEFAULT_ALPHABET, client: 3 } as never), 'alphabetFor alphabet', 'client', 'clients'],
    ['canonicalKey', () => model.canonicalKey(world(), { nodesymmetry: false } as never), 'canonicalKey options', 'nodesymmetry', 'nodeSymmetry'],
    ['exploreByLevels', () => model.exploreByLevels([], { clock: () => 0, deadlineMs: 0, memoryLimit: 5 } as never), 'exploreByLevels options', 'memoryLimit', 'memoryLimitBytes'],
  ])('%s', (_what, f, where, key, near) => {
    const e = refusal(f);
    expect(e.code).toBe('invalid-config');
    expect(e.message).toContain(where);
    expect(e.message).toContain(`"${key}"`);
    if (near !== undefined) expect(e.message).toContain(`did you mean ${near}?`);
  });

  it('canonicalKey refuses a nodeSymmetry that is not a boolean (a string read as true before)', () => {
    expect(refusal(() => model.canonicalKey(world(), { nodeSymmetry: 'no' } as never)).message).toContain('canonicalKey options.nodeSymmetry must be a boolean or absent');
  });

  it('the keys the model itself writes are all known: every scenario, matrix row and design helper passes', () => {
    for (const sc of model.SCENARIOS) expect(model.runScenario(sc, Object.keys(sc.breaks)[0] as never).steps.length).toBe(sc.steps.length);
    for (const row of MATRIX_ROWS) for (const fc of model.FAULT_CLASSES) expect(model.alphabetFor(row.design, fc).length).toBeGreaterThan(0);
    // Optional keys present with undefined are absent keys, as conformance builds its configs.
    expect(initialWorld({ design: redlock3, store: 'strict', clients: 1, tokenBase: undefined, requestTimeoutMs: undefined }).clients).toHaveLength(1);
    expect(designs.pgSession({ statementTimeoutMs: 100 }).kind).toBe('pg-session');
    expect(designs.etcdLease({ leaseRenewal: 'last-request', leaderChangeExtendMs: 5 }).kind).toBe('etcd-lease');
    expect(model.validateDesign({ ...designs.redlock(), clientDeadline: 'none', failedExtend: { lease: 'dropped', keys: 'deleted' }, driftRounding: 'round' } as never).kind).toBe('redlock');
  });
});

describe('a design bounds every duration it sets, so the worlds it steps into stay worlds the model accepts', () => {
  it.each([
    ['redisSingle', () => designs.redisSingle({ restartDelayMs: 2 ** 60 })],
    ['redlock', () => designs.redlock({ restartDelayMs: MAX_TTL_MS + 1 })],
    ['a hand-made design', () => model.validateDesign({ ...designs.redisSingle(), restartDelayMs: Number.MAX_VALUE } as never)],
  ])('a restartDelayMs past 2^31-1 is refused (%s)', (_what, f) => {
    expect(refusal(f).message).toContain(`restartDelayMs must be an integer in [0, ${MAX_TTL_MS}]`);
  });

  it('the longest restart delay steps into a world the next public step accepts', () => {
    const w = initialWorld({ design: designs.redisSingle({ restartDelayMs: MAX_TTL_MS }), store: 'strict', clients: 1 });
    const run = model.runSchedule(w, [{ kind: 'crash', node: 0 }, { kind: 'restart', node: 0 }]);
    expect(model.step(run.world, { kind: 'advance', ms: 5 })).toHaveLength(1);
  });
});
