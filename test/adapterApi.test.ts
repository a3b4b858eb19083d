import { describe, expect, it } from 'vitest';
import { designs } from '../model/design.ts';
import type { BackendUnderTest, Environment, LockClient } from '../conformance/adapter.ts';
import type { Command } from '../model/command.ts';
import { AdapterError, closeBackend } from '../conformance/adapterCall.ts';
import type { Lease } from '../impl/lease.ts';
import type { AcquireOptions } from '../impl/leaseLock.ts';
import { AdapterApiError, checkBackendApi, offeredFaults } from '../conformance/backendApi.ts';
import { checkConformance } from '../conformance/check.ts';
import { FAULT_KINDS, faultKindsOf, FaultNotOfferedError } from '../conformance/faults.ts';
import { runLockstep } from '../conformance/lockstep.ts';
import { simLeaseBackend } from '../conformance/sim/backend.ts';
import { simSessionBackend } from '../conformance/sim/sessionBackend.ts';
import { tinyLock } from '../docs/examples/tinyLock.ts';
import { resolveBackend } from '../cli/backends.ts';
import { LATE_FACTORY } from './fixtures/lateFactoryAdapter.ts';

/** A backend whose environment is `env` around a working sim instance's time control and clients. */
function withEnvironment(name: string, env: (real: Environment) => unknown, extra: Record<string, unknown> = {}): BackendUnderTest {
  const sim = simLeaseBackend(designs.redisSingle(), 'strict');
  return {
    ...sim,
    name,
    ...extra,
    start: async (o) => {
      const instance = await sim.start(o);
      return { ...instance, env: env(instance.env) as Environment };
    },
  };
}

/** An environment's time control, as its own functions. */
const timeOf = (real: Environment) => ({ nowMs: () => real.nowMs(), advanceTo: (t: number) => real.advanceTo(t), runUntil: (w: Promise<unknown>, l: number) => real.runUntil(w, l) });

describe('the adapter API: an environment is time control plus a registry of fault injectors', () => {
  it('what a backend takes is read from the injectors its environment provides', async () => {
    expect(await offeredFaults(simLeaseBackend(designs.redisSingle(), 'strict'))).toEqual(FAULT_KINDS);
    // The session lock: no expiry (no clock step), no crash; a one-sided partition (spec 3).
    expect(await offeredFaults(simSessionBackend('strict'))).toEqual(['advance', 'clock-drift', 'pause', 'partition', 'delay', 'latency', 'slow-node', 'kill-connection']);
    expect(await offeredFaults(tinyLock)).toEqual(['advance', 'clock-step', 'pause', 'delay']);
    expect(faultKindsOf({})).toEqual(['advance']);
  });

  it('generates only the faults a backend provides: a backend with no injectors gets schedules of operations and time alone', async () => {
    const bare = withEnvironment('no faults at all', (real) => ({ ...timeOf(real), faults: {}, inspect: (r: string) => real.inspect!(r) }));
    const kinds = new Set<string>();
    const r = await checkConformance(bare, { runs: 60, seed: 7, onRun: (_run, report) => report.steps.forEach((s) => kinds.add(s.command.kind)) });
    expect(r.failure?.message ?? null).toBeNull();
    expect([...kinds].sort()).toEqual(['acquire', 'advance', 'extend', 'read', 'release', 'write']);
  });

  it('a backend whose clients have no extend (a library without one) is sent none: an absent extend is not read as a refusal', async () => {
    const sim = simLeaseBackend(designs.redisSingle(), 'strict');
    const noExtend: BackendUnderTest = {
      ...sim,
      name: 'no extend',
      start: async (o) => {
        const instance = await sim.start(o);
        // Each client as it is, but without its extend.
        return { ...instance, clients: instance.clients.map((c) => ({ acquire: (r: string, a: AcquireOptions) => c.acquire(r, a), release: (l: Lease) => c.release(l), store: c.store, clock: c.clock })) };
      },
    };
    const kinds = new Set<string>();
    const r = await checkConformance(noExtend, { runs: 30, seed: 7, onRun: (_run, report) => report.steps.forEach((s) => kinds.add(s.command.kind === 'pause' && s.command.inFlight !== undefined ? `pause ${s.command.inFlight.kind}` : s.command.kind)) });
    expect(r.failure?.message ?? null).toBeNull();
    expect(kinds.has('extend')).toBe(false);
    expect(kinds.has('pause extend')).toBe(false);
    expect(kinds.has('acquire') && kinds.has('release') && kinds.has('pause')).toBe(true);
  });

  it('a command whose fault the environment does not provide (a counterexample replayed on another backend) is a typed error naming the injector', async () => {
    const bare = withEnvironment('no pause', (real) => ({ ...timeOf(real), faults: {} }));
    const run = runLockstep(bare, [{ kind: 'pause', client: 0 }], { clients: 2, tokenBase: 0n });
    await expect(run).rejects.toThrow(FaultNotOfferedError);
    await expect(run).rejects.toThrow(/no pause takes no pause fault: its environment provides no faults\.pause/);
  });

  it('an adapter of the old API (a `faults` list on the backend) is refused when it is loaded, saying what changed and how to port', async () => {
    const old = withEnvironment('old list', (real) => real, { faults: ['advance', 'pause'] });
    expect(() => checkBackendApi(old)).toThrow(AdapterApiError);
    expect(() => checkBackendApi(old)).toThrow(/old list: written for the old adapter API \(BackendUnderTest\.faults, a list of fault kinds\)\. What changed: .*To port: delete the backend's `faults: \[\.\.\.\]`/);
    await expect(checkConformance(old, { runs: 1 })).rejects.toThrow(AdapterApiError);
  });

  it('an environment of the old API (fault methods, stubs) is refused when the backend is loaded, naming where each method goes now', async () => {
    const stub = async (): Promise<void> => undefined;
    const old = withEnvironment('old methods', (real) => ({ ...timeOf(real), pause: stub, resume: stub, partition: stub, heal: stub, setDelay: stub }));
    const loading = offeredFaults(old);
    await expect(loading).rejects.toThrow(AdapterApiError);
    await expect(loading).rejects.toThrow(/old methods: its environment has partition, heal, setDelay, pause, resume as methods, as in the old adapter API \(now: faults\.partition: \{ cut\(client, node\), heal\(client, node\) \}; faults\.delay: \(client, ms\) => …; faults\.pause: \{ pause\(client\), resume\(client\) \}\)/);
    // Without the registry at all, too.
    const none = withEnvironment('no registry', (real) => ({ ...timeOf(real) }));
    await expect(offeredFaults(none)).rejects.toThrow(/no registry: its environment has no `faults` registry/);
  });
});

describe("the adapter's own calls: a throw, a hang or a malformed instance is an error naming the adapter and the call", () => {
  const sim = simLeaseBackend(designs.redisSingle(), 'strict');
  const acquire: Command = { kind: 'acquire', client: 0, resource: 'a', ttlMs: 10 } as Command;
  const opts = { clients: 2, tokenBase: 0n } as const;

  it('start() that throws: AdapterError with the cause, from the runner and from reading its faults', async () => {
    const b: BackendUnderTest = { ...sim, name: 'throws-at-start', start: () => Promise.reject(new Error('cannot start')) };
    const e = await runLockstep(b, [acquire], opts).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(AdapterError);
    expect((e as AdapterError).message).toBe('adapter throws-at-start: start() threw Error: cannot start');
    expect((e as AdapterError).cause).toBeInstanceOf(Error);
    // A synchronous throw, not a rejected promise, the same.
    const sync: BackendUnderTest = { ...sim, name: 'throws-sync', start: () => { throw new TypeError('x is undefined'); } };
    await expect(offeredFaults(sync)).rejects.toThrow('adapter throws-sync: start() threw TypeError: x is undefined');
  });

  it('a probe start() that failed is not kept for the backend object: the next call probes again (before, its failure was cached for good)', async () => {
    let starts = 0;
    const flaky: BackendUnderTest = { ...sim, name: 'fails-first-probe', start: (o) => (++starts === 1 ? Promise.reject(new Error('not yet')) : sim.start(o)) };
    await expect(offeredFaults(flaky)).rejects.toThrow('adapter fails-first-probe: start() threw Error: not yet');
    expect(await offeredFaults(flaky)).toEqual(await offeredFaults(sim));
    expect(starts).toBe(2);
  });

  it('a declaration read through a getter that throws: AdapterApiError naming where, the throw its cause (before, the bare error)', () => {
    const b = Object.defineProperty({ ...sim, name: 'getter-declaration' }, 'capabilities', { get: () => { throw new Error('not computed yet'); }, enumerable: true });
    let e: unknown;
    try {
      checkBackendApi(b);
    } catch (x) {
      e = x;
    }
    expect(e).toBeInstanceOf(AdapterApiError);
    expect((e as Error).message).toBe('the backend: reading its declaration threw Error: not computed yet');
    expect((e as Error).cause).toBeInstanceOf(Error);
  });

  it("an adapter module's factory that settles after its bound: the backend it hands over has its close hook called", async () => {
    let closedLate: () => void = () => undefined;
    const closing = new Promise<void>((resolve) => (closedLate = resolve));
    await expect(resolveBackend('test/fixtures/lateFactoryAdapter.ts', { choice: {} } as never, 20)).rejects.toThrow("adapter test/fixtures/lateFactoryAdapter.ts: its default export (a function of the servers given) had not settled after 20 ms");
    const handOver = (globalThis as Record<symbol, unknown>)[LATE_FACTORY] as (b: BackendUnderTest) => void;
    handOver({ ...sim, name: 'late backend', close: async () => closedLate() });
    // Bounded by the test's timeout: without the fix the late backend is never closed.
    await closing;
  });

  it('start() that never settles: AdapterError at the bound, in real time', async () => {
    const b: BackendUnderTest = { ...sim, name: 'hangs-at-start', start: () => new Promise(() => undefined) };
    await expect(runLockstep(b, [acquire], { ...opts, startLimitMs: 50 })).rejects.toThrow('adapter hangs-at-start: start() had not settled after 50 ms of real time');
  });

  it("a fault injection or inspect() that never settles: the run ends unjudged at the bound, naming the call (AdapterError); the instance is still closed", async () => {
    let closed = 0;
    const hanging = (name: string, env: (real: Environment) => Environment): BackendUnderTest => ({
      ...sim,
      name,
      start: async (o) => {
        const i = await sim.start(o);
        return { ...i, env: env(i.env), close: async () => { closed++; await i.close(); } };
      },
    });
    const pause = hanging('hangs-in-pause', (real) => ({ ...real, faults: { ...real.faults, pause: { pause: () => new Promise<void>(() => undefined), resume: (c: number) => real.faults.pause!.resume(c) } } }));
    const paused: Command[] = [acquire, { kind: 'pause', client: 0 } as Command];
    // A fault that fails leaves the run unjudged, as any failing injection does (the environment's failure, not the lock's).
    // The bound fires on the call that hangs and must not on the others, which settle in microseconds but may wait 100 ms
    // for the CPU on a loaded machine (load 38): a second, ten times that.
    const stuck = await runLockstep(pause, paused, { ...opts, environmentLimitMs: 1000 });
    expect(stuck.verdict).toEqual({ kind: 'inconclusive', cause: 'environment', reason: expect.stringContaining("adapter hangs-in-pause: the pause fault's pause() had not settled after 1000 ms of real time") as string });
    const inspect = hanging('hangs-in-inspect', (real) => ({ ...real, inspect: () => new Promise<never>(() => undefined) }));
    const blind = await runLockstep(inspect, [acquire], { ...opts, environmentLimitMs: 1000 });
    expect(blind.verdict).toEqual({ kind: 'inconclusive', cause: 'environment', reason: expect.stringContaining('adapter hangs-in-inspect: inspect() had not settled after 1000 ms of real time') as string });
    expect(closed).toBe(2);
    // Injections that settle in time are untouched: the same schedule with the real injectors passes.
    const fine = await runLockstep(hanging('settles', (real) => real), paused, { ...opts, environmentLimitMs: 1000 });
    expect(fine.verdict).toEqual({ kind: 'pass' });
  });

  it('an instance that is not a BackendInstance: AdapterApiError naming what is missing, and what was started is closed', async () => {
    let closed = 0;
    const shaped = (name: string, f: (i: Record<string, unknown>) => Record<string, unknown>): BackendUnderTest => ({
      ...sim,
      name,
      start: async (o) => {
        const i = await sim.start(o);
        return f({ ...i, close: async () => { closed++; await i.close(); } }) as never;
      },
    });
    await expect(runLockstep(shaped('no-clients', (i) => ({ ...i, clients: 'nope' })), [acquire], opts)).rejects.toThrow(new AdapterApiError('no-clients: start({ clients: 2 }) returned clients that are not an array (string); it must return one LockClient per client'));
    await expect(runLockstep(shaped('one-client', (i) => ({ ...i, clients: (i.clients as unknown[]).slice(0, 1) })), [acquire], opts)).rejects.toThrow('one-client: start({ clients: 2 }) returned 1 client');
    await expect(offeredFaults(shaped('no-store', (i) => ({ ...i, clients: (i.clients as object[]).map((c) => ({ ...c, acquire: (r: string, o: AcquireOptions) => (c as LockClient).acquire(r, o), release: (l: Lease) => (c as LockClient).release(l), clock: (c as LockClient).clock, store: {} })) })))).rejects.toThrow('no-store: start() returned client 0 without store (write, read)');
    expect(closed).toBe(3);
  });

  it('close() of an instance, warnings() and the close hook that throw: AdapterError naming each call', async () => {
    const closing: BackendUnderTest = { ...sim, name: 'throws-at-close', start: async (o) => ({ ...(await sim.start(o)), close: () => Promise.reject(new Error('close failed')) }) };
    await expect(runLockstep(closing, [acquire], opts)).rejects.toThrow('adapter throws-at-close: close() of an instance threw Error: close failed');
    const warning: BackendUnderTest = { ...sim, name: 'throws-at-warnings', start: async (o) => ({ ...(await sim.start(o)), warnings: () => { throw new Error('no'); } }) };
    await expect(runLockstep(warning, [acquire], opts)).rejects.toThrow('adapter throws-at-warnings: warnings() threw Error: no');
    await expect(closeBackend({ name: 'hook', close: () => Promise.reject(new Error('pool')) })).rejects.toThrow("adapter hook: close() (the backend's close hook) threw Error: pool");
  });
});
