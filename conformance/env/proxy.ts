/**
 * An in-process TCP proxy for one client-to-server link, used to inject network
 * faults on real connections. It listens on 127.0.0.1 (port 0, so the kernel
 * picks a free port) and forwards every accepted connection to one target.
 *
 * Model. Each connection has two directions (client to server, server to
 * client). A chunk read from one side goes through the *link* (the mode:
 * pass, blackhole, reset or delay) and then, for the server-to-client
 * direction only, through the client's *receive buffer* (hold/release):
 *
 *   - pass: forwarded as soon as it is read (after anything still in flight
 *     from an earlier delay, so byte order is always preserved).
 *   - delay: forwarded `ms` real milliseconds after it was read, in each
 *     direction independently, in order. Only data and end-of-stream are
 *     delayed; the TCP handshake is not. Bytes already in flight keep their
 *     schedule when the mode changes.
 *   - blackhole: a partition without RST. Connections stay open and new ones
 *     are accepted (the client sees a successful connect), but nothing is
 *     forwarded either way and nothing is buffered: every byte read is dropped,
 *     and bytes in flight (delayed) are dropped when the link goes down. A
 *     connection accepted while black-holed is only connected upstream once the
 *     link comes back, so the server never sees it during the partition.
 *     End-of-stream and resets are not bytes: like a retransmitted FIN/RST they
 *     are remembered and delivered when the link comes back. Switching back to
 *     pass or delay resumes forwarding of *new* bytes on existing connections;
 *     dropped bytes stay dropped.
 *   - reset: every open connection is destroyed with a RST on both sides
 *     (socket.resetAndDestroy()), and every new connection is reset at once.
 *
 * hold() models a client that stops reading: server-to-client bytes that come
 * out of the link are kept in the client's receive buffer (per connection)
 * instead of being written to the client, until release() delivers them in
 * order. Held bytes have already crossed the link, so release() delivers them
 * whatever the mode (a partition does not take back received bytes); a reset
 * discards them.
 *
 * Memory is bounded. Held bytes are capped at HOLD_LIMIT_BYTES (16 MiB) per
 * connection: past it that connection is destroyed with an error (RST on both
 * sockets), as a receiver with a full buffer and no reader would eventually be
 * torn down. Bytes in flight in delay mode are capped at
 * DELAY_QUEUE_LIMIT_BYTES (16 MiB) per direction: past it the proxy stops
 * reading that direction (ordinary TCP backpressure) until the queue drains;
 * nothing is dropped. Backpressure from the receiving socket is honoured the
 * same way. A black-holed link buffers nothing.
 *
 * Every timer, the listener and the proxy's own sockets are unref'd, so a
 * proxy never keeps the process alive by itself (in-process clients do).
 * Proxies are registered until close(); a process 'exit' handler destroys any
 * proxy still open.
 */
import { type Server, type Socket, connect, createServer } from 'node:net';
import { performance } from 'node:perf_hooks';
import { listenOnFreePort } from './freePortListener.ts';

export type LinkMode =
  | { kind: 'pass' } // forward both ways
  | { kind: 'blackhole' } // accept and keep connections, forward nothing either way, buffer nothing (bytes are dropped), like a partition with no RST
  | { kind: 'reset' } // destroy every open connection (RST where possible) and reset new ones at once
  | { kind: 'delay'; ms: number }; // forward with an added one-way latency of ms real milliseconds in each direction, preserving byte order

export interface ProxyTarget {
  host: string;
  port: number;
}

const HOST = '127.0.0.1' as const;
export const MAX_DELAY_MS = 60_000;
/** Held (hold()) bytes allowed per connection; past it the connection is destroyed with an error. */
export const HOLD_LIMIT_BYTES = 16 * 1024 * 1024;
/** In-flight (delay) bytes allowed per direction; past it the proxy stops reading that direction until it drains. */
export const DELAY_QUEUE_LIMIT_BYTES = 16 * 1024 * 1024;

/** Proxies started and not yet closed. */
const live = new Set<TcpProxy>();
let exitHandlerInstalled = false;

function installExitHandler(): void {
  if (exitHandlerInstalled) return;
  exitHandlerInstalled = true;
  process.on('exit', () => {
    for (const proxy of [...live]) proxy.destroyNow();
  });
}

type Item = { kind: 'data'; bytes: Buffer } | { kind: 'end' } | { kind: 'reset' };
type Terminal = 'end' | 'reset';

interface Scheduled {
  item: Item;
  due: number;
}

/** What a connection needs from its proxy. */
interface ProxyContext {
  readonly target: ProxyTarget;
  mode(): LinkMode;
  holding(): boolean;
  removed(connection: Connection): void;
}

function itemBytes(item: Item): number {
  return item.kind === 'data' ? item.bytes.length : 0;
}

/** Destroys a socket with a RST where possible (an established TCP socket), plainly otherwise. */
function resetSocket(socket: Socket): void {
  if (socket.destroyed) return;
  if (socket.connecting) {
    // resetAndDestroy() on a connecting socket waits for the connect; do not.
    socket.destroy();
    return;
  }
  try {
    socket.resetAndDestroy();
  } catch {
    socket.destroy();
  }
}

/** One direction of a connection: its in-flight queue and its flow state. */
class Direction {
  readonly queue: Scheduled[] = [];
  queuedBytes = 0;
  timer: NodeJS.Timeout | null = null;
  /** End-of-stream or reset that arrived while black-holed, delivered when the link comes back. */
  pendingTerminal: Terminal | null = null;
  /** The destination's write buffer is full; waiting for 'drain'. */
  destBlocked = false;
  /** The source sent end-of-stream. */
  sourceEnded = false;

  constructor(readonly toClient: boolean) {}

  clearQueue(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.queue.length = 0;
    this.queuedBytes = 0;
  }
}

class Connection {
  upstream: Socket | null = null;
  /** Client to server. */
  readonly up = new Direction(false);
  /** Server to client. */
  readonly down = new Direction(true);
  #held: Item[] = [];
  #heldBytes = 0;
  #tearingDown = false;
  #clientClosed = false;
  #upstreamClosed = false;
  #done = false;
  /** Why the proxy destroyed this connection, if it did so for an error (hold overflow). */
  error: Error | null = null;
  readonly finished: Promise<void>;
  #resolveFinished!: () => void;

  constructor(
    readonly client: Socket,
    readonly ctx: ProxyContext,
  ) {
    this.finished = new Promise((resolve) => {
      this.#resolveFinished = resolve;
    });
    client.setNoDelay(true);
    client.unref();
    client.on('error', () => {
      // Surfaces as 'close' with hadError; handled there.
    });
    client.on('data', (chunk: Buffer) => this.#ingress(this.up, { kind: 'data', bytes: chunk }));
    client.on('end', () => {
      this.up.sourceEnded = true;
      this.#ingress(this.up, { kind: 'end' });
    });
    client.on('drain', () => {
      this.down.destBlocked = false;
      this.#updateFlow(this.down);
    });
    client.on('close', (hadError: boolean) => {
      this.#clientClosed = true;
      this.#onSourceClose(this.up, hadError);
    });
    if (ctx.mode().kind !== 'blackhole') this.#connectUpstream();
  }

  #source(dir: Direction): Socket | null {
    return dir.toClient ? this.upstream : this.client;
  }

  #dest(dir: Direction): Socket | null {
    return dir.toClient ? this.client : this.upstream;
  }

  #connectUpstream(): void {
    if (this.upstream !== null || this.#tearingDown || this.client.destroyed) return;
    const { host, port } = this.ctx.target;
    const upstream = connect({ host, port, allowHalfOpen: true });
    this.upstream = upstream;
    upstream.setNoDelay(true);
    upstream.unref();
    upstream.on('error', () => {
      // Surfaces as 'close' with hadError; handled there.
    });
    upstream.on('data', (chunk: Buffer) => this.#ingress(this.down, { kind: 'data', bytes: chunk }));
    upstream.on('end', () => {
      this.down.sourceEnded = true;
      this.#ingress(this.down, { kind: 'end' });
    });
    upstream.on('drain', () => {
      this.up.destBlocked = false;
      this.#updateFlow(this.up);
    });
    upstream.on('close', (hadError: boolean) => {
      this.#upstreamClosed = true;
      this.#onSourceClose(this.down, hadError);
    });
  }

  #onSourceClose(dir: Direction, hadError: boolean): void {
    // Done once both sockets closed, or once the client left before the link
    // ever came up (the server never saw this connection).
    if (this.#clientClosed && (this.upstream === null || this.#upstreamClosed)) {
      this.#finish();
      return;
    }
    if (this.#tearingDown) return;
    // A clean close after end-of-stream was already forwarded as 'end'; any
    // other close (error, RST, refused connect) is a reset of the peer.
    if (hadError || !dir.sourceEnded) this.#ingress(dir, { kind: 'reset' });
  }

  #finish(): void {
    if (this.#done) return;
    this.#done = true;
    this.#tearingDown = true;
    this.up.clearQueue();
    this.down.clearQueue();
    this.#held = [];
    this.#heldBytes = 0;
    this.ctx.removed(this);
    this.#resolveFinished();
  }

  /** A chunk (or end/reset) read from the source side of `dir` enters the link. */
  #ingress(dir: Direction, item: Item): void {
    if (this.#tearingDown) return;
    const mode = this.ctx.mode();
    if (mode.kind === 'reset') return; // the connection is being torn down
    if (mode.kind === 'blackhole') {
      // Bytes are dropped; end/reset is remembered (a reset supersedes an end).
      if (item.kind !== 'data' && dir.pendingTerminal !== 'reset') dir.pendingTerminal = item.kind;
      return;
    }
    const ms = mode.kind === 'delay' ? mode.ms : 0;
    if (ms === 0 && dir.queue.length === 0) {
      this.#egress(dir, item);
      return;
    }
    const now = performance.now();
    const tail = dir.queue[dir.queue.length - 1];
    const due = tail === undefined ? now + ms : Math.max(now + ms, tail.due);
    dir.queue.push({ item, due });
    dir.queuedBytes += itemBytes(item);
    this.#arm(dir);
    this.#updateFlow(dir);
  }

  #arm(dir: Direction): void {
    if (dir.timer !== null) return;
    const head = dir.queue[0];
    if (head === undefined) return;
    const wait = Math.max(0, Math.ceil(head.due - performance.now()));
    dir.timer = setTimeout(() => {
      dir.timer = null;
      this.#drainQueue(dir);
    }, wait);
    dir.timer.unref();
  }

  #drainQueue(dir: Direction): void {
    const now = performance.now();
    for (;;) {
      if (this.#tearingDown) return;
      const head = dir.queue[0];
      // Timers may fire a little early: never deliver before the due time.
      if (head === undefined || head.due > now) break;
      dir.queue.shift();
      dir.queuedBytes -= itemBytes(head.item);
      this.#egress(dir, head.item);
    }
    this.#arm(dir);
    this.#updateFlow(dir);
  }

  /** An item leaves the link on the destination side of `dir`. */
  #egress(dir: Direction, item: Item): void {
    if (item.kind === 'reset') {
      this.teardown(true);
      return;
    }
    if (dir.toClient && this.ctx.holding()) {
      this.#held.push(item);
      this.#heldBytes += itemBytes(item);
      if (this.#heldBytes > HOLD_LIMIT_BYTES) {
        this.error = new RangeError(
          `TcpProxy: more than ${HOLD_LIMIT_BYTES} bytes held for one connection; connection destroyed`,
        );
        this.teardown(true);
      }
      return;
    }
    this.#write(dir, item);
  }

  #write(dir: Direction, item: Item): void {
    const dest = this.#dest(dir);
    if (dest === null || dest.destroyed || dest.writableEnded) return;
    if (item.kind === 'end') {
      dest.end();
    } else if (item.kind === 'data' && !dest.write(item.bytes)) {
      dir.destBlocked = true;
      this.#updateFlow(dir);
    }
  }

  #updateFlow(dir: Direction): void {
    const source = this.#source(dir);
    if (source === null || source.destroyed) return;
    const pause =
      this.ctx.mode().kind !== 'blackhole' && (dir.destBlocked || dir.queuedBytes >= DELAY_QUEUE_LIMIT_BYTES);
    if (pause && !source.isPaused()) source.pause();
    else if (!pause && source.isPaused()) source.resume();
  }

  /** The link went down: drop everything in flight, keep reading (and dropping). */
  enterBlackhole(): void {
    for (const dir of [this.up, this.down]) {
      for (const { item } of dir.queue) {
        if (item.kind !== 'data' && dir.pendingTerminal !== 'reset') dir.pendingTerminal = item.kind;
      }
      dir.clearQueue();
      this.#updateFlow(dir);
    }
  }

  /** The link is up (pass or delay): connect upstream if needed, deliver remembered end/reset, resume reading. */
  linkUp(): void {
    if (this.#tearingDown) return;
    this.#connectUpstream();
    for (const dir of [this.up, this.down]) {
      const terminal = dir.pendingTerminal;
      dir.pendingTerminal = null;
      if (terminal !== null) this.#ingress(dir, { kind: terminal });
    }
    for (const dir of [this.up, this.down]) this.#updateFlow(dir);
  }

  /** release(): deliver held bytes in order. */
  flushHeld(): void {
    const held = this.#held;
    this.#held = [];
    this.#heldBytes = 0;
    for (const item of held) this.#write(this.down, item);
  }

  /** Destroys both sockets (RST if `reset`); the connection finishes once both have closed. */
  teardown(reset: boolean): void {
    if (this.#done) return;
    this.#tearingDown = true;
    this.up.clearQueue();
    this.down.clearQueue();
    this.#held = [];
    this.#heldBytes = 0;
    for (const socket of [this.client, this.upstream]) {
      if (socket === null) continue;
      if (reset) resetSocket(socket);
      else socket.destroy();
    }
  }
}

function validateTarget(target: unknown): ProxyTarget {
  if (typeof target !== 'object' || target === null) throw new TypeError('TcpProxy: target must be { host, port }');
  const { host, port } = target as { host?: unknown; port?: unknown };
  if (typeof host !== 'string' || host.length === 0) {
    throw new TypeError(`TcpProxy: target.host must be a non-empty string, got ${JSON.stringify(host)}`);
  }
  if (typeof port !== 'number') throw new TypeError(`TcpProxy: target.port must be a number, got ${typeof port}`);
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new RangeError(`TcpProxy: target.port must be an integer in 1..65535, got ${String(port)}`);
  }
  return { host, port };
}

function validateMode(mode: unknown): LinkMode {
  if (typeof mode !== 'object' || mode === null) throw new TypeError('TcpProxy: mode must be an object with a kind');
  const { kind, ms } = mode as { kind?: unknown; ms?: unknown };
  switch (kind) {
    case 'pass':
    case 'blackhole':
    case 'reset':
      return Object.freeze({ kind });
    case 'delay':
      if (typeof ms !== 'number') throw new TypeError(`TcpProxy: delay ms must be a number, got ${typeof ms}`);
      if (!Number.isInteger(ms) || ms < 0 || ms > MAX_DELAY_MS) {
        throw new RangeError(`TcpProxy: delay ms must be an integer in 0..${MAX_DELAY_MS}, got ${String(ms)}`);
      }
      return Object.freeze({ kind, ms });
    default:
      throw new TypeError(
        `TcpProxy: unknown mode kind ${JSON.stringify(kind)} (expected pass, blackhole, reset or delay)`,
      );
  }
}

export class TcpProxy {
  readonly host = HOST;
  readonly port: number;
  readonly target: Readonly<ProxyTarget>;
  readonly #server: Server;
  readonly #connections = new Set<Connection>();
  #mode: LinkMode = Object.freeze({ kind: 'pass' });
  #holding = false;
  #closing: Promise<void> | null = null;

  private constructor(server: Server, port: number, target: ProxyTarget) {
    this.#server = server;
    this.port = port;
    this.target = Object.freeze({ ...target });
  }

  /** Listens on 127.0.0.1 (a free port) and forwards to `target`, in pass mode; EnvironmentError, nothing left listening, when it cannot. */
  static async start(target: ProxyTarget): Promise<TcpProxy> {
    const checked = validateTarget(target);
    const server = createServer({ allowHalfOpen: true });
    // A failure after the bind closes the server: a failed start leaves nothing listening.
    const port = await listenOnFreePort(server, HOST, 'TcpProxy');
    // The proxy never keeps the process alive on its own (in-process clients
    // do); a forgotten proxy is destroyed by the 'exit' handler.
    server.unref();
    const proxy = new TcpProxy(server, port, checked);
    server.on('error', () => {
      // A listening server reports nothing actionable here (accept errors); keep the process alive.
    });
    server.on('connection', (socket) => proxy.#accept(socket));
    live.add(proxy);
    installExitHandler();
    return proxy;
  }

  get mode(): LinkMode {
    return this.#mode;
  }

  setMode(mode: LinkMode): void {
    const next = validateMode(mode);
    const wasDown = this.#mode.kind === 'blackhole' || this.#mode.kind === 'reset';
    this.#mode = next;
    if (this.#closing !== null) return;
    switch (next.kind) {
      case 'reset':
        for (const connection of [...this.#connections]) connection.teardown(true);
        break;
      case 'blackhole':
        for (const connection of this.#connections) connection.enterBlackhole();
        break;
      case 'pass':
      case 'delay':
        if (wasDown) for (const connection of [...this.#connections]) connection.linkUp();
        break;
    }
  }

  /** Holds bytes from the server to the client (a paused client reads nothing); release() delivers them in order. */
  hold(): void {
    this.#holding = true;
  }

  release(): void {
    this.#holding = false;
    for (const connection of [...this.#connections]) connection.flushHeld();
  }

  /** Connections accepted and not yet fully closed. */
  get connections(): number {
    return this.#connections.size;
  }

  /** Closes the listener and every connection; idempotent. */
  close(): Promise<void> {
    if (this.#closing !== null) return this.#closing;
    live.delete(this);
    const listenerClosed = new Promise<void>((resolve) => {
      this.#server.close(() => resolve());
    });
    const connections = [...this.#connections];
    for (const connection of connections) connection.teardown(false);
    this.#closing = Promise.all([listenerClosed, ...connections.map((c) => c.finished)]).then(() => undefined);
    return this.#closing;
  }

  /** Synchronous best effort for the 'exit' handler. */
  destroyNow(): void {
    live.delete(this);
    this.#server.close();
    for (const connection of this.#connections) connection.teardown(false);
  }

  #accept(socket: Socket): void {
    if (this.#closing !== null) {
      socket.on('error', () => {});
      socket.destroy();
      return;
    }
    if (this.#mode.kind === 'reset') {
      socket.on('error', () => {});
      resetSocket(socket);
      return;
    }
    const connection = new Connection(socket, {
      target: this.target,
      mode: () => this.#mode,
      holding: () => this.#holding,
      removed: (c) => {
        this.#connections.delete(c);
      },
    });
    this.#connections.add(connection);
  }
}
