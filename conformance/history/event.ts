/**
 * The history format (spec/SPEC.md, "Histories"): what concurrent clients
 * did, one JSON object per line, in the order the recorder saw the events.
 * It is Jepsen's shape: every operation is an `invoke` followed by at most
 * one completion of the same process (`ok`, `fail` or `info`), and a process
 * has at most one operation in flight. `info` means the effect is unknown:
 * it may have happened, at any instant after its invoke, or never.
 *
 * Times are milliseconds on one monotonic clock shared by every process of
 * the history (on one machine: CLOCK_MONOTONIC, `process.hrtime`), so that
 * "a completed before b was invoked" can be read off the numbers. Tokens are
 * strings of decimal digits (exact up to 2^63-1; never a JSON number).
 *
 * An optional first line `{"type":"meta", ...}` says what was recorded, in
 * particular the policy of the store the writes went to.
 */
import type { StorePolicy } from '../../model/design.ts';

export type { StorePolicy };

/** A client process (a non-negative integer), or the fault injector. */
export type ProcessId = number | 'nemesis';

/** An operation's invocation, or its completion: ok (done), fail (certainly not done), info (unknown). */
export type EventType = 'invoke' | 'ok' | 'fail' | 'info';

/** What a client process does: on the lock, or on the store's registers. */
export type Operation = 'acquire' | 'extend' | 'release' | 'write' | 'read';

/** Fields every event carries. */
interface EventBase {
  readonly type: EventType;
  readonly process: ProcessId;
  /** ms on the history's shared monotonic clock. */
  readonly time: number;
}

/**
 * acquire: invoke carries the requested ttl (absent for a session lock);
 * ok carries the grant. `validUntil` is the deadline the client believes in,
 * converted to the history's clock (absent: no deadline, a session lock).
 */
export interface AcquireEvent extends EventBase {
  readonly op: 'acquire';
  readonly resource: string;
  /** invoke: the ttl asked for, ms (absent: a session lock). */
  readonly ttlMs?: number;
  /** ok: the owner value that identifies the grant. */
  readonly owner?: string;
  /** ok: the fencing token, decimal digits. */
  readonly token?: string;
  /** ok: the deadline the client believes in, ms on the history clock (absent: none). */
  readonly validUntil?: number;
  /** fail/info: why (`contended`, `no-quorum`, `timeout`, ...). */
  readonly reason?: string;
}

/** extend: of the lease named by owner and token; ok carries the new deadline. */
export interface ExtendEvent extends EventBase {
  readonly op: 'extend';
  readonly resource: string;
  /** The lease's owner value. */
  readonly owner: string;
  /** The lease's token, decimal digits. */
  readonly token?: string;
  /** invoke: the ttl asked for, ms. */
  readonly ttlMs?: number;
  /** ok: the new deadline, ms on the history clock. */
  readonly validUntil?: number;
  /** fail/info: why. */
  readonly reason?: string;
}

/** release: of the lease named by owner and token. The hold ends at the invoke. */
export interface ReleaseEvent extends EventBase {
  readonly op: 'release';
  readonly resource: string;
  /** The lease's owner value. */
  readonly owner: string;
  /** The lease's token, decimal digits. */
  readonly token?: string;
  /** fail/info: why. */
  readonly reason?: string;
}

/**
 * write: to register `key` of the store guarding `resource`. `token` is the
 * fencing token sent with it (absent: an unfenced write); `prev` is the value
 * the writer read first (a read-modify-write), which lets lost updates be
 * found without a search. `fail` means the store rejected it (a stale token).
 */
export interface WriteEvent extends EventBase {
  readonly op: 'write';
  readonly resource: string;
  /** The register written. */
  readonly key: string;
  readonly value: string;
  /** The value the writer read first (null: none yet); absent: a blind write. */
  readonly prev?: string | null;
  /** The fencing token sent with it, decimal digits; absent: an unfenced write. */
  readonly token?: string;
  /** fail/info: why. */
  readonly reason?: string;
}

/** read: of register `key`; ok carries the value (null: never written). */
export interface ReadEvent extends EventBase {
  readonly op: 'read';
  readonly resource: string;
  /** The register read. */
  readonly key: string;
  /** ok: the value read (null: never written). */
  readonly value?: string | null;
  /** fail/info: why. */
  readonly reason?: string;
}

/** An invocation or completion of a client's operation. */
export type OperationEvent = AcquireEvent | ExtendEvent | ReleaseEvent | WriteEvent | ReadEvent;

/**
 * The lease's loss signal fired (expired by the client's clock, lost, released). Ends a hold. For
 * LIN-1, reasons `connection-lost` and `process-exited` on a session lock (no ttl, no deadline) say
 * the server freed it, at some instant before the signal (spec 7.4; linearizability/fromHistory.ts).
 */
export interface SignalEvent {
  readonly type: 'signal';
  /** The client process whose lease it was. */
  readonly process: number;
  /** ms on the history's shared monotonic clock. */
  readonly time: number;
  readonly resource: string;
  /** The lease's owner value. */
  readonly owner: string;
  /** The lease's token, decimal digits. */
  readonly token?: string;
  /** Why the lease ended (free text: expired, connection-lost, released, ...). */
  readonly reason: string;
}

/** The nemesis began (`invoke`) or ended (`ok`/`info`) a fault; drawn in reports, never judged. */
export interface FaultEvent {
  readonly type: 'invoke' | 'ok' | 'info';
  readonly process: 'nemesis';
  /** ms on the history's shared monotonic clock. */
  readonly time: number;
  readonly op: 'fault';
  /** e.g. `pause-client`, `pause-server`, `kill-server`, `clock-step`, `partition`, `delay`, `terminate-backend`. */
  readonly fault: string;
  /** What it hit: `client 3`, `redis 1`, `postgres`... */
  readonly target?: string;
  /** Free text: anything else about the fault. */
  readonly detail?: string;
}

/**
 * The optional header, only as the first line: what was recorded. `store` is
 * the policy of the store behind every write (absent: not said; FENCE-2 is
 * then judged only if the checker is told the policy).
 */
export interface MetaEvent {
  readonly type: 'meta';
  /** The policy of the store behind every write. */
  readonly store?: StorePolicy;
  /** Free text: the backend, the workload, the seed... */
  readonly backend?: string;
  readonly description?: string;
}

/** One line of a history. */
export type HistoryEvent = MetaEvent | OperationEvent | SignalEvent | FaultEvent;

/** A whole history, in recorded order; findings name events by their index here (0-based). */
export type History = readonly HistoryEvent[];
