import pg from 'pg';
import { match } from 'ts-pattern';
import { ensureSchema } from '../../impl/postgres/schema.ts';
import { FakeClockFile } from '../env/faketime.ts';
import { PostgresServer } from '../env/postgresServer.ts';
import { TcpProxy } from '../env/proxy.ts';
import { RedisServer } from '../env/redisServer.ts';
import { RedisReplicated } from '../env/redisReplicated.ts';
import type { AdapterRef } from './adapterRef.ts';
import { EtcdCluster } from '../env/etcdCluster.ts';
import { ZookeeperEnsemble } from '../env/zookeeperEnsemble.ts';
import type { ClientBackend, FencePolicy } from './protocol.ts';
import { guardedTempDir } from '../env/tempDir.ts';

import type { StressBackend } from './backendNames.ts';

export { STRESS_BACKENDS, type StressBackend } from './backendNames.ts';

/** A server process the nemesis can pause, kill and restart. */
export interface FaultableServer {
  readonly name: string;
  pause(): void;
  resume(): void;
  readonly paused: boolean;
  crash(): Promise<void>;
  restart(): Promise<void>;
  readonly running: boolean;
}

/** A primary with its replica and Sentinel (redis-replicated, spec 7.9): the failover nemesis's handles. */
export interface Replication {
  /** Holds replication back: no write made from now on reaches the replica. */
  hold(): Promise<void>;
  /**
   * Kills the primary (SIGKILL), has Sentinel promote the replica (with what
   * replication had delivered), then restarts the old primary empty as the
   * new one's replica. RunEnvironmentError when Sentinel does not promote it
   * within the bound.
   */
  failover(): Promise<void>;
  /** Replication running again and the replica in sync (the nemesis's heal). */
  release(): Promise<void>;
}

/**
 * The servers of one stress run and the links to them: Redis lock nodes
 * (under libfaketime clocks that run at real speed until the nemesis steps
 * them) and a Redis store, or one PostgreSQL server holding locks and store.
 * With `proxied`, every client reaches every lock server through a TCP proxy
 * of its own (links[client][node]), so that one link can be cut or delayed.
 */
export interface StressServers {
  readonly backend: StressBackend;
  readonly nodes: readonly FaultableServer[];
  /** redis-replicated: the failover's handles; null elsewhere. */
  readonly replication: Replication | null;
  /** links[client][node]; empty when not proxied. */
  readonly links: readonly (readonly TcpProxy[])[];
  /** Majority of the lock nodes. */
  readonly quorum: number;
  /** What client `client` drives: the layout's own lock, or an adapter's concurrent client on these servers. */
  clientBackend(client: number, store: FencePolicy, adapter?: { readonly ref: AdapterRef; readonly tokens: boolean }): ClientBackend;
  /** etcd with peer gates: cuts the members in `side` from the others, both ways; throws elsewhere. */
  partitionMembers(side: readonly number[]): void;
  /** Ends a member partition (nothing to do where there is none). */
  healMembers(): void;
  /** Redis: steps node's clock by deltaMs (cumulative); throws without faked clocks. */
  stepClock(node: number, deltaMs: number): void;
  readonly clocksFaked: boolean;
  /** Redis: which nodes hold the lock key `key` for `owner` now (asked directly, not through the proxies). */
  nodesHolding(key: string, owner: string): Promise<number[]>;
  /** PostgreSQL: ends these backends (pg_terminate_backend, waiting until they are gone). */
  terminate(pids: readonly number[]): Promise<void>;
  /** PostgreSQL: the backends holding an advisory lock now. */
  advisoryHolders(): Promise<number[]>;
  stop(): Promise<void>;
}

export interface StartServersOptions {
  readonly backend: StressBackend;
  readonly clients: number;
  /** Run Redis nodes under libfaketime (needed for clock steps; costs speed). */
  readonly fakeClocks: boolean;
  /** Route each client's links through proxies of their own (needed for partitions and delays). */
  readonly proxied: boolean;
  /** etcd: gates between the members (needed for member partitions). */
  readonly peerGates?: boolean;
}

export async function startServers(o: StartServersOptions): Promise<StressServers> {
  if (o.backend === 'etcd') return startEtcd(o);
  if (o.backend === 'redis-replicated' || o.backend === 'redis-replicated-wait') return startReplicated(o);
  if (o.backend === 'zookeeper') return startZookeeper(o);
  return o.backend === 'pg-session' || o.backend === 'pg-xact' ? startPostgres(o) : startRedis(o);
}

async function proxies(clients: number, targets: ReadonlyArray<{ host: string; port: number }>, proxied: boolean): Promise<TcpProxy[][]> {
  if (!proxied) return [];
  const links: TcpProxy[][] = [];
  for (let c = 0; c < clients; c++) links.push(await Promise.all(targets.map((t) => TcpProxy.start({ host: t.host, port: t.port }))));
  return links;
}

/** Where the lock servers are no consensus group: no gates between members to cut. */
const NO_MEMBER_GATES: Pick<StressServers, 'partitionMembers' | 'healMembers'> = {
  partitionMembers: () => {
    throw new Error('partitionMembers: only the etcd cluster and the ZooKeeper ensemble have gates between their members');
  },
  healMembers: () => undefined,
};

/** Where the locks are no PostgreSQL advisory locks: no backend to end, none holding one. */
const NO_ADVISORY_LOCKS: Pick<StressServers, 'terminate' | 'advisoryHolders'> = {
  terminate: async () => undefined,
  advisoryHolders: async () => [],
};

async function startRedis(o: StartServersOptions): Promise<StressServers> {
  const count = o.backend === 'redlock' || o.backend === 'redlock-aof' ? 5 : 1;
  const persistence = o.backend.endsWith('-aof') ? 'aof-always' : 'none';
  const { dir, remove } = guardedTempDir('lockcheck-stress-clocks-');
  const offsets = Array.from({ length: count }, () => 0);
  const clocks = o.fakeClocks
    ? offsets.map((_o, i) => {
        const f = new FakeClockFile(dir, `node${i}.clock`);
        f.setOffset(0);
        return f;
      })
    : null;
  const started: RedisServer[] = [];
  const links: TcpProxy[][] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(links.flat().map((l) => l.close()));
    await Promise.all(started.map((s) => s.stop()));
    remove();
  };
  try {
    for (let i = 0; i < count; i++) started.push(await RedisServer.start({ persistence, ...(clocks !== null ? { clockFile: clocks[i]! } : {}) }));
    const store = await RedisServer.start({ persistence: 'none' });
    started.push(store);
    const nodes = started.slice(0, count);
    links.push(...(await proxies(o.clients, nodes, o.proxied)));
    // Each server has a password of its own (requirepass); the proxies forward AUTH like any other bytes.
    const url = (host: string, port: number, server: RedisServer): string => `redis://:${encodeURIComponent(server.password)}@${host}:${port}`;
    return {
      backend: o.backend,
      nodes: nodes.map((s, i) => faultable(`redis ${i}`, () => s)),
      replication: null,
      links,
      quorum: Math.floor(count / 2) + 1,
      clocksFaked: clocks !== null,
      clientBackend: (client, storePolicy, adapter) => {
        const nodeUrls = nodes.map((s, i) => (o.proxied ? url(links[client]![i]!.host, links[client]![i]!.port, s) : url(s.host, s.port, s)));
        const storeUrl = url(store.host, store.port, store);
        return adapter !== undefined
          ? { kind: 'adapter', adapter: adapter.ref, tokens: adapter.tokens, servers: { redis: nodeUrls, pg: null }, store: storeUrl, storePolicy }
          : { kind: 'redis', nodes: nodeUrls, store: storeUrl, storePolicy };
      },
      ...NO_MEMBER_GATES,
      stepClock: (node, deltaMs) => {
        if (clocks === null) throw new Error('stepClock: the nodes run on the real clock');
        offsets[node]! += deltaMs;
        clocks[node]!.setOffset(offsets[node]!);
      },
      nodesHolding: async (key, owner) => {
        const values = await Promise.all(nodes.map((s) => (s.running && !s.paused ? s.command(['GET', key], 500).catch(() => null) : Promise.resolve(null))));
        return values.flatMap((v, i) => (v === owner ? [i] : []));
      },
      ...NO_ADVISORY_LOCKS,
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

async function startPostgres(o: StartServersOptions): Promise<StressServers> {
  const server = await PostgresServer.start({ parentDir: '/dev/shm' });
  const links: TcpProxy[][] = [];
  let admin: pg.Client | null = null;
  const connectAdmin = async (): Promise<pg.Client> => {
    if (admin !== null) return admin;
    const c = new pg.Client({ connectionString: server.url, connectionTimeoutMillis: 5_000, query_timeout: 10_000 });
    c.on('error', () => {
      if (admin === c) admin = null;
    });
    c.on('end', () => {
      if (admin === c) admin = null;
    });
    await c.connect();
    admin = c;
    return c;
  };
  const stop = async (): Promise<void> => {
    await Promise.all(links.flat().map((l) => l.close()));
    await admin?.end().catch(() => undefined);
    await server.stop();
  };
  try {
    await ensureSchema(await connectAdmin());
    links.push(...(await proxies(o.clients, [{ host: server.host, port: server.port }], o.proxied)));
    const urlVia = (host: string, port: number): string => `postgres://${encodeURIComponent(server.user)}:${encodeURIComponent(server.password)}@${host}:${port}/${encodeURIComponent(server.database)}`;
    return {
      backend: o.backend,
      nodes: [faultable('postgres', () => server)],
      replication: null,
      links,
      quorum: 1,
      clocksFaked: false,
      clientBackend: (client, storePolicy, adapter) => {
        const url = o.proxied ? urlVia(links[client]![0]!.host, links[client]![0]!.port) : urlVia(server.host, server.port);
        if (adapter !== undefined) return { kind: 'adapter', adapter: adapter.ref, tokens: adapter.tokens, servers: { redis: [], pg: url }, store: null, storePolicy };
        return match(o.backend)
          .with('pg-xact', (): ClientBackend => ({ kind: 'pg-xact', url }))
          .otherwise((): ClientBackend => ({ kind: 'pg-session', url, storePolicy }));
      },
      ...NO_MEMBER_GATES,
      stepClock: () => {
        throw new Error('stepClock: advisory locks have no expiry; no server clock matters');
      },
      nodesHolding: async () => [],
      terminate: async (pids) => {
        if (pids.length === 0) return;
        // With a timeout, pg_terminate_backend waits until the backend has exited, and so released its locks.
        await (await connectAdmin()).query('SELECT pg_terminate_backend(pid, 5000) FROM unnest($1::int[]) AS pid', [pids]);
      },
      advisoryHolders: async () => {
        const r = await (await connectAdmin()).query<{ pid: number }>("SELECT DISTINCT pid FROM pg_locks WHERE locktype = 'advisory' AND granted");
        return r.rows.map((row) => row.pid);
      },
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

/**
 * redis-replicated: a primary, its replica and Sentinel on real clocks, and a
 * store server. Clients find the primary through Sentinel (no proxies: they
 * go where Sentinel names). The one node the nemesis pauses or kills is
 * whichever server is primary now.
 */
async function startReplicated(o: StartServersOptions): Promise<StressServers> {
  if (o.fakeClocks || o.proxied) throw new RangeError(`${o.backend}: its clients follow Sentinel to the primary, through no proxy, on real clocks (no clock steps, partitions or delays)`);
  const cluster = await RedisReplicated.start();
  let store: RedisServer | null = null;
  const stop = async (): Promise<void> => {
    await Promise.all([cluster.stop(), store?.stop()]);
  };
  try {
    store = await RedisServer.start({ persistence: 'none' });
    const storeServer = store;
    const primary = (): RedisServer => cluster.primary;
    const wait = o.backend === 'redis-replicated-wait';
    return {
      backend: o.backend,
      nodes: [faultable('redis primary', primary)],
      replication: {
        hold: () => cluster.holdReplication(),
        failover: async () => {
          await cluster.failover();
          await cluster.rejoin();
        },
        release: () => cluster.releaseReplication(),
      },
      links: [],
      quorum: 1,
      clocksFaked: false,
      clientBackend: (_client, storePolicy) => {
        const c = cluster.sentinelConnection;
        return { kind: 'redis-sentinel', sentinel: c.sentinels[0]!, name: c.name, password: c.password, sentinelPassword: c.sentinelPassword, wait, store: `redis://:${encodeURIComponent(storeServer.password)}@${storeServer.host}:${storeServer.port}`, storePolicy };
      },
      stepClock: () => {
        throw new Error('stepClock: the replicated servers run on the real clock here');
      },
      nodesHolding: async (key, owner) => ((await primary().command(['GET', key], 500).catch(() => null)) === owner ? [0] : []),
      ...NO_MEMBER_GATES,
      ...NO_ADVISORY_LOCKS,
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** A server as the nemesis's: `current()` is the process each call reaches (redis-replicated: whichever is primary now). */
function faultable(name: string, current: () => RedisServer | PostgresServer): FaultableServer {
  return {
    name,
    pause: () => current().pause(),
    resume: () => current().resume(),
    get paused() {
      return current().paused;
    },
    crash: () => current().crash(),
    restart: () => current().restart(),
    get running() {
      return current().running;
    },
  };
}

/** The three members of a consensus group (etcd cluster, ZooKeeper ensemble) as servers the nemesis can pause, kill and restart. */
function membersAsServers(
  label: string,
  group: { pause(m: number): void; resume(m: number): void; paused(m: number): boolean; kill(m: number): Promise<void>; restart(m: number): Promise<void>; running(m: number): boolean },
): FaultableServer[] {
  return [0, 1, 2].map((m): FaultableServer => ({
    name: `${label} ${m}`,
    pause: () => group.pause(m),
    resume: () => group.resume(m),
    get paused() {
      return group.paused(m);
    },
    crash: () => group.kill(m),
    restart: () => group.restart(m),
    get running() {
      return group.running(m);
    },
  }));
}

/**
 * A consensus group's stress servers: its three members as the nemesis's
 * servers, gates between them (when started with them), with `proxied` a
 * proxy per client and member; `stepClockRefusal` says why no clock step.
 * A lease (etcd) or a session (ZooKeeper) is the group's, not a member's:
 * nodesHolding has no member-wise answer to give.
 */
async function groupServers(
  o: StartServersOptions,
  label: string,
  group: EtcdCluster | ZookeeperEnsemble,
  clientBackend: (links: readonly TcpProxy[] | undefined, storePolicy: FencePolicy) => ClientBackend,
  stepClockRefusal: string,
): Promise<StressServers> {
  try {
    const links: TcpProxy[][] = [];
    if (o.proxied) for (let c = 0; c < o.clients; c++) links.push(await Promise.all([0, 1, 2].map((m) => group.link(m))));
    return {
      backend: o.backend,
      nodes: membersAsServers(label, group),
      replication: null,
      links,
      quorum: 2,
      clocksFaked: false,
      clientBackend: (client, storePolicy) => clientBackend(o.proxied ? links[client]! : undefined, storePolicy),
      partitionMembers: (side) => group.partitionMembers(side),
      healMembers: () => group.healMembers(),
      stepClock: () => {
        throw new Error(stepClockRefusal);
      },
      nodesHolding: async () => [],
      ...NO_ADVISORY_LOCKS,
      stop: () => group.stop(),
    };
  } catch (e) {
    await group.stop();
    throw e;
  }
}

/** A 3-member etcd cluster (data on /dev/shm); each member is a server the nemesis can pause, kill and restart. */
async function startEtcd(o: StartServersOptions): Promise<StressServers> {
  // Election timeout 600 ms: etcd's shortest lease is then 1 s (1.5 election timeouts, rounded up to seconds).
  const cluster = await EtcdCluster.start({ members: 3, electionMs: 600, parentDir: '/dev/shm', peerGates: o.peerGates ?? false });
  return groupServers(
    o,
    'etcd',
    cluster,
    (links, storePolicy) => ({ kind: 'etcd', hosts: links !== undefined ? links.map((p) => `https://${p.host}:${p.port}`) : cluster.endpoints, tls: cluster.clientTls, storePolicy }),
    'stepClock: etcd is a Go program, libfaketime does not reach its clocks',
  );
}

/** A 3-member ZooKeeper ensemble (data on /dev/shm); each member is a server the nemesis can pause, kill and restart. */
async function startZookeeper(o: StartServersOptions): Promise<StressServers> {
  const ensemble = await ZookeeperEnsemble.start({ members: 3, parentDir: '/dev/shm', peerGates: o.peerGates ?? false });
  return groupServers(
    o,
    'zookeeper',
    ensemble,
    (links, storePolicy) => ({ kind: 'zookeeper', connectString: links !== undefined ? links.map((p) => `${p.host}:${p.port}`).join(',') : ensemble.connectString, auth: ensemble.auth, storePolicy }),
    'stepClock: no clock fault is offered on ZooKeeper members',
  );
}
