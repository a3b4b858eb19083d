import type { ConcurrentServers } from '../adapter.ts';
import type { HistoryEvent, MetaEvent } from '../history/event.ts';
import type { AdapterRef } from './adapterRef.ts';

/** What clients and the nemesis record: every event but the header. */
export type RecordedEvent = Exclude<HistoryEvent, MetaEvent>;

/**
 * What the stress runner and its client processes say to each other over
 * the IPC channel of child_process.fork (JSON: tokens travel as digit strings).
 */

/** The lock a client process drives, with the servers it reaches (through the runner's proxies). */
export type ClientBackend =
  | { readonly kind: 'redis'; readonly nodes: readonly string[]; readonly store: string; readonly storePolicy: FencePolicy }
  /** A primary found through Sentinel (redis-replicated, spec 7.9), with WAIT 1 after every script or not. Holds passwords: never printed. */
  | { readonly kind: 'redis-sentinel'; readonly sentinel: { readonly host: string; readonly port: number }; readonly name: string; readonly password: string; readonly sentinelPassword: string; readonly wait: boolean; readonly store: string; readonly storePolicy: FencePolicy }
  | { readonly kind: 'pg-session'; readonly url: string; readonly storePolicy: FencePolicy }
  /** The write goes into the lock's own transaction: committed with the release, discarded with the lock. */
  | { readonly kind: 'pg-xact'; readonly url: string }
  /** An adapter's concurrent client on the servers it asked for; the register is in the Redis store, or in PostgreSQL outside the lock. */
  /** `tokens: false`: its leases carry no fencing token, and the history records none. */
  | { readonly kind: 'adapter'; readonly adapter: AdapterRef; readonly tokens: boolean; readonly servers: ConcurrentServers; readonly store: string | null; readonly storePolicy: FencePolicy }
  /** An etcd cluster's members (client URLs) and the client certificate they require (secret: never printed); the register is a fenced store in the same cluster, as in Jepsen's etcd analysis. */
  | { readonly kind: 'etcd'; readonly hosts: readonly string[]; readonly tls: { readonly ca: string; readonly cert: string; readonly key: string; readonly serverName: string }; readonly storePolicy: FencePolicy }
  /** A ZooKeeper ensemble's members (`host:port,…`) and the credentials its tree requires (secret: never printed); the register is a fenced store in the same ensemble. */
  | { readonly kind: 'zookeeper'; readonly connectString: string; readonly auth: ReadonlyArray<{ readonly scheme: string; readonly credentials: string }>; readonly storePolicy: FencePolicy };

/** The register's store: plain (every write lands) or fenced by the lease's token with a policy (spec FENCE-2). */
export type FencePolicy = 'unfenced' | 'monotonic' | 'strict';

export interface Workload {
  /** How many resources the clients pick from (each guards one register). */
  readonly resources: number;
  /** Resource names start with it: each run of a session works on locks and registers of its own. */
  readonly prefix: string;
  readonly ttlMinMs: number;
  readonly ttlMaxMs: number;
  /** Stop after this instant on the shared clock, or this many cycles. */
  readonly untilMs: number;
  readonly maxCycles: number;
  /** Ask the runner before each write (the targeted nemesis pauses the client there). */
  readonly gate: boolean;
}

export interface ClientConfig {
  readonly process: number;
  readonly seed: number;
  readonly backend: ClientBackend;
  readonly workload: Workload;
}

export type ToClient =
  /** Load an adapter's concurrent client now (answered by `prepared`), so that the run's time is not spent importing it. */
  | { readonly kind: 'prepare'; readonly adapter: AdapterRef }
  | { readonly kind: 'start'; readonly config: ClientConfig }
  /** The gate opens: write now. */
  | { readonly kind: 'go' }
  /** Finish the cycle in progress (bounded by its timeouts), report `done`, wait for the next start. */
  | { readonly kind: 'stop' };

/** A client holds `resource` and has read its register: the write comes next. */
export interface GateRequest {
  readonly kind: 'gate';
  readonly resource: string;
  readonly owner: string;
  readonly token: string;
  /** On the shared clock; absent for a session lock. */
  readonly validUntil?: number;
  /** PostgreSQL backend pids the lease lives on (for pg_terminate_backend). */
  readonly pids: readonly number[];
  /** On the shared clock: when the acquire that granted the lease was sent (failover-holder wants one sent while replication was held). */
  readonly acquireInvokedAt?: number;
}

export type FromClient =
  | { readonly kind: 'ready' }
  /** The adapter is loaded (or `error` says why not). */
  | { readonly kind: 'prepared'; readonly error?: string }
  | { readonly kind: 'events'; readonly events: readonly RecordedEvent[] }
  | GateRequest
  | { readonly kind: 'done'; readonly cycles: number }
  | { readonly kind: 'error'; readonly message: string }
  /** The adapter broke its contract (docs/adapter.md): an answer of the wrong shape, a call that never settled. The client stopped. */
  | { readonly kind: 'broke'; readonly message: string }
  /** Not sent by a client: the fleet's word that a client process died during a run. */
  | { readonly kind: 'exited'; readonly message: string };
