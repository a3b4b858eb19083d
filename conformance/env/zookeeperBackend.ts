import { randomUUID } from 'node:crypto';
import { leftWithin, pauseWithin } from './deadline.ts';
import { withTimeout } from '../../impl/errors.ts';
import type { Clock } from '../../model/clock.ts';
import { clockAt } from '../../model/clock.ts';
import type { Design, StorePolicy } from '../../model/design.ts';
import { clockMarginMs, designs, driftFactor } from '../../model/design.ts';
import type { MonotonicClock } from '../../impl/clock.ts';
import { systemClock } from '../../impl/clock.ts';
import { ZookeeperLock } from '../../impl/zookeeper/lock.ts';
import { zookeeperNode, type ZookeeperNode } from '../../impl/zookeeper/node.ts';
import { inLine, lockDir } from '../../impl/zookeeper/paths.ts';
import { zookeeperFencedStore } from '../../impl/zookeeper/store.ts';
import type { BackendInstance, BackendUnderTest, LockClient } from '../adapter.ts';
import type { Endpoint } from '../sim/network.ts';
import { SimNetwork } from '../sim/network.ts';
import { TimingError } from '../sim/time.ts';
import { crashQuorum, pacedEnvironment, pacedNetwork } from './pacedGroup.ts';
import { inSlot, slotOf } from './runSlot.ts';
import { failsTheRun, RunEnvironmentError } from './runEnvironment.ts';
import { ZK_TICK_MS, type ZookeeperAuth, ZookeeperEnsemble } from './zookeeperEnsemble.ts';
import { RequestBound } from './requestBound.ts';

/**
 * The ZooKeeper backend (spec 7.10 `zookeeper`) on a real 3-member
 * ensemble, checked in lockstep against the `etcd-lease` model, whose
 * semantics it shares (a lease that lives its ttl after the last renewal the
 * service heard, put-if-first, a cluster-wide creation counter as token):
 * the differences are listed in spec 7.10. Runs are paced to real time as
 * etcd's (spec 7.8): the ensemble expires sessions on its own clock. Clients
 * are in process on virtual time; each talks to the ensemble (its sessions
 * name every member) through the simulated network (cut, delay, hold while
 * paused, slow or black-holed service). The store is a fenced store in the
 * same ensemble on a session of its own that the network never cuts: the
 * model's store is always up.
 *
 * Crash-restart (spec 7.10), as etcd's: the crash is the ensemble losing
 * its quorum, the leader and a follower killed (kill -9; the follower left
 * running alternates), with no leader to expire a session meanwhile. The
 * new leader starts every session's timeout afresh when it starts, so the
 * restart waits (bounded) only for it and for the long-lived sessions, and
 * leaves the run unjudged when the model's restart would come later than
 * the expiry slack after the election; the restarted JVMs are warmed after
 * the model's restart (the next step's catch-up covers that time).
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
export const zookeeperDesign: Design = designs.etcdLease({ clockMarginMs: ZK_CLOCK_MARGIN_MS, leaseRenewal: 'last-request' });

const CALL_TIMEOUT_MS = 2_000;
const READY_TIMEOUT_MS = 20_000;
/** How often the restart looks for the leader, ms: the look bounds when the sessions were refreshed. */
const LEADER_POLL_MS = 20;

/** Starts the 3-member ensemble a cell's runs share, data on /dev/shm. */
export async function startZookeeperCell(): Promise<ZookeeperCell> {
  const ensemble = await ZookeeperEnsemble.start({ members: 3, parentDir: '/dev/shm' });
  return { ensemble, stop: () => ensemble.stop() };
}

/** The faults the ZooKeeper rows take (advance, pause, partition, delay, latency, slow-node, crash-restart) are what the environment's injectors make. */
export function realZookeeperBackend(cell: ZookeeperCell, store: StorePolicy, options: { readonly name?: string } = {}): BackendUnderTest {
  return {
    name: options.name ?? `zookeeper etcd-lease / ${store}`,
    design: zookeeperDesign,
    // Session timeouts are exact ms, but schedules of whole seconds keep the expiry slack a small part of every ttl.
    capabilities: { store, ttl: true, sessionBound: false, reentrant: false, expiryToleranceMs: ZK_EXPIRY_TOLERANCE_MS, ttlGrainMs: 1000, tokensComparedBy: 'order' },
    // A renewal lasts the session's timeout, the ttl it was opened with.
    contract: { refreshTtl: 'acquired' },
    // Runs keep to prefixes of their own, but a crash-restart kills members of the shared cluster and a close brings them back: one run at a time (runSlot.ts).
    start: (o) => inSlot(slotOf(cell.ensemble, 'zookeeper conformance run'), () => startInstance(cell, store, o.clients, o.requestTimeoutMs)),
  };
}

async function startInstance(cell: ZookeeperCell, policy: StorePolicy, clients: number, requestTimeoutMs: number | undefined): Promise<BackendInstance> {
  // A fresh root is the reset: nothing of an earlier run is in the way, and its sessions expire by themselves.
  const root = `/lockcheck/run-${randomUUID()}`;
  const nodes: ZookeeperNode[] = [];
  // The restarts under way: the election needs only one of the two back, the other is waited for after the model's restart.
  let restarting: Promise<unknown> = Promise.resolve();
  const close = async (): Promise<void> => {
    for (const n of nodes) n.close();
    // A run that ended with the ensemble down (or coming back) leaves it whole for the next one.
    await restarting.catch(() => undefined);
    await cell.ensemble.wholeAgain(READY_TIMEOUT_MS);
  };
  try {
    const { time, network, up } = pacedNetwork(ZK_PACING_TOLERANCE_MS);
    const admin = zookeeperNode({ ...cell.ensemble.clientOptions(), clock: systemClock, requestTimeoutMs: CALL_TIMEOUT_MS });
    nodes.push(admin);
    const clientClocks: Clock[] = Array.from({ length: clients }, () => clockAt());
    // A slow member is one slow round trip per attempt, extend or release (the model's one round: an attempt's connect), or a black hole.
    const timing = network.serverTiming();
    const lockClients: LockClient[] = Array.from({ length: clients }, (_v, client) => {
      // A paused client runs no timers until it resumes (then they fire before its replies): requests in flight across a pause.
      const clock: MonotonicClock = network.pausable(client, time.clockOf(() => clientClocks[client]!));
      // Every member named: after a crash a session reconnects to whichever member serves first (spec 7.10).
      const own = zookeeperNode({ ...cell.ensemble.clientOptions(), clock, requestTimeoutMs: CALL_TIMEOUT_MS });
      const storeNode = zookeeperNode({ ...cell.ensemble.clientOptions(), clock, requestTimeoutMs: CALL_TIMEOUT_MS });
      nodes.push(own, storeNode);
      const bound = new RequestBound(clock, requestTimeoutMs);
      const lock = new ZookeeperLock({ node: boundedNode(bound, () => timing.slowOperation(client), through(network, client, 0, own)), clock, driftFactor: driftFactor(zookeeperDesign), clockMarginMs: clockMarginMs(zookeeperDesign), root });
      return {
        ...bound.operations(lock),
        store: zookeeperFencedStore(through(network, client, 'store', storeNode), policy, { root }),
        clock,
      };
    });
    // The store sessions connect before the run begins: the model's store is up from the start.
    const answering = (): Promise<void> => zookeeperSessionsReady(nodes, `${root}/ready`);
    // An ensemble that does not answer in its bound (a member still coming back, a machine too busy) fails this run, not the matrix.
    await failsTheRun('the sessions answering a read', answering);
    const ensemble = cell.ensemble;
    // Crash-restart: which follower stays up alternates; a restart prepared is not prepared again.
    let crashes = 0;
    let killed: number[] = [];
    const prepareRestart = async (): Promise<void> => {
      if (killed.length === 0) return;
      const electedSince = await failsTheRun('the restart', async () => {
        // The leader is watched from before the restarts: when it starts it gives every session its full timeout afresh.
        const electing = ensemble.leaderSince(READY_TIMEOUT_MS, LEADER_POLL_MS);
        electing.catch(() => undefined);
        restarting = Promise.all(killed.map((m) => ensemble.restart(m)));
        restarting.catch(() => undefined);
        killed = [];
        const { sinceMs } = await electing;
        // The long-lived sessions answer again (the lease sessions reconnect as they do: every member is named).
        await answering();
        return sinceMs;
      });
      // The model restarts the node (refreshing every lease) once true time has caught up with now; the ensemble did at
      // the election. Further apart than the expiry slack, a session may expire before the model's restart: the run
      // cannot be judged (spec 7.10).
      const skew = performance.now() - electedSince;
      if (skew > ZK_EXPIRY_SLACK_MS) throw new TimingError(`the ensemble's sessions were refreshed up to ${skew.toFixed(0)} ms before the restart could be judged (more than ${ZK_EXPIRY_SLACK_MS} ms): the machine was too busy to keep pace`);
    };
    // The network's faults, its timing faults and crash-restart: no member clock is the runner's (spec 7.10).
    const crash = {
      crash: () => crashQuorum(ensemble, crashes++, READY_TIMEOUT_MS, time, up, (members) => (killed = members)),
      prepareRestart: () => prepareRestart(),
      restart: async () => {
        await prepareRestart();
        up[0] = true;
        // A restarted JVM answers its first requests slowly (its code not yet compiled): a session through every
        // member warms them. After the model's restart: the next step's catch-up covers the time it takes.
        await failsTheRun('the warm-up after the restart', async () => {
          await restarting;
          await Promise.all(ensemble.endpoints.map((endpoint) => warm(ensemble.clientOptions(endpoint), `${root}/warm`)));
        });
      },
    };
    const inspect = async (resource: string): Promise<ReadonlyArray<string | null>> => {
      // The model's node is down: what the members hold is not the clients' to see (the runner skips a down node).
      if (!up[0]) return [null];
      const dir = lockDir(resource, root);
      // ZooKeeper's reads are not linearizable: a member (the leader too) may not yet have applied a write another
      // member acknowledged. A write on the look's own session first is the barrier (the client library has no
      // sync): its member has applied every earlier write before it answers it.
      await admin.fencedWrite(`${root}/barrier`, 1n, 'barrier', 'unfenced');
      const line = inLine(await admin.children(dir));
      time.noteServerReply();
      time.assertOnTime();
      return [line[0] === undefined ? null : `${dir}/${line[0]}`];
    };
    const env = pacedEnvironment(time, network, timing, crash, inspect);
    return { clients: lockClients, env, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/**
 * The lock's calls bounded as the model bounds them (RequestBound); the
 * store's and the look's are not. A slow member slows the first round of
 * each attempt, extend and release (`slow` as it is sent), as the model's one round.
 */
function boundedNode(bound: RequestBound, slow: () => void, node: ZookeeperNode): ZookeeperNode {
  const first = <T>(call: () => Promise<T>) => () => {
    slow();
    return call();
  };
  return {
    openSession: (t) => bound.bounded('zookeeper connect', first(() => node.openSession(t))),
    contenders: (s, d) => bound.bounded('zookeeper get children', () => node.contenders(s, d)),
    enqueue: (s, d) => bound.bounded('zookeeper create', () => node.enqueue(s, d)),
    touch: (s, p) => bound.bounded('zookeeper touch', first(() => node.touch(s, p))),
    watchGone: (s, p, w) => node.watchGone(s, p, w),
    deleteOwned: (s, p, z) => bound.bounded('zookeeper delete', first(() => node.deleteOwned(s, p, z))),
    // A failed attempt waits for its session's close (ZookeeperLock): bounded as its other calls, a black hole cannot hold it.
    closeSession: (s) => bound.bounded('zookeeper close session', () => node.closeSession(s)),
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

/**
 * Waits until every node's long-lived session answers a read, within
 * `timeoutMs`; RunEnvironmentError, the last look's failure its cause, when
 * they do not: the servers failed this run.
 */
export async function zookeeperSessionsReady(nodes: readonly ZookeeperNode[], path: string, timeoutMs = READY_TIMEOUT_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      // Each look cut to what is left: a node's own call bound (CALL_TIMEOUT_MS) may be longer.
      await withTimeout(systemClock, leftWithin(timeoutMs, deadline), 'ready', Promise.all(nodes.map((n) => n.get(path))));
      return;
    } catch (error) {
      if (Date.now() >= deadline) throw new RunEnvironmentError(`ZooKeeper: the sessions did not answer a read within ${timeoutMs} ms: ${error instanceof Error ? error.message : String(error)}`, null, { cause: error });
      await new Promise((resolve) => setTimeout(resolve, pauseWithin(20, deadline)));
    }
  }
}

/** Sessions through one member (with the ensemble's credentials): opened, a contender made under `dir`, closed (each call bounded). */
async function warm(through: { readonly connectString: string; readonly auth: ZookeeperAuth }, dir: string): Promise<void> {
  const node = zookeeperNode({ ...through, clock: systemClock, requestTimeoutMs: READY_TIMEOUT_MS });
  try {
    for (let round = 0; round < 3; round++) {
      const session = await node.openSession(1000);
      await node.enqueue(session, dir);
      await node.closeSession(session);
    }
  } finally {
    node.close();
  }
}
