import type { ConcurrentClient } from '../adapter.ts';
import { keysFor } from '../../impl/redis/keys.ts';
import type { AdapterRef } from './adapterRef.ts';
import type { RecordedEvent } from './protocol.ts';
import { ClientFleet, lastLine as lastLineOf } from './fleet.ts';
import type { NemesisFault } from './nemesis.ts';
import { isTargeted, Nemesis, needsFakeClocks, needsPeerGates, needsProxies, unsupported } from './nemesis.ts';
import type { FencePolicy, FromClient } from './protocol.ts';
import { Recorder } from './recorder.ts';
import type { StressBackend, StressServers } from './servers.ts';
import { startServers } from './servers.ts';
import { sharedNowMs } from './sharedClock.ts';
import { finishWithin } from '../realTimeLimit.ts';
import { onInterrupt } from '../env/processes.ts';
import { counted } from '../counted.ts';

/**
 * A stress run: N client processes race on real servers with a Jepsen-style
 * workload while the nemesis injects faults; the result is the history.
 * Everything it starts (servers, proxies, client processes) is gone when it
 * returns or throws.
 */
export interface StressOptions extends RunOptions {
  readonly backend: StressBackend;
  readonly clients: number;
  readonly progress?: (line: string) => void;
}

/** One run of a session: what may change from one run to the next on the same servers and processes. */
export interface RunOptions {
  readonly seconds: number;
  readonly nemesis: readonly NemesisFault[];
  readonly seed: number;
  /** The register's store (pg-xact ignores it: its writes are in the lock's transaction). */
  readonly store: FencePolicy;
  readonly resources: number;
  readonly ttlMinMs: number;
  readonly ttlMaxMs: number;
  /** Per client; default unbounded (the time bound stops the run). */
  readonly maxCycles?: number;
  /** Stop once the nemesis has struck this many times (the clients finish their cycles first). */
  readonly maxFaults?: number;
  /** Stop once the history holds this many events (the clients finish their cycles first). Default and most MAX_STRESS_EVENTS. */
  readonly maxEvents?: number;
  /** A killed server stays down at least this long (Redlock's delayed restart: longer than any ttl). Default 0. */
  readonly restartDelayMs?: number;
  /** The clients drive this adapter's concurrent client instead of the layout's own lock (its servers: layoutOf). */
  readonly adapter?: StressAdapter;
  /**
   * Called with the history recorded so far when SIGINT, SIGTERM or SIGHUP ends the run (before the servers are
   * stopped): minutes of racing are not lost to a Ctrl-C. Operations still in flight have no completion in it.
   */
  readonly onInterrupt?: (historySoFar: RecordedEvent[]) => void;
}

/** An adapter in a stress run: where the client processes load it from, and its client as loaded here. */
export interface StressAdapter {
  readonly name: string;
  readonly ref: AdapterRef;
  readonly client: ConcurrentClient;
}

/** The servers an adapter's concurrent client asks for, as the stress backend that starts them. */
export function layoutOf(client: ConcurrentClient): StressBackend {
  return client.servers.kind === 'postgres' ? 'pg-session' : client.servers.nodes === 1 ? 'redis-single' : 'redlock';
}

export interface StressRun {
  readonly history: RecordedEvent[];
  /** From the clients' start to their last event, ms. */
  readonly durationMs: number;
  /** Setup (servers and processes) and teardown, ms. */
  readonly overheadMs: number;
  readonly cycles: number;
  readonly faults: number;
  /** The faults of the nemesis that struck at least once, in the order given (one never drawn, or that found nothing to strike, is missing). */
  readonly faultsStruck: readonly NemesisFault[];
  /** Client processes that failed (a message each); their events up to then are in the history. */
  readonly clientErrors: readonly string[];
  /**
   * Where the adapter broke its contract (a message each: an answer of the
   * wrong shape, a call that never settled, a client that never finished its
   * cycle): the run is the adapter's error, whatever its history says.
   */
  readonly adapterErrors: readonly string[];
  /** The run was stopped before its time because the history reached maxEvents. */
  readonly eventLimitReached: boolean;
}

/**
 * The most events a run records: every event is held in memory until the
 * run is judged, and the history file must stay within what `lockcheck check`
 * reads (256 MiB; an event is some 200 bytes). A long run with fast clients
 * otherwise grew until the process ran out of memory.
 */
export const MAX_STRESS_EVENTS = 1_000_000;

export function checkStressOptions(backend: StressBackend, o: RunOptions): void {
  for (const f of o.nemesis) {
    const why = unsupported(f, backend);
    if (why !== null) throw new RangeError(why);
  }
  if (o.ttlMinMs > o.ttlMaxMs) throw new RangeError(`ttl range ${o.ttlMinMs}-${o.ttlMaxMs} is empty`);
  if (o.maxEvents !== undefined && (!Number.isSafeInteger(o.maxEvents) || o.maxEvents < 1 || o.maxEvents > MAX_STRESS_EVENTS)) throw new RangeError(`maxEvents must be an integer in [1, ${MAX_STRESS_EVENTS}], got ${o.maxEvents}`);
  if (o.adapter !== undefined) {
    if (layoutOf(o.adapter.client) !== backend) throw new RangeError(`${o.adapter.name} runs on ${layoutOf(o.adapter.client)} servers, not ${backend}`);
    if (o.adapter.client.tokens === false && o.store !== 'unfenced') throw new RangeError(`${o.adapter.name} hands out no fencing tokens: its register's store must be unfenced, not ${o.store}`);
    // Without it no holder's nodes are found: the fault never struck, and the run said safe with "0 faults injected".
    if (o.nemesis.includes('clock-step-holder') && o.adapter.client.lockKey === undefined) throw new RangeError(`clock-step-holder: ${o.adapter.name}'s concurrent client declares no lockKey (the Redis key its lock on a resource lives in), so no holder's nodes can be found and the fault could never strike`);
  }
}

export async function runStress(o: StressOptions): Promise<StressRun> {
  checkStressOptions(o.backend, o);
  const t0 = sharedNowMs();
  const session = await StressSession.start({ backend: o.backend, clients: o.clients, fakeClocks: needsFakeClocks(o.nemesis), proxied: needsProxies(o.nemesis), peerGates: needsPeerGates(o.nemesis), ...(o.progress ? { progress: o.progress } : {}) });
  try {
    const run = await session.run(o);
    return { ...run, overheadMs: sharedNowMs() - t0 - run.durationMs };
  } finally {
    await session.stop();
  }
}

export interface SessionOptions {
  readonly backend: StressBackend;
  readonly clients: number;
  /** Redis nodes under libfaketime (for clock steps). */
  readonly fakeClocks: boolean;
  /** Client links through TCP proxies (for partitions and delays). */
  readonly proxied: boolean;
  /** etcd: gates between the members (for member partitions). */
  readonly peerGates?: boolean;
  readonly progress?: (line: string) => void;
}

/**
 * Servers and client processes started once, for several runs (the matrix
 * runs one per fault class): each run works on resources of its own and
 * ends with every fault healed.
 */
export class StressSession {
  readonly #o: SessionOptions;
  readonly #servers: StressServers;
  readonly #fleet: ClientFleet;
  readonly #t0: number;
  #runs = 0;
  #route: (client: number, m: FromClient) => void = () => undefined;

  private constructor(o: SessionOptions, servers: StressServers, fleet: ClientFleet, t0: number) {
    this.#o = o;
    this.#servers = servers;
    this.#fleet = fleet;
    this.#t0 = t0;
  }

  static async start(o: SessionOptions): Promise<StressSession> {
    const t0 = sharedNowMs();
    const progress = (line: string): void => o.progress?.(`[${((sharedNowMs() - t0) / 1000).toFixed(1)} s] ${line}`);
    progress(`${o.backend}: starting servers`);
    const servers = await startServers({ backend: o.backend, clients: o.clients, fakeClocks: o.fakeClocks, proxied: o.proxied, peerGates: o.peerGates ?? false });
    let session: StressSession | null = null;
    try {
      progress(`${o.backend}: starting ${o.clients} client processes`);
      const fleet = await ClientFleet.start(o.clients, (client, m) => {
        if (session !== null) session.#route(client, m);
      });
      session = new StressSession(o, servers, fleet, t0);
      return session;
    } catch (e) {
      await servers.stop();
      throw e;
    }
  }

  #progress(line: string): void {
    this.#o.progress?.(`[${((sharedNowMs() - this.#t0) / 1000).toFixed(1)} s] ${line}`);
  }

  /** One run; the servers and processes stay up for the next. */
  async run(o: RunOptions): Promise<StressRun> {
    checkStressOptions(this.#o.backend, o);
    if (needsFakeClocks(o.nemesis) && !this.#o.fakeClocks) throw new RangeError('this session runs its Redis nodes on the real clock: clock faults need fakeClocks');
    if (needsProxies(o.nemesis) && !this.#o.proxied) throw new RangeError('this session has no proxies: partitions and delays need proxied');
    if (needsPeerGates(o.nemesis) && this.#o.peerGates !== true) throw new RangeError('this session has no gates between its members: partition-members needs peerGates');
    const t0 = sharedNowMs();
    const { clients, backend } = this.#o;
    const fleet = this.#fleet;
    const label = o.adapter?.name ?? backend;
    // A process that died in an earlier run was reported there (a finding about the library); this run measures a fresh one.
    const replaced = await fleet.replaceDead();
    if (replaced.length > 0) this.#progress(`${label}: client process ${replaced.join(', ')} replaced (it exited in an earlier run)`);
    if (o.adapter !== undefined) await this.#prepare(o.adapter);
    const recorder = new Recorder();
    const clientErrors: string[] = [];
    const adapterErrors: string[] = [];
    const nemesis = new Nemesis({ faults: o.nemesis, servers: this.#servers, fleet, recorder, seed: o.seed, ttlMinMs: o.ttlMinMs, ttlMaxMs: o.ttlMaxMs, restartDelayMs: o.restartDelayMs ?? 0, lockKey: o.adapter?.client.lockKey ?? ((r) => keysFor(r).lock) });
    let cycles = 0;
    const maxEvents = o.maxEvents ?? MAX_STRESS_EVENTS;
    let eventLimitReached = false;
    const finishedClients = new Set<number>();
    let allDone!: () => void;
    const finished = new Promise<void>((resolve) => (allDone = resolve));
    const finish = (client: number): void => {
      finishedClients.add(client);
      if (finishedClients.size === clients) allDone();
    };
    this.#route = (client, m) => {
      switch (m.kind) {
        case 'events':
          recorder.add(m.events);
          if (!eventLimitReached && recorder.size >= maxEvents) {
            eventLimitReached = true;
            this.#progress(`${label}: the history holds ${counted(recorder.size, 'event')}, its limit: the clients finish their cycles and the run ends`);
            fleet.stopRuns();
          }
          return;
        case 'gate':
          void nemesis.atGate(client, m).finally(() => fleet.go(client));
          return;
        case 'done':
          cycles += m.cycles;
          finish(client);
          return;
        case 'error':
          clientErrors.push(`client ${client}: ${m.message}`);
          finish(client);
          return;
        case 'broke':
          adapterErrors.push(`client ${client}: ${m.message}`);
          finish(client);
          return;
        case 'exited':
          clientErrors.push(`client ${client}: ${m.message}`);
          recorder.endHolds(client, 'process-exited');
          finish(client);
          return;
        case 'ready':
        case 'prepared':
          return;
      }
    };
    const startedAt = sharedNowMs();
    const untilMs = startedAt + o.seconds * 1000;
    const gate = o.nemesis.some(isTargeted);
    const prefix = `s${this.#runs++}-`;
    for (let c = 0; c < clients; c++) {
      if (!fleet.alive(c)) {
        clientErrors.push(`client ${c}: its process exited before the run started: ${lastLineOf(fleet.stderrOf(c))}`);
        finish(c);
        continue;
      }
      fleet.start(c, {
        process: c,
        seed: (o.seed + 7919 * (c + 1)) | 0,
        backend: this.#servers.clientBackend(c, o.store, o.adapter !== undefined ? { ref: o.adapter.ref, tokens: o.adapter.client.tokens ?? true } : undefined),
        workload: { resources: o.resources, prefix, ttlMinMs: o.ttlMinMs, ttlMaxMs: o.ttlMaxMs, untilMs, maxCycles: o.maxCycles ?? Number.MAX_SAFE_INTEGER, gate },
      });
    }
    this.#progress(`${label}: running for ${o.seconds} s (nemesis: ${o.nemesis.length > 0 ? o.nemesis.join(', ') : 'none'})`);
    const ticker = setInterval(() => this.#progress(`${label}: ${Math.round((sharedNowMs() - startedAt) / 1000)} s, ${counted(recorder.size, 'event')}, ${counted(nemesis.count, 'fault')}`), 5_000);
    const saved = o.onInterrupt;
    const unregister = saved === undefined ? () => false : onInterrupt(async () => saved(recorder.history()));
    try {
      await Promise.race([nemesis.run(untilMs, o.maxFaults), finished]);
      await nemesis.finish();
      // The clients stop by themselves at untilMs (or maxCycles); after enough faults they are asked to.
      const enough = o.maxFaults !== undefined && nemesis.count >= o.maxFaults;
      if (enough) fleet.stopRuns();
      await finishWithin(finished, Math.max(0, untilMs - sharedNowMs()) + 100);
      fleet.stopRuns();
      if (!(await finishWithin(finished, RUN_END_TIMEOUT_MS))) {
        // Their calls are bounded (the clients' timeouts, the workload's guard): one still busy is stuck where nothing bounds it.
        // Its events so far are kept (a pending call stays pending in the history); the process goes, and the next run gets a fresh one.
        const stuck = Array.from({ length: clients }, (_v, c) => c).filter((c) => !finishedClients.has(c));
        const message = (c: number): string => `client ${c}: did not finish its cycle within ${RUN_END_TIMEOUT_MS} ms of the run's end (stopped)`;
        (o.adapter !== undefined ? adapterErrors : clientErrors).push(...stuck.map(message));
        await fleet.killClients(stuck);
      }
    } finally {
      unregister();
      clearInterval(ticker);
      await nemesis.finish();
      this.#route = () => undefined;
    }
    const history = recorder.history();
    const last = history.length > 0 ? history[history.length - 1]!.time : startedAt;
    const durationMs = Math.max(0, last - startedAt);
    return { history, durationMs, overheadMs: sharedNowMs() - t0 - durationMs, cycles, faults: nemesis.count, faultsStruck: o.nemesis.filter((f) => nemesis.struck.has(f)), clientErrors, adapterErrors, eventLimitReached };
  }

  /** Has every live client process load the adapter before the run's clock starts (bounded); a failure to load ends the run. */
  async #prepare(adapter: StressAdapter): Promise<void> {
    const live = Array.from({ length: this.#o.clients }, (_v, c) => c).filter((c) => this.#fleet.alive(c));
    const waiting = new Map<number, () => void>();
    const errors: string[] = [];
    const all = Promise.all(live.map((c) => new Promise<void>((resolve) => waiting.set(c, resolve))));
    this.#route = (client, m) => {
      if (m.kind === 'prepared') {
        if (m.error !== undefined) errors.push(`client ${client}: ${m.error}`);
        waiting.get(client)?.();
      } else if (m.kind === 'exited') {
        waiting.get(client)?.(); // the run reports a process that is gone
      }
    };
    for (const c of live) this.#fleet.prepare(c, adapter.ref);
    let timer: NodeJS.Timeout | undefined;
    const inTime = await Promise.race([all.then(() => true), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), PREPARE_TIMEOUT_MS)))]);
    clearTimeout(timer);
    this.#route = () => undefined;
    if (!inTime) throw new Error(`the client processes did not load ${adapter.name} within ${PREPARE_TIMEOUT_MS} ms`);
    if (errors.length > 0) throw new Error(`the client processes could not load ${adapter.name}: ${errors[0]}`);
  }

  /** Lets the client processes go and stops the servers. */
  async stop(): Promise<void> {
    this.#progress(`${this.#o.backend}: stopping clients and servers`);
    try {
      await this.#fleet.close();
    } finally {
      await this.#servers.stop();
    }
  }
}

/** Bound on the client processes loading an adapter (TypeScript through tsx, on a loaded machine). */
const PREPARE_TIMEOUT_MS = 60_000;

/** Bound on the clients finishing their cycles once asked (their calls are bounded by their own timeouts). */
const RUN_END_TIMEOUT_MS = 30_000;

