import type { FaultKind, LibraryContract } from '../conformance/adapter.ts';
import type { LibraryId } from '../conformance/adapters/libraries.ts';
import { ADVISORY_LOCK_CONTRACT, IOREDIS_LOCK_CONTRACT, REDIS_LOCK_CONTRACT, REDIS_SEMAPHORE_CONTRACT, REDIS_SEMAPHORE_REDLOCK_CONTRACT, REDLOCK4_CONTRACT, redlockContract } from '../conformance/adapters/contracts.ts';
import { contractDesign } from '../conformance/consequence.ts';
import type { Design, StorePolicy } from '../model/design.ts';
import { designs } from '../model/design.ts';
import type { FaultClass } from '../model/faultClass.ts';
import { closest } from '../impl/options.ts';

/*
 * The matrix's rows and columns by name: what the CLI checks its arguments and
 * prints its usage against, kept apart from the servers and adapters that run
 * them (backends.ts) so that a mistyped command is answered without loading
 * the drivers.
 */

/**
 * The built-in backends the CLI runs, on servers it starts itself (and stops
 * when done), and the fault classes of the measured matrix.
 */
export interface BuiltIn {
  readonly name: string;
  /** The model the row is judged, predicted and seeded by (a library row: the model of its library's contract). */
  readonly design: Design;
  readonly store: StorePolicy;
  /** An npm library audited through its adapter (conformance/adapters/): its deviations are the audit's findings. */
  readonly library?: LibraryId;
  /** At most this many schedules per cell: a row whose runs take seconds of real time each (etcd, redis-replicated). */
  readonly maxRuns?: number;
  /** The design runs on ZooKeeper rather than on its own service: the zookeeper rows, judged by etcd-lease (spec 7.10). */
  readonly lockService?: 'zookeeper';
}

export type { LibraryId };

/**
 * The npm package each library audit drives. The adapters are loaded on
 * demand: lockcheck does not depend on the libraries it audits, and a row
 * whose library is not installed is reported in one line, not a stack trace.
 */
export const LIBRARY_PACKAGES: Readonly<Record<LibraryId, { readonly name: string; readonly version: string }>> = {
  redlock: { name: 'redlock', version: '5.0.0-beta.2' },
  // npm's `latest` tag of redlock, beside 5.0.0-beta.2 under an alias.
  redlock4: { name: 'redlock4', version: 'npm:redlock@4.2.0' },
  'sesamecare-redlock': { name: '@sesamecare-oss/redlock', version: '1.4.0' },
  'advisory-lock': { name: 'advisory-lock', version: '2.0.0' },
  'redis-semaphore-mutex': { name: 'redis-semaphore', version: '5.8.0' },
  'redis-semaphore-redlock-mutex': { name: 'redis-semaphore', version: '5.8.0' },
  'ioredis-lock': { name: '@microfleet/ioredis-lock', version: '6.0.1' },
  'redis-lock': { name: 'redis-lock', version: '1.0.0' },
};

/** Schedules per etcd cell in the matrix: each run takes seconds of real time (whole-second ttls, spec 7.8). */
const ETCD_MATRIX_RUNS = 10;
/** Schedules per ZooKeeper cell: paced to real time like etcd's, few enough that a cell takes about a minute. */
const ZK_MATRIX_RUNS = 4;

/**
 * Schedules per redis-replicated cell in the matrix: a failover takes a second
 * or two of real time and its run a fresh primary, replica and Sentinel after
 * it (30 crash-restart runs took 108 s; 10 keep the two rows near 3 minutes).
 */
const REPLICATED_MATRIX_RUNS = 10;

const RESTART_DELAY_MS = 61; // longer than the longest ttl the schedules use (60 ms)

/**
 * The library audits: rows of the matrix beside the built-in backends. A
 * row's design is the model of its library's contract (contractDesign, the
 * contract from conformance/adapters/contracts.ts, which its adapter
 * declares too): the matrix predicts the row and seeds its runs from it, and
 * checks that it is the design its adapter is judged by.
 */
const library = (design: Design, contract: LibraryContract): Design => contractDesign(design, contract, false);
export const LIBRARY_AUDITS: readonly BuiltIn[] = [
  { name: 'lib:redlock@5.0.0-beta.2', design: library(designs.redlock(), redlockContract(0.01)), store: 'unfenced', library: 'redlock' },
  { name: 'lib:@sesamecare-oss/redlock@1.4.0', design: library(designs.redlock(), redlockContract(0.01)), store: 'unfenced', library: 'sesamecare-redlock' },
  { name: 'lib:advisory-lock@2.0.0', design: library(designs.pgSession(), ADVISORY_LOCK_CONTRACT), store: 'unfenced', library: 'advisory-lock' },
  { name: 'lib:redis-semaphore@5.8.0/Mutex', design: library(designs.redisSingle(), REDIS_SEMAPHORE_CONTRACT), store: 'unfenced', library: 'redis-semaphore-mutex' },
  { name: 'lib:redis-semaphore@5.8.0/RedlockMutex', design: library(designs.redlock(), REDIS_SEMAPHORE_REDLOCK_CONTRACT), store: 'unfenced', library: 'redis-semaphore-redlock-mutex' },
  { name: 'lib:redlock@4.2.0', design: library(designs.redlock(), REDLOCK4_CONTRACT), store: 'unfenced', library: 'redlock4' },
  { name: 'lib:@microfleet/ioredis-lock@6.0.1', design: library(designs.redisSingle(), IOREDIS_LOCK_CONTRACT), store: 'unfenced', library: 'ioredis-lock' },
  { name: 'lib:redis-lock@1.0.0', design: library(designs.redisSingle(), REDIS_LOCK_CONTRACT), store: 'unfenced', library: 'redis-lock' },
];

export const BUILT_INS: readonly BuiltIn[] = [
  ...[designs.redisSingle(), designs.redisSingle({ persistence: 'aof-always' }), designs.redlock(), designs.redlock({ persistence: 'aof-always' }), designs.redlock({ restartDelayMs: RESTART_DELAY_MS })].flatMap(
    (design) => (['unfenced', 'strict'] as const).map((store) => ({ name: builtInName(design, store), design, store })),
  ),
  // A primary, an asynchronous replica and Sentinel; the crash is a failover (spec 7.9). Without and with WAIT 1.
  ...[designs.redisReplicated(), designs.redisReplicated({ wait: true })].map((design) => ({ name: builtInName(design, 'unfenced'), design, store: 'unfenced' as const, maxRuns: REPLICATED_MATRIX_RUNS })),
  ...(['unfenced', 'strict'] as const).map((store) => ({ name: builtInName(designs.pgSession(), store), design: designs.pgSession(), store })),
  { name: builtInName(designs.pgXact(), 'transactional'), design: designs.pgXact(), store: 'transactional' },
  // etcd on a real 3-member cluster; its runs are paced to real time, with the wider clock margin that needs (Servers.backend).
  ...(['unfenced', 'strict'] as const).map((store) => ({ name: builtInName(designs.etcdLease(), store), design: designs.etcdLease(), store, maxRuns: ETCD_MATRIX_RUNS })),
  // ZooKeeper's lock recipe on a real 3-member ensemble, judged by etcd-lease (spec 7.10), paced to real time as etcd's.
  ...(['unfenced', 'strict'] as const).map((store) => ({ name: `zookeeper/${store}`, design: designs.etcdLease(), store, maxRuns: ZK_MATRIX_RUNS, lockService: 'zookeeper' as const })),
];

function builtInName(design: Design, store: StorePolicy): string {
  const d = design;
  const variant =
    d.kind === 'redis-single' || d.kind === 'redlock'
      ? `${d.kind}${d.persistence === 'aof-always' ? '-aof' : ''}${d.restartDelayMs > 0 ? '-delayed-restart' : ''}`
      : d.kind === 'redis-replicated' && d.wait
        ? 'redis-replicated-wait'
        : d.kind;
  return `${variant}/${store}`;
}

/** The measured matrix's columns: fault kinds the generated schedules may use, and the model's classes that predict them. */
export interface MeasuredFaultClass {
  readonly id: string;
  readonly title: string;
  readonly faults: readonly FaultKind[];
  /** Without these the class is not measured (the cell says so rather than report the rest of its faults as the class). */
  readonly essential: readonly FaultKind[];
  readonly model: readonly FaultClass[];
}

export const MEASURED_FAULT_CLASSES: readonly MeasuredFaultClass[] = [
  { id: 'client-pause', title: 'client pause (also between check and write, and with replies in flight)', faults: ['advance', 'pause'], essential: ['pause'], model: ['client-pause'] },
  { id: 'clock-step', title: "a node's clock steps (with partitions)", faults: ['advance', 'clock-step', 'partition'], essential: ['clock-step'], model: ['clock-step'] },
  { id: 'crash-restart', title: 'a node crashes and restarts (with partitions)', faults: ['advance', 'crash-restart', 'partition'], essential: ['crash-restart'], model: ['crash-restart'] },
  { id: 'partition-delay', title: 'partitions and delayed replies', faults: ['advance', 'partition', 'delay'], essential: ['partition', 'delay'], model: ['partition', 'delay'] },
  // A Redis connection holds no lock state: there the class is its pauses, and is measured as such.
  { id: 'connection-loss', title: 'connection loss (with pauses)', faults: ['advance', 'pause', 'kill-connection'], essential: ['pause'], model: ['connection-loss'] },
  // Late replies on every operation, one node slow or a black hole, and the clients' request (or statement) timeout;
  // with pauses, so that an operation is in flight across its client's pause (an acquire split at its rounds, spec 7.7).
  {
    id: 'timing',
    title: 'late replies on every operation (also across a pause), delayed write requests, a slow or black-holed node',
    faults: ['advance', 'delay', 'latency', 'slow-node', 'pause'],
    essential: ['latency', 'slow-node'],
    model: ['timing', 'delay', 'client-pause'],
  },
];

/** `; did you mean 'x'?` when `spec`, trimmed and in any case, or with a typo, is near a name lockcheck knows. */
export function didYouMean(spec: string, names: readonly string[]): string {
  const trimmed = spec.trim();
  const near = names.find((n) => n.toLowerCase() === trimmed.toLowerCase()) ?? closest(trimmed, names);
  return near === undefined ? '' : `; did you mean '${near}'?`;
}
