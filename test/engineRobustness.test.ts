import { describe, expect, it } from 'vitest';
import type { BackendUnderTest, LockClient } from '../conformance/adapter.ts';
import { checkConformance, checkMisconfigurations, runLockstep } from '../conformance/index.ts';
import { simLeaseBackend } from '../conformance/sim/backend.ts';
import { LeaseLostError } from '../impl/errors.ts';
import type { Lease } from '../impl/lease.ts';
import type { Command } from '../model/index.ts';
import { designs } from '../model/index.ts';

/**
 * The engine against an adapter that breaks the adapter API in the ways
 * adapters written by hand do: an operation that never settles, a throw of
 * something that is no Error, an answer of the wrong kind, a lease whose
 * signal cannot be read. Each is a finding of the run, named and bounded in
 * time, never the harness's own crash or hang.
 */
const base = simLeaseBackend(designs.redisSingle(), 'strict');

/** The backend with each client's `op` replaced by `make(the real one)`. */
function withClient<K extends 'acquire' | 'extend' | 'release'>(op: K, make: (real: NonNullable<LockClient[K]>) => unknown): BackendUnderTest {
  return {
    ...base,
    name: `broken ${op}`,
    start: async (o) => {
      const instance = await base.start(o);
      const clients = instance.clients.map((c): LockClient => {
        const real = { acquire: c.acquire.bind(c), extend: c.extend?.bind(c), release: c.release.bind(c) };
        return { acquire: real.acquire, ...(real.extend ? { extend: real.extend } : {}), release: real.release, store: c.store, clock: c.clock, [op]: make(real[op] as NonNullable<LockClient[K]>) };
      });
      return { ...instance, clients };
    },
  };
}

/** Grants leases whose `signal` is `signal(the real lease, reads of it so far, grants before it)`, read through a getter each time. */
function withSignal(signal: (real: Lease, reads: number, grant: number) => unknown): BackendUnderTest {
  let grants = 0;
  return withClient('acquire', (real) => async (...args: Parameters<LockClient['acquire']>) => {
    const r = await real(...args);
    if (r.kind !== 'granted') return r;
    const l = r.lease;
    const grant = grants++;
    let reads = 0;
    const lease = { resource: l.resource, owner: l.owner, token: l.token, validUntilMs: l.validUntilMs, get signal() { return signal(l, reads++, grant); } };
    return { kind: 'granted', lease };
  });
}

const acquire: Command = { kind: 'acquire', client: 0, resource: 'r', ttlMs: 10 };
const schedule: Command[] = [acquire, { kind: 'extend', client: 0, resource: 'r', ttlMs: 10 }, { kind: 'write', client: 0, resource: 'r', value: 'a' }, { kind: 'release', client: 0, resource: 'r' }];
const never = () => () => new Promise<never>(() => undefined);

async function verdictOf(backend: BackendUnderTest, commands: readonly Command[] = schedule) {
  const started = performance.now();
  const report = await runLockstep(backend, commands, { clients: 2, tokenBase: 0n, closeLimitMs: 1000 });
  return { verdict: report.verdict, realMs: performance.now() - started };
}

describe('the engine reports an adapter that breaks the API, and stays bounded in time', () => {
  it.each([
    ['acquire', "client 0's acquire did not complete by t=0 ms"],
    ['extend', "client 0's extend did not complete by t=0 ms"],
    ['release', "client 0's release did not complete by t=0 ms"],
  ] as const)('an %s that never settles is LIVE-1 at the model\'s time, in real milliseconds', async (op, message) => {
    const { verdict, realMs } = await verdictOf(withClient(op, never));
    expect(verdict).toMatchObject({ kind: 'conformance-failure', property: 'LIVE-1' });
    expect(verdict.kind === 'conformance-failure' && verdict.message).toContain(message);
    // Virtual time: nothing waits for real time to pass.
    expect(realMs).toBeLessThan(5000);
  });

  it.each([
    ['null', null, '(null)'],
    ['undefined', undefined, '(undefined)'],
    ['a string', 'boom', '("boom")'],
    ['a plain object', { code: 7 }, '({"code":7})'],
  ])('a throw of %s is reported as what was thrown, not as the harness\'s TypeError', async (_what, thrown, shown) => {
    for (const op of ['acquire', 'release'] as const) {
      const { verdict } = await verdictOf(
        withClient(op, () => async () => {
          throw thrown;
        }),
      );
      expect(verdict).toMatchObject({ kind: 'conformance-failure', property: 'LIVE-1' });
      expect(verdict.kind === 'conformance-failure' && verdict.message).toBe(`client 0's ${op} threw a value that is no Error ${shown}, where the model has it done`);
    }
  });

  it('a whole check of an adapter that throws null ends in a failure to replay, not an exception', async () => {
    const result = await checkConformance(
      withClient('release', () => async () => {
        throw null;
      }),
      { runs: 20, seed: 11, faults: ['advance'] },
    );
    expect(result.failure?.report.verdict).toMatchObject({ kind: 'conformance-failure', property: 'LIVE-1' });
    expect(result.failure?.message).toContain('threw a value that is no Error (null)');
  });

  it('an answer of the wrong kind is a breach naming it, never mapped to a neighbour', async () => {
    const acquired = await verdictOf(withClient('acquire', () => async () => ({ kind: 'extended', validUntilMs: 5 })));
    expect(acquired.verdict).toMatchObject({ kind: 'conformance-failure', property: 'MUTEX-1', message: 'acquire answered {"kind":"extended","validUntilMs":5}, which the adapter API does not define' });
    const extended = await verdictOf(withClient('extend', () => async () => ({ kind: 'granted' })));
    expect(extended.verdict).toMatchObject({ kind: 'conformance-failure', property: 'MUTEX-1', message: 'extend answered {"kind":"granted"}, which the adapter API does not define' });
  });

  it.each([
    ['acquire', 'a timed-out with a lease beside it', { kind: 'timed-out', lease: null }, 'MUTEX-1', 'acquire answered {"kind":"timed-out","lease":null}'],
    ['acquire', 'a denial for a reason the API does not have', { kind: 'denied', reason: 'busy' }, 'MUTEX-1', 'acquire answered {"kind":"denied","reason":"busy"}'],
    ['extend', 'a refusal for a reason the API does not have', { kind: 'not-extended', reason: 'busy' }, 'MUTEX-1', 'extend answered {"kind":"not-extended","reason":"busy"}'],
    ['write', 'an acceptance that also names a highest token', { kind: 'accepted', highest: 3n }, 'FENCE-2', "the store's write answered {\"kind\":\"accepted\",\"highest\":\"3n\"}"],
    ['read', 'a value without its token', { value: 'a', token: null }, 'STORE-1', "the store's read answered {\"value\":\"a\",\"token\":null}"],
  ] as const)('%s answering %s is a breach naming the answer (never compared as a neighbouring outcome)', async (op, _what, answer, property, message) => {
    const backend: BackendUnderTest =
      op === 'write' || op === 'read'
        ? {
            ...base,
            start: async (o) => {
              const instance = await base.start(o);
              const clients = instance.clients.map((c): LockClient => {
                const store = { read: c.store.read.bind(c.store), write: c.store.write.bind(c.store), [op]: async () => answer } as LockClient['store'];
                return { acquire: c.acquire.bind(c), ...(c.extend ? { extend: c.extend.bind(c) } : {}), release: c.release.bind(c), store, clock: c.clock };
              });
              return { ...instance, clients };
            },
          }
        : withClient(op, () => async () => answer);
    const commands: Command[] = op === 'read' ? [{ kind: 'read', client: 0, resource: 'r' }] : schedule;
    const { verdict } = await verdictOf(backend, commands);
    expect(verdict).toMatchObject({ kind: 'conformance-failure', property, message: `${message}, which the adapter API does not define` });
  });

  it("a release whose signal fires with a reason that is no LeaseLostError (a plain { reason: 'released' }) is reported: user code cannot tell why", async () => {
    const controllers = new Map<string, AbortController>();
    const plain = withSignal((l) => {
      const c = controllers.get(l.owner) ?? new AbortController();
      controllers.set(l.owner, c);
      return c.signal;
    });
    const backend: BackendUnderTest = {
      ...plain,
      start: async (o) => {
        const instance = await plain.start(o);
        const clients = instance.clients.map((c): LockClient => ({ ...c, acquire: c.acquire.bind(c), ...(c.extend ? { extend: c.extend.bind(c) } : {}), release: async (lease) => {
          await c.release(lease);
          controllers.get(lease.owner)?.abort({ reason: 'released' });
        } }));
        return { ...instance, clients };
      },
    };
    const { verdict } = await verdictOf(backend, [acquire, { kind: 'release', client: 0, resource: 'r' }]);
    expect(verdict).toMatchObject({ kind: 'conformance-failure', property: 'LIVE-1', message: `the released lease on 'r' signalled reason {"reason":"released"}, not 'released'` });
  });

  it("a ttl lease whose signal fires at its deadline with reason 'connection-lost' (not 'expired') is LIVE-1 naming both", async () => {
    const relabelled = withSignal((l) => {
      const c = new AbortController();
      l.signal.addEventListener('abort', () => c.abort(new LeaseLostError('connection-lost', l.resource)), { once: true });
      return c.signal;
    });
    // One signal per lease, read twice by the harness: the same controller each time.
    const signals = new Map<string, AbortSignal>();
    const backend: BackendUnderTest = {
      ...relabelled,
      start: async (o) => {
        const instance = await relabelled.start(o);
        const clients = instance.clients.map((c): LockClient => ({ ...c, acquire: async (r, options) => {
          const x = await c.acquire(r, options);
          if (x.kind !== 'granted') return x;
          const l = x.lease;
          const signal = signals.get(l.owner) ?? l.signal;
          signals.set(l.owner, signal);
          return { kind: 'granted', lease: { resource: l.resource, owner: l.owner, token: l.token, validUntilMs: l.validUntilMs, signal } as Lease };
        }, ...(c.extend ? { extend: c.extend.bind(c) } : {}), release: c.release.bind(c) }));
        return { ...instance, clients };
      },
    };
    const { verdict } = await verdictOf(backend, [acquire, { kind: 'advance', ms: 20 }]);
    expect(verdict).toMatchObject({ kind: 'conformance-failure', property: 'LIVE-1', message: "client 0's lease on 'r' signalled its loss with reason connection-lost; the model has it expired" });
  });

  it('a lease whose signal getter throws is a breach (MUTEX-1), at the grant and at a later read', async () => {
    const atGrant = await verdictOf(
      withSignal(() => {
        throw null;
      }),
    );
    expect(atGrant.verdict).toMatchObject({ kind: 'conformance-failure', property: 'MUTEX-1', message: "reading the signal of the lease on 'r' threw a value that is no Error (null): user code cannot learn when the lease ends" });
    // The second read (the harness checks that every read gives the same signal) throws.
    const later = await verdictOf(
      withSignal((l, reads) => {
        if (reads > 0) throw new Error('gone');
        return l.signal;
      }),
    );
    expect(later.verdict).toMatchObject({ kind: 'conformance-failure', property: 'MUTEX-1', message: "reading the signal of the lease on 'r' threw Error: gone: user code cannot learn when the lease ends" });
  });

  it('a signal that is no AbortSignal, first read at a pause before a write, is a breach of that step, not an exception', async () => {
    // Every second grant's signal is read late: here at the pause that checks the lease before its write.
    const late: Command[] = [acquire, { ...acquire, resource: 'q' }, { kind: 'pause', client: 0, pendingWrite: { resource: 'q', value: 'a' } }];
    const { verdict } = await verdictOf(
      withSignal((l, _reads, grant) => (grant === 0 ? l.signal : 'not a signal')),
      late,
    );
    expect(verdict).toMatchObject({ kind: 'conformance-failure', property: 'MUTEX-1', message: "the lease on 'q' has signal not a signal, which the adapter API does not define" });
    expect(verdict.kind === 'conformance-failure' && verdict.step.command.kind).toBe('pause');
  });

  it('invalid input refused by a throw of null is reported as that, not as accepted', async () => {
    // The first step's probe is acquire('').
    const throwsNull = withClient('acquire', (real) => async (resource: string, options: Parameters<LockClient['acquire']>[1]) => {
      if (resource === '') throw null;
      return real(resource, options);
    });
    const { verdict } = await verdictOf(throwsNull, [acquire]);
    expect(verdict).toMatchObject({ kind: 'conformance-failure', property: 'MUTEX-1', message: "invalid input (acquire('')) was refused with a value that is no Error (null), not with InvalidInputError" });
  });

  it('a misconfiguration refused by a throw of null is reported as that, not as accepted', async () => {
    const problems = await checkMisconfigurations({
      ...base,
      misconfigurations: [
        {
          what: 'driftFactor 1',
          names: 'driftFactor',
          attempt: async () => {
            throw null;
          },
        },
      ],
    });
    expect(problems).toEqual([`${base.name}: driftFactor 1 was refused with a value that is no Error (null), not with InvalidInputError`]);
  });
});
