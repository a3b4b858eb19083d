import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkConformance } from '../conformance/index.ts';
import type { EtcdCell } from '../conformance/env/etcdBackend.ts';
import { realEtcdBackend, startEtcdCell } from '../conformance/env/etcdBackend.ts';
import { skipUnjudged } from './probes.ts';
import { type BackendOn, blackHoleAndLateReplies, crashRestartTwice, expectReadLast, pausedHolder, splitAcquireDenied, staleLandsUnfenced } from './lockstepScenarios.ts';

/**
 * The etcd backend against `etcd-lease` on a real 3-member cluster, paced to
 * real time (etcd's ttls are whole seconds, so every run takes seconds).
 * LOCKCHECK_ETCD_RUNS sets the schedules per store policy (default 3: CI
 * keeps these cells small; `lockcheck matrix` runs more).
 */
const RUNS = Number(process.env.LOCKCHECK_ETCD_RUNS ?? 3);
const SEED = Number(process.env.LOCKCHECK_SEED ?? 20161010);

let cell: EtcdCell;
beforeAll(async () => {
  cell = await startEtcdCell();
}, 60_000);
afterAll(async () => {
  await cell?.stop();
});

describe('etcd agrees with etcd-lease on a real cluster', () => {
  for (const store of ['unfenced', 'strict'] as const) {
    it(`etcd / ${store}: no conformance failure in ${RUNS} schedules with pauses, partitions and delays`, async ({ skip }) => {
      const result = await checkConformance(realEtcdBackend(cell, store), { runs: RUNS, seed: SEED, resources: 2, maxCommands: 15, faults: ['advance', 'pause', 'partition', 'delay'] });
      expect(result.failure?.message ?? null).toBeNull();
      // A run the machine could not pace is inconclusive, never judged: with none judged the test is skipped, saying so.
      skipUnjudged(skip, result);
    }, 300_000);
  }

  const backend: BackendOn = (store) => realEtcdBackend(cell, store);

  // Jepsen's etcd 3.4.3 finding in lockstep: a holder paused past its lease between its check and its
  // write loses the update of the next holder unless the store checks the revision (spec 7.6, scenario etcd-pause).
  // The pause outlasts the ttl and the whole expiry tolerance by as much again (PAST_EXPIRY_MS).
  const jepsen = pausedHolder();

  // An acquire split by its client's pause (spec 7.7): the LeaseGrant goes out, the client stops before its put; another
  // client is granted meanwhile, and the first, resumed, finds the key.
  it('an acquire paused after its LeaseGrant: another client is granted, the resumed one is denied', async ({ skip }) => {
    await splitAcquireDenied(skip, backend);
  }, 60_000);

  it('a holder paused past its lease: the stale write lands unfenced (STORE-1), the revision fence rejects it', async ({ skip }) => {
    const fenced = await staleLandsUnfenced(skip, backend, jepsen);
    expect(fenced.findings).toEqual([]);
    expectReadLast(fenced, 'fresh');
  }, 60_000);

  // Timing faults (spec 7.6.1): the service a black hole, so an extend gets no reply and gives up at its bound (the
  // ttl); back to normal, the lease runs out; a late first round of the next acquire shortens its validity.
  it('a black-holed service and late replies: the extend gives up at its bound, the late grant is shorter', async ({ skip }) => {
    await blackHoleAndLateReplies(skip, backend);
  }, 60_000);

  // Crash-restart (spec 7.6.1): the leader and a follower killed, the quorum lost; back on their WAL, the new
  // leader refreshes the lease to its ttl plus the election timeout (600 ms), so the lock outlives its holder's
  // validity; the revision goes on. Twice, so that both followers are the one killed once.
  it('a crash of the leader and a follower and their restart: the lease survives, refreshed; tokens go on increasing', async ({ skip }) => {
    await crashRestartTwice(skip, backend, 2600);
  }, 120_000);
});
