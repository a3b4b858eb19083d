/**
 * A real ZooKeeper ensemble (Debian's `zookeeper` 3.8, on the installed
 * Java) under the test environment's control: 3 members (or 1) on free
 * loopback ports (client, quorum, election) with their data in one private
 * (0700) temporary directory; each can be killed (SIGKILL) and restarted on
 * its data, paused (SIGSTOP) and resumed. Clients reach the members through
 * TCP proxies made per link (`link(member)`), which cut or delay that link
 * alone.
 *
 * The JVMs run small and start fast: a 96 MB heap, the serial collector,
 * only the first JIT tier, no perf data, no admin server, no JMX. tickTime is
 * 100 ms (the session expiry granularity), and the session timeouts a client
 * may ask for span 100 ms to 60 s. Writes are not fsynced (forceSync=no):
 * the data sits on /dev/shm or a temp dir that dies with the ensemble, and no
 * test asks a member to survive a machine crash.
 *
 * Members listen on 127.0.0.1 only and only the four-letter words `srvr` and
 * `ruok` answer. A watchdog (watchdog.ts) kills the members and removes the
 * directory should the starting process die, even by SIGKILL; a process
 * 'exit' handler does the same on an ordinary exit. ZooKeeper expires
 * sessions on the leader's monotonic clock (System.nanoTime); libfaketime
 * would reach a JVM, but no fault here steps it (spec 7.10).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { EnvironmentError } from './faketime.ts';
import { freeLoopbackPort, onExitKill } from './processes.ts';
import { TcpProxy } from './proxy.ts';
import { Guard } from './watchdog.ts';

export { EnvironmentError } from './faketime.ts';

export interface ZookeeperEnsembleOptions {
  /** Members (odd, 1..7). Default 3. */
  readonly members?: number;
  /** Bound on start-up (spawn to a leader with a quorum), port retries included. Default 60000: JVMs start slowly on a loaded machine. */
  readonly startTimeoutMs?: number;
  /** Where the ensemble's temporary directory goes (default: the OS temp dir). */
  readonly parentDir?: string;
}

/** What `status()` reports about one member: its role and the last zxid it applied. */
export interface ZookeeperMemberStatus {
  readonly member: number;
  readonly mode: 'leader' | 'follower' | 'standalone';
  readonly zxid: bigint;
}

const HOST = '127.0.0.1';
export const ZK_JAR = '/usr/share/java/zookeeper.jar';
const DEFAULT_START_TIMEOUT_MS = 60_000;
const PROBE_TIMEOUT_MS = 500;
const POLL_MS = 100;
const OUTPUT_RING_BYTES = 16 * 1024;
/** ZooKeeper's tick, ms: sessions expire on tick boundaries (spec 7.10). */
export const ZK_TICK_MS = 100;
const INSTALL_ZOOKEEPER = 'apt-get update && apt-get install -y --no-install-recommends zookeeper';
const JVM_FLAGS = ['-Xmx96m', '-Xss512k', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1', '-XX:-UsePerfData', '-Djava.awt.headless=true', '-Dzookeeper.jmx.log4j.disable=true'];

type Startup = { readonly kind: 'ready' } | { readonly kind: 'address-in-use' } | { readonly kind: 'failed'; readonly reason: string };
const READY: Startup = { kind: 'ready' };

const live = new Set<ZookeeperEnsemble>();

class Member {
  child: ChildProcess | null = null;
  exited: Promise<void> = Promise.resolve();
  pid = -1;
  paused = false;
  output = '';
  spawnError: NodeJS.ErrnoException | null = null;
  clientPort = 0;
  quorumPort = 0;
  electionPort = 0;

  constructor(
    readonly index: number,
    readonly dir: string,
  ) {}

  get running(): boolean {
    const c = this.child;
    return c !== null && c.pid !== undefined && c.exitCode === null && c.signalCode === null;
  }

  get config(): string {
    return join(this.dir, 'zoo.cfg');
  }
}

export class ZookeeperEnsemble {
  readonly host = HOST;
  readonly startTimeoutMs: number;
  readonly #members: Member[];
  readonly #dir: string;
  readonly #links = new Set<TcpProxy>();
  readonly #guard = new Guard();
  #stopping: Promise<void> | null = null;

  private constructor(dir: string, count: number, options: ZookeeperEnsembleOptions) {
    this.#dir = dir;
    this.startTimeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
    this.#members = Array.from({ length: count }, (_, i) => new Member(i, join(dir, `m${i + 1}`)));
    this.#guard.set({ processes: [], dirs: [dir] });
  }

  /** Starts every member and resolves once a leader serves a quorum of followers (or the one member serves). */
  static async start(options: ZookeeperEnsembleOptions = {}): Promise<ZookeeperEnsemble> {
    const count = options.members ?? 3;
    if (!Number.isInteger(count) || count < 1 || count > 7 || count % 2 === 0) throw new RangeError(`members must be odd, 1..7, got ${String(count)}`);
    const timeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new RangeError(`startTimeoutMs must be positive, got ${String(timeoutMs)}`);
    onExitKill(killAllSync);
    const dir = await mkdtemp(join(options.parentDir ?? tmpdir(), 'lockcheck-zk-'));
    const ensemble = new ZookeeperEnsemble(dir, count, options);
    live.add(ensemble);
    const deadline = Date.now() + timeoutMs;
    try {
      for (;;) {
        for (const m of ensemble.#members) {
          m.clientPort = await freeLoopbackPort();
          m.quorumPort = await freeLoopbackPort();
          m.electionPort = await freeLoopbackPort();
        }
        if (new Set(ensemble.#members.flatMap((m) => [m.clientPort, m.quorumPort, m.electionPort])).size < 3 * count) continue;
        await ensemble.#writeConfigs();
        for (const m of ensemble.#members) ensemble.#spawn(m);
        const result = await ensemble.#waitReady(deadline);
        if (result.kind === 'ready') return ensemble;
        await Promise.all(ensemble.#members.map((m) => ensemble.#kill(m)));
        if (result.kind === 'failed') throw ensemble.#startError(result.reason);
        if (Date.now() >= deadline) throw ensemble.#startError('no free ports could be bound');
      }
    } catch (error) {
      await ensemble.stop();
      throw error;
    }
  }

  get size(): number {
    return this.#members.length;
  }

  get dir(): string {
    return this.#dir;
  }

  /** The members' own client addresses, `127.0.0.1:port` (no proxy). */
  get endpoints(): string[] {
    return this.#members.map((m) => `${HOST}:${m.clientPort}`);
  }

  /** A connection string naming every member. */
  get connectString(): string {
    return this.endpoints.join(',');
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

  /** A new TCP proxy to `member`'s client port, for one client's link. Closed by stop(). */
  async link(member: number): Promise<TcpProxy> {
    this.#assertNotStopped('link');
    const m = this.#member(member);
    const proxy = await TcpProxy.start({ host: HOST, port: m.clientPort });
    this.#links.add(proxy);
    return proxy;
  }

  /** Each member's status (`srvr`), or null for one that does not answer within `timeoutMs`. */
  async status(timeoutMs = 1000): Promise<Array<ZookeeperMemberStatus | null>> {
    return Promise.all(this.#members.map((m) => memberStatus(m, timeoutMs)));
  }

  /** The index of the member that leads with a quorum behind it, waiting up to `timeoutMs`. */
  async leader(timeoutMs = 20_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = servingLeader(await this.status(PROBE_TIMEOUT_MS), this.size);
      if (found !== null) return found;
      if (Date.now() >= deadline) throw new EnvironmentError(`ZookeeperEnsemble: no leader with a quorum within ${timeoutMs} ms`);
      await sleep(POLL_MS);
    }
  }

  /** SIGKILL one member and wait for it to exit; its data stays. */
  async kill(member: number): Promise<void> {
    this.#assertNotStopped('kill');
    await this.#kill(this.#member(member));
  }

  /** Starts a killed member again on its data and ports (a running one is killed first); resolves when it serves. */
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
      if (result.kind === 'failed' || Date.now() >= deadline) throw this.#startError(`member ${m.index + 1} did not come back: ${result.kind === 'failed' ? result.reason : 'its ports stayed in use'}`);
      await sleep(100);
    }
  }

  /** SIGSTOP: the member keeps its sockets open but neither answers nor takes part in the quorum. */
  pause(member: number): void {
    this.#signal(this.#member(member), 'SIGSTOP', 'pause');
    this.#member(member).paused = true;
  }

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
      } finally {
        await rm(this.#dir, { recursive: true, force: true, maxRetries: 3 });
        this.#guard.release();
        live.delete(this);
      }
    })();
    return this.#stopping;
  }

  logTail(): string {
    return this.#members.map((m) => `--- member ${m.index + 1} ---\n${m.output.slice(-2048)}`).join('\n');
  }

  #member(member: number): Member {
    const m = this.#members[member];
    if (m === undefined) throw new RangeError(`ZookeeperEnsemble: no member ${String(member)} (0..${this.#members.length - 1})`);
    return m;
  }

  async #writeConfigs(): Promise<void> {
    const servers = this.#members.length === 1 ? [] : this.#members.map((x) => `server.${x.index + 1}=${HOST}:${x.quorumPort}:${x.electionPort}`);
    for (const m of this.#members) {
      await mkdir(m.dir, { recursive: true, mode: 0o700 });
      await writeFile(join(m.dir, 'myid'), `${m.index + 1}\n`);
      const lines = [
        `tickTime=${ZK_TICK_MS}`,
        // In ticks: a follower has 5 s to sync at start, 2 s to answer the leader after.
        'initLimit=50',
        'syncLimit=20',
        `dataDir=${m.dir}`,
        `clientPort=${m.clientPort}`,
        `clientPortAddress=${HOST}`,
        'admin.enableServer=false',
        '4lw.commands.whitelist=srvr,ruok',
        'minSessionTimeout=100',
        'maxSessionTimeout=60000',
        'forceSync=no',
        'preAllocSize=1024',
        'snapCount=100000',
        'maxClientCnxns=0',
        ...servers,
      ];
      await writeFile(m.config, `${lines.join('\n')}\n`, { mode: 0o600 });
    }
  }

  #spawn(m: Member): void {
    const env: NodeJS.ProcessEnv = {};
    // JVM and ZooKeeper variables of the caller have no business here, nor libfaketime.
    for (const [key, value] of Object.entries(process.env)) if (!/^(JAVA|JDK|_JAVA|ZOO|CLASSPATH|JVMFLAGS|LD_PRELOAD|FAKETIME)/.test(key)) env[key] = value;
    const child = spawn('java', [...JVM_FLAGS, `-Dzookeeper.log.dir=${m.dir}`, '-cp', ZK_JAR, 'org.apache.zookeeper.server.quorum.QuorumPeerMain', m.config], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    m.child = child;
    m.paused = false;
    m.spawnError = null;
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
    child.unref();
    (child.stdout as Socket | null)?.unref();
    (child.stderr as Socket | null)?.unref();
    if (child.pid !== undefined) m.pid = child.pid;
    this.#guardNow();
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

  async #waitReady(deadline: number): Promise<Startup> {
    for (;;) {
      for (const m of this.#members) {
        const failed = this.#exitReason(m);
        if (failed !== null) return failed;
      }
      if (servingLeader(await this.status(PROBE_TIMEOUT_MS), this.size) !== null) {
        this.#guardNow();
        return READY;
      }
      if (Date.now() >= deadline) return { kind: 'failed', reason: `no leader with a quorum within ${this.startTimeoutMs} ms` };
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

  #exitReason(m: Member): Startup | null {
    if (m.running) return null;
    if (m.spawnError?.code === 'ENOENT') throw new EnvironmentError('java is not installed (not found on PATH)', INSTALL_ZOOKEEPER);
    if (/Unable to access jarfile|ClassNotFoundException|Could not find or load main class/.test(m.output)) throw new EnvironmentError(`ZooKeeper is not installed (${ZK_JAR})`, INSTALL_ZOOKEEPER);
    if (/Address already in use|BindException/i.test(m.output)) return { kind: 'address-in-use' };
    return { kind: 'failed', reason: `member ${m.index + 1} exited during start-up${m.spawnError ? ` (${m.spawnError.message})` : ''}` };
  }

  #startError(reason: string): EnvironmentError {
    return new EnvironmentError(`ZookeeperEnsemble (dir ${this.#dir}) failed to start: ${reason}\n${this.logTail()}`);
  }

  #signal(m: Member, signal: NodeJS.Signals, what: string): void {
    this.#assertNotStopped(what);
    if (!m.running) throw new Error(`ZookeeperEnsemble: cannot ${what} member ${m.index + 1}, it is not running`);
    m.child!.kill(signal);
  }

  #assertNotStopped(what: string): void {
    if (this.#stopping !== null) throw new Error(`ZookeeperEnsemble: cannot ${what} a stopped ensemble`);
  }

  /** Synchronous last-resort cleanup for the exit handler. */
  killSync(): void {
    for (const proxy of this.#links) proxy.destroyNow();
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

export async function stopAllZookeeperEnsembles(): Promise<void> {
  await Promise.all([...live].map((e) => e.stop()));
}

function killAllSync(): void {
  for (const e of [...live]) e.killSync();
}

/** One member's `srvr` answer, bounded by `timeoutMs`; null when it does not answer or is not serving. */
async function memberStatus(m: Member, timeoutMs: number): Promise<ZookeeperMemberStatus | null> {
  if (!m.running || m.paused) return null;
  const text = await fourLetterWord(m.clientPort, 'srvr', timeoutMs);
  if (text === null) return null;
  const mode = /^Mode: (leader|follower|standalone)$/m.exec(text)?.[1];
  const zxid = /^Zxid: (0x[0-9a-f]+)$/m.exec(text)?.[1];
  if (mode === undefined || zxid === undefined) return null;
  return { member: m.index, mode: mode as ZookeeperMemberStatus['mode'], zxid: BigInt(zxid) };
}

/** Sends a four-letter word and reads the reply until the member closes the connection. */
export function fourLetterWord(port: number, word: string, timeoutMs: number): Promise<string | null> {
  return new Promise((resolve) => {
    const socket = connect({ host: HOST, port });
    let text = '';
    const done = (value: string | null): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(value);
    };
    const timer = setTimeout(() => done(null), timeoutMs);
    socket.on('connect', () => socket.write(word));
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8');
    });
    socket.on('end', () => done(text));
    socket.on('error', () => done(null));
  });
}

/** The leader when it and a majority of the members (itself included) serve; the one member of a standalone ensemble. */
function servingLeader(statuses: ReadonlyArray<ZookeeperMemberStatus | null>, size: number): number | null {
  const serving = statuses.filter((s): s is ZookeeperMemberStatus => s !== null);
  const standalone = serving.find((s) => s.mode === 'standalone');
  if (standalone !== undefined) return standalone.member;
  const leader = serving.find((s) => s.mode === 'leader');
  return leader !== undefined && serving.length > size / 2 ? leader.member : null;
}
