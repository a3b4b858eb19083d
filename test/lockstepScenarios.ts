import { expect } from 'vitest';
import { runLockstep, type BackendUnderTest, type RunReport } from '../conformance/index.ts';
import type { Command, StorePolicy } from '../model/index.ts';
import { inPace, type Skip } from './probes.ts';

/**
 * The fixed lockstep schedules the etcd and ZooKeeper backends are both
 * checked on (paced to real time), and what each must show. `backend` makes
 * a fresh backend under test on the given store policy.
 */
export type BackendOn = (store: StorePolicy) => BackendUnderTest;

const r = 'r0';

/**
 * How long a lease of 1000 ms is left to run out before the next acquire: the ttl and a whole expiry tolerance
 * (etcd's and ZooKeeper's, up to 800 ms) by as much again. At the tolerance's end the model already wants the key
 * gone, and a busy machine's server expires it late: the next acquire refused, the run judged a liveness failure
 * (seen on etcd at 1800 ms, then on ZooKeeper in CI), none of the finding the schedule is about.
 */
export const PAST_EXPIRY_MS = 2600;

/**
 * Jepsen's pause in lockstep: a holder paused past its lease (`pauseMs` of
 * real time) between its check and its write loses the next holder's update
 * unless the store checks the token.
 */
export const pausedHolder = (pauseMs = PAST_EXPIRY_MS): Command[] => [
  { kind: 'acquire', client: 0, resource: r, ttlMs: 1000 },
  { kind: 'pause', client: 0, pendingWrite: { resource: r, value: 'stale' } },
  { kind: 'advance', ms: pauseMs },
  { kind: 'acquire', client: 1, resource: r, ttlMs: 1000 },
  { kind: 'write', client: 1, resource: r, value: 'fresh' },
  { kind: 'resume', client: 0 },
  { kind: 'read', client: 1, resource: r },
];

/**
 * Kleppmann's delayed packet (spec 3, "Delayed requests"): a write checked under a valid lease and held in the
 * network lands after the lease ran out and the next holder wrote.
 */
export const delayedWrite: Command[] = [
  { kind: 'acquire', client: 0, resource: r, ttlMs: 1000 },
  { kind: 'write', client: 0, resource: r, value: 'stale', delayed: true },
  { kind: 'advance', ms: PAST_EXPIRY_MS },
  { kind: 'acquire', client: 1, resource: r, ttlMs: 1000 },
  { kind: 'write', client: 1, resource: r, value: 'fresh' },
  { kind: 'deliver', client: 0 },
  { kind: 'read', client: 1, resource: r },
];

/** The run's last step read `value` (with a token). */
export function expectReadLast(run: RunReport, value: string): void {
  expect(run.steps.at(-1)?.actual).toEqual({ kind: 'value', value, token: expect.any(BigInt) as bigint });
}

/**
 * A stale write against the next holder's (`commands` end with a read of the register): unfenced it lands
 * (STORE-1, the read sees 'stale'); on the strict store the run passes. Returns the strict run for the rest of
 * the test's checks.
 */
export async function staleLandsUnfenced(skip: Skip, backend: BackendOn, commands: readonly Command[]): Promise<RunReport> {
  const unfenced = await inPace(skip, () => runLockstep(backend('unfenced'), commands, { clients: 2, tokenBase: 0n, continueAfterViolation: true }));
  expect(unfenced.verdict.kind === 'pass' || unfenced.verdict.kind === 'property-violation').toBe(true);
  expect(unfenced.findings.flatMap((f) => f.violations.map((v) => v.property))).toContain('STORE-1');
  expectReadLast(unfenced, 'stale');
  const fenced = await inPace(skip, () => runLockstep(backend('strict'), commands, { clients: 2, tokenBase: 0n, continueAfterViolation: true }));
  expect(fenced.verdict).toEqual({ kind: 'pass' });
  return fenced;
}

/** A strict run of `commands` passes and its steps other than (catch-up) advances end as `outcomes`. */
async function passesWith(skip: Skip, backend: BackendOn, commands: readonly Command[], outcomes: readonly string[]): Promise<RunReport> {
  const run = await inPace(skip, () => runLockstep(backend('strict'), commands, { clients: 2, tokenBase: 0n }));
  expect(run.verdict).toEqual({ kind: 'pass' });
  // Catch-up advances (real time the steps took) may come between the steps.
  expect(run.steps.filter((s) => s.command.kind !== 'advance').map((s) => s.actual.kind)).toEqual(outcomes);
  return run;
}

/**
 * An acquire split by its client's pause (spec 7.7): its first round goes out, the client stops before it puts
 * its key; another client is granted meanwhile, and the first, resumed, finds the key and is denied.
 */
export async function splitAcquireDenied(skip: Skip, backend: BackendOn): Promise<void> {
  const split: Command[] = [
    // A ttl far beyond the expiry tolerance: the other client's grant can only mean the key was never put.
    { kind: 'pause', client: 0, inFlight: { kind: 'acquire', client: 0, resource: r, ttlMs: 3000, latencyMs: 100 } },
    { kind: 'advance', ms: 200 },
    { kind: 'acquire', client: 1, resource: r, ttlMs: 3000 },
    { kind: 'resume', client: 0 },
  ];
  await passesWith(skip, backend, split, ['ok', 'granted', 'denied']);
}

/**
 * Timing faults (spec 7.6.1): the service a black hole, so an extend gets no reply and gives up at its bound
 * (the ttl); back to normal, the lease runs out; a late first round of the next acquire shortens its validity.
 */
export async function blackHoleAndLateReplies(skip: Skip, backend: BackendOn): Promise<void> {
  const timing: Command[] = [
    { kind: 'acquire', client: 0, resource: r, ttlMs: 1000 },
    { kind: 'node-delay', node: 0, ms: 'never' },
    { kind: 'extend', client: 0, resource: r, ttlMs: 1000 },
    { kind: 'node-delay', node: 0, ms: 0 },
    // The extend's give-up took the ttl already: the next acquire comes PAST_EXPIRY_MS after the grant.
    { kind: 'advance', ms: PAST_EXPIRY_MS - 1000 },
    { kind: 'acquire', client: 1, resource: r, ttlMs: 1000, latencyMs: 300 },
    { kind: 'write', client: 1, resource: r, value: 'late', latencyMs: 100 },
  ];
  const run = await passesWith(skip, backend, timing, ['granted', 'ok', 'not-extended', 'ok', 'granted', 'accepted']);
  // Validity counts from before the late first round: what is left when the grant arrives is 300 ms shorter.
  const late = run.steps.find((s) => s.command.kind === 'acquire' && s.command.client === 1)!;
  if (late.actual.kind !== 'granted') throw new Error(`expected a grant, got ${late.actual.kind}`);
  expect(late.actual.validUntilMs! - late.endMs).toBeLessThanOrEqual(1000 - 300);
}

/**
 * Crash-restart: the leader and a follower killed, the quorum lost; back on their logs, the lock outlives its
 * holder's validity (`advanceMs` of real time later still held), and tokens go on. Twice, so that both followers
 * are the one killed once.
 */
export async function crashRestartTwice(skip: Skip, backend: BackendOn, advanceMs: number): Promise<void> {
  const crashRestart: Command[] = [
    { kind: 'acquire', client: 0, resource: r, ttlMs: 1000 },
    { kind: 'crash', node: 0 },
    { kind: 'acquire', client: 1, resource: r, ttlMs: 1000 },
    { kind: 'restart', node: 0 },
    { kind: 'acquire', client: 1, resource: r, ttlMs: 1000 },
    { kind: 'advance', ms: advanceMs },
    { kind: 'acquire', client: 1, resource: r, ttlMs: 1000 },
    { kind: 'crash', node: 0 },
    { kind: 'restart', node: 0 },
    { kind: 'release', client: 1, resource: r },
    { kind: 'acquire', client: 0, resource: r, ttlMs: 1000 },
    { kind: 'write', client: 0, resource: r, value: 'after' },
  ];
  await passesWith(skip, backend, crashRestart, ['granted', 'ok', 'denied', 'ok', 'denied', 'granted', 'ok', 'ok', 'released', 'granted', 'accepted']);
}
