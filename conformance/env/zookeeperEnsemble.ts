/**
 * A real ZooKeeper ensemble (Debian's `zookeeper` 3.8, on the installed
 * Java) under the test environment's control: 3 members (or 1) on free
 * loopback ports (client, quorum, election) with their data in one private
 * (0700) temporary directory; each can be killed (SIGKILL) and restarted on
 * its data, paused (SIGSTOP) and resumed. Clients reach the members through
 * TCP proxies made per link (`link(member)`), which cut or delay that link
 * alone. The bookkeeping of members is consensusGroup.ts's, shared with the
 * etcd cluster.
 *
 * The JVMs run small and start fast: a 96 MB heap, the serial collector,
 * only the first JIT tier, no perf data, no admin server, no JMX. tickTime is
 * 100 ms (the session expiry granularity), and the session timeouts a client
 * may ask for span 100 ms to 60 s. Writes are not fsynced (forceSync=no):
 * the data sits on /dev/shm or a temp dir that dies with the ensemble, and no
 * test asks a member to survive a machine crash.
 *
 * Members listen on 127.0.0.1 only and only the four-letter words `srvr`,
 * `ruok` and `mntr` (metrics: counts, no data) answer. The ensemble is closed to clients without the run's digest
 * credentials (a password made per run, never printed): right after the
 * first start every znode of ZooKeeper's own gets an ACL for that identity
 * alone (zookeeperLockdown.ts), and what lockcheck's clients create carries
 * it too (zookeeperNode's `auth`, CREATOR_ALL_ACL). node-zookeeper-client
 * speaks neither SASL nor TLS, so clients cannot be refused at the door:
 * another local user can still connect, ask whether a path exists and add
 * load, but changes nothing. The members' quorum and election ports require
 * SASL (DIGEST-MD5, a second per-run password in a 0600 JAAS file): a
 * connection without it is dropped, so no one else can join the quorum or
 * vote. A watchdog (watchdog.ts) kills the members and removes the
 * directory should the starting process die, even by SIGKILL; a process
 * 'exit' handler does the same on an ordinary exit. ZooKeeper expires
 * sessions on the leader's monotonic clock (System.nanoTime); libfaketime
 * would reach a JVM, but no fault here steps it (spec 7.10).
 */
import { randomBytes } from 'node:crypto';
import { registerSecret } from './redact.ts';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { javaPropertiesValue } from './configText.ts';
import { builtIn } from './tempDir.ts';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConsensusGroup, GroupMember, HOST, type MemberCommand, startingGroup, stopAllOf } from './consensusGroup.ts';
import { EnvironmentError } from './faketime.ts';
import { lockDown } from './zookeeperLockdown.ts';

export { EnvironmentError } from './faketime.ts';

export interface ZookeeperEnsembleOptions {
  /** Members (odd, 1..7). Default 3. */
  readonly members?: number;
  /**
   * Bound on start-up (spawn to a leader with a quorum), port retries included. Default 60000: JVMs start slowly
   * on a loaded machine. Closing the tree to other clients comes after, bounded on its own by max(5 s, a quarter of
   * this): start() as a whole ends within 1.25 times this, or this plus 5 s.
   */
  readonly startTimeoutMs?: number;
  /** Where the ensemble's temporary directory goes (default: the OS temp dir). */
  readonly parentDir?: string;
  /**
   * Members reach each other's quorum and election ports through gates of
   * this process (peerGate.ts), so that `partitionMembers` can cut them
   * apart: each member's config names its own ports for it to listen on and
   * the gates' ports for the others. Off by default.
   */
  readonly peerGates?: boolean;
}

/** What `status()` reports about one member: its role and the last zxid it applied. */
export interface ZookeeperMemberStatus {
  readonly member: number;
  readonly mode: 'leader' | 'follower' | 'standalone';
  readonly zxid: bigint;
}

export const ZK_JAR = '/usr/share/java/zookeeper.jar';
const DEFAULT_START_TIMEOUT_MS = 60_000;
/** ZooKeeper's tick, ms: sessions expire on tick boundaries (spec 7.10). */
export const ZK_TICK_MS = 100;
const INSTALL_ZOOKEEPER = 'apt-get update && apt-get install -y --no-install-recommends zookeeper';
// IPv4 sockets only: the peer gates find a connection's owner in /proc/net/tcp (a dual-stack JVM socket is in tcp6).
const JVM_FLAGS = ['-Xmx96m', '-Xss512k', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1', '-XX:-UsePerfData', '-Djava.awt.headless=true', '-Dzookeeper.jmx.log4j.disable=true', '-Djava.net.preferIPv4Stack=true'];

class Member extends GroupMember {
  quorumPort = 0;
  electionPort = 0;

  constructor(
    index: number,
    readonly dir: string,
  ) {
    super(index, `member ${index + 1}`);
  }

  get config(): string {
    return join(this.dir, 'zoo.cfg');
  }
}

/** Digest credentials as zookeeperNode's `auth` takes them. */
export type ZookeeperAuth = ReadonlyArray<{ readonly scheme: 'digest'; readonly credentials: string }>;

export class ZookeeperEnsemble extends ConsensusGroup<Member, ZookeeperMemberStatus> {
  /** The run's client identity, `lockcheck:<random>`: the only one the tree lets in. */
  readonly #credentials = `lockcheck:${randomBytes(24).toString('base64url')}`;
  /** The members' password to one another (quorum SASL). */
  readonly #quorumSecret = randomBytes(24).toString('base64url');
  protected readonly addressInUse = /Address already in use|BindException/i;
  protected readonly leaderWanted = 'leader with a quorum';

  private constructor(dir: string, count: number, options: ZookeeperEnsembleOptions) {
    super('ZookeeperEnsemble', 'ensemble', dir, Array.from({ length: count }, (_, i) => new Member(i, join(dir, `m${i + 1}`))), options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS, options.peerGates ?? false);
    // Hidden wherever they are printed (a digest identity is user:password).
    registerSecret(this.#credentials.slice(this.#credentials.indexOf(':') + 1));
    registerSecret(this.#quorumSecret);
  }

  /** Starts every member and resolves once a leader serves a quorum of followers (or the one member serves). */
  static async start(options: ZookeeperEnsembleOptions = {}): Promise<ZookeeperEnsemble> {
    const count = options.members ?? 3;
    if (!Number.isInteger(count) || count < 1 || count > 7 || count % 2 === 0) throw new RangeError(`members must be odd, 1..7, got ${String(count)}`);
    const timeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new RangeError(`startTimeoutMs must be positive, got ${String(timeoutMs)}`);
    const pending = startingGroup('ZookeeperEnsemble');
    let ensemble: ZookeeperEnsemble;
    try {
      ensemble = await builtIn(await mkdtemp(join(options.parentDir ?? tmpdir(), 'lockcheck-zk-')), (dir) => new ZookeeperEnsemble(dir, count, options));
    } catch (error) {
      pending.abandoned();
      throw error;
    }
    // Stopped at once should a stopAllZookeeperEnsembles() have come while the directory was made: boot() then rejects.
    pending.arrived(ensemble);
    await ensemble.boot();
    try {
      await lockDown(ensemble.connectString, ensemble.#credentials, Math.max(5000, ensemble.startTimeoutMs / 4));
      // A stop() as the lockdown ended: the ensemble is gone.
      ensemble.assertNotStopped('start');
    } catch (error) {
      throw await ensemble.failedStart(error);
    }
    return ensemble;
  }

  /** The members' own client addresses, `127.0.0.1:port` (no proxy). */
  get endpoints(): string[] {
    return this.members.map((m) => `${HOST}:${m.clientPort}`);
  }

  /** A connection string naming every member. */
  get connectString(): string {
    return this.endpoints.join(',');
  }

  /** What a client presents to be let into the tree (zookeeperNode's `auth`): secret, never to be printed. */
  get auth(): ZookeeperAuth {
    return [{ scheme: 'digest', credentials: this.#credentials }];
  }

  /** zookeeperNode options for `connectString` (default: every member), credentials included. */
  clientOptions(connectString: string = this.connectString): { readonly connectString: string; readonly auth: ZookeeperAuth } {
    return { connectString, auth: this.auth };
  }

  /** The index of the member that leads with a quorum behind it, waiting up to `timeoutMs`. */
  override leader(timeoutMs = 20_000): Promise<number> {
    return super.leader(timeoutMs);
  }

  protected override get pollMs(): number {
    return 100;
  }

  protected async prepareStart(): Promise<void> {
    for (const m of this.members) {
      m.clientPort = await this.claimedPort();
      m.quorumPort = await this.claimedPort();
      m.electionPort = await this.claimedPort();
    }
  }

  protected peerPorts(m: Member): readonly number[] {
    return [m.quorumPort, m.electionPort];
  }

  /** Each member's config: its own quorum and election ports to listen on, the others' as it dials them (their gates', when there are gates). */
  protected override async writeConfig(): Promise<void> {
    for (const m of this.members) {
      const servers =
        this.members.length === 1
          ? []
          : this.members.map((x) => `server.${x.index + 1}=${HOST}:${x === m ? `${x.quorumPort}:${x.electionPort}` : `${this.dialedPort(x, 0)}:${this.dialedPort(x, 1)}`}`);
      await mkdir(m.dir, { recursive: true, mode: 0o700 });
      await writeAnew(join(m.dir, 'myid'), `${m.index + 1}\n`);
      const lines = [
        `tickTime=${ZK_TICK_MS}`,
        // In ticks: a follower has 5 s to sync at start, 2 s to answer the leader after.
        'initLimit=50',
        'syncLimit=20',
        // Escaped: Properties.load reads a backslash in the path as an escape (the data went to another directory, 0755, left at the end).
        `dataDir=${javaPropertiesValue(m.dir)}`,
        `clientPort=${m.clientPort}`,
        `clientPortAddress=${HOST}`,
        'admin.enableServer=false',
        // mntr: the session count (sessions()), so that a test can tell a session nobody owns (a connect given up on).
        '4lw.commands.whitelist=srvr,ruok,mntr',
        'minSessionTimeout=100',
        'maxSessionTimeout=60000',
        'forceSync=no',
        'preAllocSize=1024',
        'snapCount=100000',
        'maxClientCnxns=0',
        ...(this.members.length === 1 ? [] : QUORUM_SASL),
        ...servers,
      ];
      await writeAnew(m.config, `${lines.join('\n')}\n`);
    }
    if (this.members.length > 1) await writeAnew(this.#jaasFile, jaas(this.#quorumSecret));
  }

  get #jaasFile(): string {
    return join(this.dir, 'jaas.conf');
  }

  protected command(m: Member): MemberCommand {
    return {
      file: 'java',
      args: [...JVM_FLAGS, `-Dzookeeper.log.dir=${m.dir}`, ...(this.members.length === 1 ? [] : [`-Djava.security.auth.login.config=${this.#jaasFile}`]), '-cp', ZK_JAR, 'org.apache.zookeeper.server.quorum.QuorumPeerMain', m.config],
      // JVM and ZooKeeper variables of the caller have no business here, nor libfaketime.
      dropEnv: /^(JAVA|JDK|_JAVA|ZOO|CLASSPATH|JVMFLAGS|LD_PRELOAD|FAKETIME)/,
    };
  }

  protected notInstalled(m: Member): EnvironmentError | null {
    if (m.spawnError?.code === 'ENOENT') return new EnvironmentError('java is not installed (not found on PATH)', INSTALL_ZOOKEEPER);
    if (/Unable to access jarfile|ClassNotFoundException|Could not find or load main class/.test(m.output)) return new EnvironmentError(`ZooKeeper is not installed (${ZK_JAR})`, INSTALL_ZOOKEEPER);
    return null;
  }

  /** One member's `srvr` answer, bounded by `timeoutMs`; null when it does not answer or is not serving. */
  protected async memberStatus(m: Member, timeoutMs: number): Promise<ZookeeperMemberStatus | null> {
    if (!m.running || m.paused) return null;
    const text = await fourLetterWord(m.clientPort, 'srvr', timeoutMs);
    if (text === null) return null;
    const mode = /^Mode: (leader|follower|standalone)$/m.exec(text)?.[1];
    const zxid = /^Zxid: (0x[0-9a-f]+)$/m.exec(text)?.[1];
    if (mode === undefined || zxid === undefined) return null;
    return { member: m.index, mode: mode as ZookeeperMemberStatus['mode'], zxid: BigInt(zxid) };
  }

  /**
   * The sessions one member tracks (mntr's zk_global_sessions: every session
   * of a standalone member, or of the ensemble as its leader sees them), or
   * null when it does not answer within `timeoutMs`.
   */
  async sessions(member: number, timeoutMs = 1000): Promise<number | null> {
    const m = this.member(member);
    if (!m.running || m.paused) return null;
    const text = await fourLetterWord(m.clientPort, 'mntr', timeoutMs);
    const count = text === null ? undefined : /^zk_global_sessions\s+(\d+)$/m.exec(text)?.[1];
    return count === undefined ? null : Number(count);
  }

  /** The leader when it and a majority of the members (itself included) serve; the one member of a standalone ensemble. */
  protected leaderOf(statuses: ReadonlyArray<ZookeeperMemberStatus | null>): number | null {
    const serving = statuses.filter((s): s is ZookeeperMemberStatus => s !== null);
    const standalone = serving.find((s) => s.mode === 'standalone');
    if (standalone !== undefined) return standalone.member;
    const leader = serving.find((s) => s.mode === 'leader');
    return leader !== undefined && serving.length > this.size / 2 ? leader.member : null;
  }
}

/** Members speak to one another only after SASL (DIGEST-MD5), both as leader and as learner. */
const QUORUM_SASL = ['quorum.auth.enableSasl=true', 'quorum.auth.learnerRequireSasl=true', 'quorum.auth.serverRequireSasl=true'];

/** The members' login: each serves as QuorumServer and joins as QuorumLearner with the one per-run password. */
/** A file of the ensemble's private directory made afresh (each start attempt writes its own ports): created, never written through something already there. */
async function writeAnew(path: string, text: string): Promise<void> {
  await rm(path, { force: true });
  await writeFile(path, text, { mode: 0o600, flag: 'wx' });
}

function jaas(secret: string): string {
  const module = 'org.apache.zookeeper.server.auth.DigestLoginModule required';
  return `QuorumServer {\n  ${module}\n  user_lockcheck="${secret}";\n};\nQuorumLearner {\n  ${module}\n  username="lockcheck"\n  password="${secret}";\n};\n`;
}

export async function stopAllZookeeperEnsembles(): Promise<void> {
  await stopAllOf('ZookeeperEnsemble');
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
