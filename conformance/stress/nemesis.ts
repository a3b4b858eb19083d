import { match } from 'ts-pattern';
import type { FaultEvent } from '../history/event.ts';
import type { RecordedEvent } from './protocol.ts';
import type { ClientFleet } from './fleet.ts';
import type { GateRequest } from './protocol.ts';
import { Random } from './random.ts';
import type { Recorder } from './recorder.ts';
import type { StressBackend, StressServers } from './servers.ts';
import { sharedNowMs } from './sharedClock.ts';

/**
 * The nemesis: real faults on a seeded schedule. Random faults hit a random
 * client, server or link; targeted faults wait for a client that holds a
 * lease and has read its register (the workload's gate, just before the
 * write) and strike there, so that the consequence is certain rather than
 * hoped for:
 *
 * - pause-holder: SIGSTOP the holder until its lease has expired and another
 *   client has written the same register, then SIGCONT: its write lands on
 *   a register it no longer guards (a lost update unless the store fences it).
 * - terminate-holder (PostgreSQL): SIGSTOP the holder, pg_terminate_backend
 *   its sessions, SIGCONT once another client has acquired the resource.
 * - clock-step-holder (Redis): when the holder's key is on a bare majority of
 *   nodes, step one of those nodes' clocks past the key's expiry and open the
 *   gate once another client has acquired the resource.
 * - failover-holder (redis-replicated): hold replication back, wait for a
 *   holder whose acquire was sent after that (its grant cannot be on the
 *   replica), kill the primary so Sentinel promotes the replica, rejoin the
 *   old primary as a replica, and open the gate once another client has
 *   acquired the resource and written its register. With WAIT 1 no grant
 *   completes while replication is held: after the hold's window the
 *   failover comes all the same, without a holder.
 *
 * The random `failover` holds replication back for a while, then fails over.
 */
export const RANDOM_FAULTS = ['pause-client', 'pause-server', 'kill-server', 'clock-step', 'partition', 'delay', 'terminate-backend', 'partition-members', 'failover'] as const;
export const TARGETED_FAULTS = ['pause-holder', 'terminate-holder', 'clock-step-holder', 'failover-holder'] as const;
export type NemesisFault = (typeof RANDOM_FAULTS)[number] | (typeof TARGETED_FAULTS)[number];
export const NEMESIS_FAULTS: readonly NemesisFault[] = [...RANDOM_FAULTS, ...TARGETED_FAULTS];

export function isTargeted(f: NemesisFault): f is (typeof TARGETED_FAULTS)[number] {
  return (TARGETED_FAULTS as readonly string[]).includes(f);
}

/** Faults that need gates between the cluster's members (etcd's peer gates). */
export function needsPeerGates(faults: readonly NemesisFault[]): boolean {
  return faults.includes('partition-members');
}

/** Faults that need the links proxied. */
export function needsProxies(faults: readonly NemesisFault[]): boolean {
  return faults.includes('partition') || faults.includes('delay');
}

/** Faults that need the Redis nodes under libfaketime. */
export function needsFakeClocks(faults: readonly NemesisFault[]): boolean {
  return faults.includes('clock-step') || faults.includes('clock-step-holder');
}

/** Why `fault` cannot hit `backend`, or null. */
export function unsupported(fault: NemesisFault, backend: StressBackend): string | null {
  const pg = backend === 'pg-session' || backend === 'pg-xact';
  const replicated = backend === 'redis-replicated' || backend === 'redis-replicated-wait';
  if ((fault === 'failover' || fault === 'failover-holder') && !replicated) return `${fault}: ${backend} has no replica for Sentinel to promote (redis-replicated has)`;
  if (replicated && (fault === 'clock-step' || fault === 'clock-step-holder' || fault === 'partition' || fault === 'delay')) {
    return `${fault}: ${backend}'s clients follow Sentinel to the primary directly, on real clocks (no proxies, no faked clocks)`;
  }
  if ((fault === 'clock-step' || fault === 'clock-step-holder') && pg) return `${fault}: advisory locks have no expiry, no server clock matters to ${backend}`;
  if ((fault === 'terminate-backend' || fault === 'terminate-holder') && !pg) return `${fault}: ${backend} has no PostgreSQL backend to terminate`;
  if ((fault === 'clock-step' || fault === 'clock-step-holder') && backend === 'etcd') return `${fault}: etcd is a Go program, libfaketime does not reach its clocks`;
  if (fault === 'partition-members' && backend !== 'etcd' && backend !== 'zookeeper') return `${fault}: only the etcd cluster and the ZooKeeper ensemble have gates between their members`;
  if ((fault === 'clock-step' || fault === 'clock-step-holder') && backend === 'zookeeper') return `${fault}: ZooKeeper expires sessions on its monotonic clock (System.nanoTime); no clock fault is offered on its members (spec 7.10)`;
  return null;
}

export interface NemesisOptions {
  readonly faults: readonly NemesisFault[];
  readonly servers: StressServers;
  readonly fleet: ClientFleet;
  readonly recorder: Recorder;
  /** Seeds the schedule (when, which fault, on what, how long) and, apart, the choices among what a strike finds. */
  readonly seed: number;
  readonly ttlMinMs: number;
  readonly ttlMaxMs: number;
  /** A killed server stays down at least this long. */
  readonly restartDelayMs: number;
  /** The Redis key holding the lock on a resource (clock-step-holder looks for the holder's nodes there). */
  readonly lockKey: (resource: string) => string;
}

type Armed = { readonly fault: (typeof TARGETED_FAULTS)[number]; readonly done: () => void };

export class Nemesis {
  readonly #o: NemesisOptions;
  #armed: Armed | null = null;
  /** redis-replicated: when replication was held back (a failover is to come); null when it runs. */
  #heldSince: number | null = null;
  #busy = false;
  #faults = 0;
  readonly #struck = new Set<NemesisFault>();
  #healing = false;
  /** When the clients stop: no strike starts later than 2 ttls before, none outlasts it by more than a ttl. */
  #untilMs = Number.POSITIVE_INFINITY;
  /** Aborted by finish(): every wait of a fault in progress ends at once, and no new fault starts. */
  readonly #stop = new AbortController();
  #loop: Promise<void> = Promise.resolve();

  /** The schedule's draws: the same for a seed whatever the run finds, as no draw depends on it. */
  readonly #schedule: Random;
  /** Choices among what a strike found (a holder session, a node of a bare majority): apart, so that how many there were never shifts the schedule. */
  readonly #found: Random;

  constructor(options: NemesisOptions) {
    this.#o = options;
    this.#schedule = new Random(options.seed);
    this.#found = new Random(options.seed ^ 0x2545f491);
  }

  /** Faults injected so far. */
  get count(): number {
    return this.#faults;
  }

  /** The faults of the nemesis that struck at least once (a run whose faults never struck observed none of them). */
  get struck(): ReadonlySet<NemesisFault> {
    return this.#struck;
  }

  /** Counts a fault as injected: only where it strikes, never where it was drawn and found nothing to strike. */
  #strike(fault: NemesisFault): void {
    this.#faults++;
    this.#struck.add(fault);
  }

  /** Between a fault and the next: about the longest ttl, at least 200 ms. */
  get #intervalMs(): number {
    return Math.max(200, this.#o.ttlMaxMs);
  }

  /** Bound on one fault (a pause, a wait for its consequence). */
  get #maxFaultMs(): number {
    return 5 * this.#o.ttlMaxMs + 10_000;
  }

  /** Injects faults until the shared clock reaches `untilMs` (or `maxFaults` were injected), then heals everything. */
  run(untilMs: number, maxFaults = Number.POSITIVE_INFINITY): Promise<void> {
    this.#loop = this.#run(untilMs, maxFaults);
    return this.#loop;
  }

  /** Ends the fault in progress early, waits for the schedule to stop, heals everything. */
  async finish(): Promise<void> {
    this.#stop.abort();
    await this.#loop;
    await this.heal();
  }

  /** Resolves after `ms`, or at once when finish() is called or `ended` aborts. */
  #sleep(ms: number, ended?: AbortSignal): Promise<void> {
    const signals = [this.#stop.signal, ...(ended === undefined ? [] : [ended])];
    return new Promise((resolve) => {
      if (signals.some((s) => s.aborted)) return resolve();
      const timer = setTimeout(done, Math.max(0, ms));
      function done(): void {
        clearTimeout(timer);
        for (const s of signals) s.removeEventListener('abort', done);
        resolve();
      }
      for (const s of signals) s.addEventListener('abort', done, { once: true });
    });
  }

  async #run(untilMs: number, maxFaults: number): Promise<void> {
    const { faults } = this.#o;
    const random = this.#schedule;
    this.#untilMs = untilMs;
    try {
      while (faults.length > 0 && this.#faults < maxFaults && !this.#stop.signal.aborted) {
        const waitMs = random.int(Math.floor(this.#intervalMs / 2), Math.floor((this.#intervalMs * 3) / 2));
        if (sharedNowMs() + waitMs >= untilMs) break;
        await this.#sleep(waitMs);
        if (this.#stop.signal.aborted) break;
        const fault = random.pick(faults);
        const endBy = Math.min(untilMs, sharedNowMs() + this.#maxFaultMs);
        if (isTargeted(fault)) await this.#arm(fault, endBy);
        else await this.#random(fault, endBy);
      }
    } finally {
      await this.heal();
    }
  }

  /** A client at its gate: resolves when it may write (at once unless a targeted fault strikes it). */
  async atGate(client: number, request: GateRequest): Promise<void> {
    const armed = this.#armed;
    if (armed === null || this.#busy || this.#healing || sharedNowMs() > this.#untilMs - 2 * this.#o.ttlMaxMs) return;
    this.#busy = true;
    try {
      const struck = await this.#targeted(armed.fault, client, request);
      if (struck) {
        this.#armed = null;
        armed.done();
      }
    } finally {
      this.#busy = false;
    }
  }

  /** Every client and server running, every link passing. Idempotent. */
  async heal(): Promise<void> {
    this.#healing = true;
    this.#armed?.done();
    this.#armed = null;
    const { fleet, servers } = this.#o;
    for (let c = 0; c < fleet.size; c++) if (fleet.paused(c)) fleet.resume(c);
    for (const s of servers.nodes) {
      if (s.paused) s.resume();
      if (!s.running) await s.restart();
    }
    for (const l of servers.links.flat()) l.setMode({ kind: 'pass' });
    servers.healMembers();
    // Also after a failover that did not complete: the killed primary was restarted above, the replica syncs again.
    if (servers.replication !== null) {
      this.#endHold('healed: replication runs again');
      await servers.replication.release();
    }
  }

  async #arm(fault: Armed['fault'], endBy: number): Promise<void> {
    let done!: () => void;
    const struck = new Promise<void>((resolve) => (done = resolve));
    const holding = fault === 'failover-holder';
    if (holding) {
      await this.#hold('writes from now on stay on the primary, until the failover');
      // The window for a holder: about a lease long, then the failover comes with or without one.
      endBy = Math.min(endBy, sharedNowMs() + this.#duration(endBy));
    }
    this.#armed = { fault, done };
    // The window's sleep ends with the window: left pending after a strike, each kept a timer and a listener on the stop signal for up to #maxFaultMs (11 at once: MaxListenersExceededWarning).
    const window = new AbortController();
    const hit = await Promise.race([struck.then(() => true), this.#sleep(Math.max(0, endBy - sharedNowMs()), window.signal).then(() => false)]);
    window.abort();
    this.#armed = null;
    // A strike in progress finishes before the next fault is drawn.
    while (this.#busy) await new Promise((resolve) => setTimeout(resolve, 10));
    if (holding && !hit && this.#heldSince !== null && !this.#stop.signal.aborted) {
      this.#strike(fault);
      await this.#failover('no client was granted a lease while replication was held');
    }
  }

  #replication(): NonNullable<StressServers['replication']> {
    const r = this.#o.servers.replication;
    if (r === null) throw new Error(`the failover needs a replicated Redis, not ${this.#o.servers.backend}`);
    return r;
  }

  /** Holds replication back (redis-replicated): no write from now on reaches the replica until the failover. */
  async #hold(detail: string): Promise<void> {
    this.#record('invoke', 'hold-replication', 'redis replica', detail);
    await this.#replication().hold();
    // From now on (not from the invoke: the hold first lets the replica catch up), no grant reaches the replica.
    this.#heldSince = sharedNowMs();
  }

  /** The hold ends (at the failover, or healed): the history's replication window closes. */
  #endHold(detail: string): void {
    if (this.#heldSince === null) return;
    this.#heldSince = null;
    this.#record('ok', 'hold-replication', 'redis replica', detail);
  }

  /**
   * Kills the primary, has Sentinel promote the replica, rejoins the old
   * primary (replication runs again after); `then` runs before the fault's
   * end is recorded, and says what followed.
   */
  async #failover(why: string, then: () => Promise<string> = async () => 'the replica promoted, the old primary rejoined as its replica'): Promise<void> {
    this.#endHold('the primary is killed next');
    this.#record('invoke', 'failover', 'redis primary', `kill -9 of the primary, SENTINEL FAILOVER, the old primary back as a replica (${why})`);
    await this.#replication().failover();
    this.#record('ok', 'failover', 'redis primary', await then());
  }

  #record(type: FaultEvent['type'], fault: string, target: string, detail?: string): void {
    this.#o.recorder.add([{ type, process: 'nemesis', time: sharedNowMs(), op: 'fault', fault, target, ...(detail !== undefined ? { detail } : {}) }]);
  }

  #duration(endBy: number): number {
    const t = this.#o.ttlMaxMs;
    return Math.max(1, Math.floor(Math.min(this.#schedule.int(Math.ceil(t / 2), 3 * t), endBy - sharedNowMs())));
  }

  async #random(fault: (typeof RANDOM_FAULTS)[number], endBy: number): Promise<void> {
    const { fleet, servers } = this.#o;
    const random = this.#schedule;
    // Counted in each branch as it strikes: a terminate-backend that found no holder injected nothing.
    await match(fault)
      .with('pause-client', async () => {
        const c = random.int(0, fleet.size - 1);
        const ms = this.#duration(endBy);
        this.#strike(fault);
        this.#record('invoke', 'pause-client', `client ${c}`, `${ms} ms`);
        fleet.pause(c);
        await this.#sleep(ms);
        fleet.resume(c);
        this.#record('ok', 'pause-client', `client ${c}`);
      })
      .with('pause-server', async () => {
        const n = random.int(0, servers.nodes.length - 1);
        const s = servers.nodes[n]!;
        const ms = this.#duration(endBy);
        this.#strike(fault);
        this.#record('invoke', 'pause-server', s.name, `${ms} ms`);
        s.pause();
        await this.#sleep(ms);
        s.resume();
        this.#record('ok', 'pause-server', s.name);
      })
      .with('kill-server', async () => {
        const s = servers.nodes[random.int(0, servers.nodes.length - 1)]!;
        const downMs = this.#o.restartDelayMs + random.int(0, this.#o.ttlMaxMs);
        this.#strike(fault);
        this.#record('invoke', 'kill-server', s.name, `kill -9, restart after ${downMs} ms`);
        await s.crash();
        await this.#sleep(downMs);
        await s.restart();
        this.#record('ok', 'kill-server', s.name);
      })
      .with('clock-step', async () => {
        const n = random.int(0, servers.nodes.length - 1);
        const ms = random.int(this.#o.ttlMaxMs, 2 * this.#o.ttlMaxMs);
        this.#strike(fault);
        servers.stepClock(n, ms);
        this.#record('invoke', 'clock-step', servers.nodes[n]!.name, `+${ms} ms`);
        this.#record('ok', 'clock-step', servers.nodes[n]!.name);
      })
      .with('partition', 'delay', async (kind) => {
        const c = random.int(0, fleet.size - 1);
        const n = random.int(0, servers.nodes.length - 1);
        const link = servers.links[c]![n]!;
        const ms = this.#duration(endBy);
        const delayMs = random.int(1, Math.max(1, Math.floor(this.#o.ttlMinMs / 2)));
        const target = `client ${c} - ${servers.nodes[n]!.name}`;
        this.#strike(fault);
        this.#record('invoke', kind, target, kind === 'partition' ? `black hole for ${ms} ms` : `+${delayMs} ms each way for ${ms} ms`);
        link.setMode(kind === 'partition' ? { kind: 'blackhole' } : { kind: 'delay', ms: delayMs });
        await this.#sleep(ms);
        link.setMode({ kind: 'pass' });
        this.#record('ok', kind, target);
      })
      .with('partition-members', async () => {
        const n = random.int(0, servers.nodes.length - 1);
        const ms = this.#duration(endBy);
        const target = `${servers.nodes[n]!.name} | the other members`;
        this.#strike(fault);
        this.#record('invoke', 'partition-members', target, `peer links cut for ${ms} ms`);
        servers.partitionMembers([n]);
        await this.#sleep(ms);
        servers.healMembers();
        this.#record('ok', 'partition-members', target);
      })
      .with('failover', async () => {
        const ms = this.#duration(endBy);
        this.#strike(fault);
        await this.#hold(`for ${ms} ms, then the failover: writes stay on the primary`);
        await this.#sleep(ms);
        // Stopped meanwhile: the heal lets replication run again, no failover after the run's end.
        if (!this.#stop.signal.aborted) await this.#failover(`after ${ms} ms of held replication`);
      })
      .with('terminate-backend', async () => {
        const holders = await servers.advisoryHolders();
        if (holders.length === 0) return;
        const pid = this.#found.pick(holders);
        this.#strike(fault);
        this.#record('invoke', 'terminate-backend', 'postgres', `backend ${pid}`);
        await servers.terminate([pid]);
        this.#record('ok', 'terminate-backend', 'postgres', `backend ${pid}`);
      })
      .exhaustive();
  }

  /** Strikes a client at its gate; false when this client is not a fit (the fault stays armed). */
  async #targeted(fault: Armed['fault'], client: number, g: GateRequest): Promise<boolean> {
    const { fleet, servers, recorder } = this.#o;
    const endBy = Math.min(sharedNowMs() + this.#maxFaultMs, this.#untilMs + this.#o.ttlMaxMs);
    const byOther = (op: 'write' | 'acquire', since: number) => (e: RecordedEvent) =>
      e.process !== client && e.process !== 'nemesis' && e.type === 'ok' && 'op' in e && e.op === op && 'resource' in e && e.resource === g.resource && e.time > since;
    const target = `client ${client}`;
    return match(fault)
      .with('pause-holder', async () => {
        const at = sharedNowMs();
        this.#strike(fault);
        this.#record('invoke', 'pause-client', target, `holder of ${g.resource} (token ${g.token}), between its read and its write`);
        fleet.pause(client);
        // Past its deadline (by its own clock), and another client has written the register since.
        const wrote = await recorder.waitFor(byOther('write', at), endBy, this.#stop.signal);
        // Past its deadline, but never past the fault's bound: a deadline far off (a lease of 200 ttls) held the client for minutes.
        const cut = g.validUntil !== undefined && g.validUntil >= endBy;
        if (g.validUntil !== undefined && sharedNowMs() < g.validUntil) await this.#sleep(Math.max(0, Math.min(g.validUntil + 1, endBy) - sharedNowMs()));
        fleet.resume(client);
        this.#record('ok', 'pause-client', target, `${wrote ? `another client wrote ${g.resource} meanwhile` : `no other write of ${g.resource} within the bound`}${cut ? `; resumed at the fault's bound, before its deadline` : ''}`);
        return true;
      })
      .with('terminate-holder', async () => {
        if (g.pids.length === 0) return false;
        const at = sharedNowMs();
        this.#strike(fault);
        this.#record('invoke', 'pause-client', target, `holder of ${g.resource} (token ${g.token}), between its read and its write`);
        fleet.pause(client);
        this.#record('invoke', 'terminate-backend', 'postgres', `backends ${g.pids.join(', ')} of ${target}`);
        await servers.terminate(g.pids);
        this.#record('ok', 'terminate-backend', 'postgres', `backends ${g.pids.join(', ')} of ${target}`);
        const acquired = await recorder.waitFor(byOther('acquire', at), endBy, this.#stop.signal);
        fleet.resume(client);
        this.#record('ok', 'pause-client', target, acquired ? `another client acquired ${g.resource} meanwhile` : `no other grant of ${g.resource} within the bound`);
        return true;
      })
      .with('clock-step-holder', async () => {
        const holding = await servers.nodesHolding(this.#o.lockKey(g.resource), g.owner);
        if (holding.length !== servers.quorum) return false;
        const n = holding[this.#found.int(0, holding.length - 1)]!;
        const ms = 2 * this.#o.ttlMaxMs;
        const at = sharedNowMs();
        this.#strike(fault);
        servers.stepClock(n, ms);
        this.#record('invoke', 'clock-step', servers.nodes[n]!.name, `+${ms} ms, a node of ${target}'s bare majority for ${g.resource}`);
        this.#record('ok', 'clock-step', servers.nodes[n]!.name);
        await recorder.waitFor(byOther('acquire', at), Math.min(endBy, g.validUntil ?? endBy), this.#stop.signal);
        return true;
      })
      .with('failover-holder', async () => {
        // A grant whose acquire was sent before the hold may be on the replica: not this fault's holder.
        if (this.#heldSince === null || g.acquireInvokedAt === undefined || g.acquireInvokedAt < this.#heldSince) return false;
        const at = sharedNowMs();
        this.#strike(fault);
        await this.#failover(`${target} holds ${g.resource} (token ${g.token}), granted while replication was held, between its read and its write`, async () => {
          // The promoted replica never saw the grant nor its token: another client is granted the resource with a token
          // not above the holder's (FENCE-1), within the holder's lease if the failover was quick enough (MUTEX-1); the
          // holder writes after that client's write (a lost update on an unfenced store, STORE-1).
          const acquired = await recorder.waitFor(byOther('acquire', at), endBy, this.#stop.signal);
          const when = acquired ? (g.validUntil !== undefined && sharedNowMs() > g.validUntil ? `after ${target}'s lease was over` : `while ${target} held it`) : '';
          const wrote = acquired && (await recorder.waitFor(byOther('write', at), endBy, this.#stop.signal));
          return acquired ? `another client acquired ${g.resource} ${when}${wrote ? ', and wrote it' : ''}` : `no other grant of ${g.resource} within the bound`;
        });
        return true;
      })
      .exhaustive();
  }
}
