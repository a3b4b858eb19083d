import { randomUUID } from 'node:crypto';
import type { Clock } from '../../model/clock.ts';
import { clockAt } from '../../model/clock.ts';
import type { Design, StorePolicy } from '../../model/design.ts';
import { clockMarginMs, designs, driftFactor } from '../../model/design.ts';
import type { MonotonicClock } from '../../impl/clock.ts';
import { systemClock } from '../../impl/clock.ts';
import { ZookeeperLock } from '../../impl/zookeeper/lock.ts';
import { zookeeperNode, type ZookeeperNode } from '../../impl/zookeeper/node.ts';
import { lockDir, sequenceOf } from '../../impl/zookeeper/paths.ts';
import { zookeeperFencedStore } from '../../impl/zookeeper/store.ts';
import type { BackendInstance, BackendUnderTest, Environment, LockClient } from '../adapter.ts';
import type { Endpoint } from '../sim/network.ts';
import { SimNetwork } from '../sim/network.ts';
import { VirtualTime } from '../sim/time.ts';
import { ZK_TICK_MS, ZookeeperEnsemble } from './zookeeperEnsemble.ts';
import { RequestBound } from './requestBound.ts';

/**
 * The ZooKeeper backend (spec 7.10 `zookeeper`) on a real 3-member
 * ensemble, checked in lockstep against the `etcd-lease` model, whose
 * semantics it shares (a lease that lives its ttl after the last renewal the
 * service heard, put-if-first, a cluster-wide creation counter as token):
 * the differences are listed in spec 7.10. Runs are paced to real time as
 * etcd's (spec 7.8): the ensemble expires sessions on its own clock. Clients
 * are in process on virtual time; client i talks to member i mod 3 through
 * the simulated network (cut, delay, hold while paused). The store is a
 * fenced store in the same ensemble on a session of its own that the
 * network never cuts: the model's store is always up.
 *
 * Crash-restart is not offered in lockstep (spec 7.10): under heavy load a
 * lease session was gone at the model's restart that the model refreshes.
 */
export interface ZookeeperCell {
  readonly ensemble: ZookeeperEnsemble;
  stop(): Promise<void>;
}

/** How closely a run follows real time, ms (as etcd's). */
export const ZK_PACING_TOLERANCE_MS = 200;
/**
 * How late the ensemble may delete an expired session's contender, ms,
 * beyond the pacing: the leader expires sessions on tick boundaries (100 ms),
 * hears a follower's sessions at its pings (every half tick), then closes
 * the session through the quorum; 4 ticks in all.
 */
export const ZK_EXPIRY_SLACK_MS = 4 * ZK_TICK_MS;
export const ZK_EXPIRY_TOLERANCE_MS = ZK_PACING_TOLERANCE_MS + ZK_EXPIRY_SLACK_MS;
/** The lease's clock margin: the ensemble never expires a session early, so the margin need only cover the pacing. */
export const ZK_CLOCK_MARGIN_MS = ZK_PACING_TOLERANCE_MS + 2;

/** The design the ZooKeeper rows are judged by: etcd-lease with the margin the pacing needs. */
export const zookeeperDesign: Design = designs.etcdLease({ clockMarginMs: ZK_CLOCK_MARGIN_MS });

const CALL_TIMEOUT_MS = 2_000;

/** Starts the 3-member ensemble a cell's runs share, data on /dev/shm. */
export async function startZookeeperCell(): Promise<ZookeeperCell> {
  const ensemble = await ZookeeperEnsemble.start({ members: 3, parentDir: '/dev/shm' });
  return { ensemble, stop: () => ensemble.stop() };
}

/** The faults the ZooKeeper rows take (advance, pause, partition, delay, latency, slow-node) are what the environment's injectors make. */
export function realZookeeperBackend(cell: ZookeeperCell, store: StorePolicy, options: { readonly name?: string } = {}): BackendUnderTest {
  return {
    name: options.name ?? `zookeeper etcd-lease / ${store}`,
    design: zookeeperDesign,
    // Session timeouts are exact ms, but schedules of whole seconds keep the expiry slack a small part of every ttl.
    capabilities: { store, ttl: true, sessionBound: false, reentrant: false, expiryToleranceMs: ZK_EXPIRY_TOLERANCE_MS, ttlGrainMs: 1000, tokensComparedBy: 'order' },
    // A renewal lasts the session's timeout, the ttl it was opened with.
    contract: { refreshTtl: 'acquired' },
    start: (o) => startInstance(cell, store, o.clients, o.requestTimeoutMs),
  };
}

async function startInstance(cell: ZookeeperCell, policy: StorePolicy, clients: number, requestTimeoutMs: number | undefined): Promise<BackendInstance> {
  // A fresh root is the reset: nothing of an earlier run is in the way, and its sessions expire by themselves.
  const root = `/lockcheck/run-${randomUUID()}`;
  const nodes: ZookeeperNode[] = [];
  const close = async (): Promise<void> => {
    for (const n of nodes) n.close();
  };
  try {
    const up = [true];
    const settle: { network?: SimNetwork } = {};
    const time = new VirtualTime({ settle: () => settle.network!.settled(), realTime: { toleranceMs: ZK_PACING_TOLERANCE_MS } });
    const network = new SimNetwork(time, (e: Endpoint) => (e === 'store' ? { reachable: () => true } : { reachable: () => up[0]! }));
    settle.network = network;
    const admin = zookeeperNode({ connectString: cell.ensemble.connectString, clock: systemClock, requestTimeoutMs: CALL_TIMEOUT_MS });
    nodes.push(admin);
    const clientClocks: Clock[] = Array.from({ length: clients }, () => clockAt());
    // A slow member is one slow round trip per lock operation (an acquire's connect; the model's acquire is one round), or a black hole.
    const timing = network.serverTiming();
    const lockClients: LockClient[] = Array.from({ length: clients }, (_v, client) => {
      // A paused client runs no timers until it resumes (then they fire before its replies): requests in flight across a pause.
      const clock: MonotonicClock = network.pausable(client, time.clockOf(() => clientClocks[client]!));
      const own = zookeeperNode({ connectString: cell.ensemble.endpoints[client % cell.ensemble.size]!, clock, requestTimeoutMs: CALL_TIMEOUT_MS });
      const storeNode = zookeeperNode({ connectString: cell.ensemble.connectString, clock, requestTimeoutMs: CALL_TIMEOUT_MS });
      nodes.push(own, storeNode);
      const bound = new RequestBound(clock, requestTimeoutMs);
      const lock = new ZookeeperLock({ node: boundedNode(bound, through(network, client, 0, own)), clock, driftFactor: driftFactor(zookeeperDesign), clockMarginMs: clockMarginMs(zookeeperDesign), root });
      return {
        ...bound.operations(lock, () => timing.slowOperation(client)),
        store: zookeeperFencedStore(through(network, client, 'store', storeNode), policy, { root }),
        clock,
      };
    });
    // The store sessions connect before the run begins: the model's store is up from the start.
    await Promise.all(nodes.map((n) => n.get(`${root}/ready`)));
    const env: Environment = {
      nowMs: () => time.nowMs(),
      advanceTo: (t) => time.advanceTo(t),
      runUntil: (work, limitMs) => time.runUntil(work, limitMs),
      // The network's faults and its timing faults: no member clock is the runner's, and crash-restart is not offered (spec 7.10).
      faults: { ...network.faults(), ...timing.faults },
      realTimeAheadMs: () => time.lagMs(),
      inspect: async (resource) => {
        const dir = lockDir(resource, root);
        // ZooKeeper's reads are not linearizable: a member (the leader too) may not yet have applied a write another
        // member acknowledged. A write on the look's own session first is the barrier (the client library has no
        // sync): its member has applied every earlier write before it answers it.
        await admin.fencedWrite(`${root}/barrier`, 1n, 'barrier', 'unfenced');
        const line = (await admin.children(dir)).sort((a, b) => sequenceOf(a) - sequenceOf(b));
        time.noteServerReply();
        time.assertOnTime();
        return [line[0] === undefined ? null : `${dir}/${line[0]}`];
      },
    };
    return { clients: lockClients, env, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** The lock's calls bounded as the model bounds them (RequestBound); the store's and the look's are not. */
function boundedNode(bound: RequestBound, node: ZookeeperNode): ZookeeperNode {
  return {
    openSession: (t) => bound.bounded('zookeeper connect', () => node.openSession(t)),
    contenders: (s, d) => bound.bounded('zookeeper get children', () => node.contenders(s, d)),
    enqueue: (s, d) => bound.bounded('zookeeper create', () => node.enqueue(s, d)),
    touch: (s, p) => bound.bounded('zookeeper touch', () => node.touch(s, p)),
    watchGone: (s, p, w) => node.watchGone(s, p, w),
    deleteOwned: (s, p, z) => bound.bounded('zookeeper delete', () => node.deleteOwned(s, p, z)),
    closeSession: (s) => node.closeSession(s),
    children: (d) => node.children(d),
    get: (p) => node.get(p),
    fencedWrite: (p, t, v, pol) => node.fencedWrite(p, t, v, pol),
    close: () => node.close(),
  };
}

/** Every call of `node` through the simulated network, as client `client` to `endpoint`. */
function through(network: SimNetwork, client: number, endpoint: Endpoint, node: ZookeeperNode): ZookeeperNode {
  return {
    openSession: (t) => network.call(client, endpoint, () => node.openSession(t)),
    contenders: (s, d) => network.call(client, endpoint, () => node.contenders(s, d)),
    enqueue: (s, d) => network.call(client, endpoint, () => node.enqueue(s, d)),
    touch: (s, p) => network.call(client, endpoint, () => node.touch(s, p)),
    watchGone: (s, p, w) => node.watchGone(s, p, w),
    deleteOwned: (s, p, z) => network.call(client, endpoint, () => node.deleteOwned(s, p, z)),
    closeSession: (s) => network.call(client, endpoint, () => node.closeSession(s)),
    children: (d) => network.call(client, endpoint, () => node.children(d)),
    get: (p) => network.call(client, endpoint, () => node.get(p)),
    fencedWrite: (p, t, v, pol) => network.call(client, endpoint, () => node.fencedWrite(p, t, v, pol)),
    close: () => node.close(),
  };
}
