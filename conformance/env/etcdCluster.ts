/**
 * A real 3-member etcd cluster under the test environment's control: the
 * members listen on free loopback ports (client and peer) with their data in
 * one private (0700) temporary directory; each can be killed (SIGKILL) and
 * restarted on its data, paused (SIGSTOP) and resumed. Clients reach the
 * members through TCP proxies made per link (`link(member)`), which cut
 * (partition) or delay that link alone. The bookkeeping of members is
 * consensusGroup.ts's, shared with the ZooKeeper ensemble.
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
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConsensusGroup, GroupMember, HOST, type MemberCommand, stopAllOf } from './consensusGroup.ts';
import { EnvironmentError } from './faketime.ts';

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

const DEFAULT_START_TIMEOUT_MS = 30_000;
const INSTALL_ETCD = 'apt-get update && apt-get install -y --no-install-recommends etcd-server';

class Member extends GroupMember {
  peerPort = 0;

  constructor(
    index: number,
    readonly name: string,
    readonly dataDir: string,
  ) {
    super(index, `member ${name}`);
  }

  get clientUrl(): string {
    return `http://${HOST}:${this.clientPort}`;
  }

  get peerUrl(): string {
    return `http://${HOST}:${this.peerPort}`;
  }

}

export class EtcdCluster extends ConsensusGroup<Member, MemberStatus> {
  readonly #token = `lockcheck-${randomBytes(8).toString('hex')}`;
  readonly #heartbeatMs: number;
  readonly #electionMs: number;
  protected readonly addressInUse = /address already in use/i;
  protected readonly leaderWanted = 'leader agreed by a majority';

  private constructor(dir: string, count: number, options: EtcdClusterOptions) {
    super('EtcdCluster', 'cluster', dir, Array.from({ length: count }, (_, i) => new Member(i, `m${i}`, join(dir, `m${i}`))), options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS, options.peerGates ?? false);
    this.#heartbeatMs = options.heartbeatMs ?? 100;
    this.#electionMs = options.electionMs ?? 1000;
  }

  /** Starts every member and resolves once the cluster has a leader that serves reads. */
  static async start(options: EtcdClusterOptions = {}): Promise<EtcdCluster> {
    const count = options.members ?? 3;
    if (!Number.isInteger(count) || count < 1 || count > 7 || count % 2 === 0) throw new RangeError(`members must be odd, 1..7, got ${String(count)}`);
    const timeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new RangeError(`startTimeoutMs must be positive, got ${String(timeoutMs)}`);
    // mkdtemp makes the directory 0700: the members' data and logs are the invoking user's alone.
    const dir = await mkdtemp(join(options.parentDir ?? tmpdir(), 'lockcheck-etcd-'));
    const cluster = new EtcdCluster(dir, count, options);
    await cluster.boot();
    return cluster;
  }

  /** The members' own client URLs (no proxy). */
  get endpoints(): string[] {
    return this.members.map((m) => m.clientUrl);
  }

  /**
   * The index of the member every answering member names as leader, waiting
   * (up to `timeoutMs`) for a majority to agree on one.
   */
  override leader(timeoutMs = 10_000): Promise<number> {
    return super.leader(timeoutMs);
  }

  /** Kills every member at once (a whole-cluster crash); restartAll() starts them again. */
  async crashAll(): Promise<void> {
    this.assertNotStopped('crash');
    await this.killAll();
  }

  /** Starts every member again (a running one is killed first) and waits for a leader. */
  async restartAll(): Promise<void> {
    this.assertNotStopped('restart');
    await this.respawnAll('the cluster');
  }

  protected async prepareStart(): Promise<void> {
    for (;;) {
      for (const m of this.members) {
        m.clientPort = await this.claimedPort();
        m.peerPort = await this.claimedPort();
      }
      if (new Set(this.members.flatMap((m) => [m.clientPort, m.peerPort])).size === 2 * this.size) break;
    }
  }

  protected peerPorts(m: Member): readonly number[] {
    return [m.peerPort];
  }

  /** The peer URL the other members dial: its gate's, or the member's own. */
  #advertisedPeerUrl(m: Member): string {
    return `http://${HOST}:${this.dialedPort(m, 0)}`;
  }

  /** A failed start leaves data of a cluster that never was: the next try starts on none. */
  protected override async afterFailedStart(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }

  protected command(m: Member): MemberCommand {
    return {
      file: 'etcd',
      args: [
        '--name', m.name,
        '--data-dir', m.dataDir,
        '--listen-client-urls', m.clientUrl,
        '--advertise-client-urls', m.clientUrl,
        '--listen-peer-urls', m.peerUrl,
        '--initial-advertise-peer-urls', this.#advertisedPeerUrl(m),
        '--initial-cluster', this.members.map((x) => `${x.name}=${this.#advertisedPeerUrl(x)}`).join(','),
        '--initial-cluster-state', 'new',
        '--initial-cluster-token', this.#token,
        '--heartbeat-interval', String(this.#heartbeatMs),
        '--election-timeout', String(this.#electionMs),
        '--logger', 'zap',
        '--log-outputs', 'stderr',
        '--log-level', 'warn',
      ],
      // An inherited ETCD_* variable would override a flag (etcd refuses both); LD_PRELOAD has no business here.
      dropEnv: /^(ETCD|LD_PRELOAD$|FAKETIME)/,
    };
  }

  protected notInstalled(m: Member): EnvironmentError | null {
    return m.spawnError?.code === 'ENOENT' ? new EnvironmentError('etcd is not installed (not found on PATH)', INSTALL_ETCD) : null;
  }

  /** One member's status through etcd's JSON gateway (POST /v3/maintenance/status), bounded by `timeoutMs`. */
  protected async memberStatus(m: Member, timeoutMs: number): Promise<MemberStatus | null> {
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
  protected leaderOf(statuses: ReadonlyArray<MemberStatus | null>): number | null {
    const votes = new Map<string, number>();
    for (const s of statuses) if (s !== null && s.leader !== '0') votes.set(s.leader, (votes.get(s.leader) ?? 0) + 1);
    for (const [leader, count] of votes) {
      if (count <= this.size / 2) continue;
      const own = statuses.find((s) => s !== null && s.id === leader);
      if (own !== undefined && own !== null) return own.member;
    }
    return null;
  }
}

/** Stops every cluster started in this process and not yet stopped. */
export async function stopAllEtcdClusters(): Promise<void> {
  await stopAllOf((g) => g instanceof EtcdCluster);
}
