/**
 * What an etcd cluster and a ZooKeeper ensemble share as processes under the
 * test environment's control: members in one private (0700) temporary
 * directory, each started, killed (SIGKILL) and restarted on its data,
 * paused (SIGSTOP) and resumed; per-client TCP proxies to a member's client
 * port (`link`); a leader found by polling every member's status; a watchdog
 * (watchdog.ts) that kills the members and removes the directory should the
 * starting process die, even by SIGKILL, and a process 'exit' handler that
 * does the same on an ordinary exit; and, when asked for, gates before the
 * members' peer ports (peerGate.ts) that cut members apart
 * (`partitionMembers`). A subclass says how a member is started, which peer
 * ports it listens on, how its status is read and which member leads.
 */
import { InvalidInputError } from '../../model/errors.ts';
import { type ChildProcess, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { leftWithin, pauseWithin } from './deadline.ts';
import { EnvironmentError } from './faketime.ts';
import { StoppedWhileStarting } from './stoppedWhileStarting.ts';
import { PeerGate } from './peerGate.ts';
import { startAll } from './allOrNothing.ts';
import { claimPort, onExitKill } from './processes.ts';
import { TcpProxy } from './proxy.ts';
import { Guard } from './watchdog.ts';

export const HOST = '127.0.0.1';
const PROBE_TIMEOUT_MS = 500;
const OUTPUT_RING_BYTES = 16 * 1024;

/** How a start-up ended: ready, a port taken by someone else (try fresh ones), or failed. */
export type Startup = { readonly kind: 'ready' } | { readonly kind: 'address-in-use' } | { readonly kind: 'failed'; readonly reason: string };
const READY: Startup = { kind: 'ready' };

/** One member's process and what is known of it. */
export class GroupMember {
  child: ChildProcess | null = null;
  exited: Promise<void> = Promise.resolve();
  pid = -1;
  paused = false;
  output = '';
  spawnError: NodeJS.ErrnoException | null = null;
  clientPort = 0;
  /** The gates before its peer ports (in peerPorts' order), when the group has them. */
  gates: PeerGate[] = [];

  constructor(
    readonly index: number,
    /** How messages name it. */
    readonly label: string,
  ) {}

  get running(): boolean {
    const c = this.child;
    return c !== null && c.pid !== undefined && c.exitCode === null && c.signalCode === null;
  }
}

/** How a member's process is started. */
export interface MemberCommand {
  readonly file: string;
  readonly args: readonly string[];
  /** Variables of the caller that have no business in the member (they would override its flags, or preload libfaketime). */
  readonly dropEnv: RegExp;
}

/** Groups started and not yet stopped, for the exit handler. */
const live = new Set<ConsensusGroup<GroupMember, { readonly member: number }>>();

/** Starts whose group does not exist yet (its directory, its CA being made), with their kind: stopAllOf stops each group as it comes. */
const pending = new Set<{ readonly kind: string; stopRequested: boolean; readonly done: Promise<void>; readonly finish: () => void }>();

/**
 * Called before a start's first await: a stopAllOf(kind) that comes before
 * the group exists would otherwise miss it, and the start would go on to
 * spawn members nobody stops. `arrived` stops the group at once when one did.
 */
export function startingGroup(kind: string): { arrived(group: ConsensusGroup<GroupMember, { readonly member: number }>): void; abandoned(): void } {
  let finish = (): void => undefined;
  const done = new Promise<void>((resolve) => (finish = resolve));
  const entry = { kind, stopRequested: false, done, finish };
  pending.add(entry);
  return {
    arrived: (group) => {
      pending.delete(entry);
      if (!entry.stopRequested) return entry.finish();
      // boot() sees the stop and rejects StoppedWhileStarting.
      void group.stop().then(entry.finish, entry.finish);
    },
    abandoned: () => {
      pending.delete(entry);
      entry.finish();
    },
  };
}

export abstract class ConsensusGroup<M extends GroupMember, S extends { readonly member: number }> {
  readonly host = HOST;
  readonly startTimeoutMs: number;
  protected readonly members: readonly M[];
  readonly #dir: string;
  readonly #links = new Set<TcpProxy>();
  readonly #guard = new Guard();
  readonly #peerGates: boolean;
  #stopping: Promise<void> | null = null;

  protected constructor(
    /** How errors name the group: 'EtcdCluster', 'ZookeeperEnsemble'. */
    readonly kind: string,
    /** And what it is: 'cluster', 'ensemble'. */
    private readonly noun: string,
    dir: string,
    members: readonly M[],
    startTimeoutMs: number,
    /**
     * Members reach each other through gates of this process, so that
     * `partitionMembers` can cut them apart. Off by default: the gates put
     * every message between members through this process's event loop.
     */
    peerGates: boolean,
  ) {
    this.#peerGates = peerGates;
    this.#dir = dir;
    this.members = members;
    this.startTimeoutMs = startTimeoutMs;
    this.#guard.set({ processes: [], dirs: [dir] });
    onExitKill(killAllSync);
    live.add(this);
  }

  /** How `member` is started. */
  protected abstract command(m: M): MemberCommand;
  /** One member's status, or null when it does not answer within `timeoutMs` (or is not running or paused). */
  protected abstract memberStatus(m: M, timeoutMs: number): Promise<S | null>;
  /** The member that leads with a quorum behind it, or null. */
  protected abstract leaderOf(statuses: ReadonlyArray<S | null>): number | null;
  /** An error to throw at once when a member that exited shows the software is missing, else null. */
  protected abstract notInstalled(m: M): EnvironmentError | null;
  /** What the member prints when a port it binds is taken. */
  protected abstract readonly addressInUse: RegExp;
  /** What a leader is, for messages: 'leader agreed by a majority'. */
  protected abstract readonly leaderWanted: string;

  /** The ports a member listens on for the other members (raft, quorum, election). */
  protected abstract peerPorts(m: M): readonly number[];
  /** Fresh ports and whatever the members need before they start (configs); the gates are opened after it. Distinct ports are boot()'s to check. */
  protected abstract prepareStart(): Promise<void>;
  /** After a failed start, before the next try. */
  protected async afterFailedStart(): Promise<void> {}

  /** The port the other members dial for `m`'s `i`th peer port: its gate's, or the port itself. */
  protected dialedPort(m: M, i: number): number {
    return m.gates[i]?.port ?? this.peerPorts(m)[i]!;
  }

  /** The releases of the members' ports (processes.ts claimPort): kept across restarts, given back at stop() or a fresh start. */
  #claims: Array<() => void> = [];

  /** A port for a member: one it keeps across its restarts (no other process is given it between a kill and the restart). */
  protected async claimedPort(): Promise<number> {
    const claim = await claimPort();
    this.#claims.push(claim.release);
    return claim.port;
  }

  #releasePorts(): void {
    for (const release of this.#claims.splice(0)) release();
  }

  /** Starts every member and resolves once a leader serves (bounded by startTimeoutMs, port retries included). */
  protected async boot(): Promise<void> {
    const deadline = Date.now() + this.startTimeoutMs;
    try {
      // Free ports race with every other process: when a member cannot bind, start over on fresh ones, until the deadline.
      for (;;) {
        this.#assertStillStarting('its ports were claimed');
        await this.#closeGates();
        this.#releasePorts();
        await this.prepareStart();
        await this.#openGates();
        // A stop() during the ports' claim or the gates' opening closed only the gates there were then.
        if (this.#stopping !== null) await this.#closeGates();
        this.#assertStillStarting('its members were spawned');
        // Two ports alike (a gate's port comes from the kernel and may be one a member is about to bind): fresh ports.
        const ports = this.members.flatMap((m) => [m.clientPort, ...this.peerPorts(m), ...m.gates.map((g) => g.port)]);
        if (new Set(ports).size < ports.length) {
          if (Date.now() >= deadline) throw this.startError(`no ${ports.length} distinct ports within ${this.startTimeoutMs} ms`);
          continue;
        }
        await this.writeConfig();
        for (const m of this.members) this.#spawn(m);
        const result = await this.#waitReady(deadline);
        // Members killed by stop() are not a start-up failure, nor ports to try again.
        this.#assertStillStarting('a leader served');
        if (result.kind === 'ready') return;
        await Promise.all(this.members.map((m) => this.#kill(m)));
        await this.afterFailedStart();
        if (result.kind === 'failed') throw this.startError(result.reason);
        if (Date.now() >= deadline) throw this.startError('no free ports could be bound');
      }
    } catch (error) {
      throw await this.failedStart(error);
    }
  }

  /**
   * Stops the group after its start failed, and says why: StoppedWhileStarting
   * (the failure as cause) when a stop() came meanwhile, since what failed then
   * (a killed member, a removed directory) is the stop's doing.
   */
  protected async failedStart(error: unknown): Promise<unknown> {
    const stoppedWhileStarting = this.#stopping !== null;
    await this.stop();
    if (stoppedWhileStarting && !(error instanceof StoppedWhileStarting)) return new StoppedWhileStarting(`${this.kind} (dir ${this.#dir}): stop() came while it was starting`, { cause: error });
    return error;
  }

  /** Throws StoppedWhileStarting once stop() was called: what start() was about to do (`next`) is not done. */
  #assertStillStarting(next: string): void {
    if (this.#stopping !== null) throw new StoppedWhileStarting(`${this.kind} (dir ${this.#dir}): stop() came while it was starting, before ${next}`);
  }

  get size(): number {
    return this.members.length;
  }

  get dir(): string {
    return this.#dir;
  }

  pid(member: number): number {
    return this.member(member).pid;
  }

  running(member: number): boolean {
    return this.member(member).running;
  }

  paused(member: number): boolean {
    return this.member(member).paused;
  }

  get stopped(): boolean {
    return this.#stopping !== null;
  }

  /**
   * A new TCP proxy to `member`'s client port, for one client's link: cut it
   * (`setMode({ kind: 'blackhole' })`) or delay it without touching the
   * others. Closed by stop().
   */
  async link(member: number): Promise<TcpProxy> {
    this.assertNotStopped('link');
    const m = this.member(member);
    const proxy = await TcpProxy.start({ host: HOST, port: m.clientPort });
    // stop() closed the links there were: this one came after.
    if (this.#stopping !== null) {
      await proxy.close();
      this.assertNotStopped('link');
    }
    this.#links.add(proxy);
    return proxy;
  }

  /** Each member's status, or null for one that does not answer within `timeoutMs`. */
  async status(timeoutMs = 1000): Promise<Array<S | null>> {
    return Promise.all(this.members.map((m) => this.memberStatus(m, timeoutMs)));
  }

  /** The index of the leading member, waiting up to `timeoutMs` for one. */
  async leader(timeoutMs: number): Promise<number> {
    return (await this.leaderSince(timeoutMs, this.pollMs)).member;
  }

  /**
   * The leading member, waiting up to `timeoutMs` (looking every `pollMs`),
   * and a lower bound on when it began to lead (performance.now()): the
   * start of the last look that found none. Started while no leader can be,
   * the bound is the true one to within a look and its interval.
   */
  async leaderSince(timeoutMs: number, pollMs: number): Promise<{ readonly member: number; readonly sinceMs: number }> {
    const deadline = Date.now() + timeoutMs;
    let sinceMs = performance.now();
    for (;;) {
      const lookedAt = performance.now();
      const found = this.leaderOf(await this.status(leftWithin(PROBE_TIMEOUT_MS, deadline)));
      if (found !== null) return { member: found, sinceMs };
      sinceMs = lookedAt;
      if (Date.now() >= deadline) throw new EnvironmentError(`${this.kind}: no ${this.leaderWanted} within ${timeoutMs} ms`);
      await sleep(pauseWithin(pollMs, deadline));
    }
  }

  /** How often start-up and leader waits look again, ms. */
  protected get pollMs(): number {
    return 50;
  }

  /** SIGKILL one member and wait for it to exit; its data stays. No-op when it is not running. */
  async kill(member: number): Promise<void> {
    this.assertNotStopped('kill');
    await this.#kill(this.member(member));
  }

  /**
   * The crash of the model's one lock node: SIGKILL of the leader and of one
   * follower (the `nth`, taken in turn), so that the group loses its quorum.
   * Resolves with the members killed, once both have exited.
   */
  async killLeaderAndFollower(nth: number, timeoutMs: number): Promise<number[]> {
    const leader = await this.leader(timeoutMs);
    const followers = this.members.map((_m, i) => i).filter((i) => i !== leader);
    const killed = [leader, followers[nth % followers.length]!];
    await Promise.all(killed.map((m) => this.kill(m)));
    return killed;
  }

  /** Every member running again and a leader agreed (bounded by `timeoutMs`): runs that share the group each leave it whole for the next. No-op once stopped. */
  async wholeAgain(timeoutMs: number): Promise<void> {
    if (this.stopped) return;
    const down = Array.from({ length: this.size }, (_v, m) => m).filter((m) => !this.running(m));
    if (down.length === 0) return;
    await Promise.all(down.map((m) => this.restart(m)));
    await this.leader(timeoutMs);
  }

  /** Starts a killed member again on its data and ports (a running one is killed first); resolves when it answers. */
  async restart(member: number): Promise<void> {
    this.assertNotStopped('restart');
    const m = this.member(member);
    await this.#kill(m);
    const deadline = Date.now() + this.startTimeoutMs;
    for (;;) {
      this.#spawn(m);
      const result = await this.#waitMember(m, deadline);
      // Killed by stop(): not a member that failed to come back.
      this.#assertStillStarting(`${m.label} answered`);
      if (result.kind === 'ready') return;
      await this.#kill(m);
      // The port may still be held by the killed process's sockets for a moment.
      if (result.kind === 'failed' || Date.now() >= deadline) throw this.startError(`${m.label} did not come back: ${result.kind === 'failed' ? result.reason : 'its ports stayed in use'}`);
      await sleep(pauseWithin(100, deadline));
    }
  }

  /**
   * Cuts the members in `side` from the others, both ways (every peer
   * connection between the two sides is closed, and new ones are closed at once),
   * replacing any earlier cut; clients still reach every member. Needs
   * `peerGates`.
   */
  partitionMembers(side: readonly number[]): void {
    this.assertNotStopped('partition');
    if (!this.#peerGates) throw new Error(`${this.kind}: partitionMembers needs a${this.noun === 'ensemble' ? 'n' : ''} ${this.noun} started with peerGates`);
    const inside = new Set(side.map((m) => this.member(m).index));
    for (const m of this.members) {
      const cut = this.members.filter((x) => inside.has(x.index) !== inside.has(m.index)).map((x) => x.index);
      for (const gate of m.gates) gate.setCut(cut);
    }
  }

  /** Ends the member partition: every member reaches every other again. */
  healMembers(): void {
    for (const m of this.members) for (const gate of m.gates) gate.setCut([]);
  }

  /** SIGSTOP: the member keeps its sockets open but neither answers nor takes part in the quorum. */
  pause(member: number): void {
    this.#signal(this.member(member), 'SIGSTOP', 'pause');
    this.member(member).paused = true;
  }

  /** SIGCONT. */
  resume(member: number): void {
    this.#signal(this.member(member), 'SIGCONT', 'resume');
    this.member(member).paused = false;
  }

  /** Kills every member, closes every link, removes the directory. Idempotent. */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      try {
        await Promise.all([...this.#links].map((p) => p.close()));
        this.#links.clear();
        await Promise.all(this.members.map((m) => this.#kill(m)));
        await this.#closeGates();
      } finally {
        await rm(this.#dir, { recursive: true, force: true, maxRetries: 3 });
        this.#guard.release();
        this.#releasePorts();
        live.delete(this);
      }
    })();
    return this.#stopping;
  }

  /** The end of each member's output, for error messages. */
  logTail(): string {
    return this.members.map((m) => `--- ${m.label} ---\n${m.output.slice(-2048)}`).join('\n');
  }

  protected member(member: number): M {
    const m = this.members[member];
    if (m === undefined) throw new RangeError(`${this.kind}: no member ${String(member)} (0..${this.members.length - 1})`);
    return m;
  }

  /** Kills every member at once. */
  protected async killAll(): Promise<void> {
    await Promise.all(this.members.map((m) => this.#kill(m)));
  }

  /** Starts every member again (all killed first) and waits for a leader. */
  protected async respawnAll(what: string): Promise<void> {
    await this.killAll();
    const deadline = Date.now() + this.startTimeoutMs;
    for (const m of this.members) this.#spawn(m);
    const result = await this.#waitReady(deadline);
    this.#assertStillStarting('a leader served');
    if (result.kind !== 'ready') throw this.startError(`${what} did not come back: ${result.kind === 'failed' ? result.reason : 'its ports were in use'}`);
  }

  /** Writes what the members read at start (their configs), once the ports and gates are known. */
  protected async writeConfig(): Promise<void> {}

  /** A gate per peer port of each member, when the group has them: all or none (a gate that fails closes those opened, then EnvironmentError, the failure its cause). */
  async #openGates(): Promise<void> {
    if (!this.#peerGates) return;
    const pids = (): number[] => this.members.map((x) => (x.running ? x.pid : -1));
    const wanted = this.members.flatMap((m) => this.peerPorts(m).map((port) => ({ m, port })));
    let gates: PeerGate[];
    try {
      gates = await startAll(
        wanted.map(({ port }) => () => PeerGate.start(port, pids)),
        (gate) => gate.close(),
      );
    } catch (error) {
      throw new EnvironmentError(`${this.kind} (dir ${this.#dir}): its peer gates could not be opened: ${error instanceof Error ? error.message : String(error)}`, null, { cause: error });
    }
    for (const m of this.members) m.gates = [];
    wanted.forEach(({ m }, i) => m.gates.push(gates[i]!));
  }

  async #closeGates(): Promise<void> {
    await Promise.all(this.members.flatMap((m) => m.gates.map((g) => g.close())));
    for (const m of this.members) m.gates = [];
  }

  #spawn(m: M): void {
    // A stop() during a restart (or a start) killed what ran: nothing more is spawned.
    this.#assertStillStarting(`${m.label} was spawned`);
    const { file, args, dropEnv } = this.command(m);
    const env: NodeJS.ProcessEnv = {};
    for (const [key, value] of Object.entries(process.env)) if (!dropEnv.test(key)) env[key] = value;
    const child = spawn(file, [...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    m.child = child;
    m.paused = false;
    m.spawnError = null;
    // A fresh start's output alone says why it failed (an earlier 'address in use' must not).
    m.output = '';
    m.exited = new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.once('error', (error: NodeJS.ErrnoException) => {
        m.spawnError = error;
        resolve();
      });
    });
    const capture = (chunk: Buffer): void => {
      m.output = (m.output + chunk.toString('utf8')).slice(-OUTPUT_RING_BYTES);
    };
    child.stdout?.on('data', capture);
    child.stderr?.on('data', capture);
    // A forgotten group must not keep the test process alive: the exit handler and the watchdog kill it.
    child.unref();
    (child.stdout as Socket | null)?.unref();
    (child.stderr as Socket | null)?.unref();
    if (child.pid !== undefined) m.pid = child.pid;
    this.#guardNow();
  }

  #guardNow(): void {
    this.#guard.set({ processes: this.members.filter((m) => m.running).map((m) => ({ pid: m.pid })), dirs: [this.#dir] });
  }

  async #kill(m: M): Promise<void> {
    const child = m.child;
    if (child === null) return;
    if (m.running) {
      child.ref();
      child.kill('SIGKILL');
    }
    await m.exited;
    m.child = null;
    m.paused = false;
  }

  /** Polls until a leader serves; a member that exits stops the wait. */
  async #waitReady(deadline: number): Promise<Startup> {
    for (;;) {
      for (const m of this.members) {
        const failed = await this.#exitReason(m);
        if (failed !== null) return failed;
      }
      if (this.leaderOf(await this.status(leftWithin(PROBE_TIMEOUT_MS, deadline))) !== null) {
        this.#guardNow();
        return READY;
      }
      if (Date.now() >= deadline) return { kind: 'failed', reason: `no ${this.leaderWanted} within ${this.startTimeoutMs} ms` };
      await sleep(pauseWithin(this.pollMs, deadline));
    }
  }

  async #waitMember(m: M, deadline: number): Promise<Startup> {
    for (;;) {
      const failed = await this.#exitReason(m);
      if (failed !== null) return failed;
      if ((await this.memberStatus(m, leftWithin(PROBE_TIMEOUT_MS, deadline))) !== null) {
        this.#guardNow();
        return READY;
      }
      if (Date.now() >= deadline) return { kind: 'failed', reason: `no answer within ${this.startTimeoutMs} ms` };
      await sleep(pauseWithin(this.pollMs, deadline));
    }
  }

  /** Why a member is no longer running (null while it runs). */
  async #exitReason(m: M): Promise<Startup | null> {
    if (m.running) return null;
    const missing = this.notInstalled(m);
    if (missing !== null) throw missing;
    // A member that says nothing (ZooKeeper logs nowhere here) lost a port race if one of its ports is taken now.
    if (this.addressInUse.test(m.output) || (await anyTaken([m.clientPort, ...this.peerPorts(m)]))) return { kind: 'address-in-use' };
    return { kind: 'failed', reason: `${m.label} exited during start-up${m.spawnError ? ` (${m.spawnError.message})` : ''}` };
  }

  protected startError(reason: string): EnvironmentError {
    return new EnvironmentError(`${this.kind} (dir ${this.#dir}) failed to start: ${reason}\n${this.logTail()}`);
  }

  #signal(m: M, signal: NodeJS.Signals, what: string): void {
    this.assertNotStopped(what);
    if (!m.running) throw new InvalidInputError('precondition', `${this.kind}: cannot ${what} ${m.label}, it is not running`);
    m.child!.kill(signal);
  }

  protected assertNotStopped(what: string): void {
    if (this.#stopping !== null) throw new InvalidInputError('precondition', `${this.kind}: cannot ${what} a stopped ${this.noun}`);
  }

  /** Synchronous last-resort cleanup for the exit handler. */
  killSync(): void {
    for (const proxy of this.#links) proxy.destroyNow();
    for (const m of this.members) for (const gate of m.gates) gate.destroyNow();
    for (const m of this.members) {
      if (m.running) {
        try {
          m.child!.kill('SIGKILL');
        } catch {
          // already gone
        }
      }
    }
    try {
      rmSync(this.#dir, { recursive: true, force: true, maxRetries: 3 });
    } catch {
      // best effort at exit
    }
    this.#guard.release();
    live.delete(this);
  }
}

/** Stops every group of `kind` ('EtcdCluster', 'ZookeeperEnsemble') started in this process and not yet stopped, those still starting included. */
export async function stopAllOf(kind: string): Promise<void> {
  const starting = [...pending].filter((entry) => entry.kind === kind);
  for (const entry of starting) entry.stopRequested = true;
  await Promise.all([...[...live].filter((g) => g.kind === kind).map((g) => g.stop()), ...starting.map((entry) => entry.done)]);
}

function killAllSync(): void {
  for (const group of [...live]) group.killSync();
}

/** Whether any of `ports` cannot be bound on the loopback address now. */
async function anyTaken(ports: readonly number[]): Promise<boolean> {
  for (const port of ports) {
    const taken = await new Promise<boolean>((resolve) => {
      const server = createServer();
      server.once('error', () => resolve(true));
      server.listen(port, HOST, () => server.close(() => resolve(false)));
    });
    if (taken) return true;
  }
  return false;
}
