import { describe, expect, it } from 'vitest';
import { checkConformance, simLeaseBackend } from '../conformance/index.ts';
import { SEED_CELLS } from '../conformance/seedSchedules.ts';
import { derivedSeeds } from '../conformance/derivedSeeds.ts';
import { faultsLackingFor, faultsNeededBy, seedSchedules } from '../conformance/seeds.ts';
import { seedCell, seedCellKeys } from '../conformance/writeSeeds.ts';
import { describeDesign, designs } from '../model/index.ts';
import { BUILT_INS, LIBRARY_AUDITS, MEASURED_FAULT_CLASSES } from '../cli/backends.ts';
import { describeCell, oracleUnpredicted, predict, unfencedPrediction } from '../cli/matrix.ts';
import { matrixCell } from './matrixCell.ts';
import { unpredictedBreaks, type Observed } from '../cli/stressOracle.ts';
import type { NemesisFault } from '../conformance/stress/nemesis.ts';
import type { PropertyId } from '../model/properties.ts';

/**
 * The model's counterexamples seed the real-server runs (issue 12, item 6):
 * the generated file must be current with the model, and a run asked for
 * them must try them first.
 */
describe('seed schedules from the model', () => {
  it('cover every cell of the matrix rows, each once', () => {
    const want = seedCellKeys().map(({ row, fault }) => `${describeDesign(row.design)}|${row.store}|${fault}`);
    expect(SEED_CELLS.map((c) => `${c.design}|${c.store}|${c.fault}`)).toEqual(want);
  });

  // Every cell small enough to explore again here (the rest: `npm run seeds`, minutes).
  const small = seedCellKeys().filter((_k, i) => (SEED_CELLS[i]?.states ?? 0) <= 5_000);
  it.each(small.map((k) => [`${describeDesign(k.row.design)} / ${k.row.store} / ${k.fault}`, k] as const))('are current with the model: %s (else npm run seeds)', (_name, k) => {
    const recorded = SEED_CELLS.find((c) => c.design === describeDesign(k.row.design) && c.store === k.row.store && c.fault === k.fault)!;
    expect(seedCell(k.row, k.fault)).toEqual(recorded);
  });

  it('include the known counterexamples: the paused unfenced holder, the Redlock clock jump and crash-restart', () => {
    const lengths = (design: string, store: string, fault: string): Record<string, number> =>
      Object.fromEntries(SEED_CELLS.find((c) => c.design === design && c.store === store && c.fault === fault)!.found.map((f) => [f.property, f.commands.length]));
    expect(lengths('redis-single(none)', 'unfenced', 'client-pause')['STORE-1']).toBe(6);
    expect(lengths(describeDesign(designs.redlock()), 'unfenced', 'clock-step')['MUTEX-1']).toBe(5);
    expect(lengths(describeDesign(designs.redlock()), 'unfenced', 'crash-restart')['MUTEX-1']).toBe(6);
  });

  it("predict a library row by the model of its contract: redis-semaphore's deadline-less Mutex, paused, is two holders (MUTEX-1); lockcheck's own client, which stops at its deadline, is not", () => {
    const row = LIBRARY_AUDITS.find((r) => r.name === 'lib:redis-semaphore@5.8.0/Mutex')!;
    const pause = MEASURED_FAULT_CLASSES.find((c) => c.id === 'client-pause')!;
    expect(describeDesign(row.design)).toBe('redis-single(none, no client deadline, failed extend drops lease if denied, keeps keys)');
    expect(predict(row.design, row.store, pause).properties).toContain('MUTEX-1');
    expect(predict(designs.redisSingle(), row.store, pause).properties).not.toContain('MUTEX-1');
    // And its runs start with that model's shortest counterexample: the key runs out under a holder that keeps no deadline, and a second client gets it.
    expect(seedSchedules(row.design, row.store, pause.faults)[0]!.map((c) => c.kind)).toEqual(['acquire', 'advance', 'acquire']);
    expect(seedSchedules(designs.redisSingle(), row.store, pause.faults)[0]!.map((c) => c.kind)).not.toEqual(['acquire', 'advance', 'acquire']);
  });

  it('the timing column draws pause with latency (operations in flight across a pause), so it predicts what pauses break too and its runs start with the pause seeds', () => {
    const timing = MEASURED_FAULT_CLASSES.find((c) => c.id === 'timing')!;
    expect(timing.faults).toEqual(expect.arrayContaining(['latency', 'pause']));
    const row = LIBRARY_AUDITS.find((r) => r.name === 'lib:redis-semaphore@5.8.0/Mutex')!;
    // The deadline-less Mutex, paused, is two holders: a timing cell with pauses in it must predict that.
    expect(predict(row.design, row.store, timing).properties).toContain('MUTEX-1');
    expect(seedSchedules(row.design, row.store, timing.faults).map((s) => s.map((c) => c.kind))).toContainEqual(['acquire', 'advance', 'acquire']);
  });

  it("judge the concurrent line by what the prediction implies: overlapping holds lose read-modify-writes even through a strict store (Redlock under clock steps); anything else outside the prediction is flagged", () => {
    const col = (id: string) => MEASURED_FAULT_CLASSES.find((c) => c.id === id)!;
    const clockStep = predict(designs.redlock(), 'strict', col('clock-step')).properties;
    expect(clockStep).toContain('MUTEX-1');
    expect(clockStep).not.toContain('STORE-1');
    expect(unpredictedBreaks(clockStep, ['MUTEX-1', 'STORE-1'])).toEqual([]);
    expect(unpredictedBreaks(clockStep, ['STORE-1', 'FENCE-2'])).toEqual(['FENCE-2']);
    const paused = predict(designs.redlock(), 'strict', col('client-pause')).properties;
    expect(paused).not.toContain('MUTEX-1');
    expect(unpredictedBreaks(paused, ['MUTEX-1', 'STORE-1'])).toEqual(['MUTEX-1', 'STORE-1']);
  });

  it("account for a lost update on a fenced row where the unfenced row predicts a late write: it lands first, accepted, and the newer holder's read-modify-write overwrites it (ZooKeeper under pauses); overlapping holds stay flagged", () => {
    const col = (id: string) => MEASURED_FAULT_CLASSES.find((c) => c.id === id)!;
    const paused = col('client-pause');
    const strict = predict(designs.etcdLease(), 'strict', paused).properties;
    expect(strict).not.toContain('MUTEX-1');
    expect(strict).not.toContain('STORE-1');
    const unfenced = unfencedPrediction(designs.etcdLease(), 'strict', paused);
    expect(unfenced).toContain('STORE-1');
    expect(unpredictedBreaks(strict, ['STORE-1'], unfenced)).toEqual([]);
    expect(unpredictedBreaks(strict, ['MUTEX-1', 'STORE-1', 'FENCE-2'], unfenced)).toEqual(['MUTEX-1', 'FENCE-2']);
    // Where the unfenced row predicts no late write either, a lost update is still flagged.
    const partition = col('partition-delay');
    const calm = unfencedPrediction(designs.redisSingle(), 'strict', partition);
    expect(calm).not.toContain('STORE-1');
    expect(unpredictedBreaks(predict(designs.redisSingle(), 'strict', partition).properties, ['STORE-1'], calm)).toEqual(['STORE-1']);
    // Only a fenced row takes the unfenced row's prediction; every fenced built-in row has one recorded.
    expect(unfencedPrediction(designs.etcdLease(), 'unfenced', paused)).toEqual([]);
    expect(unfencedPrediction(designs.pgXact(), 'transactional', paused)).toEqual([]);
    for (const row of BUILT_INS.filter((r) => r.store === 'strict' || r.store === 'monotonic')) {
      for (const c of MEASURED_FAULT_CLASSES) expect(() => unfencedPrediction(row.design, row.store, c), `${row.name} x ${c.id}`).not.toThrow();
    }
  });

  it("judge the concurrent line against every class its nemesis brings about: a delayed link also delays the store's writes (the model's timing), so ZooKeeper's lost update under partition-delay is predicted; a partition alone, or overlapping holds, stay flagged", () => {
    const row = BUILT_INS.find((r) => r.name === 'zookeeper/unfenced')!;
    const col = MEASURED_FAULT_CLASSES.find((c) => c.id === 'partition-delay')!;
    const all = (): boolean => true;
    const seen = (nemesis: NemesisFault[], broken: PropertyId[]): Observed => ({ command: '', nemesis, operations: 1, faults: 1, overlappingHolds: 0, lostUpdates: 0, staleWritesAccepted: 0, tokenOrderViolations: 0, broken, clientErrors: [], elapsedMs: 0 });
    // The column alone predicts nothing here: what the h24 matrix flagged ("7 lost updates, observed, not predicted: STORE-1").
    expect(predict(row.design, row.store, col).properties).toEqual([]);
    expect(oracleUnpredicted(row.design, row.store, col, seen(['partition', 'delay'], ['STORE-1']), all)).toEqual([]);
    expect(oracleUnpredicted(row.design, row.store, col, seen(['partition'], ['STORE-1']), all)).toEqual(['STORE-1']);
    expect(oracleUnpredicted(row.design, row.store, col, seen(['partition', 'delay'], ['MUTEX-1', 'STORE-1']), all)).toEqual(['MUTEX-1']);
    // Through a strict store the late write is rejected: a stale write accepted stays news.
    const strict = BUILT_INS.find((r) => r.name === 'zookeeper/strict')!;
    expect(oracleUnpredicted(strict.design, strict.store, col, seen(['partition', 'delay'], ['FENCE-2']), all)).toEqual(['FENCE-2']);
  });

  it('only use the faults the backend takes, with durations scaled to its ttl floor', () => {
    const faults = ['advance', 'pause'] as const;
    const seeds = seedSchedules(designs.redisSingle(), 'unfenced', faults);
    expect(seeds.length).toBeGreaterThan(0);
    for (const s of seeds) for (const c of s) expect(faultsNeededBy(c)!.every((k) => (faults as readonly string[]).includes(k))).toBe(true);
    expect(seeds.every((s) => s.every((c) => !('resource' in c) || c.resource === 'r0'))).toBe(true);
    const scaled = seedSchedules(designs.redisSingle(), 'unfenced', faults, 25);
    const ttls = (ss: typeof seeds): number[] => ss.flat().flatMap((c) => (c.kind === 'acquire' && c.ttlMs !== undefined ? [c.ttlMs] : []));
    expect(ttls(scaled)).toEqual(ttls(seeds).map((t) => t * 3));
  });

  it("give a derived prediction a schedule of its own, checked on the model: Redlock without persistence on a strict store under crash-restart (STORE-1 from MUTEX-1 with FENCE-1, beyond depth 8)", () => {
    const design = designs.redlock();
    const cell = SEED_CELLS.find((c) => c.design === describeDesign(design) && c.store === 'strict' && c.fault === 'crash-restart')!;
    const derived = cell.found.filter((f) => f.derived === true);
    expect(derived.map((f) => [f.property, f.commands.length])).toEqual([['STORE-1', 10]]);
    // The older holder takes and releases the lock first, so that its token runs ahead of the counter the restart loses.
    expect(derived[0]!.commands.map((c) => c.kind)).toEqual(['partition', 'partition', 'acquire', 'release', 'acquire', 'crash', 'restart', 'acquire', 'write', 'write']);
    expect(predict(design, 'strict', MEASURED_FAULT_CLASSES.find((c) => c.id === 'crash-restart')!).properties).toContain('STORE-1');
    expect(seedSchedules(design, 'strict', ['advance', 'crash-restart', 'partition']).some((s) => s.length === 10 && s.at(-1)!.kind === 'write')).toBe(true);
    // Only where the model breaks it: without the double grant, or where the exploration found the property itself, nothing is built.
    expect(derivedSeeds(design, 'strict', cell.found.filter((f) => f.property !== 'MUTEX-1'))).toEqual([]);
    expect(derivedSeeds(design, 'strict', [...cell.found.filter((f) => f.derived !== true), { property: 'STORE-1', commands: [] }])).toEqual([]);
    // And a candidate the model does not break is not kept: a "double grant" that is none (the second acquire is denied).
    const notDouble = [
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 10 },
      { kind: 'acquire', client: 1, resource: 'r', ttlMs: 10 },
    ] as const;
    expect(derivedSeeds(design, 'strict', [{ property: 'MUTEX-1', commands: notDouble }, { property: 'FENCE-1', commands: notDouble }])).toEqual([]);
    expect(derivedSeeds(design, 'unfenced', [{ property: 'MUTEX-1', commands: notDouble }])).toEqual([]);
  });

  it("say when a prediction needs a fault the backend does not take: pg-xact's MUTEX-1 under crash-restart comes from the column's partitions only", () => {
    const xact = designs.pgXact();
    expect(faultsLackingFor(xact, 'transactional', ['crash-restart'], 'MUTEX-1', ['advance', 'crash-restart'])).toEqual(['partition']);
    expect(faultsLackingFor(xact, 'transactional', ['crash-restart'], 'MUTEX-1', ['advance', 'crash-restart', 'partition'])).toBeNull();
    // Where one recorded schedule runs on the faults given, or none is recorded, nothing is claimed.
    expect(faultsLackingFor(xact, 'transactional', ['crash-restart', 'connection-loss'], 'MUTEX-1', ['advance', 'pause', 'kill-connection'])).toBeNull();
    expect(faultsLackingFor(xact, 'transactional', ['crash-restart'], 'LIVE-1', ['advance'])).toBeNull();
    const cell = matrixCell({ backend: 'pg-xact/transactional', faultClass: 'crash-restart', runs: 4, predicted: ['MUTEX-1'], outOfReach: [{ property: 'MUTEX-1', needs: ['partition'] }] });
    expect(describeCell(cell)).toContain('(predicted with partition, which this backend does not take: MUTEX-1)');
  });

  it('run first: a one-run check of an unfenced lease under pauses finds the stale write at run 1', async () => {
    const backend = simLeaseBackend(designs.redisSingle(), 'unfenced');
    const seeded = await checkConformance(backend, { runs: 1, seed: 1, faults: ['advance', 'pause'], failOn: { properties: ['STORE-1'] }, modelSeeds: true });
    expect(seeded.failure?.failedAtRun).toBe(1);
    expect(seeded.failure?.properties).toContain('STORE-1');
  });
});
