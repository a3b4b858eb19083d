import { describe, expect, it } from 'vitest';
import type { BackendUnderTest } from '../conformance/adapter.ts';
import { AdapterApiError, checkBackendApi, checkConformance, runLockstep } from '../conformance/index.ts';
import { simLeaseBackend } from '../conformance/sim/backend.ts';
import { simSessionBackend } from '../conformance/sim/sessionBackend.ts';
import { InvalidInputError } from '../model/errors.ts';
import type { Command } from '../model/command.ts';
import { designs } from '../model/design.ts';

/**
 * A backend's declaration (name, design, capabilities, contract, options and
 * its members) is checked whole before anything starts: a value of the wrong
 * type, out of range, or contradicting another is an AdapterApiError naming
 * the field. Without the check such a value was read as something else (the
 * string 'false' as true, an unknown token kind as bigint) and the runs were
 * judged by rules the adapter never declared, or it failed later as a
 * TypeError or an error of the model's, after a server had started.
 */
const sim = simLeaseBackend(designs.redisSingle(), 'strict');
const unfenced = simLeaseBackend(designs.redisSingle(), 'unfenced');
const session = simSessionBackend('strict');

/** `sim` with its start() counted: a refusal must come before any. */
function counted(b: Record<string, unknown>): { backend: BackendUnderTest; starts: () => number } {
  let starts = 0;
  const base = b as unknown as BackendUnderTest;
  return { backend: { ...base, start: (o) => (starts++, base.start(o)) }, starts: () => starts };
}

const CASES: readonly (readonly [what: string, backend: Record<string, unknown>, says: string])[] = [
  ['an empty name', { ...sim, name: '' }, 'must be a BackendUnderTest'],
  ['a design of no known kind', { ...sim, design: { kind: 'nope' } }, 'design.kind must be one of'],
  ['a design without its fields', { ...sim, design: { kind: 'redis-single' } }, 'redis-single persistence must be one of'],
  ['capabilities that are no object', { ...sim, capabilities: 'strict' }, 'capabilities must be an object'],
  ['capabilities.ttl a string', { ...sim, capabilities: { ...sim.capabilities, ttl: 'yes' } }, 'capabilities.ttl must be a boolean, got "yes"'],
  ['capabilities.sessionBound a number', { ...sim, capabilities: { ...sim.capabilities, sessionBound: 0 } }, 'capabilities.sessionBound must be a boolean, got 0'],
  ['capabilities.reentrant absent', { ...sim, capabilities: { store: 'strict', ttl: true, sessionBound: false } }, 'capabilities.reentrant must be a boolean, got undefined'],
  ['capabilities.tokens a string', { ...unfenced, capabilities: { ...unfenced.capabilities, tokens: 'false' } }, 'capabilities.tokens must be a boolean or absent, got "false"'],
  ['capabilities.store unknown', { ...sim, capabilities: { ...sim.capabilities, store: 'bogus' } }, 'capabilities.store must be one of'],
  ['capabilities.expiryToleranceMs NaN', { ...sim, capabilities: { ...sim.capabilities, expiryToleranceMs: Number.NaN } }, 'capabilities.expiryToleranceMs must be an integer'],
  ['capabilities.expiryToleranceMs negative', { ...sim, capabilities: { ...sim.capabilities, expiryToleranceMs: -1 } }, 'capabilities.expiryToleranceMs must be an integer'],
  ['capabilities.ttlGrainMs 0', { ...sim, capabilities: { ...sim.capabilities, ttlGrainMs: 0 } }, 'capabilities.ttlGrainMs must be an integer'],
  ['capabilities.ttlGrainMs 1.5', { ...sim, capabilities: { ...sim.capabilities, ttlGrainMs: 1.5 } }, 'capabilities.ttlGrainMs must be an integer'],
  ['capabilities.tokensComparedBy unknown', { ...sim, capabilities: { ...sim.capabilities, tokensComparedBy: 'size' } }, 'capabilities.tokensComparedBy must be one of'],
  ['a contract that is no object', { ...sim, contract: 'lenient' }, 'contract must be an object'],
  ['contract.deadline unknown', { ...sim, contract: { deadline: 'maybe' } }, 'contract.deadline must be one of'],
  ["contract.clientTimeout the string 'false'", { ...sim, contract: { clientTimeout: 'false' } }, 'contract.clientTimeout must be a boolean or absent, got "false"'],
  ['contract.refreshTtl unknown', { ...sim, contract: { refreshTtl: 'fixed' } }, 'contract.refreshTtl must be one of'],
  ['contract.denialReasons a number', { ...sim, contract: { denialReasons: 1 } }, 'contract.denialReasons must be a boolean or absent'],
  ['contract.validatesInput null', { ...sim, contract: { validatesInput: null } }, 'contract.validatesInput must be a boolean or absent'],
  ['contract.tokens unknown', { ...sim, contract: { tokens: 'bigints' } }, 'contract.tokens must be one of'],
  ['contract.failedExtend a string', { ...sim, contract: { failedExtend: 'dropped' } }, 'contract.failedExtend must be'],
  ['contract.failedExtend.lease unknown', { ...sim, contract: { failedExtend: { lease: 'lost', keys: 'kept' } } }, 'contract.failedExtend.lease must be one of'],
  ['contract.failedExtend with a typo', { ...sim, contract: { failedExtend: { lease: 'kept', key: 'kept' } } }, 'contract.failedExtend: unknown option "key" (did you mean keys?)'],
  ['contract.driftMargin.factor NaN', { ...sim, contract: { driftMargin: { factor: Number.NaN, fixedMs: 0, rounding: 'ceil' } } }, 'contract.driftMargin.factor must be a number in [0, 1)'],
  ['contract.driftMargin.factor 1', { ...sim, contract: { driftMargin: { factor: 1, fixedMs: 0, rounding: 'ceil' } } }, 'contract.driftMargin.factor must be a number in [0, 1)'],
  ['contract.driftMargin.fixedMs -1', { ...sim, contract: { driftMargin: { factor: 0.01, fixedMs: -1, rounding: 'ceil' } } }, 'contract.driftMargin.fixedMs must be an integer in [0, 1000]'],
  ['contract.driftMargin.rounding unknown', { ...sim, contract: { driftMargin: { factor: 0.01, fixedMs: 0, rounding: 'floor' } } }, 'contract.driftMargin.rounding must be one of'],
  ['options that are no object', { ...sim, options: 'drift=0.01' }, 'options must be an object'],
  ['an option that is a bigint (no JSON for a counterexample file)', { ...sim, options: { base: 1n } }, 'options.base must be a string, a finite number, a boolean or null'],
  ['an option that is an object', { ...sim, options: { nested: { a: 1 } } }, 'options.nested must be a string, a finite number, a boolean or null'],
  ['an option that is NaN', { ...sim, options: { factor: Number.NaN } }, 'options.factor must be a string, a finite number, a boolean or null'],
  ['a close hook that is no function', { ...sim, close: 'stop' }, 'close must be a function or absent'],
  ['misconfigurations that are no array', { ...sim, misconfigurations: { what: 'x' } }, 'misconfigurations must be an array'],
  ['a concurrent client without connect()', { ...sim, concurrent: { servers: { kind: 'redis', nodes: 1 } } }, 'concurrent must be a ConcurrentClient'],
  ['a member of no BackendUnderTest (a typo)', { ...sim, contracts: { tokens: 'none' } }, 'unknown option "contracts" (did you mean contract?)'],
  // Contradictions: each value valid alone.
  ['no tokens (capabilities) with a fenced store', { ...sim, capabilities: { ...sim.capabilities, tokens: false } }, "without fencing tokens (capabilities.tokens false) its store must be 'unfenced', not 'strict'"],
  ['no tokens (contract) with a fenced store', { ...sim, contract: { tokens: 'none' } }, "without fencing tokens (contract.tokens 'none') its store must be 'unfenced', not 'strict'"],
  ['tokens in the contract, none in the capabilities', { ...unfenced, capabilities: { ...unfenced.capabilities, tokens: false }, contract: { tokens: 'bigint' } }, "contract.tokens 'bigint' contradicts capabilities.tokens false"],
  ['a transactional store on a ttl design', { ...sim, capabilities: { ...sim.capabilities, store: 'transactional' } }, 'capabilities.store must be a store that fits design redis-single'],
  ['ttl on a session lock', { ...session, capabilities: { ...session.capabilities, ttl: true } }, 'capabilities.ttl true contradicts its design pg-session'],
  ['session-bound on a ttl lock', { ...sim, capabilities: { ...sim.capabilities, sessionBound: true } }, 'capabilities.sessionBound true contradicts its design redis-single'],
  ['reentrant on a lock that does not stack', { ...sim, capabilities: { ...sim.capabilities, reentrant: true } }, 'capabilities.reentrant true contradicts its design redis-single'],
];

describe("a backend's declaration is checked whole before anything starts", () => {
  it.each(CASES)('%s: AdapterApiError naming the field, from checkBackendApi, checkConformance and runLockstep, before start()', async (_what, declared, says) => {
    const { backend, starts } = counted(declared);
    expect(() => checkBackendApi(backend)).toThrow(AdapterApiError);
    expect(() => checkBackendApi(backend)).toThrow(says);
    await expect(checkConformance(backend, { runs: 1, seed: 1 })).rejects.toThrow(AdapterApiError);
    await expect(runLockstep(backend, [], { clients: 2, tokenBase: 0n })).rejects.toThrow(AdapterApiError);
    expect(starts()).toBe(0);
  });

  it('the declarations of a good backend pass: every field at a value it takes', async () => {
    const full: BackendUnderTest = {
      ...unfenced,
      capabilities: { ...unfenced.capabilities, tokens: false, expiryToleranceMs: 0, ttlGrainMs: 1, tokensComparedBy: 'value' },
      contract: { deadline: 'none', clientTimeout: false, refreshTtl: 'acquired', failedExtend: { lease: 'dropped', keys: 'deleted' }, denialReasons: false, tokens: 'none', validatesInput: false, driftMargin: { factor: 0, fixedMs: 1000, rounding: 'round' } },
      options: { a: 'x', b: 1.5, c: true, d: null },
      close: async () => undefined,
      misconfigurations: [],
    };
    expect(() => checkBackendApi(full)).not.toThrow();
    expect(() => checkBackendApi(session)).not.toThrow();
    expect((await runLockstep(full, [{ kind: 'acquire', client: 0, resource: 'r', ttlMs: 10 }], { clients: 1, tokenBase: 0n })).verdict.kind).toBe('pass');
  });
});

describe('runLockstep refuses bad options and commands before start()', () => {
  const acquire: Command = { kind: 'acquire', client: 0, resource: 'r', ttlMs: 10 };
  it.each([
    ['closeLimitMs NaN', { closeLimitMs: Number.NaN }, 'closeLimitMs'],
    ['startLimitMs a string', { startLimitMs: '50' }, 'startLimitMs'],
    ['environmentLimitMs 0', { environmentLimitMs: 0 }, 'environmentLimitMs'],
    ['requestTimeoutMs -1', { requestTimeoutMs: -1 }, 'requestTimeoutMs'],
    ['clients 0', { clients: 0 }, 'clients'],
    ['clients 1.5', { clients: 1.5 }, 'clients'],
    ['tokenBase a number', { tokenBase: 0 }, 'tokenBase'],
    ['tokenBase past 2^63-1', { tokenBase: 2n ** 63n }, 'tokenBase'],
    ['continueAfterViolation a string', { continueAfterViolation: 'yes' }, 'continueAfterViolation'],
  ] as const)('%s', async (_what, bad, names) => {
    const { backend, starts } = counted(sim as unknown as Record<string, unknown>);
    const e = await runLockstep(backend, [acquire], { clients: 2, tokenBase: 0n, ...bad } as never).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(InvalidInputError);
    expect((e as Error).message).toContain(names);
    expect(starts()).toBe(0);
  });

  it.each([
    ['not an array', 'acquire', 'commands must be an array of commands'],
    ['a command of no kind', [{ client: 0 }], 'commands[0] must be a command'],
    ['a command of an unknown kind', [acquire, { kind: 'explode' }], 'commands[1]: unknown command kind "explode"'],
    ['a client past the run', [{ ...acquire, client: 2 }], 'commands[0].client must be a client index in [0, 1]'],
    ['a node past the design', [{ kind: 'crash', node: 1 }], 'commands[0].node must be a node index in [0, 0]'],
    // Commands no state of the design's model takes were skipped as ones this state does not enable (found writing an adapter's test).
    ['an acquire without a ttl on a ttl design', [acquire, { kind: 'acquire', client: 1, resource: 'r' }], 'commands[1]'],
    ['an empty resource', [{ ...acquire, resource: '' }], 'commands[0]'],
    ['an advance of 0 ms', [acquire, { kind: 'advance', ms: 0 }], 'commands[1]'],
    ['an acquire without a ttl in flight across a pause', [{ kind: 'pause', client: 0, inFlight: { kind: 'acquire', client: 0, resource: 'r' } }], 'commands[0]'],
  ] as const)('commands: %s (a run of it would pass having run nothing)', async (_what, commands, says) => {
    const { backend, starts } = counted(sim as unknown as Record<string, unknown>);
    const e = await runLockstep(backend, commands as never, { clients: 2, tokenBase: 0n }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(InvalidInputError);
    expect((e as Error).message).toContain(says);
    expect(starts()).toBe(0);
  });

  it('a command only this state does not enable is still skipped, as a generated one is (a resume of a running client)', async () => {
    const r = await runLockstep(sim, [acquire, { kind: 'resume', client: 0 }], { clients: 2, tokenBase: 0n });
    expect(r.verdict.kind).toBe('pass');
    expect(r.steps.length).toBe(1);
  });
});

describe('checkConformance: a replay path is checked before anything starts', () => {
  it.each([
    ['a path without a seed (it would replay against a random seed)', { path: '3:0:1' }, 'path needs seed'],
    ['a path that is not colon-separated indexes', { seed: 1, path: 'garbage' }, 'path must be'],
    ['an empty path', { seed: 1, path: '' }, 'path must be'],
  ] as const)('%s', async (_what, options, says) => {
    const { backend, starts } = counted(sim as unknown as Record<string, unknown>);
    const e = await checkConformance(backend, { runs: 1, ...options }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(InvalidInputError);
    expect((e as Error).message).toContain(says);
    expect(starts()).toBe(0);
  });
});
