import { describe, expect, it } from 'vitest';
import type { BackendUnderTest } from '../conformance/adapter.ts';
import { runLockstep } from '../conformance/index.ts';
import { simLeaseBackend } from '../conformance/sim/backend.ts';
import type { Command } from '../model/index.ts';
import { designs } from '../model/index.ts';

/** The backend with its instances' close() replaced: one that never finishes (after the real close), or one that fails. */
function withClose(backend: BackendUnderTest, close: (real: () => Promise<void>) => Promise<void>): BackendUnderTest {
  return {
    ...backend,
    start: async (o) => {
      const instance = await backend.start(o);
      return { ...instance, close: () => close(() => instance.close()) };
    },
  };
}

const schedule: Command[] = [
  { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 50 },
  { kind: 'write', client: 0, resource: 'r0', value: 'a' },
  { kind: 'release', client: 0, resource: 'r0' },
];

describe("lockstep: a backend's teardown never stops the suite", () => {
  it('a close() that never finishes: the run returns its verdict after closeLimitMs, with a warning naming it', async () => {
    const base = simLeaseBackend(designs.redisSingle(), 'strict');
    const stuck = withClose(base, async (real) => {
      await real();
      await new Promise<never>(() => undefined);
    });
    const report = await runLockstep(stuck, schedule, { clients: 2, tokenBase: 0n, closeLimitMs: 50 });
    expect(report.verdict.kind).toBe('pass');
    expect(report.warnings?.some((w) => w.includes("close() had not finished after 50 ms"))).toBe(true);
  });

  it('a close() that finishes in time adds no warning; one that fails still throws', async () => {
    const base = simLeaseBackend(designs.redisSingle(), 'strict');
    // A bound the close keeps on a loaded machine too (it settles in microseconds, but a process may go 100 ms without
    // the CPU at load 38): only the stuck close above waits its bound out.
    const report = await runLockstep(base, schedule, { clients: 2, tokenBase: 0n, closeLimitMs: 10_000 });
    expect(report.verdict.kind).toBe('pass');
    expect(report.warnings ?? []).toEqual([]);
    const failing = withClose(base, async (real) => {
      await real();
      throw new Error('teardown failed');
    });
    await expect(runLockstep(failing, schedule, { clients: 2, tokenBase: 0n })).rejects.toThrow('teardown failed');
  });

  it("an environment whose own inspect() fails: that run is judged neither way, with the reason, and nothing is thrown", async () => {
    const base = simLeaseBackend(designs.redisSingle(), 'strict');
    const failing: BackendUnderTest = {
      ...base,
      start: async (o) => {
        const instance = await base.start(o);
        return {
          ...instance,
          env: {
            ...instance.env,
            inspect: async () => {
              throw new Error('admin read timed out');
            },
          },
        };
      },
    };
    const report = await runLockstep(failing, schedule, { clients: 2, tokenBase: 0n });
    expect(report.verdict).toMatchObject({ kind: 'inconclusive', cause: 'environment' });
    expect(report.warnings?.some((w) => w.includes("could not inspect 'r0': admin read timed out"))).toBe(true);
  });

  it("a fault the environment fails to inject (a driver's untyped error): that run is judged neither way; a bug in its code still throws", async () => {
    const base = simLeaseBackend(designs.redisSingle({ persistence: 'aof-always' }), 'strict');
    const restartFailing = (error: Error): BackendUnderTest => ({
      ...base,
      start: async (o) => {
        const instance = await base.start(o);
        const crash = instance.env.faults.crash!;
        return {
          ...instance,
          env: {
            ...instance.env,
            faults: {
              ...instance.env.faults,
              crash: {
                crash: (node: number) => crash.crash(node),
                restart: async () => {
                  throw error;
                },
              },
            },
          },
        };
      },
    });
    const crashing: Command[] = [{ kind: 'acquire', client: 0, resource: 'r0', ttlMs: 50 }, { kind: 'crash', node: 0 }, { kind: 'restart', node: 0 }];
    // node-postgres's own connect timeout, as it ended an npm start at pg-session/strict x crash-restart.
    const report = await runLockstep(restartFailing(new Error('timeout expired')), crashing, { clients: 2, tokenBase: 0n });
    expect(report.verdict).toMatchObject({ kind: 'inconclusive', cause: 'environment' });
    expect(report.warnings?.some((w) => w.includes("the environment's restart fault failed: timeout expired"))).toBe(true);
    await expect(runLockstep(restartFailing(new TypeError('x is undefined')), crashing, { clients: 2, tokenBase: 0n })).rejects.toThrow(TypeError);
  });
});
