import { describe, expect, it } from 'vitest';
import { faultsNeededBy, seedSchedules } from '../conformance/seeds.ts';
import type { FaultKind } from '../conformance/adapter.ts';
import type { Command } from '../model/index.ts';
import { designs } from '../model/index.ts';

/**
 * The model's seed schedules at their edges (docs/mutation.md, "session
 * h17"): which faults a seed needs decides whether a backend runs it, and
 * the variant past the expiry edge must step each clock 1 ms further from
 * zero, back or forth.
 */
const ALL: FaultKind[] = ['advance', 'clock-step', 'clock-drift', 'pause', 'crash-restart', 'partition', 'delay', 'latency', 'slow-node', 'kill-connection'];

describe('faultsNeededBy', () => {
  it('an extend in flight across a pause needs late replies (paused clients run no timers), as an acquire does', () => {
    const extend: Command = { kind: 'extend', client: 0, resource: 'r', ttlMs: 10 };
    expect(faultsNeededBy({ kind: 'pause', client: 0, inFlight: extend })).toEqual(['pause', 'latency']);
    expect(faultsNeededBy({ kind: 'pause', client: 0, inFlight: { kind: 'release', client: 0, resource: 'r' } })).toEqual(['pause']);
  });

  it('a delayed write needs late replies (the runner holds it as the network would)', () => {
    expect(faultsNeededBy({ kind: 'write', client: 0, resource: 'r', value: 'a', delayed: true })).toEqual(['latency']);
    expect(faultsNeededBy({ kind: 'write', client: 0, resource: 'r', value: 'a' })).toEqual([]);
  });
});

describe('seedSchedules: the variant past the expiry edge', () => {
  it('steps every clock 1 ms further from zero, a step back included', () => {
    const steps: Array<[number, number]> = [];
    for (const design of [designs.redisSingle(), designs.redlock(), designs.redisReplicated(), designs.etcdLease()]) {
      for (const store of ['strict', 'monotonic', 'unfenced'] as const) {
        const out = seedSchedules(design, store, ALL);
        // Each schedule with a clock step is followed by its variant.
        out.forEach((s, i) => {
          const next = out[i + 1];
          if (!s.some((c) => c.kind === 'clock-step') || next === undefined || next.length !== s.length) return;
          // The same schedule but for its clock steps' sizes (an original, then its variant).
          const shape = (x: Command[]) => JSON.stringify(x.map((c) => (c.kind === 'clock-step' ? { ...c, deltaMs: Math.sign(c.deltaMs) } : c)));
          if (shape(s) !== shape(next) || JSON.stringify(s) === JSON.stringify(next)) return;
          s.forEach((c, k) => {
            const v = next[k]!;
            if (c.kind === 'clock-step' && v.kind === 'clock-step') steps.push([c.deltaMs, v.deltaMs]);
          });
        });
      }
    }
    expect(steps.some(([d]) => d < 0)).toBe(true);
    for (const [d, v] of steps) expect(v).toBe(d + Math.sign(d));
  });
});

describe('npm run seeds (conformance/writeSeeds.ts) knows it is the script run', () => {
  it('under a path with a space or a percent sign too: the URL holds it encoded, and the text comparison made the script do nothing, exit 0', async () => {
    const { isRunAsScript } = await import('../conformance/writeSeeds.ts');
    const { pathToFileURL } = await import('node:url');
    for (const path of ['/work/main/conformance/writeSeeds.ts', '/home/a user/lock check/conformance/writeSeeds.ts', '/srv/100%/conformance/writeSeeds.ts', '/srv/ünï/conformance/writeSeeds.ts']) {
      expect(isRunAsScript(pathToFileURL(path).href, path), path).toBe(true);
    }
    // Imported (by a test, by another script): not run.
    expect(isRunAsScript(pathToFileURL('/work/main/conformance/writeSeeds.ts').href, '/work/main/node_modules/vitest/vitest.mjs')).toBe(false);
    expect(isRunAsScript(pathToFileURL('/work/main/conformance/writeSeeds.ts').href, undefined)).toBe(false);
  });
});
