/**
 * A real 3-member etcd cluster under the test environment's control: the
 * members listen on free loopback ports (client and peer) with their data in
 * one private (0700) temporary directory; each can be killed (SIGKILL) and
 * restarted on its data, paused (SIGSTOP) and resumed. Clients reach the
 * members through TCP proxies made per link (`link(member)`), which cut
 * (partition) or delay that link alone.
 *
 * Members listen on 127.0.0.1 only, without client authentication: etcd's
 * auth needs TLS or a token flow the lockstep clients would have to carry,
 * and nothing off the machine can connect. A watchdog (watchdog.ts) kills the
 * members and removes the directory should the starting process die, even by
 * SIGKILL; a process 'exit' handler does the same on an ordinary exit.
 *
 * etcd is a Go program: libfaketime does not reach it, so the members run on
 * the machine's real clocks (spec 7.8) and no clock fault is offered.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { EnvironmentError } from './faketime.ts';
import { freeLoopbackPort, onExitKill } from './processes.ts';
import { PeerGate } from './peerGate.ts';
import { TcpProxy } from './proxy.ts';
import { Guard } from './watchdog.ts';

export { EnvironmentError } from './faketime.ts';

export interface EtcdClusterOptions {
  /** Members (odd, 1..7). Default 3. */
  readonly members?: number;
  /** Bound on start-up (spawn to a leader answering), port retries included. Default 30000. */
  readonly startTimeoutMs?: number;
  /** Raft heartbeat and election timeout, ms (etcd's defaults: 100 and 1000). */
  readonly heartbeatMs?: number;
  readonly electionMs?: number;
  /** Where the cluster's temporary directory goes (default: the OS temp dir; /dev/shm spares the disk's fsyncs). */
  readonly parentDir?: string;
  /**
   * Members reach each other through gates of this process (peerGate.ts), so
   * that `partitionMembers` can cut them apart. Off by default: the gates put
   * every raft message through this process's event loop.
   */
  readonly peerGates?: boolean;
}

/** What `status()` reports about one member. */
export interface MemberStatus {
  readonly member: number;
  /** etcd's member id, as a decimal string. */
  readonly id: string;
  /** The id of the member this one follows as leader ('0' when it knows none). */
  readonly leader: string;
  readonly revision: bigint;
}

const HOST = '127.0.0.1';
const DEFAULT_START_TIMEOUT_MS = 30_000;
const PROBE_TIMEOUT_MS = 500;
const POLL_MS = 50;
const OUTPUT_RING_BYTES = 16 * 1024;
const INSTALL_ETCD = 'apt-get update && apt-get install -y --no-install-recommends etcd-server';

/** How a start-up ended: ready, a port taken by someone else (try fresh ones), or failed. */
type Startup = { readonly kind: 'ready' } | { readonly kind: 'address-in-use' } | { readonly kind: 'failed'; readonly reason: string };
const READY: Startup = { kind: 'ready' };

/** Clusters started and not yet stopped. */
const live = new Set<EtcdCluster>();

class Member {
  child: ChildProcess | null = null;
  exited: Promise<void> = Promise.resolve();
  pid = -1;
  paused = false;
  output = '';
  spawnError: NodeJS.ErrnoException | null = null;

  constructor(
    readonly index: number,
    readonly name: string,
    readonly dataDir: string,
    public clientPort: number,
    public peerPort: number,
  ) {}

  get running(): boolean {
    const c = this.child;
    return c !== null && c.pid !== undefined && c.exitCode === null && c.signalCode === null;
  }

  get clientUrl(): string {
    return `http://${HOST}:${this.clientPort}`;
  }

  get peerUrl(): string {
    return `http://${HOST}:${this.peerPort}`;
  }

  /** The gate in front of the peer port, when the cluster has them. */
  gate: PeerGate | null = null;

  /** The peer URL the other members dial: the gate's, or the member's own. */
  get advertisedPeerUrl(): string {
    return this.gate === null ? this.peerUrl : `http://${HOST}:${this.gate.port}`;
  }
}

export class EtcdCluster {
  readonly host = HOST;
  readonly startTimeoutMs: number;
  readonly #members: Member[];
  readonly #dir: string;
  readonly #token = `lockcheck-${randomBytes(8).toString('hex')}`;
  readonly #heartbeatMs: number;
  readonly #electionMs: number;
  readonly #links = new Set<TcpProxy>();
  readonly #guard = new Guard();
  readonly #peerGates: boolean;
  #stopping: Promise<void> | null = null;

  private constructor(dir: string, count: number, options: EtcdClusterOptions) {
    this.#dir = dir;
    this.startTimeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
    this.#heartbeatMs = options.heartbeatMs ?? 100;
    this.#electionMs = options.electionMs ?? 1000;
    this.#peerGates = options.peerGates ?? false;
    this.#members = Array.from({ length: count }, (_, i) => new Member(i, `m${i}`, join(dir, `m${i}`), 0, 0));
    this.#guard.set({ processes: [], dirs: [dir] });
  }

  /** Starts every member and resolves once the cluster has a leader that serves reads. */
  static async start(options: EtcdClusterOptions = {}): Promise<EtcdCluster> {
    const count = options.members ?? 3;
    if (!Number.isInteger(count) || count < 1 || count > 7 || count % 2 === 0) throw new RangeError(`members must be odd, 1..7, got ${String(count)}`);
    const timeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new RangeError(`startTimeoutMs must be positive, got ${String(timeoutMs)}`);
    onExitKill(killAllSync);
    // mkdtemp makes the directory 0700: the members' data and logs are the invoking user's alone.
    const dir = await mkdtemp(join(options.parentDir ?? tmpdir(), 'lockcheck-etcd-'));
    const cluster = new EtcdCluster(dir, count, options);
    live.add(cluster);
    const deadline = Date.now() + timeoutMs;
    try {
      // Free ports race with every other process: when a member cannot bind, start over on fresh ones.
      for (;;) {
        for (const m of cluster.#members) {
          m.clientPort = await freeLoopbackPort();
          m.peerPort = await freeLoopbackPort();
        }
        if (new Set(cluster.#members.flatMap((m) => [m.clientPort, m.peerPort])).size < 2 * count) continue;
        await cluster.#openGates();
        for (const m of cluster.#members) cluster.#spawn(m);
        const result = await cluster.#waitReady(deadline);
        if (result.kind === 'ready') return cluster;
        await Promise.all(cluster.#members.map((m) => cluster.#kill(m)));
        await rm(dir, { recursive: true, force: true });
        if (result.kind === 'failed') throw cluster.#startError(result.reason);
        if (Date.now() >= deadline) throw cluster.#startError('no free ports could be bound');
      }
    } catch (error) {
      await cluster.stop();
      throw error;
    }
  }

  get size(): number {
    return this.#members.length;
  }

  get dir(): string {
    return this.#dir;
  }

  /** The members' own client URLs (no proxy). */
  get endpoints(): string[] {
    return this.#members.map((m) => m.clientUrl);
  }

  pid(member: number): number {
    return this.#member(member).pid;
  }

  running(member: number): boolean {
    return this.#member(member).running;
  }

  paused(member: number): boolean {
    return this.#member(member).paused;
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
    this.#assertNotStopped('link');
    const m = this.#member(member);
    const proxy = await TcpProxy.start({ host: HOST, port: m.clientPort });
    this.#links.add(proxy);
    return proxy;
  }

  /** Each member's status, or null for one that does not answer within `timeoutMs`. */
  async status(timeoutMs = 1000): Promise<Array<MemberStatus | null>> {
    return Promise.all(this.#members.map((m) => memberStatus(m, timeoutMs)));
  }

  /**
   * The index of the member every answering member names as leader, waiting
   * (up to `timeoutMs`) for a majority to agree on one.
   */
  async leader(timeoutMs = 10_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const statuses = await this.status(PROBE_TIMEOUT_MS);
      const found = majorityLeader(statuses, this.size);
      if (found !== null) return found;
      if (Date.now() >= deadline) throw new EnvironmentError(`EtcdCluster: no leader agreed by a majority within ${timeoutMs} ms`);
      await sleep(POLL_MS);
    }
  }

  /** SIGKILL one member and wait for it to exit; its data stays. No-op when it is not running. */
  async kill(member: number): Promise<void> {
    this.#assertNotStopped('kill');
    await this.#kill(this.#member(member));
  }

  /** Starts a killed member again on its data and ports (a running one is killed first); resolves when it answers. */
  async restart(member: number): Promise<void> {
    this.#assertNotStopped('restart');
    const m = this.#member(member);
    await this.#kill(m);
    const deadline = Date.now() + this.startTimeoutMs;
    for (;;) {
      this.#spawn(m);
      const result = await this.#waitMember(m, deadline);
      if (result.kind === 'ready') return;
      await this.#kill(m);
      // The port may still be held by the killed process's sockets for a moment.
      if (result.kind === 'failed' || Date.now() >= deadline) throw this.#startError(`member ${m.name} did not come back: ${result.kind === 'failed' ? result.reason : 'its ports stayed in use'}`);
      await sleep(100);
    }
  }

  /** Kills every member at once (a whole-cluster crash), then starts them all again and waits for a leader. */
  async crashAll(): Promise<void> {
    this.#assertNotStopped('crash');
    await Promise.all(this.#members.map((m) => this.#kill(m)));
  }

  async restartAll(): Promise<void> {
    this.#assertNotStopped('restart');
    await Promise.all(this.#members.map((m) => this.#kill(m)));
    const deadline = Date.now() + this.startTimeoutMs;
    for (const m of this.#members) this.#spawn(m);
    const result = await this.#waitReady(deadline);
    if (result.kind !== 'ready') throw this.#startError(`the cluster did not come back: ${result.kind === 'failed' ? result.reason : 'its ports were in use'}`);
  }

  /**
   * Cuts the members in `side` from the others, both ways (every peer
   * connection between the two sides is closed, and new ones are closed at once),
   * replacing any earlier cut; clients still reach every member. Needs
   * `peerGates`.
   */
  partitionMembers(side: readonly number[]): void {
    this.#assertNotStopped('partition');
    if (!this.#peerGates) throw new Error('EtcdCluster: partitionMembers needs a cluster started with peerGates');
    const inside = new Set(side.map((m) => this.#member(m).index));
    for (const m of this.#members) m.gate!.setCut(this.#members.filter((x) => inside.has(x.index) !== inside.has(m.index)).map((x) => x.index));
  }

  /** Ends the member partition: every member reaches every other again. */
  healMembers(): void {
    for (const m of this.#members) m.gate?.setCut([]);
  }

  /** SIGSTOP: the member keeps its sockets open but neither answers nor takes part in raft. */
  pause(member: number): void {
    this.#signal(this.#member(member), 'SIGSTOP', 'pause');
    this.#member(member).paused = true;
  }

  /** SIGCONT. */
  resume(member: number): void {
    this.#signal(this.#member(member), 'SIGCONT', 'resume');
    this.#member(member).paused = false;
  }

  /** Kills every member, closes every link, removes the directory. Idempotent. */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      try {
        await Promise.all([...this.#links].map((p) => p.close()));
        this.#links.clear();
        await Promise.all(this.#members.map((m) => this.#kill(m)));
        await this.#closeGates();
      } finally {
        await rm(this.#dir, { recursive: true, force: true, maxRetries: 3 });
        this.#guard.release();
        live.delete(this);
      }
    })();
    return this.#stopping;
  }

  /** The end of each member's output, for error messages. */
  logTail(): string {
    return this.#members.map((m) => `--- ${m.name} ---\n${m.output.slice(-2048)}`).join('\n');
  }

  #member(member: number): Member {
    const m = this.#members[member];
    if (m === undefined) throw new RangeError(`EtcdCluster: no member ${String(member)} (0..${this.#members.length - 1})`);
    return m;
  }

  #args(m: Member): string[] {
    return [
      '--name', m.name,
      '--data-dir', m.dataDir,
      '--listen-client-urls', m.clientUrl,
      '--advertise-client-urls', m.clientUrl,
      '--listen-peer-urls', m.peerUrl,
      '--initial-advertise-peer-urls', m.advertisedPeerUrl,
      '--initial-cluster', this.#members.map((x) => `${x.name}=${x.advertisedPeerUrl}`).join(','),
      '--initial-cluster-state', 'new',
      '--initial-cluster-token', this.#token,
      '--heartbeat-interval', String(this.#heartbeatMs),
      '--election-timeout', String(this.#electionMs),
      '--logger', 'zap',
      '--log-outputs', 'stderr',
      '--log-level', 'warn',
    ];
  }

  #spawn(m: Member): void {
    const env: NodeJS.ProcessEnv = {};
    // An inherited ETCD_* variable would override a flag (etcd refuses both); LD_PRELOAD has no business here.
    for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('ETCD') && key !== 'LD_PRELOAD' && !key.startsWith('FAKETIME')) env[key] = value;
    const child = spawn('etcd', this.#args(m), { env, stdio: ['ignore', 'pipe', 'pipe'] });
    m.child = child;
    m.paused = false;
    m.spawnError = null;
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
    // A forgotten cluster must not keep the test process alive: the exit handler and the watchdog kill it.
    child.unref();
    (child.stdout as Socket | null)?.unref();
    (child.stderr as Socket | null)?.unref();
    if (child.pid !== undefined) m.pid = child.pid;
    this.#guardNow();
  }

  /** A gate per member in front of its (new) peer port, when the cluster has them. */
  async #openGates(): Promise<void> {
    await this.#closeGates();
    if (!this.#peerGates) return;
    const pids = (): number[] => this.#members.map((x) => (x.running ? x.pid : -1));
    for (const m of this.#members) m.gate = await PeerGate.start(m.peerPort, pids);
  }

  async #closeGates(): Promise<void> {
    await Promise.all(this.#members.flatMap((m) => (m.gate === null ? [] : [m.gate.close()])));
    for (const m of this.#members) m.gate = null;
  }

  #guardNow(): void {
    this.#guard.set({ processes: this.#members.filter((m) => m.running).map((m) => ({ pid: m.pid })), dirs: [this.#dir] });
  }

  async #kill(m: Member): Promise<void> {
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

  /** Polls until a majority names one leader and it serves a status call; a member that exits stops the wait. */
  async #waitReady(deadline: number): Promise<Startup> {
    for (;;) {
      for (const m of this.#members) {
        const failed = this.#exitReason(m);
        if (failed !== null) return failed;
      }
      const statuses = await this.status(PROBE_TIMEOUT_MS);
      if (majorityLeader(statuses, this.size) !== null) {
        this.#guardNow();
        return READY;
      }
      if (Date.now() >= deadline) return { kind: 'failed', reason: `no leader within ${this.startTimeoutMs} ms` };
      await sleep(POLL_MS);
    }
  }

  async #waitMember(m: Member, deadline: number): Promise<Startup> {
    for (;;) {
      const failed = this.#exitReason(m);
      if (failed !== null) return failed;
      if ((await memberStatus(m, PROBE_TIMEOUT_MS)) !== null) {
        this.#guardNow();
        return READY;
      }
      if (Date.now() >= deadline) return { kind: 'failed', reason: `no answer within ${this.startTimeoutMs} ms` };
      await sleep(POLL_MS);
    }
  }

  /** Why a member is no longer running (null while it runs). */
  #exitReason(m: Member): Startup | null {
    if (m.running) return null;
    if (m.spawnError?.code === 'ENOENT') throw new EnvironmentError('etcd is not installed (not found on PATH)', INSTALL_ETCD);
    if (/address already in use/i.test(m.output)) return { kind: 'address-in-use' };
    return { kind: 'failed', reason: `member ${m.name} exited during start-up${m.spawnError ? ` (${m.spawnError.message})` : ''}` };
  }

  #startError(reason: string): EnvironmentError {
    return new EnvironmentError(`EtcdCluster (dir ${this.#dir}) failed to start: ${reason}\n${this.logTail()}`);
  }

  #signal(m: Member, signal: NodeJS.Signals, what: string): void {
    this.#assertNotStopped(what);
    if (!m.running) throw new Error(`EtcdCluster: cannot ${what} member ${m.name}, it is not running`);
    m.child!.kill(signal);
  }

  #assertNotStopped(what: string): void {
    if (this.#stopping !== null) throw new Error(`EtcdCluster: cannot ${what} a stopped cluster`);
  }

  /** Synchronous last-resort cleanup for the exit handler. */
  killSync(): void {
    for (const proxy of this.#links) proxy.destroyNow();
    for (const m of this.#members) m.gate?.destroyNow();
    for (const m of this.#members) {
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

/** Stops every cluster started in this process and not yet stopped. */
export async function stopAllEtcdClusters(): Promise<void> {
  await Promise.all([...live].map((cluster) => cluster.stop()));
}

function killAllSync(): void {
  for (const cluster of [...live]) cluster.killSync();
}

/** One member's status through etcd's JSON gateway (POST /v3/maintenance/status), bounded by `timeoutMs`. */
async function memberStatus(m: Member, timeoutMs: number): Promise<MemberStatus | null> {
  if (!m.running || m.paused) return null;
  try {
    const response = await fetch(`${m.clientUrl}/v3/maintenance/status`, { method: 'POST', body: '{}', signal: AbortSignal.timeout(timeoutMs) });
    if (!response.ok) return null;
    const body = (await response.json()) as { header?: { member_id?: string; revision?: string }; leader?: string };
    const id = body.header?.member_id;
    if (id === undefined) return null;
    return { member: m.index, id, leader: body.leader ?? '0', revision: BigInt(body.header?.revision ?? '0') };
  } catch {
    return null;
  }
}

/** The member a majority of the cluster names as leader (and that answers itself), or null. */
function majorityLeader(statuses: ReadonlyArray<MemberStatus | null>, size: number): number | null {
  const votes = new Map<string, number>();
  for (const s of statuses) if (s !== null && s.leader !== '0') votes.set(s.leader, (votes.get(s.leader) ?? 0) + 1);
  for (const [leader, count] of votes) {
    if (count <= size / 2) continue;
    const own = statuses.find((s) => s !== null && s.id === leader);
    if (own !== undefined && own !== null) return own.member;
  }
  return null;
}
