import { describe, expect, it } from 'vitest';
import type { ClientFleet } from '../conformance/stress/fleet.ts';
import { Nemesis } from '../conformance/stress/nemesis.ts';
import type { NemesisFault } from '../conformance/stress/nemesis.ts';
import { Recorder } from '../conformance/stress/recorder.ts';
import type { StressServers } from '../conformance/stress/servers.ts';
import { sharedNowMs } from '../conformance/stress/sharedClock.ts';

/**
 * The nemesis's schedule for a seed: which fault, on what, for how long, the
 * same whatever a strike finds. Its processes and servers are stand-ins that
 * only count (no server is needed to draw a schedule): what differs between
 * the two runs is only how many PostgreSQL sessions hold an advisory lock.
 */
const SEED = Number(process.env['LOCKCHECK_SEED'] ?? 20161010);

async function schedule(faults: readonly NemesisFault[], holders: readonly number[]): Promise<{ pauses: string[]; struck: number; terminatedBeforeLastPause: boolean }> {
  const paused = new Set<number>();
  const fleet = { size: 3, pause: (c: number) => paused.add(c), resume: (c: number) => paused.delete(c), paused: (c: number) => paused.has(c) } as unknown as ClientFleet;
  const servers = { nodes: [], links: [], replication: null, healMembers: () => undefined, advisoryHolders: () => Promise.resolve(holders), terminate: () => Promise.resolve() } as unknown as StressServers;
  const recorder = new Recorder();
  const nemesis = new Nemesis({ faults, servers, fleet, recorder, seed: SEED, ttlMinMs: 10, ttlMaxMs: 10, restartDelayMs: 0, lockKey: (r) => r });
  await nemesis.run(sharedNowMs() + 2_000);
  await nemesis.finish();
  const invokes = recorder.history().filter((e) => e.type === 'invoke' && e.process === 'nemesis');
  const pauses = invokes.flatMap((e) => ('fault' in e && e.fault === 'pause-client' ? [`${e.target} ${e.detail ?? ''}`] : []));
  const lastPause = invokes.map((e) => 'fault' in e && e.fault === 'pause-client').lastIndexOf(true);
  return { pauses, struck: nemesis.count, terminatedBeforeLastPause: invokes.slice(0, lastPause).some((e) => 'fault' in e && e.fault === 'terminate-backend') };
}

describe('the nemesis schedule', () => {
  it('is the same for a seed whether or not a strike found something to choose from (a terminate-backend with no session to end shifted every later draw)', async () => {
    const [none, two] = await Promise.all([schedule(['terminate-backend', 'pause-client'], []), schedule(['terminate-backend', 'pause-client'], [101, 102])]);
    // The seed has a terminate-backend before a later pause: a choice among the sessions there would shift it.
    expect(two.terminatedBeforeLastPause).toBe(true);
    const n = Math.min(none.pauses.length, two.pauses.length);
    expect(n).toBeGreaterThanOrEqual(2);
    expect(two.pauses.slice(0, n)).toEqual(none.pauses.slice(0, n));
    // Counted only where it struck: with no session to end, a terminate-backend injected nothing.
    expect(none.struck).toBe(none.pauses.length);
    expect(two.struck).toBeGreaterThan(two.pauses.length);
  }, 20_000);
});
