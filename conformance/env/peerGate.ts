/**
 * A gate in front of one cluster member's peer port, for partitions between
 * members. Every member dials a peer at the same advertised URL, so a proxy
 * per target cannot tell one sender from another; the gate asks the kernel
 * instead: the connecting socket's owner (/proc/net/tcp gives the inode of
 * the socket bound to the connection's source port, /proc/<pid>/fd names the
 * process holding it) is the member that dialed. A connection from a member
 * the gate is told is cut off is closed at once, and cutting a member closes
 * the connections it already has (destroy, not resetAndDestroy: on Node 20 a
 * reset socket kept its handle and the process alive): the two members then
 * see a peer that hangs up,
 * in both directions, whichever side dials (raft streams and pipelines,
 * forwarded lease renewals alike). Linux only, as the rest of the
 * environment. A connection whose owner cannot be found (not a member:
 * a probe) passes.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { listenOnFreePort } from './freePortListener.ts';

const HOST = '127.0.0.1';

interface Pair {
  readonly from: number | null;
  readonly inbound: Socket;
  readonly outbound: Socket;
}

export class PeerGate {
  readonly #server: Server;
  readonly #pairs = new Set<Pair>();
  #cut = new Set<number>();

  private constructor(
    server: Server,
    readonly port: number,
    readonly targetPort: number,
    /** The pids of the members, by index (a member not running: -1). */
    private readonly pids: () => readonly number[],
  ) {
    this.#server = server;
  }

  /** Listens on a free loopback port and forwards to `targetPort`. */
  static async start(targetPort: number, pids: () => readonly number[]): Promise<PeerGate> {
    const server = createServer();
    // A gate on port 0 (no port read) would send every member's peer dials nowhere: fail, closed.
    const port = await listenOnFreePort(server, HOST, 'PeerGate');
    const gate = new PeerGate(server, port, targetPort, pids);
    server.on('connection', (socket) => gate.#accept(socket));
    server.unref();
    return gate;
  }

  /** The members whose connections this gate resets (replaces the previous set). */
  setCut(members: Iterable<number>): void {
    this.#cut = new Set(members);
    for (const pair of [...this.#pairs]) if (pair.from !== null && this.#cut.has(pair.from)) this.#drop(pair);
  }

  get cut(): ReadonlySet<number> {
    return this.#cut;
  }

  /** Which member the accepted `socket` came from, or null when no member owns its other end. */
  sourceOf(socket: Socket): number | null {
    const inode = socketInode(socket.remotePort ?? -1, this.port);
    if (inode === null) return null;
    const pids = this.pids();
    for (let member = 0; member < pids.length; member++) {
      const pid = pids[member]!;
      if (pid > 0 && ownsSocket(pid, inode)) return member;
    }
    return null;
  }

  #accept(inbound: Socket): void {
    const from = this.sourceOf(inbound);
    if (from !== null && this.#cut.has(from)) {
      inbound.destroy();
      return;
    }
    const outbound = createConnection({ host: HOST, port: this.targetPort });
    const pair: Pair = { from, inbound, outbound };
    this.#pairs.add(pair);
    const end = (): void => this.#drop(pair);
    inbound.on('error', end).on('close', end);
    outbound.on('error', end).on('close', end);
    inbound.pipe(outbound);
    outbound.pipe(inbound);
  }

  #drop(pair: Pair): void {
    if (!this.#pairs.delete(pair)) return;
    pair.inbound.destroy();
    pair.outbound.destroy();
  }

  /** Resets every connection and stops listening. */
  async close(): Promise<void> {
    for (const pair of [...this.#pairs]) this.#drop(pair);
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  /** For the exit handler. */
  destroyNow(): void {
    for (const pair of [...this.#pairs]) this.#drop(pair);
    this.#server.close();
  }
}

/** The inode of the loopback TCP socket bound to `localPort` and connected to `remotePort`, from /proc/net/tcp. */
function socketInode(localPort: number, remotePort: number): string | null {
  const local = `0100007F:${localPort.toString(16).toUpperCase().padStart(4, '0')}`;
  const remote = `0100007F:${remotePort.toString(16).toUpperCase().padStart(4, '0')}`;
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f[1] === local && f[2] === remote) return f[9] ?? null;
  }
  return null;
}

function ownsSocket(pid: number, inode: string): boolean {
  const link = `socket:[${inode}]`;
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        if (readlinkSync(`/proc/${pid}/fd/${fd}`) === link) return true;
      } catch {
        // closed meanwhile
      }
    }
  } catch {
    // the process is gone
  }
  return false;
}
