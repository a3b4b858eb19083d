/**
 * One command language for operations and faults. The same values drive the
 * model, the exploration and (later) the conformance runner against real
 * backends. Clients and nodes are named by index (0-based).
 */

/** An operation a client performs. */
export type Operation =
  /**
   * One acquisition attempt (try-acquire). A blocking acquire is a sequence of
   * these with time passing between them. `latencyMs` is the true time the
   * first request/reply round trip takes (message delay); the grant happens on
   * the nodes when the request arrives, the client sees the reply `latencyMs`
   * later. Later round trips (write-back, undo, retries) carry only the
   * nodes' own delays (the `node-delay` fault). A reply later than the
   * client's request timeout (WorldConfig.requestTimeoutMs, else the ttl)
   * counts as no answer.
   * `ttlMs` is required by ttl designs and must be absent for session-bound ones.
   */
  | {
      readonly kind: 'acquire';
      readonly client: number;
      readonly resource: string;
      readonly ttlMs?: number;
      readonly latencyMs?: number;
      /** A blocking acquire: after a denial, wait `retryDelayMs` and try again, at most `retries` more times. */
      readonly retries?: number;
      readonly retryDelayMs?: number;
    }
  /**
   * Extends the client's lease to a fresh ttl, if it still owns it. With
   * `latencyMs` (ttl designs), its replies come that much later: the nodes
   * extend when the requests arrive, the client judges the replies by its
   * clock when they come.
   */
  | { readonly kind: 'extend'; readonly client: number; readonly resource: string; readonly ttlMs: number; readonly latencyMs?: number }
  /** Releases the client's lease (a commit, for a transaction-scoped lock); `latencyMs` as for extend (ttl designs). */
  | { readonly kind: 'release'; readonly client: number; readonly resource: string; readonly latencyMs?: number }
  /**
   * A guarded write: the client checks its lease on its own clock, then writes with its token; the store's reply may come `latencyMs` later (ttl designs).
   * With `delayed`, the network holds the request (Kleppmann's delayed packet): the client checks and sends now (outcome `ok`, or
   * `not-held` and nothing sent), the store receives the write only at the client's `deliver`, a later step, and judges it then.
   * Until then the client waits for the reply and does nothing else. Not with `latencyMs`, and not on designs that write inside
   * the lock's transaction (pg-xact: the write shares the lock's connection, which delivers in order).
   */
  | { readonly kind: 'write'; readonly client: number; readonly resource: string; readonly value: string; readonly latencyMs?: number; readonly delayed?: true }
  /** Reads the store. */
  | { readonly kind: 'read'; readonly client: number; readonly resource: string };

/** Which process a clock fault hits. */
export type ClockTarget = { readonly node: number } | { readonly client: number };

/** A fault the environment injects. */
export type Fault =
  /** True time passes; every clock moves at its own rate. */
  | { readonly kind: 'advance'; readonly ms: number }
  /** A wall-clock step on a node (a client's monotonic clock cannot step). */
  | { readonly kind: 'clock-step'; readonly node: number; readonly deltaMs: number }
  /** A process's clock starts running fast or slow. */
  | { readonly kind: 'clock-drift'; readonly target: ClockTarget; readonly driftPpm: number }
  /**
   * The client stops (GC, page fault, SIGSTOP). With `pendingWrite`, it stops
   * after checking its lease for that write and before sending it: the write
   * goes out when it resumes, unchecked. With `inFlight`, it stops right after
   * sending that operation's requests: they take effect now, and the client
   * reads the replies only when it resumes (the resume's outcome is the
   * operation's). At most one of the two. An acquire or extend in flight
   * (ttl designs) is one that takes several round trips interleaving with
   * other clients' commands: its first round's requests take effect now, and
   * at the resume the client reads the replies by its clock then (a request
   * timeout that passed during the pause counts them as no answer), and only
   * then sends its next round (Redlock's token write-back, or the undo).
   */
  | {
      readonly kind: 'pause';
      readonly client: number;
      readonly pendingWrite?: { readonly resource: string; readonly value: string };
      readonly inFlight?: Operation;
    }
  /** The client runs again; its outcome is the in-flight operation's, if there was one. */
  | { readonly kind: 'resume'; readonly client: number }
  /** The network delivers the client's delayed write (`write` with `delayed`) to the store; the outcome is the store's reply. */
  | { readonly kind: 'deliver'; readonly client: number }
  /**
   * Asynchronous replication delivers: the node's replica now has everything
   * the primary has (redis-replicated; a no-op elsewhere).
   */
  | { readonly kind: 'replicate'; readonly node: number }
  /** A node crashes (SIGKILL); a replicated node fails over to its replica (Sentinel promotes it). */
  | { readonly kind: 'crash'; readonly node: number }
  /** A crashed node starts again; it keeps state only if the design persists. */
  | { readonly kind: 'restart'; readonly node: number }
  /** Messages between a client and a node are lost (black hole) until healed. */
  | { readonly kind: 'partition'; readonly client: number; readonly node: number }
  | { readonly kind: 'heal'; readonly client: number; readonly node: number }
  /**
   * Every reply from this node takes `ms` longer (0: back to normal), or with
   * 'never' the node is a black hole: requests to it vanish and no reply
   * comes, so a client waits out its request timeout (unlike a partition,
   * which fails at once). Ttl designs.
   */
  | { readonly kind: 'node-delay'; readonly node: number; readonly ms: number | 'never' }
  /** The server drops the client's connection and the session state with it (pg_terminate_backend). */
  | { readonly kind: 'kill-connection'; readonly client: number };

/** One step of a schedule: a client's operation, or time passing and faults. */
export type Command = Operation | Fault;
/** The kinds of Command. */
export type CommandKind = Command['kind'];

const OPERATION_KINDS = new Set<CommandKind>(['acquire', 'extend', 'release', 'write', 'read']);

export function isOperation(command: Command): command is Operation {
  return OPERATION_KINDS.has(command.kind);
}
