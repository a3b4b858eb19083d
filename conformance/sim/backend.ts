import type { Clock } from '../../model/clock.ts';
import { clockAt, setDrift } from '../../model/clock.ts';
import type { Design, StorePolicy } from '../../model/design.ts';
import { describeDesign, driftFactor, nodeCount, persists, restartDelayMs, clockMarginMs } from '../../model/design.ts';
import type { MonotonicClock } from '../../impl/clock.ts';
import type { FencedStore } from '../../impl/fencedStore.ts';
import type { LeaseLockOptions } from '../../impl/leaseLock.ts';
import { LeaseLock } from '../../impl/leaseLock.ts';
import type { LeaseNode } from '../../impl/leaseNode.ts';
import type { BackendInstance, BackendUnderTest, Environment, InstanceOptions, LockClient } from '../adapter.ts';
import type { Misconfiguration } from '../configuration.ts';
import type { Endpoint } from './network.ts';
import { SimNetwork } from './network.ts';
import { leaseNodeOver, SimRedisNode } from './redisNode.ts';
import { SimStore, storeOver } from './store.ts';
import { VirtualTime } from './time.ts';
import { checkObject, checkPolicy, knownOptions, refuse } from '../../impl/options.ts';

/**
 * In-memory Redis lease backends: the real LeaseLock algorithm (impl/) over
 * simulated Redis nodes, a simulated store and a simulated network, all on
 * virtual time. Each part can be swapped, which is how the broken fixtures
 * are built: one wrong part each.
 */
/**
 * A client lock's options, as LeaseLock takes them (`new LeaseLock(parts)`:
 * a LeaseLock refuses a key it does not know, so nothing else is in here).
 */
export interface LockParts {
  /** The client's view of each simulated node. */
  readonly nodes: readonly LeaseNode[];
  /** The client's monotonic clock, on virtual time (drifting as the schedule says). */
  readonly clock: MonotonicClock;
  /** The design's drift allowance, a fraction of the ttl. */
  readonly driftFactor: number;
  /** The design's fixed drift allowance, in ms. */
  readonly clockMarginMs: number;
  /** Seeded per client, so owner values repeat run to run. */
  readonly random: () => number;
  /** The run's request timeout (absent: the operation's ttl). */
  readonly requestTimeoutMs?: number;
}

/**
 * The parts of an in-memory backend (simLeaseBackend), each replaceable:
 * absent parts are lockcheck's correct ones. A broken fixture swaps one.
 */
export interface SimParts {
  /** A lock-service node. Default: the atomic in-memory Redis node. */
  readonly nodeServer?: (time: VirtualTime, persistent: boolean, restartDelayMs: number, tokenBase: bigint) => SimRedisNode;
  /** What a client's calls go through, given its lock. Default: the lock's own acquire, extend and release. */
  readonly client?: (lock: LeaseLock) => Pick<LockClient, 'acquire' | 'extend' | 'release'>;
  /** The client algorithm, given its options and the client's wall clock (epoch-based, and not what a lease may be timed by). Default: LeaseLock. */
  readonly lock?: (parts: LockParts, wallClock: MonotonicClock) => LeaseLock;
  /** A client's view of one node. Default: the atomic scripts. */
  readonly node?: (network: SimNetwork, client: number, index: number, node: SimRedisNode) => LeaseNode;
  /** The store server. Default: the model's policy, atomically. */
  readonly storeServer?: (policy: StorePolicy) => SimStore;
  /** A client's view of the store. Default: one atomic call per write. */
  readonly store?: (network: SimNetwork, client: number, store: SimStore) => FencedStore;
}

const checkPartKeys = knownOptions('parts', ['nodeServer', 'client', 'lock', 'node', 'storeServer', 'store']);

/** Where client wall clocks start: an epoch reading, unlike a monotonic clock's. */
const WALL_EPOCH_MS = 1_700_000_000_000;

/** A small deterministic generator (xorshift32), so owner values repeat run to run. */
function seeded(seed: number): () => number {
  let x = seed >>> 0 || 0x9e3779b9;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 2 ** 32;
  };
}

/**
 * An in-memory backend for a redis-single or redlock design: LeaseLock over
 * simulated Redis nodes, network and store on virtual time, with `parts`
 * swapped in; named `name` (default: the design and store). Needs no
 * servers: what the suite's own tests and the broken fixtures run on.
 * Throws InvalidInputError('invalid-config') for another design or an
 * unknown part.
 */
export function simLeaseBackend(design: Design, store: StorePolicy, parts: SimParts = {}, name?: string): BackendUnderTest {
  const kind = (checkObject(design, 'design') as { kind?: unknown }).kind;
  if (kind !== 'redis-single' && kind !== 'redlock') refuse('design', 'a redis-single or redlock design (simLeaseBackend runs Redis designs)', kind);
  checkPartKeys(checkObject(parts, 'parts'));
  checkSimNaming(store, name);
  name ??= `memory ${describeDesign(design)} / ${store}`;
  return {
    name,
    design,
    capabilities: { store, ttl: true, sessionBound: false, reentrant: false },
    start: async (options) => startSim(design, store, parts, options),
    misconfigurations: leaseLockMisconfigurations(design, store, parts),
  };
}

/** Lock options out of range, each just past an end or not a whole number: the lock must refuse them as it is built. */
const BAD_LOCK_OPTIONS: ReadonlyArray<{ readonly what: string; readonly names: string; readonly options: (nodes: readonly LeaseNode[]) => Partial<LeaseLockOptions> }> = [
  { what: 'no nodes', names: 'nodes', options: () => ({ nodes: [] }) },
  { what: '16 nodes', names: 'nodes', options: (nodes) => ({ nodes: Array.from({ length: 16 }, (_v, i) => nodes[i % nodes.length]!) }) },
  ...[-0.01, 1, Number.NaN].map((driftFactor) => ({ what: `driftFactor ${driftFactor}`, names: 'driftFactor', options: () => ({ driftFactor }) })),
  ...[-1, 1.5, 1001].map((clockMarginMs) => ({ what: `clockMarginMs ${clockMarginMs}`, names: 'clockMarginMs', options: () => ({ clockMarginMs }) })),
  ...[-1, 0.5].map((safetyMarginMs) => ({ what: `safetyMarginMs ${safetyMarginMs}`, names: 'safetyMarginMs', options: () => ({ safetyMarginMs }) })),
];

function leaseLockMisconfigurations(design: Design, store: StorePolicy, parts: SimParts): Misconfiguration[] {
  return BAD_LOCK_OPTIONS.map(({ what, names, options }) => ({
    what: `a lock with ${what}`,
    names,
    attempt: async () => {
      const lock = (p: LockParts, wallClock: MonotonicClock): LeaseLock => (parts.lock ?? ((q: LockParts) => new LeaseLock(q)))({ ...p, ...options(p.nodes) } as LockParts, wallClock);
      const instance = startSim(design, store, { ...parts, lock }, { clients: 1, tokenBase: 0n });
      await instance.close();
    },
  }));
}

function startSim(design: Design, policy: StorePolicy, parts: SimParts, options: InstanceOptions): BackendInstance {
  const time = new VirtualTime();
  const nodes = Array.from({ length: nodeCount(design) }, () => parts.nodeServer?.(time, persists(design), restartDelayMs(design), options.tokenBase) ?? new SimRedisNode(time, persists(design), restartDelayMs(design), options.tokenBase));
  const storeServer = parts.storeServer?.(policy) ?? new SimStore(policy);
  const network = new SimNetwork(time, (e: Endpoint) => (e === 'store' ? storeServer : nodes[e]!));
  const clientClocks: Clock[] = Array.from({ length: options.clients }, () => clockAt());
  const clients: LockClient[] = clientClocks.map((_c, client) => {
    const clock = network.pausable(client, time.clockOf(() => clientClocks[client]!));
    const wallClock = time.clockOf(() => ({ ...clientClocks[client]!, readingMs: clientClocks[client]!.readingMs + WALL_EPOCH_MS }));
    const lockParts: LockParts = {
      nodes: nodes.map((node, index) => parts.node?.(network, client, index, node) ?? leaseNodeOver(network, client, index, node)),
      clock,
      driftFactor: driftFactor(design),
      clockMarginMs: clockMarginMs(design),
      random: seeded(0x5eed + client * 7919),
      ...(options.requestTimeoutMs !== undefined ? { requestTimeoutMs: options.requestTimeoutMs } : {}),
    };
    const lock = parts.lock?.(lockParts, wallClock) ?? new LeaseLock(lockParts satisfies LeaseLockOptions);
    return {
      ...(parts.client?.(lock) ?? { acquire: (resource, o) => lock.acquire(resource, o), extend: (lease, ttlMs) => lock.extend(lease, ttlMs), release: (lease) => lock.release(lease) }),
      store: parts.store?.(network, client, storeServer) ?? storeOver(network, client, storeServer),
      clock,
    };
  });
  const env: Environment = {
    nowMs: () => time.nowMs(),
    advanceTo: (t) => time.advanceTo(t),
    runUntil: (work, limitMs) => time.runUntil(work, limitMs),
    faults: {
      clockStep: async (node, deltaMs) => nodes[node]!.stepClock(deltaMs),
      clockDrift: async (target, driftPpm) => {
        if ('node' in target) nodes[target.node]!.drift(driftPpm);
        else clientClocks[target.client] = setDrift(clientClocks[target.client]!, time.nowMs(), driftPpm);
      },
      crash: { crash: async (node) => nodes[node]!.crash(), restart: async (node) => nodes[node]!.restart() },
      ...network.faults(),
      ...network.timingFaults(),
      // A Redis connection carries no lock state: the client reconnects.
      killConnection: async () => undefined,
    },
    inspect: async (resource) => nodes.map((n) => (n.up ? n.holder(resource) : null)),
  };
  return { clients, env, close: async () => undefined };
}

/**
 * A sim backend's store policy and name, checked as it is made: a symbol for
 * the store threw a TypeError building the default name, and a store or a
 * name of the wrong kind was refused only later, by checkConformance, as the
 * adapter's error.
 */
export function checkSimNaming(store: unknown, name: unknown): void {
  checkPolicy(store, ['unfenced', 'strict', 'monotonic', 'transactional']);
  if (name !== undefined && (typeof name !== 'string' || name === '')) refuse('name', 'a non-empty string', name);
}
