/**
 * A real 3-member etcd cluster under the test environment's control: the
 * members listen on free loopback ports (client and peer) with their data in
 * one private (0700) temporary directory; each can be killed (SIGKILL) and
 * restarted on its data, paused (SIGSTOP) and resumed. Clients reach the
 * members through TCP proxies made per link (`link(member)`), which cut
 * (partition) or delay that link alone. The bookkeeping of members is
 * consensusGroup.ts's, shared with the ZooKeeper ensemble.
 *
 * Members listen on 127.0.0.1 only, and only over TLS with a client
 * certificate of the run's own CA (runCa.ts), on the client and on the peer
 * ports alike: another local user cannot send a request (nor a raft message)
 * to a member, nor through the per-link proxies, which carry the handshake
 * through. etcd's password auth alone would not do: on etcd 3.4 a client
 * without a token still raised the NOSPACE alarm, compacted and even disabled
 * auth through the JSON gateway. `clientTls` is what lockcheck's own clients
 * present (etcdClient's `tls`). A watchdog (watchdog.ts) kills the
 * members and removes the directory should the starting process die, even by
 * SIGKILL; a process 'exit' handler does the same on an ordinary exit.
 *
 * etcd is a Go program: libfaketime does not reach it, so the members run on
 * the machine's real clocks (spec 7.8) and no clock fault is offered.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { builtIn } from './tempDir.ts';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConsensusGroup, GroupMember, HOST, type MemberCommand, startingGroup, stopAllOf } from './consensusGroup.ts';
import { EnvironmentError } from './faketime.ts';
import { type ClientTls, makeRunCa, type RunCa } from './runCa.ts';

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
    return `https://${HOST}:${this.clientPort}`;
  }

  get peerUrl(): string {
    return `https://${HOST}:${this.peerPort}`;
  }

}

export class EtcdCluster extends ConsensusGroup<Member, MemberStatus> {
  readonly #token = `lockcheck-${randomBytes(8).toString('hex')}`;
  readonly #heartbeatMs: number;
  readonly #electionMs: number;
  readonly #ca: RunCa;
  protected readonly addressInUse = /address already in use/i;
  protected readonly leaderWanted = 'leader agreed by a majority';

  private constructor(dir: string, ca: RunCa, count: number, options: EtcdClusterOptions) {
    super('EtcdCluster', 'cluster', dir, Array.from({ length: count }, (_, i) => new Member(i, `m${i}`, join(dir, `m${i}`))), options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS, options.peerGates ?? false);
    this.#heartbeatMs = options.heartbeatMs ?? 100;
    this.#electionMs = options.electionMs ?? 1000;
    this.#ca = ca;
  }

  /** Starts every member and resolves once the cluster has a leader that serves reads. */
  static async start(options: EtcdClusterOptions = {}): Promise<EtcdCluster> {
    const count = options.members ?? 3;
    if (!Number.isInteger(count) || count < 1 || count > 7 || count % 2 === 0) throw new RangeError(`members must be odd, 1..7, got ${String(count)}`);
    const timeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new RangeError(`startTimeoutMs must be positive, got ${String(timeoutMs)}`);
    const pending = startingGroup('EtcdCluster');
    let cluster: EtcdCluster;
    try {
      // mkdtemp makes the directory 0700: the members' data and logs are the invoking user's alone.
      cluster = await builtIn(await mkdtemp(join(options.parentDir ?? tmpdir(), 'lockcheck-etcd-')), async (dir) => {
        const tlsDir = join(dir, 'tls');
        await mkdir(tlsDir, { mode: 0o700 });
        return new EtcdCluster(dir, await makeRunCa(tlsDir), count, options);
      });
    } catch (error) {
      pending.abandoned();
      throw error;
    }
    // Stopped at once should a stopAllEtcdClusters() have come while the directory and the CA were made: boot() then rejects.
    pending.arrived(cluster);
    await cluster.boot();
    return cluster;
  }

  /** The members' own client URLs (no proxy). */
  get endpoints(): string[] {
    return this.members.map((m) => m.clientUrl);
  }

  /** The members' own peer URLs (for tests that knock on them). */
  get peerEndpoints(): string[] {
    return this.members.map((m) => m.peerUrl);
  }

  /** What a client presents to be let in (etcdClient's `tls`): secret, never to be printed. */
  get clientTls(): ClientTls {
    return this.#ca.client;
  }

  /** etcdClient options for `hosts` (default: every member's own URL), TLS included. */
  clientOptions(hosts: readonly string[] = this.endpoints): { readonly hosts: readonly string[]; readonly tls: ClientTls } {
    return { hosts, tls: this.#ca.client };
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
    for (const m of this.members) {
      m.clientPort = await this.claimedPort();
      m.peerPort = await this.claimedPort();
    }
  }

  protected peerPorts(m: Member): readonly number[] {
    return [m.peerPort];
  }

  /** The peer URL the other members dial: its gate's, or the member's own. */
  #advertisedPeerUrl(m: Member): string {
    return `https://${HOST}:${this.dialedPort(m, 0)}`;
  }

  /** A failed start leaves data of a cluster that never was: the next try starts on none (the certificates stay). */
  protected override async afterFailedStart(): Promise<void> {
    await Promise.all(this.members.map((m) => rm(m.dataDir, { recursive: true, force: true })));
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
        // Clients and peers alike must present a certificate of the run's CA.
        '--client-cert-auth', '--trusted-ca-file', this.#ca.server.caFile,
        '--cert-file', this.#ca.server.certFile, '--key-file', this.#ca.server.keyFile,
        '--peer-client-cert-auth', '--peer-trusted-ca-file', this.#ca.server.caFile,
        '--peer-cert-file', this.#ca.server.certFile, '--peer-key-file', this.#ca.server.keyFile,
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
      const text = await postTls(`${m.clientUrl}/v3/maintenance/status`, '{}', this.#ca.client, timeoutMs);
      if (text === null) return null;
      const body = JSON.parse(text) as { header?: { member_id?: string; revision?: string }; leader?: string };
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
  await stopAllOf('EtcdCluster');
}

/** POSTs `body` over TLS with the client certificate; the reply's text on a 2xx, else null (also on any error or after `timeoutMs`). */
function postTls(url: string, body: string, tls: ClientTls, timeoutMs: number): Promise<string | null> {
  return new Promise((resolve) => {
    const req = request(url, { method: 'POST', ca: tls.ca, cert: tls.cert, key: tls.key, timeout: timeoutMs, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve(res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300 ? text : null));
      res.on('error', () => resolve(null));
    });
    const timer = setTimeout(() => req.destroy(), timeoutMs);
    req.on('close', () => clearTimeout(timer));
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(null));
    req.end(body);
  });
}
