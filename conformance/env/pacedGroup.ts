import type { Environment } from '../adapter.ts';
import type { FaultInjectors } from '../faults.ts';
import type { Endpoint } from '../sim/network.ts';
import { SimNetwork } from '../sim/network.ts';
import { VirtualTime } from '../sim/time.ts';
import type { ConsensusGroup, GroupMember } from './consensusGroup.ts';
import { failsTheRun } from './runEnvironment.ts';

/**
 * What the etcd and ZooKeeper rows share: a run on a real consensus group,
 * paced to real time (spec 7.8: the group expires leases on its own clocks),
 * whose model node is the whole group.
 */

/** A run's virtual time, paced to real time within `toleranceMs`, and its network: the store always reachable, the lock service while `up[0]`. */
export function pacedNetwork(toleranceMs: number): { readonly time: VirtualTime; readonly network: SimNetwork; readonly up: boolean[] } {
  const up = [true];
  // The network settles real I/O before virtual time moves on; the time waits on the network: made in turn.
  const settle: { network?: SimNetwork } = {};
  const time = new VirtualTime({ settle: () => settle.network!.settled(), realTime: { toleranceMs } });
  const network = new SimNetwork(time, (e: Endpoint) => (e === 'store' ? { reachable: () => true } : { reachable: () => up[0]! }));
  settle.network = network;
  return { time, network, up };
}

/**
 * The model's crash of its one node: the group loses its quorum (the leader
 * and the `nth` follower killed, kill -9), the lock service unreachable from
 * before the kill; `killed` hears which members went as soon as they have. A
 * kill that fails fails the run; one later than the pace allows (a lease may
 * have run out meanwhile) leaves the run unjudged, never judged wrong: the
 * model's crash is at the step's instant.
 */
export async function crashQuorum(group: ConsensusGroup<GroupMember, { readonly member: number }>, nth: number, timeoutMs: number, time: VirtualTime, up: boolean[], killed: (members: number[]) => void): Promise<void> {
  await failsTheRun('the crash of the leader and a follower', async () => {
    up[0] = false;
    killed(await group.killLeaderAndFollower(nth, timeoutMs));
  });
  time.noteServerReply();
  time.assertOnTime();
}

/**
 * The run's environment: time control on the paced virtual time, the
 * network's faults and its timing faults, and the group's crash-restart (no
 * member's clock is the runner's: the group is not on libfaketime).
 */
export function pacedEnvironment(time: VirtualTime, network: SimNetwork, timing: ReturnType<SimNetwork['serverTiming']>, crash: NonNullable<FaultInjectors['crash']>, inspect: NonNullable<Environment['inspect']>): Environment {
  return {
    nowMs: () => time.nowMs(),
    advanceTo: (t) => time.advanceTo(t),
    runUntil: (work, limitMs) => time.runUntil(work, limitMs),
    faults: { ...network.faults(), ...timing.faults, crash },
    realTimeAheadMs: () => time.lagMs(),
    inspect,
  };
}
