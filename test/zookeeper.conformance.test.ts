import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkConformance, runLockstep } from '../conformance/index.ts';
import type { ZookeeperCell } from '../conformance/env/zookeeperBackend.ts';
import { realZookeeperBackend, startZookeeperCell } from '../conformance/env/zookeeperBackend.ts';
import type { Command } from '../model/index.ts';

/**
 * The ZooKeeper backend against `etcd-lease` (spec 7.10) on a real 3-member
 * ensemble, paced to real time. LOCKCHECK_ZK_RUNS sets the schedules per
 * store policy (default 2: CI keeps these cells small; `lockcheck matrix`
 * runs more).
 */
const RUNS = Number(process.env.LOCKCHECK_ZK_RUNS ?? 2);
const SEED = Number(process.env.LOCKCHECK_SEED ?? 20161010);

let cell: ZookeeperCell;
beforeAll(async () => {
  cell = await startZookeeperCell();
}, 90_000);
afterAll(async () => {
  await cell?.stop();
});

describe('ZooKeeper agrees with etcd-lease on a real ensemble', () => {
  for (const store of ['unfenced', 'strict'] as const) {
    it(`zookeeper / ${store}: no conformance failure in ${RUNS} schedules with pauses, partitions and delays`, async () => {
      const result = await checkConformance(realZookeeperBackend(cell, store), { runs: RUNS, seed: SEED, resources: 2, maxCommands: 12 });
      expect(result.failure?.message ?? null).toBeNull();
      expect(result.stoppedEarly).toBeLessThan(RUNS);
    }, 300_000);
  }

  // The Jepsen pause in lockstep: a holder paused past its session timeout between its check and its write loses
  // the next holder's update unless the store checks the create zxid.
  const r = 'r0';
  const pause: Command[] = [
    { kind: 'acquire', client: 0, resource: r, ttlMs: 1000 },
    { kind: 'pause', client: 0, pendingWrite: { resource: r, value: 'stale' } },
    { kind: 'advance', ms: 1800 },
    { kind: 'acquire', client: 1, resource: r, ttlMs: 1000 },
    { kind: 'write', client: 1, resource: r, value: 'fresh' },
    { kind: 'resume', client: 0 },
    { kind: 'read', client: 1, resource: r },
  ];
  it('a holder paused past its session: the stale write lands unfenced (STORE-1), the zxid fence rejects it', async () => {
    const unfenced = await runLockstep(realZookeeperBackend(cell, 'unfenced'), pause, { clients: 2, tokenBase: 0n, continueAfterViolation: true });
    expect(unfenced.verdict.kind === 'pass' || unfenced.verdict.kind === 'property-violation').toBe(true);
    expect(unfenced.findings.flatMap((f) => f.violations.map((v) => v.property))).toContain('STORE-1');
    expect(unfenced.steps.at(-1)?.actual).toEqual({ kind: 'value', value: 'stale', token: expect.any(BigInt) as bigint });
    const fenced = await runLockstep(realZookeeperBackend(cell, 'strict'), pause, { clients: 2, tokenBase: 0n, continueAfterViolation: true });
    expect(fenced.verdict).toEqual({ kind: 'pass' });
    expect(fenced.findings).toEqual([]);
    expect(fenced.steps.at(-1)?.actual).toEqual({ kind: 'value', value: 'fresh', token: expect.any(BigInt) as bigint });
  }, 60_000);
});
