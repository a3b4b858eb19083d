import {
  castGrpcError,
  ClientClosedError,
  EtcdAuthenticationFailedError,
  EtcdInvalidAuthTokenError,
  EtcdLeaseInvalidError,
  EtcdPermissionDeniedError,
  EtcdRoleNotGrantedError,
  EtcdUserNotFoundError,
  GRPCDeadlineExceededError,
  GRPCFailedPreconditionError,
  GRPCInvalidArgumentError,
  GRPCNotImplementedError,
  GRPCResourceExhastedError,
  GRPCUnauthenticatedError,
  GRPCUnavailableError,
  type Etcd3,
  type ICompare,
  type IKeyValue,
  type IRequestOp,
  type ITxnRequest,
} from 'etcd3';
import { RetryPolicy } from 'cockatiel';
import { match, P } from 'ts-pattern';
import { InvalidInputError } from '../../model/errors.ts';
import { boundedFromNow, checkedClock } from '../checkedClock.ts';
import type { MonotonicClock } from '../clock.ts';
import { ConnectionConfigError, isDefect, isRefusal, ServerRefusedError, TimeoutError, UnavailableError } from '../errors.ts';
import type { WriteResult } from '../fencedStore.ts';
import { storedToken } from '../storeCell.ts';
import { hostRefusalsOf, NAME_NOT_RESOLVED, refusedAtConnect, TLS_REFUSED } from './connectRefusals.ts';
import { checkClock, checkMethods, checkObject, checkPolicy, checkTimeoutMs, FENCES, knownOptions, refuse } from '../options.ts';
import { checkToken, checkValue, MAX_TTL_MS } from '../../model/errors.ts';

/** Digits of 2^63-1: tokens padded to this compare as numbers byte by byte. */
const TOKEN_DIGITS = 19;

/** gRPC call options (the deadline), as etcd3's calls take them. */
type CallOptions = NonNullable<Parameters<Etcd3['kv']['txn']>[1]>;

/**
 * The etcd calls the lock and the store make, each one round trip bounded by
 * a timeout (a gRPC deadline, and the same bound on the client's monotonic
 * clock). Failures are typed: TimeoutError (no reply in time: the outcome is
 * unknown), UnavailableError (the call failed: nothing happened, or for a
 * write it may have), ConnectionConfigError (authentication refused, a host
 * name that does not resolve, a TLS handshake refusing the configuration),
 * InvalidInputError('precondition') (the client was closed),
 * ServerRefusedError (etcd refused the call, a permission or an argument:
 * nothing happened, and no retry changes that). Conformance wraps each call
 * in its simulated network; the lock reads nothing else.
 */
export interface EtcdNode {
  /** LeaseGrant: a fresh lease of `ttlSeconds` (etcd may round it up to its minimum). */
  grant(ttlSeconds: number): Promise<{ readonly id: string; readonly ttlSeconds: number }>;
  /** One transaction: put `key` under `leaseId` if absent (create revision 0); else read it. */
  putIfAbsent(key: Buffer, value: string, leaseId: string): Promise<PutIfAbsent>;
  /** One keep-alive round: the lease's remaining ttl in seconds, 0 or less when it is gone. */
  keepAlive(leaseId: string): Promise<number>;
  /**
   * One transaction that changes nothing: whether `key` is still under
   * `leaseId` with `createRevision` (false when it was deleted, or replaced
   * by another put: a new create revision, or another lease or none).
   */
  owns(key: Buffer, leaseId: string, createRevision: bigint): Promise<boolean>;
  /** One transaction: delete `key` only if it is still under `leaseId` with `createRevision`. */
  deleteIfOwned(key: Buffer, leaseId: string, createRevision: bigint): Promise<boolean>;
  /** LeaseRevoke; a lease already gone is no error. */
  revoke(leaseId: string): Promise<void>;
  /** Range of one key: its value, null when absent. */
  get(key: Buffer): Promise<string | null>;
  /**
   * One transaction: judge `token` against the highest accepted (kept under
   * `highestKey` as a 19-digit decimal, so that etcd's byte comparison is
   * numeric order) by `policy`, and if accepted put `value` under `key` and
   * raise the highest.
   */
  fencedWrite(key: Buffer, highestKey: Buffer, token: bigint, value: string, policy: 'unfenced' | 'strict' | 'monotonic'): Promise<WriteResult>;
}

/** putIfAbsent's outcome: the key made (its create revision, the token), or the key already there (whose lease, its create revision). */
export type PutIfAbsent =
  | { readonly kind: 'created'; readonly createRevision: bigint }
  | { readonly kind: 'exists'; readonly lease: string; readonly createRevision: bigint };

/** etcd3Node's options. */
export interface Etcd3NodeOptions {
  /** The client's monotonic clock: every call is bounded on it too, beside its gRPC deadline. */
  readonly clock: MonotonicClock;
  /** Bound on every call, ms. Default 2000. */
  readonly requestTimeoutMs?: number;
}

const checkKeys = knownOptions('etcd3Node options', ['clock', 'requestTimeoutMs']);

/** etcd3's own retry is on: no global policy given (its default retries), or a retry policy. */
function retriesOnItsOwn(client: Etcd3): boolean {
  const faultHandling = (client as unknown as { options?: { faultHandling?: { global?: unknown } } }).options?.faultHandling;
  return faultHandling?.global === undefined || faultHandling.global instanceof RetryPolicy;
}

/**
 * The calls on an etcd3 client (npm `etcd3`). Build the client with `etcdClient()` so that it does not retry on its own.
 * Each call rejects with InvalidInputError before anything is sent for a bad argument, and ('precondition') for a
 * request whose keys and values cannot fit in etcd's default --max-request-bytes (MAX_REQUEST_BYTES less 256 bytes).
 */
export function etcd3Node(client: Etcd3, options: Etcd3NodeOptions): EtcdNode {
  checkObject(client, 'client', 'an etcd3 client');
  checkMethods(client.kv, 'client.kv', 'an etcd3 KV client', ['txn', 'range']);
  checkMethods(client.leaseClient, 'client.leaseClient', 'an etcd3 lease client', ['leaseGrant', 'leaseKeepAlive', 'leaseRevoke']);
  // etcd3 retries a failed call three times unless told otherwise: for a call whose reply was lost that is a retry of an unknown outcome (a fenced write that ran reads as rejected when run again: its own token is the highest).
  if (retriesOnItsOwn(client)) throw new InvalidInputError('invalid-config', "client retries failed calls on its own (etcd3's default faultHandling.global: three attempts), and a retried write whose first reply was lost may have run: build it with etcdClient(), or give it faultHandling: { global: noop }");
  checkObject(options, 'etcd3Node options');
  checkKeys(options);
  // Each reading checked (impl/checkedClock.ts), the bound's start read before a call goes: a bad reading rejects it, InvalidInputError, nothing sent.
  const clock = checkedClock(checkClock(options.clock));
  const timeoutMs = checkTimeoutMs(options.requestTimeoutMs ?? 2000, 'requestTimeoutMs');
  // Which hosts refused their last call at connect (an etcdClient's client; another client's are not known: all).
  const refusals = hostRefusalsOf(client);
  const everyHostRefuses = (): boolean => refusals?.everyHost ?? true;
  // `freeing`: a call that gives back what a lease holds (revoke), sent even on a clock that cannot be read (boundedFromNow).
  const bounded = <T>(what: string, work: (call: CallOptions) => Promise<T>, freeing = false): Promise<T> => {
    const call = { deadline: Date.now() + timeoutMs };
    const send = (): Promise<T> => {
      try {
        return work(call);
      } catch (error) {
        return Promise.reject(error as Error);
      }
    };
    // A call its host refused at connect (a name that does not resolve, a TLS handshake refused) was sent nothing: it
    // goes again, to a host not passed over (passOver), while another may still take it; once every host refused, the
    // mistake is thrown (unknown-host, tls).
    const sendAll = (): Promise<T> => {
      let started = send();
      for (let i = 1; i < (refusals?.hosts ?? 1); i++) started = started.catch((error: unknown) => (refusedAtConnect(error) && !everyHostRefuses() ? send() : Promise.reject(error as Error)));
      return started;
    };
    // Bounded on the clock from a reading taken before anything is sent (impl/checkedClock.ts): a refused reading sends nothing.
    // A revoke (`freeing`) goes even on a clock that cannot be read, bounded by its gRPC deadline alone.
    return boundedFromNow(clock, timeoutMs, `etcd ${what}`, sendAll, freeing ? 'send' : 'refuse').catch((error: unknown) => {
      throw typed(error, what, timeoutMs, everyHostRefuses());
    });
  };
  return {
    grant: (ttlSeconds) =>
      bounded('lease grant', async (call) => {
        checkTtlSeconds(ttlSeconds);
        const r = await client.leaseClient.leaseGrant({ TTL: ttlSeconds, ID: 0 }, call);
        if (r.error) throw new UnavailableError(`etcd lease grant: ${r.error}`);
        return { id: r.ID, ttlSeconds: Number(r.TTL) };
      }),
    putIfAbsent: (key, value, leaseId) =>
      bounded('put-if-absent', async (call) => {
        checkKey(key, 'key');
        checkValue(value);
        checkLeaseId(leaseId);
        // The key goes three times (compare, put, range).
        checkRequestSize('put-if-absent', 3 * key.length + Buffer.byteLength(value, 'utf8'));
        const r = await client.kv.txn(
          {
            compare: [{ key, target: 'Create', result: 'Equal', create_revision: 0 }],
            success: [{ request_put: { key, value: Buffer.from(value, 'utf8'), lease: leaseId } }],
            failure: [{ request_range: { key } }],
          },
          call,
        );
        if (r.succeeded) return { kind: 'created', createRevision: BigInt(r.header.revision) };
        const kv: IKeyValue | undefined = r.responses[0]?.response_range.kvs[0];
        // Deleted between the compare and the range cannot happen (one transaction); say so loudly if it does.
        if (kv === undefined) throw new UnavailableError('etcd put-if-absent: the key was neither absent nor present');
        return { kind: 'exists', lease: kv.lease, createRevision: BigInt(kv.create_revision) };
      }),
    keepAlive: (leaseId) =>
      bounded('lease keep-alive', async (call) => {
        checkLeaseId(leaseId);
        const stream = await client.leaseClient.leaseKeepAlive(call);
        try {
          const reply = await new Promise<{ TTL: string }>((resolve, reject) => {
            stream.on('data', resolve);
            stream.on('error', reject);
            stream.write({ ID: leaseId });
          });
          return Number(reply.TTL);
        } finally {
          stream.end();
        }
      }),
    owns: (key, leaseId, createRevision) =>
      bounded('owns', async (call) => {
        checkOwned(key, leaseId, createRevision);
        checkRequestSize('owns', 2 * (key as Buffer).length);
        const r = await client.kv.txn({ compare: owned(key, leaseId, createRevision), success: [], failure: [] }, call);
        return r.succeeded;
      }),
    deleteIfOwned: (key, leaseId, createRevision) =>
      bounded('delete-if-owned', async (call) => {
        checkOwned(key, leaseId, createRevision);
        checkRequestSize('delete-if-owned', 3 * (key as Buffer).length);
        const r = await client.kv.txn(
          {
            compare: owned(key, leaseId, createRevision),
            success: [{ request_delete_range: { key } }],
          },
          call,
        );
        return r.succeeded;
      }),
    revoke: (leaseId) =>
      bounded('lease revoke', async (call) => {
        checkLeaseId(leaseId);
        try {
          await client.leaseClient.leaseRevoke({ ID: leaseId }, call);
        } catch (error) {
          if (!(error instanceof EtcdLeaseInvalidError)) throw error;
        }
      }, true),
    get: (key) =>
      bounded('range', async (call) => {
        checkKey(key, 'key');
        checkRequestSize('range', key.length);
        const r = await client.kv.range({ key }, call);
        return r.kvs[0]?.value.toString('utf8') ?? null;
      }),
    fencedWrite: (key, highestKey, token, value, policy) =>
      bounded('fenced write', async (call) => {
        checkKey(key, 'key');
        checkKey(highestKey, 'highestKey');
        checkToken(token);
        checkValue(value);
        checkPolicy(policy, FENCES);
        checkFencedWriteSize(key, highestKey, Buffer.byteLength(value, 'utf8'));
        const padded = Buffer.from(token.toString().padStart(TOKEN_DIGITS, '0'), 'ascii');
        const put: IRequestOp = { request_put: { key, value: Buffer.from(value, 'utf8') } };
        const raise: IRequestOp = { request_put: { key: highestKey, value: padded } };
        const readHighest: IRequestOp = { request_range: { key: highestKey } };
        const below: ICompare = { key: highestKey, target: 'Value', result: 'Less', value: padded };
        const above: ICompare = { key: highestKey, target: 'Value', result: 'Greater', value: padded };
        // etcd's value compare on an absent key is false: the outer compare handles the first write.
        const judged: ITxnRequest = match(policy)
          .with('strict', (): ITxnRequest => ({ compare: [below], success: [put, raise], failure: [readHighest] }))
          .with('monotonic', (): ITxnRequest => ({ compare: [above], success: [readHighest], failure: [put, raise] }))
          .with('unfenced', (): ITxnRequest => ({ compare: [below], success: [put, raise], failure: [put] }))
          .exhaustive();
        const r = await client.kv.txn(
          { compare: [{ key: highestKey, target: 'Create', result: 'Equal', create_revision: 0 }], success: [put, raise], failure: [{ request_txn: judged }] },
          call,
        );
        if (r.succeeded) return { kind: 'accepted' };
        const inner = r.responses[0]?.response_txn;
        if (inner === undefined) throw new UnavailableError('etcd fenced write: no inner transaction reply');
        const accepted = policy === 'monotonic' ? !inner.succeeded : inner.succeeded || policy === 'unfenced';
        if (accepted) return { kind: 'accepted' };
        const highest = inner.responses[0]?.response_range?.kvs[0]?.value.toString('utf8');
        if (highest === undefined) throw new UnavailableError('etcd fenced write: the highest token vanished');
        // Not digits: the key holds something the store did not write (a refusal, not an outage to retry).
        return { kind: 'rejected', highest: storedToken(highest, `etcd key '${highestKey.toString('utf8')}'`, 'the highest token', 'padded') };
      }),
  };
}

/**
 * The arguments of the node's calls, checked as the lock's and the store's
 * are (the node is public: etcd3Node): a wrong one was sent and read as an
 * outage (a lease id etcd3 cannot encode, a string key), or taken (a token
 * -1n wrote '-1' as a cell's highest token, and every later write to the
 * cell failed on it). Each is an InvalidInputError naming the argument, as a
 * rejection, before anything is sent.
 */
function checkKey(key: unknown, name: string): void {
  if (!Buffer.isBuffer(key)) refuse(name, 'a Buffer', key);
}

/**
 * etcd's default --max-request-bytes (1.5 MiB): a member refuses a larger
 * request ('request is too large', or gRPC's message limit just above it),
 * and every retry meets the same refusal. Judged before anything is sent,
 * from the keys and values the request carries (each as often as the request
 * names it), with room for the request's framing.
 */
export const MAX_REQUEST_BYTES = 1_572_864;
const REQUEST_FRAMING_BYTES = 256;

/** A fenced write's request with a cell of `cellBytes` fits etcd's bound: the cell's put goes twice (the first write's branch and the judged one), the highest key six times with its token four. */
export function checkFencedWriteSize(key: Buffer, highestKey: Buffer, cellBytes: number): void {
  checkRequestSize('fenced write', 2 * (key.length + cellBytes) + 6 * highestKey.length + 4 * TOKEN_DIGITS);
}

function checkRequestSize(what: string, bytes: number): void {
  const most = MAX_REQUEST_BYTES - REQUEST_FRAMING_BYTES;
  if (bytes > most) throw new InvalidInputError('precondition', `${what} too large for an etcd request: ${bytes} bytes of keys and values, at most ${most} (etcd's default --max-request-bytes less room for the request's framing)`);
}

/** Whether `leaseId` is written as grant returns lease ids: etcd's int64, in decimal. */
export function isLeaseId(leaseId: unknown): leaseId is string {
  return typeof leaseId === 'string' && /^-?\d{1,19}$/.test(leaseId);
}

/** A lease id as grant returned it. */
function checkLeaseId(leaseId: unknown): void {
  if (!isLeaseId(leaseId)) refuse('leaseId', 'a lease id as grant returned it (decimal digits)', leaseId);
}

/** etcd's lease ttls are whole seconds: at least 1, at most the longest ttl the lock takes. */
const MAX_TTL_SECONDS = Math.ceil(MAX_TTL_MS / 1000);

function checkTtlSeconds(ttlSeconds: unknown): void {
  if (typeof ttlSeconds !== 'number' || !Number.isInteger(ttlSeconds) || ttlSeconds < 1 || ttlSeconds > MAX_TTL_SECONDS) refuse('ttlSeconds', `an integer number of seconds in [1, ${MAX_TTL_SECONDS}]`, ttlSeconds);
}

function checkOwned(key: unknown, leaseId: unknown, createRevision: unknown): void {
  checkKey(key, 'key');
  checkLeaseId(leaseId);
  if (typeof createRevision !== 'bigint' || createRevision < 0n || createRevision > 2n ** 63n - 1n) refuse('createRevision', 'a bigint in [0, 2^63-1]', createRevision);
}

/** The key is the one our put created (its create revision) and still under our lease (an operator's put keeps the first, not the second). */
function owned(key: Buffer, leaseId: string, createRevision: bigint): ICompare[] {
  return [
    { key, target: 'Create', result: 'Equal', create_revision: createRevision.toString() },
    { key, target: 'Lease', result: 'Equal', lease: leaseId },
  ];
}

/**
 * etcd's InvalidArgument replies that are about the credentials (a call
 * without a user on a cluster with auth on), not the request.
 */
const NO_USER = /etcdserver: user name is empty/;
/** InvalidArgument that passes: the auth store changed under the call (etcd 3.5+); the next call carries a fresh revision. */
const AUTH_OLD_REVISION = /etcdserver: revision of auth store is old/;
/** FailedPrecondition from Authenticate when the cluster has no auth on: credentials were given that it cannot take. */
const AUTH_NOT_ENABLED = /etcdserver: authentication is not enabled/;
/**
 * RESOURCE_EXHAUSTED for a request larger than the member takes (gRPC's
 * message limit: etcd's --max-request-bytes plus room): the same request
 * meets it again, so it is a refusal, not an outage (a store write of a
 * value of a megabyte read as UnavailableError, retried for ever).
 */
const MESSAGE_TOO_LARGE = /message larger than max/;
/**
 * The library's errors as the lock's typed ones. Only what no retry can fix
 * is a refusal (ConnectionConfigError, ServerRefusedError, carrying etcd3's
 * error as the cause); a programming error (isDefect) passes as it is;
 * anything else, an expired auth token included (etcd3 authenticates again
 * on the next call), is an UnavailableError.
 */
function typed(error: unknown, what: string, timeoutMs: number, everyHostRefuses: boolean): Error {
  if (error instanceof TimeoutError || error instanceof UnavailableError || error instanceof InvalidInputError || isRefusal(error)) return error;
  // A programming error (etcd3's, a wrapper's, ours) is no outage: an UnavailableError would be retried, and read as no-quorum.
  if (isDefect(error)) return error as Error;
  // etcd3 casts its unary calls' errors; a stream's (the keep-alive's) come raw from gRPC, with the status code.
  const cause = error instanceof Error && error.constructor === Error && typeof (error as { code?: unknown }).code === 'number' ? castGrpcError(error) : error;
  const message = `etcd ${what}: ${cause instanceof Error ? cause.message : String(cause)}`;
  const options = { cause };
  return match(cause)
    .with(P.instanceOf(GRPCDeadlineExceededError), () => new TimeoutError(`etcd ${what}`, timeoutMs))
    // A closed client stays closed: a misuse, not an outage to retry.
    .with(P.instanceOf(ClientClosedError), () => new InvalidInputError('precondition', `etcd ${what}: the client was closed`))
    .with(P.instanceOf(GRPCUnavailableError), (e) =>
      // Refused at connect by one host while another may still take the call: a member out of order, not the client's mistake.
      !everyHostRefuses
        ? new UnavailableError(message, options)
        : NAME_NOT_RESOLVED.test(e.message)
          ? new ConnectionConfigError('unknown-host', `the host name does not resolve: ${message}`, options)
          : TLS_REFUSED.test(e.message)
            ? new ConnectionConfigError('tls', message, options)
            : new UnavailableError(message, options),
    )
    .with(P.instanceOf(EtcdInvalidAuthTokenError), () => new UnavailableError(message, options))
    .with(P.instanceOf(GRPCResourceExhastedError), (e) => (MESSAGE_TOO_LARGE.test(e.message) ? new ServerRefusedError('statement', 'ResourceExhausted', message, options) : new UnavailableError(message, options)))
    .with(P.instanceOf(EtcdAuthenticationFailedError), P.instanceOf(EtcdUserNotFoundError), P.instanceOf(GRPCUnauthenticatedError), () => new ConnectionConfigError('authentication', message, options))
    .with(P.instanceOf(EtcdPermissionDeniedError), () => new ServerRefusedError('permission', 'PermissionDenied', message, options))
    .with(P.instanceOf(EtcdRoleNotGrantedError), () => new ServerRefusedError('permission', 'RoleNotGranted', message, options))
    // A member that does not serve etcd's API (another gRPC service at that address): every call meets it again.
    .with(P.instanceOf(GRPCNotImplementedError), () => new ServerRefusedError('statement', 'Unimplemented', message, options))
    .with(P.instanceOf(GRPCInvalidArgumentError), (e) =>
      NO_USER.test(e.message)
        ? new ConnectionConfigError('authentication', message, options)
        : AUTH_OLD_REVISION.test(e.message)
          ? new UnavailableError(message, options)
          : new ServerRefusedError('statement', 'InvalidArgument', message, options),
    )
    .with(P.instanceOf(GRPCFailedPreconditionError), (e) => (AUTH_NOT_ENABLED.test(e.message) ? new ConnectionConfigError('authentication', message, options) : new UnavailableError(message, options)))
    .otherwise(() => new UnavailableError(message, options));
}
