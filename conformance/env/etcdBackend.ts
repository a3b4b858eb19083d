import { randomUUID } from 'node:crypto';
import { leftWithin, pauseWithin } from './deadline.ts';
import type { Etcd3 } from 'etcd3';
import type { Clock } from '../../model/clock.ts';
import { clockAt } from '../../model/clock.ts';
import type { Design, StorePolicy } from '../../model/design.ts';
import { clockMarginMs, designs, driftFactor } from '../../model/design.ts';
import type { MonotonicClock } from '../../impl/clock.ts';
import { etcdClient } from '../../impl/etcd/client.ts';
import { lockKey } from '../../impl/etcd/keys.ts';
import { EtcdLock } from '../../impl/etcd/lock.ts';
import { etcd3Node, type EtcdNode } from '../../impl/etcd/node.ts';
import { etcdFencedStore } from '../../impl/etcd/store.ts';
import type { BackendInstance, BackendUnderTest, LockClient } from '../adapter.ts';
import type { Endpoint } from '../sim/network.ts';
import { SimNetwork } from '../sim/network.ts';
import { TimingError } from '../sim/time.ts';
import { crashQuorum, pacedEnvironment, pacedNetwork } from './pacedGroup.ts';
import { inSlot, slotOf } from './runSlot.ts';
import { failsTheRun, RunEnvironmentError } from './runEnvironment.ts';
import { EtcdCluster } from './etcdCluster.ts';
import { RequestBound } from './requestBound.ts';

/**
 * The etcd backend (spec 7.6 `etcd-lease`) on a real 3-member etcd cluster,
 * checked in lockstep against the model. etcd is a Go program on the
 * machine's real clocks (libfaketime does not reach it) and grants ttls in
 * whole seconds, so a run is paced to real time (spec 7.8) and its ttls are
 * whole seconds. Clients are in process on virtual time; each talks to one
 * member (client i to member i mod 3; followers forward to the leader)
 * through the simulated network (cut, delay, hold while paused). The store
 * is a fenced store in a separate one-member etcd: the model's store is
 * always up, whatever the lock service does.
 *
 * Crash-restart (spec 7.6.1): the model's crash of its one node is the
 * cluster losing its quorum, the leader and a follower killed (kill -9; the
 * follower left running alternates), so that no lessor runs while the node
 * is down; the clients cannot reach it meanwhile. The restart brings both
 * back on their WAL and waits (bounded) for a leader, whose promotion
 * refreshes every lease to its ttl plus the election timeout, and for fresh
 * client connections (a gRPC channel to a killed member backs off for about
 * a second); all that before true time catches up (prepareRestart), so the
 * model's refresh happens at the real one, within the pacing.
 */
export interface EtcdCell {
  readonly lock: EtcdCluster;
  readonly store: EtcdCluster;
  stop(): Promise<void>;
}

/** How closely a run follows real time, ms: the round trips of one step (an acquire and the look at the keys after it; each an fsync on the members) fit in it on a busy machine. */
export const ETCD_PACING_TOLERANCE_MS = 200;
/**
 * How late etcd may remove an expired lease's key, ms, beyond the pacing:
 * the leader's lessor looks for expired leases every 500 ms (measured on
 * this machine: 7 to 524 ms after the ttl), then revokes through raft.
 */
export const ETCD_REVOKE_SLACK_MS = 600;
/** The model's expiry tolerance for the etcd row (spec 7.7, 7.8). */
export const ETCD_EXPIRY_TOLERANCE_MS = ETCD_PACING_TOLERANCE_MS + ETCD_REVOKE_SLACK_MS;
/** The lease's clock margin: etcd never expires a key early, so the margin need only cover the pacing. */
export const ETCD_CLOCK_MARGIN_MS = ETCD_PACING_TOLERANCE_MS + 2;

/** The lock cluster's raft election timeout, ms: etcd's minimum lease ttl is 1.5 of it rounded up to a second (1 s here). */
export const ETCD_ELECTION_MS = 600;

/** The design the etcd row is judged by: etcd-lease with the margin the pacing needs, and a new leader's lease refresh as etcd's. */
export const etcdDesign: Design = designs.etcdLease({ clockMarginMs: ETCD_CLOCK_MARGIN_MS, leaderChangeExtendMs: ETCD_ELECTION_MS });

const CALL_TIMEOUT_MS = 2_000;
const READY_TIMEOUT_MS = 10_000;

/**
 * Starts the clusters a cell's runs share: the lock cluster (3 members, an
 * election timeout of 600 ms so that etcd's minimum lease ttl is 1 s) and
 * the store (1 member), data on /dev/shm.
 */
export async function startEtcdCell(): Promise<EtcdCell> {
  const lock = await EtcdCluster.start({ members: 3, electionMs: ETCD_ELECTION_MS, parentDir: '/dev/shm' });
  try {
    const store = await EtcdCluster.start({ members: 1, parentDir: '/dev/shm' });
    return { lock, store, stop: async () => void (await Promise.all([lock.stop(), store.stop()])) };
  } catch (error) {
    await lock.stop();
    throw error;
  }
}

/** The faults the etcd row takes (advance, pause, partition, delay, crash-restart, latency, slow-node) are what its environment's injectors make. */
export function realEtcdBackend(cell: EtcdCell, store: StorePolicy, options: { readonly name?: string } = {}): BackendUnderTest {
  return {
    name: options.name ?? `etcd etcd-lease / ${store}`,
    design: etcdDesign,
    capabilities: { store, ttl: true, sessionBound: false, reentrant: false, expiryToleranceMs: ETCD_EXPIRY_TOLERANCE_MS, ttlGrainMs: 1000, tokensComparedBy: 'order' },
    // A keep-alive renews the ttl the lease was granted with.
    contract: { refreshTtl: 'acquired' },
    // Runs keep to prefixes of their own, but a crash-restart kills members of the shared cluster and a close brings them back: one run at a time (runSlot.ts).
    start: (o) => inSlot(slotOf(cell.lock, 'etcd conformance run'), () => startInstance(cell, store, o.clients, o.requestTimeoutMs)),
  };
}

async function startInstance(cell: EtcdCell, policy: StorePolicy, clients: number, requestTimeoutMs: number | undefined): Promise<BackendInstance> {
  // A fresh prefix is the reset: nothing of an earlier run is in the way, and its leases expire by themselves.
  const prefix = `run-${randomUUID()}/`;
  const all = new Set<Etcd3>();
  // Every member requires a client certificate of its cluster's own CA (the store cluster has its own).
  const open = (cluster: EtcdCluster, hosts: readonly string[]): Etcd3 => {
    const c = etcdClient(cluster.clientOptions(hosts));
    all.add(c);
    return c;
  };
  const lockCluster = cell.lock;
  const close = async (): Promise<void> => {
    for (const c of all) c.close();
    // A run that ended with the cluster down leaves it whole for the next one.
    await lockCluster.wholeAgain(READY_TIMEOUT_MS);
  };
  try {
    const { time, network, up } = pacedNetwork(ETCD_PACING_TOLERANCE_MS);
    // The connections to the lock cluster, made again after a restart (a channel to a killed member backs off).
    const connect = (): { readonly admin: Etcd3; readonly own: readonly Etcd3[]; readonly nodes: readonly EtcdNode[] } => {
      const own = Array.from({ length: clients }, (_v, client) => open(lockCluster, [lockCluster.endpoints[client % lockCluster.size]!]));
      const nodes = own.map((c, client) => etcd3Node(c, { clock: clocks[client]!, requestTimeoutMs: CALL_TIMEOUT_MS }));
      return { admin: open(lockCluster, lockCluster.endpoints), own, nodes };
    };
    const clientClocks: Clock[] = Array.from({ length: clients }, () => clockAt());
    // A paused client runs no timers until it resumes (then they fire before its replies): requests in flight across a pause.
    const clocks: MonotonicClock[] = Array.from({ length: clients }, (_v, client) => network.pausable(client, time.clockOf(() => clientClocks[client]!)));
    // A slow member is one slow round trip per attempt, extend or release (the model's one round: an attempt's grant), or a black hole.
    const timing = network.serverTiming();
    let lockLinks = connect();
    const lockClients: LockClient[] = Array.from({ length: clients }, (_v, client) => {
      const clock = clocks[client]!;
      const bound = new RequestBound(clock, requestTimeoutMs);
      const node = boundedNode(bound, () => timing.slowOperation(client), through(network, client, 0, () => lockLinks.nodes[client]!));
      const storeNode = etcd3Node(open(cell.store, cell.store.endpoints), { clock, requestTimeoutMs: CALL_TIMEOUT_MS });
      const lock = new EtcdLock({ node, clock, driftFactor: driftFactor(etcdDesign), clockMarginMs: clockMarginMs(etcdDesign), prefix });
      return {
        ...bound.operations(lock),
        store: etcdFencedStore(through(network, client, 'store', () => storeNode), policy, { prefix }),
        clock,
      };
    });
    // Every connection answers before the run begins: the model's nodes are up from the start.
    await Promise.all([...all].map((c) => etcdClientReady(c)));
    // Crash-restart: which follower stays up alternates; a restart prepared is not prepared again.
    let crashes = 0;
    let killed: number[] = [];
    const prepareRestart = async (): Promise<void> => {
      if (killed.length === 0) return;
      const electedAt = await failsTheRun('the restart', async () => {
        // The leader is elected as soon as one of the two is back (with the member left running): watched meanwhile.
        const restarting = Promise.all(killed.map((m) => lockCluster.restart(m)));
        restarting.catch(() => undefined);
        await lockCluster.leader(READY_TIMEOUT_MS);
        const at = performance.now();
        await restarting;
        killed = [];
        const stale = lockLinks;
        lockLinks = connect();
        for (const c of [stale.admin, ...stale.own]) closeClient(all, c);
        await Promise.all([...all].map((c) => etcdClientReady(c)));
        return at;
      });
      // The new leader refreshed every lease when it was elected; the model restarts the node after all this: further
      // apart than the expiry tolerance leaves beyond the pace, the run cannot be judged.
      const skew = performance.now() - electedAt;
      if (skew > ETCD_REVOKE_SLACK_MS) throw new TimingError(`the restart's connections were ready ${skew.toFixed(0)} ms after the election (more than ${ETCD_REVOKE_SLACK_MS} ms): the machine was too busy to keep pace`);
    };
    // The network's faults and crash-restart: no clock of a member is the runner's (Go), and an etcd lease lives
    // with its ttl, not with a connection.
    const crash = {
      crash: () => crashQuorum(lockCluster, crashes++, READY_TIMEOUT_MS, time, up, (members) => (killed = members)),
      prepareRestart: () => prepareRestart(),
      restart: async () => {
        await prepareRestart();
        up[0] = true;
      },
    };
    const inspect = async (resource: string): Promise<ReadonlyArray<string | null>> => {
      // The model's node is down: what the members hold is not the clients' to see (the runner skips a down node).
      if (!up[0]) return [null];
      const r = await lockLinks.admin.kv.range({ key: lockKey(resource, prefix) }, { deadline: Date.now() + CALL_TIMEOUT_MS });
      time.noteServerReply();
      time.assertOnTime();
      return [r.kvs[0]?.value.toString('utf8') ?? null];
    };
    const env = pacedEnvironment(time, network, timing, crash, inspect);
    return { clients: lockClients, env, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** Every call of the current `node` through the simulated network, as client `client` to `endpoint`. */
function through(network: SimNetwork, client: number, endpoint: Endpoint, node: () => EtcdNode): EtcdNode {
  return {
    grant: (t) => network.call(client, endpoint, () => node().grant(t)),
    putIfAbsent: (k, v, l) => network.call(client, endpoint, () => node().putIfAbsent(k, v, l)),
    keepAlive: (l) => network.call(client, endpoint, () => node().keepAlive(l)),
    owns: (k, l, r) => network.call(client, endpoint, () => node().owns(k, l, r)),
    deleteIfOwned: (k, l, r) => network.call(client, endpoint, () => node().deleteIfOwned(k, l, r)),
    revoke: (l) => network.call(client, endpoint, () => node().revoke(l)),
    get: (k) => network.call(client, endpoint, () => node().get(k)),
    fencedWrite: (k, h, t, v, p) => network.call(client, endpoint, () => node().fencedWrite(k, h, t, v, p)),
  };
}

/**
 * The lock's calls bounded as the model bounds them (RequestBound); the
 * store's are not. A slow member slows the first round of each attempt,
 * extend and release (`slow` as it is sent), as the model's one round.
 */
function boundedNode(bound: RequestBound, slow: () => void, node: EtcdNode): EtcdNode {
  const first = <T>(call: () => Promise<T>) => () => {
    slow();
    return call();
  };
  return {
    grant: (t) => bound.bounded('etcd lease grant', first(() => node.grant(t))),
    putIfAbsent: (k, v, l) => bound.bounded('etcd put-if-absent', () => node.putIfAbsent(k, v, l)),
    keepAlive: (l) => bound.bounded('etcd lease keep-alive', first(() => node.keepAlive(l))),
    // Sent beside the keep-alive, in the same round: the slow member slowed that round once already.
    owns: (k, l, r) => bound.bounded('etcd owns', () => node.owns(k, l, r)),
    deleteIfOwned: (k, l, r) => bound.bounded('etcd delete-if-owned', first(() => node.deleteIfOwned(k, l, r))),
    revoke: (l) => bound.bounded('etcd lease revoke', first(() => node.revoke(l))),
    get: (k) => node.get(k),
    fencedWrite: (k, h, t, v, p) => node.fencedWrite(k, h, t, v, p),
  };
}

/** Closes a client and forgets it. */
function closeClient(all: Set<Etcd3>, client: Etcd3): void {
  client.close();
  all.delete(client);
}

/**
 * Waits until a client's connection answers a read, within `timeoutMs`
 * (each read and pause cut to what is left); RunEnvironmentError, the last
 * read's failure its cause, when it does not: the servers failed this run.
 */
export async function etcdClientReady(client: Etcd3, timeoutMs = READY_TIMEOUT_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await client.kv.range({ key: Buffer.from('lockcheck/ready') }, { deadline: Date.now() + leftWithin(1000, deadline) });
      return;
    } catch (error) {
      if (Date.now() >= deadline) throw new RunEnvironmentError(`etcd: a connection did not answer a read within ${timeoutMs} ms: ${error instanceof Error ? error.message : String(error)}`, null, { cause: error });
      await new Promise((resolve) => setTimeout(resolve, pauseWithin(50, deadline)));
    }
  }
}
