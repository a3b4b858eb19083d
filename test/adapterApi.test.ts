import { describe, expect, it } from 'vitest';
import { designs } from '../model/design.ts';
import type { BackendUnderTest, Environment } from '../conformance/adapter.ts';
import type { Lease } from '../impl/lease.ts';
import type { AcquireOptions } from '../impl/leaseLock.ts';
import { AdapterApiError, checkBackendApi, offeredFaults } from '../conformance/backendApi.ts';
import { checkConformance } from '../conformance/check.ts';
import { FAULT_KINDS, faultKindsOf, FaultNotOfferedError } from '../conformance/faults.ts';
import { runLockstep } from '../conformance/lockstep.ts';
import { simLeaseBackend } from '../conformance/sim/backend.ts';
import { simSessionBackend } from '../conformance/sim/sessionBackend.ts';
import { tinyLock } from '../docs/examples/tinyLock.ts';

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
    expect(await offeredFaults(simSessionBackend('strict'))).toEqual(['advance', 'clock-drift', 'pause', 'partition', 'delay', 'kill-connection']);
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
