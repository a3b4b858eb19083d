import { judgeRecording, unobserved } from '../conformance/stress/observed.ts';
import type { History } from '../conformance/history/event.ts';
import type { CheckCounts } from '../conformance/history/check.ts';
import type { NemesisFault } from '../conformance/stress/nemesis.ts';
import { needsFakeClocks, needsProxies, NEMESIS_FAULTS, unsupported } from '../conformance/stress/nemesis.ts';
import type { FencePolicy } from '../conformance/stress/protocol.ts';
import type { RunOptions, StressAdapter } from '../conformance/stress/runner.ts';
import { layoutOf, StressSession } from '../conformance/stress/runner.ts';
import { libraryConcurrent } from '../conformance/adapters/libraries.ts';
import type { StressBackend } from '../conformance/stress/servers.ts';
import type { PropertyId } from '../model/properties.ts';
import type { FaultClass } from '../model/faultClass.ts';
import { RunEnvironmentError } from '../conformance/env/runEnvironment.ts';
import { restartDelayMs } from '../model/design.ts';
import { finishWithin, valueWithin } from '../conformance/realTimeLimit.ts';
import type { BuiltIn, MeasuredFaultClass } from './backends.ts';
import { missingLibrary } from './backends.ts';
import { MalformedRecordingError, stressCommandLine, validRecording } from './stress.ts';
import { counted } from '../conformance/counted.ts';

/**
 * The matrix's second oracle: what concurrent client processes observed in
 * a short `lockcheck stress` run of the row's backend under the column's
 * faults (overlapping holds, lost updates, stale writes accepted), next to
 * what the lockstep runner measured and the model predicted.
 */
export interface Observed {
  /** The stress command that reproduces the cell. */
  readonly command: string;
  /** The faults its nemesis drew from (what the model's prediction for the line must cover: modelClassesOf). */
  readonly nemesis: readonly NemesisFault[];
  readonly operations: number;
  readonly faults: number;
  readonly overlappingHolds: number;
  readonly lostUpdates: number;
  readonly staleWritesAccepted: number;
  readonly tokenOrderViolations: number;
  /** The properties those consequences break (MUTEX-1, STORE-1, FENCE-2, FENCE-1). */
  readonly broken: readonly PropertyId[];
  /** Client processes that failed (a library that killed its process, say), one line each. */
  readonly clientErrors: readonly string[];
  readonly elapsedMs: number;
}

/**
 * The breaks of a history the model's prediction for a cell does not account for. A lost update (the
 * history's STORE-1, spec 10.4.3) follows from more than a stale write landing over a newer one (the
 * model's STORE-1): a fenced store accepts the older holder's write when it lands first, and the
 * newer holder's read-modify-write then builds on what it read before (docs/stress.md, "Fencing
 * prevents stale writes, not lost read-modify-writes"). That takes two holders that both write
 * while the older one's lease is over or overlapping: overlapping holds (MUTEX-1 predicted), or a
 * write that lands after its holder's lease ended, which the same design with an unfenced store
 * predicts as STORE-1 (`unfencedPredicted`: that prediction, for a row whose store is fenced).
 */
export function unpredictedBreaks(predicted: readonly PropertyId[], broken: readonly PropertyId[], unfencedPredicted: readonly PropertyId[] = []): readonly PropertyId[] {
  const accounted = new Set<PropertyId>(predicted);
  if (accounted.has('MUTEX-1') || unfencedPredicted.includes('STORE-1')) accounted.add('STORE-1');
  return broken.filter((p) => !accounted.has(p));
}

/**
 * The model's fault classes a stress fault can bring about: what the model must explore for its
 * prediction to cover the concurrent line. A stress fault is coarser than the model's command: a
 * delayed link delays every request on it, the store's writes as well as the lock's replies, so it
 * is the model's late replies (`delay`) and its writes that land late (`timing`); a paused server
 * is a slow node and late replies. The column's own classes are always covered (oracleColumn).
 */
const MODEL_CLASSES_OF: Record<NemesisFault, readonly FaultClass[]> = {
  'pause-client': ['client-pause'],
  'pause-holder': ['client-pause'],
  'pause-server': ['delay', 'timing'],
  'kill-server': ['crash-restart'],
  'clock-step': ['clock-step'],
  'clock-step-holder': ['clock-step'],
  partition: ['partition'],
  delay: ['delay', 'timing'],
  'terminate-backend': ['connection-loss'],
  'terminate-holder': ['connection-loss'],
  'partition-members': ['partition'],
  failover: ['crash-restart'],
  'failover-holder': ['crash-restart'],
};

/** The column as the concurrent line needs it predicted: its own model classes and those its nemesis's faults bring about. */
export function oracleColumn(col: MeasuredFaultClass, nemesis: readonly NemesisFault[]): MeasuredFaultClass {
  const model = new Set<FaultClass>(col.model);
  for (const f of nemesis) for (const c of MODEL_CLASSES_OF[f]) model.add(c);
  return { ...col, model: [...model] };
}

/** What the clients do in a cell: few of them, on one resource, with short ttls, so that the faults land in seconds. */
export const STRESS_CLIENTS = 3;
const TTL_MIN_MS = 100;
const TTL_MAX_MS = 200;

/** The row's stress backend (a library row: the servers its adapter's concurrent client runs on, and that client), or why it has none. */
export async function stressBackendOf(row: BuiltIn): Promise<{ backend: StressBackend; store: FencePolicy; adapter?: StressAdapter } | { why: string }> {
  if (row.library !== undefined) {
    const missing = await missingLibrary(row);
    if (missing !== null) return { why: missing };
    const client = await libraryConcurrent(row.library);
    return { backend: layoutOf(client), store: 'unfenced', adapter: { name: row.name, ref: { kind: 'library', library: row.library }, client } };
  }
  const d = row.design;
  const store: FencePolicy = row.store === 'transactional' ? 'unfenced' : row.store;
  if (row.lockService === 'zookeeper') return { backend: 'zookeeper', store };
  switch (d.kind) {
    case 'redis-single':
      return { backend: d.persistence === 'aof-always' ? 'redis-single-aof' : 'redis-single', store };
    case 'redlock':
      return { backend: d.persistence === 'aof-always' ? 'redlock-aof' : 'redlock', store };
    case 'pg-session':
      return { backend: 'pg-session', store };
    case 'pg-xact':
      return { backend: 'pg-xact', store };
    case 'etcd-lease':
      return { backend: 'etcd', store };
    case 'redis-replicated':
      return { backend: d.wait ? 'redis-replicated-wait' : 'redis-replicated', store };
  }
}

/** The nemesis of a fault class: the targeted fault that makes its consequence certain, and its random kind. */
export function nemesisOf(col: MeasuredFaultClass, backend: StressBackend): NemesisFault[] {
  const pg = backend === 'pg-session' || backend === 'pg-xact';
  const faults: Record<string, NemesisFault[]> = {
    'client-pause': ['pause-holder', 'pause-client'],
    'clock-step': ['clock-step-holder', 'clock-step'],
    // redis-replicated's crash is the failover (spec 7.9), as in its lockstep cells.
    'crash-restart': isReplicated(backend) ? ['failover-holder'] : ['kill-server'],
    'partition-delay': ['partition', 'delay'],
    // A Redis connection holds no lock state: there the class is its pauses (as in the lockstep columns).
    'connection-loss': pg ? ['terminate-holder', 'terminate-backend'] : ['pause-client'],
    // The stress nemesis delays links (every request on them); it has no black hole. Pauses too, as the lockstep column draws them.
    timing: ['delay', 'pause-client'],
  };
  return (faults[col.id] ?? []).filter((f) => NEMESIS_FAULTS.includes(f) && unsupported(f, backend) === null);
}

function isReplicated(backend: StressBackend): boolean {
  return backend === 'redis-replicated' || backend === 'redis-replicated-wait';
}

/**
 * How long a cell's run is and its ttls. A failover takes one to three
 * seconds of real time (Sentinel's look at the replica, the promotion, the
 * clients finding the new primary): the repeated token (FENCE-1) and the lost
 * update (STORE-1) follow whatever it takes, but the holds overlap (MUTEX-1)
 * only if the holder's lease outlasts it. The nemesis arms its first fault ½
 * to 1½ longest ttls into the run and strikes no later than two ttls before
 * its end, so the run lasts 3½ longest ttls and a little more.
 */
export function cellShape(col: MeasuredFaultClass, backend: StressBackend, seconds: number): { seconds: number; ttlMinMs: number; ttlMaxMs: number } {
  if (isReplicated(backend) && col.id === 'crash-restart') return { seconds: Math.max(seconds, FAILOVER_SECONDS), ttlMinMs: FAILOVER_TTL_MIN_MS, ttlMaxMs: FAILOVER_TTL_MAX_MS };
  return { seconds, ttlMinMs: TTL_MIN_MS, ttlMaxMs: TTL_MAX_MS };
}
const FAILOVER_SECONDS = 15;
/** Setup and teardown of a ZooKeeper ensemble or a Sentinel failover take tens of seconds on a loaded machine; three minutes is beyond any run seen. */
const STRESS_SLACK_MS = 180_000;
const FAILOVER_TTL_MIN_MS = 3_000;
const FAILOVER_TTL_MAX_MS = 4_000;

/**
 * Runs the cells of the matrix's rows one session per stress backend (servers
 * and client processes started once for the rows that share it).
 */
export class StressOracle {
  #session: { backend: StressBackend; session: Promise<StressSession> } | null = null;
  /** Stops of sessions whose run overran, not finished when given up on. */
  readonly #stopping: Promise<void>[] = [];

  constructor(
    readonly seconds: number,
    readonly seed: number,
    readonly progress: (line: string) => void,
    /** Real time a cell's stress run may take beyond its seconds (servers and client processes started, the checks); also the bound on stopping a run that overran. */
    readonly slackMs: number = STRESS_SLACK_MS,
  ) {}

  async observe(row: BuiltIn, col: MeasuredFaultClass): Promise<Observed | { readonly notObserved: string }> {
    const target = await stressBackendOf(row);
    if ('why' in target) return { notObserved: target.why };
    const nemesis = nemesisOf(col, target.backend);
    if (nemesis.length === 0) return { notObserved: `no ${col.id} fault for ${target.backend}` };
    const t0 = performance.now();
    const shape = cellShape(col, target.backend, this.seconds);
    const run: RunOptions = {
      seconds: shape.seconds,
      nemesis,
      seed: this.seed,
      store: target.store,
      resources: 1,
      ttlMinMs: shape.ttlMinMs,
      ttlMaxMs: shape.ttlMaxMs,
      restartDelayMs: restartDelayMs(row.design),
      ...(target.adapter !== undefined ? { adapter: target.adapter } : {}),
    };
    let result;
    // Bounded in real time, servers' start included: a stress run that hangs (a server or client
    // process that never answers) must cost one cell's concurrent line, never the whole matrix.
    const limitMs = shape.seconds * 1000 + this.slackMs;
    try {
      const bounded = await valueWithin((async () => (await this.#sessionFor(target.backend)).run(run))(), limitMs);
      if (!bounded.done) {
        await this.#abandon();
        return { notObserved: `the stress run had not finished after ${Math.round(limitMs / 1000)} s of real time (servers and client processes stopped; the next cell starts fresh ones)` };
      }
      result = bounded.value;
    } catch (e) {
      // The servers failed this run (a failover Sentinel did not carry out): the cell says so, the next starts on fresh servers.
      if (!(e instanceof RunEnvironmentError)) throw e;
      await this.stop();
      return { notObserved: `environment error: ${e.message.split('\n')[0]}` };
    }
    const store = target.backend === 'pg-xact' ? 'transactional' : target.store;
    let history: History;
    try {
      history = validRecording([{ type: 'meta', store }, ...result.history]);
    } catch (e) {
      if (!(e instanceof MalformedRecordingError)) throw e;
      return { notObserved: `malformed history: ${e.problem.message}` };
    }
    const report = judgeRecording(history, store);
    // A check the time budget cut short counted nothing: its zero is not 'not observed', so the cell says so instead.
    const undecided = report.checks.find((k) => k.verdict === 'unknown' && k.property !== 'LIN-1');
    if (undecided !== undefined) return { notObserved: `the history check could not decide ${undecided.property} (${undecided.note ?? 'unknown'})` };
    const c = allCounted(report.counts);
    if (c === null) return { notObserved: 'the history check ran out of its budget before it counted the history' };
    // No hold granted or no fault struck: "none" would read as safe under the column's faults.
    const nothing = unobserved({ operations: c.operations, holds: c.holds, nemesis, faultsStruck: result.faultsStruck });
    if (nothing !== null && report.verdict !== 'violation') return { notObserved: `${nothing} (${counted(c.operations, 'op')})` };
    const broken: PropertyId[] = [
      ...(c.overlappingHolds > 0 ? (['MUTEX-1'] as const) : []),
      ...(c.tokenOrderViolations > 0 ? (['FENCE-1'] as const) : []),
      ...(c.staleWritesAccepted > 0 ? (['FENCE-2'] as const) : []),
      ...(c.lostUpdates > 0 ? (['STORE-1'] as const) : []),
    ];
    return {
      command: stressCommandLine({ ...run, backend: target.backend, clients: STRESS_CLIENTS }),
      nemesis,
      operations: c.operations,
      faults: result.faults,
      overlappingHolds: c.overlappingHolds,
      lostUpdates: c.lostUpdates,
      staleWritesAccepted: c.staleWritesAccepted,
      tokenOrderViolations: c.tokenOrderViolations,
      broken,
      clientErrors: [...result.clientErrors, ...result.adapterErrors.map((e) => `the adapter broke its contract: ${e}`)],
      elapsedMs: performance.now() - t0,
    };
  }

  async #sessionFor(backend: StressBackend): Promise<StressSession> {
    if (this.#session?.backend === backend) return this.#session.session;
    await this.stop();
    // Every cell of a session may need clock steps and link faults: start the servers for all of them.
    // No column uses member partitions: the sessions start without peer gates.
    const all = NEMESIS_FAULTS.filter((f) => unsupported(f, backend) === null && f !== 'partition-members');
    const session = StressSession.start({ backend, clients: STRESS_CLIENTS, fakeClocks: needsFakeClocks(all), proxied: needsProxies(all), progress: this.progress });
    this.#session = { backend, session };
    return session;
  }

  /** Stops a session whose run overran, itself bounded: what does not stop in time is left to the exit's clean-ups. */
  async #abandon(): Promise<void> {
    const stopping = this.stop();
    this.#stopping.push(stopping.catch(() => undefined));
    if (!(await finishWithin(stopping, this.slackMs))) this.progress(`the stress session did not stop within ${Math.round(this.slackMs / 1000)} s; the next cell goes on, the last stop() waits for it`);
  }

  /** Stops the current session, and waits for any abandoned one still stopping. */
  async stop(): Promise<void> {
    const current = this.#session;
    this.#session = null;
    if (current !== null) await (await current.session.catch(() => null))?.stop();
    const abandoned = this.#stopping.splice(0);
    await Promise.all(abandoned);
  }
}

/** "2 overlapping holds, 1 lost update" or "none", for a cell. */
export function observedText(o: Observed): string {
  const parts = [
    o.overlappingHolds > 0 ? counted(o.overlappingHolds, 'overlapping hold') : '',
    o.lostUpdates > 0 ? counted(o.lostUpdates, 'lost update') : '',
    o.staleWritesAccepted > 0 ? `${counted(o.staleWritesAccepted, 'stale write')} accepted` : '',
    o.tokenOrderViolations > 0 ? `${counted(o.tokenOrderViolations, 'token')} out of order` : '',
  ].filter((x) => x);
  const died = o.clientErrors.length > 0 ? `; ${counted(o.clientErrors.length, 'client process', 'client processes')} failed: ${o.clientErrors[0]}` : '';
  return `${parts.length > 0 ? parts.join(', ') : 'none'} (${counted(o.operations, 'op')}, ${counted(o.faults, 'fault')}${died})`;
}

/** The counts when the check took every one (none null: its budget did not run out first), else null. */
function allCounted(c: CheckCounts): { readonly [K in keyof CheckCounts]: Exclude<CheckCounts[K], null> } | null {
  return Object.values(c).every((n) => n !== null) ? (c as { readonly [K in keyof CheckCounts]: Exclude<CheckCounts[K], null> }) : null;
}
