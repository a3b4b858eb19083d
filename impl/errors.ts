/**
 * Errors the lock clients throw. Invalid input throws InvalidInputError (from
 * the model: the same rules and codes as the spec); a call that cannot finish
 * in time throws TimeoutError; a network failure throws UnavailableError.
 */
import { InvalidInputError } from '../model/errors.ts';
import { asText, messageText } from './errorText.ts';
import { awaitedAt } from './clock.ts';
import type { MonotonicClock } from './clock.ts';
export { InvalidInputError };

/** A call got no reply within its bound (the message names the call and the ms): its outcome is unknown; a write may have landed. */
export class TimeoutError extends Error {
  override readonly name = 'TimeoutError';
  /** `options.cause`: the driver's own timeout, when it was the one that fired. */
  constructor(what: string, ms: number, options?: ErrorOptions) {
    super(`${asText(what)} timed out after ${asText(ms)} ms`, options);
  }
}

/** A call failed (the connection is gone, a server cannot serve it now): nothing happened, or for a write it may have. */
export class UnavailableError extends Error {
  override readonly name = 'UnavailableError';
  constructor(message?: string, options?: ErrorOptions) {
    super(messageText(message), options);
  }
}

/**
 * WAIT returned fewer replica acknowledgements than asked for within its
 * timeout: the write is on the primary but may be lost at a failover, so the
 * lock does not count it (spec 7.9).
 */
export class ReplicationError extends Error {
  override readonly name = 'ReplicationError';
  constructor(
    readonly wanted: number,
    readonly acknowledged: number,
  ) {
    super(`WAIT: ${asText(acknowledged)} of ${asText(wanted)} replicas acknowledged`);
  }
}

/** The resource's token sequence is exhausted (2^63-1): no further grant can carry a larger token. */
export class TokenOverflowError extends Error {
  override readonly name = 'TokenOverflowError';
  constructor(readonly resource: string) {
    super(`the fencing token of '${asText(resource)}' reached 2^63-1; no further grant is possible`);
  }
}

/**
 * A connection that can never succeed as configured (not an outage): thrown
 * rather than read as a denial. `cause`, when given, is the driver's error.
 */
export class ConnectionConfigError extends Error {
  override readonly name = 'ConnectionConfigError';
  constructor(
    readonly code: 'authentication' | 'unknown-database' | 'unknown-host' | 'tls',
    message: string,
    options?: { readonly cause?: unknown },
  ) {
    super(`${asText(code)}: ${asText(message)}`, options);
  }
}

/**
 * The server refused a statement or command for a reason no retry can fix:
 * a missing permission, a missing schema or table, an SQL or script error.
 * Thrown rather than read as contention or an outage. Never a refusal a
 * server gives only while it restarts, shuts down, loads, is read-only or
 * busy for a moment, or because an earlier statement of the same
 * transaction failed: those are outages (impl/redis/replyErrors.ts,
 * impl/postgres/attempts.ts refusal). `serverCode` is the
 * SQLSTATE (PostgreSQL), the error's first word (Redis) or the gRPC status
 * name (etcd, e.g. PermissionDenied); `cause` is the driver's error.
 */
export class ServerRefusedError extends Error {
  override readonly name = 'ServerRefusedError';
  constructor(
    readonly code: 'permission' | 'schema' | 'statement',
    readonly serverCode: string,
    message: string,
    options?: { readonly cause?: unknown },
  ) {
    super(`${asText(code)} (${asText(serverCode)}): ${asText(message)}`, options);
  }
}

/**
 * The PostgreSQL wire client (the session lock's and openPostgresFencedStore's
 * driver) could not read the server's replies: not a PostgreSQL server, a
 * stream out of step, a message not expected in the connection's state, a
 * malformed SCRAM exchange. The connection is dropped; no retry fixes it, so
 * it is a refusal (isRefusal), thrown rather than read as an outage.
 */
export class WireProtocolError extends Error {
  override readonly name = 'WireProtocolError';
  constructor(message?: string, options?: ErrorOptions) {
    super(messageText(message), options);
  }
}

/** A refusal no retry fixes (credentials, a permission, a schema, a statement, a server whose replies cannot be read): thrown by the locks and stores, never read as contention or an outage. */
export function isRefusal(e: unknown): e is ConnectionConfigError | ServerRefusedError | WireProtocolError {
  return e instanceof ConnectionConfigError || e instanceof ServerRefusedError || e instanceof WireProtocolError;
}

/**
 * What a lock passes on from a failed call instead of reading it as an
 * outage: a refusal, an InvalidInputError (a client or node used after its
 * close(), which no retry fixes either), or a programming error (isDefect).
 */
export function mustThrow(e: unknown): boolean {
  return isRefusal(e) || e instanceof InvalidInputError || isDefect(e);
}

/**
 * A programming error (a TypeError, RangeError, ReferenceError or
 * SyntaxError: lockcheck's own code, or code it calls, broken or used with
 * something it does not fit), never an outage or a server's answer: a lock
 * round rejects with it instead of counting it as a vote against
 * (impl/round.ts), and a fenced store passes it on as it is.
 */
export function isDefect(e: unknown): boolean {
  return e instanceof TypeError || e instanceof RangeError || e instanceof ReferenceError || e instanceof SyntaxError;
}

/**
 * Why a lease's AbortSignal fired. `reason` changes once, from 'released' to
 * 'connection-lost', where a release went out and its session ended before
 * it was confirmed (LeaseHandle.releaseUnconfirmed: lockcheck's PostgreSQL
 * locks); it never changes otherwise.
 */
export class LeaseLostError extends Error {
  override readonly name = 'LeaseLostError';
  constructor(
    readonly reason: 'expired' | 'released' | 'connection-lost',
    resource: string,
  ) {
    super(`lease on '${asText(resource)}' ${asText(reason)}`);
  }

  /** One without a stack trace: one is made on every release, and the reason says it all. */
  static of(reason: LeaseLostError['reason'], resource: string): LeaseLostError {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
      return new LeaseLostError(reason, resource);
    } finally {
      Error.stackTraceLimit = limit;
    }
  }
}

/**
 * Relabels a loss already signalled (lockcheck's own leases only; not exported
 * from the package): a release that went out fired 'released', and its
 * session ended before the unlock was confirmed, so the lock went with the
 * session: from then on the reason reads 'connection-lost'.
 */
export function relabelLoss(e: LeaseLostError, reason: LeaseLostError['reason'], resource: string): void {
  Object.defineProperty(e, 'reason', { value: reason, enumerable: true, configurable: true });
  Object.defineProperty(e, 'message', { value: `lease on '${asText(resource)}' ${asText(reason)}`, enumerable: false, writable: true, configurable: true });
}

/** Bounds a promise by a deadline on `clock` (on the system clock the deadline holds the process open: the caller awaits it). */
export function withTimeout<T>(clock: MonotonicClock, ms: number, what: string, work: Promise<T>): Promise<T> {
  let atMs: number;
  try {
    atMs = clock.now() + ms;
  } catch (e) {
    return Promise.reject(e as Error);
  }
  return boundedUntil(clock, atMs, ms, what, work);
}

/** `work` bounded by the instant `atMs` on `clock`: a TimeoutError naming `what` and its `ms` then. */
export function boundedUntil<T>(clock: MonotonicClock, atMs: number, ms: number, what: string, work: Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let cancel = (): void => undefined;
    work.then(
      (v) => {
        cancel();
        resolve(v);
      },
      (e: unknown) => {
        cancel();
        reject(e as Error);
      },
    );
    // A caller's schedule that throws fails the call (the executor's throw), the work's outcome still handled above.
    cancel = awaitedAt(clock, atMs, () => reject(new TimeoutError(what, ms)));
  });
}
