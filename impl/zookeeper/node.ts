import { AssertionError } from 'node:assert';
import zookeeper from 'node-zookeeper-client';
import type { ACL, Client, Exception, Stat } from 'node-zookeeper-client';
import { match } from 'ts-pattern';
import { boundedFromNow, checkedClock } from '../checkedClock.ts';
import type { MonotonicClock } from '../clock.ts';
import { ConnectionConfigError, isDefect, isRefusal, ServerRefusedError, TimeoutError, UnavailableError } from '../errors.ts';
import type { WriteResult } from '../fencedStore.ts';
import { checkToken, checkTtl, checkValue, InvalidInputError, MAX_TTL_MS } from '../../model/errors.ts';
import { passes } from '../../model/store.ts';
import { checkConnectString } from './connectString.ts';
import { LATER_CODES, teachLaterCodes } from './codes.ts';
import { PassOver, type Member } from './passOver.ts';
import { foreignCell, parseCell } from '../storeCell.ts';
import { CONTENDER, takenByZookeeper, ZNODE_PATH } from './paths.ts';
import { checkClock, checkCredential, checkObject, checkPolicy, checkTimeoutMs, FENCES, knownOptions, refuse } from '../options.ts';

/**
 * One ZooKeeper session of the lock: the lease. Its timeout is the one the
 * ensemble negotiated; `expired` resolves when the ensemble reports the
 * session gone.
 */
export interface ZookeeperSession {
  /** The session timeout the ensemble negotiated, ms: each renewal lasts that long. */
  readonly timeoutMs: number;
  /**
   * Resolves when the session is over other than by `closeSession`:
   * 'expired' when the ensemble reports it expired, 'closed' when the node's
   * close() ended it (its contender is deleted then, at once). Resolving
   * with nothing reads as 'expired'.
   */
  readonly expired: Promise<'expired' | 'closed' | void>;
}

/**
 * The ZooKeeper calls the lock and the store make, each bounded by a timeout
 * on the client's monotonic clock. Failures are typed: TimeoutError (no reply
 * in time: the outcome is unknown), UnavailableError (the call failed: the
 * connection or session is gone, or the ensemble is in a passing state);
 * refusals no retry fixes are ConnectionConfigError('authentication') (the
 * ensemble refused the credentials: AUTH_FAILED), ConnectionConfigError
 * ('unknown-host') (no host of the connect string resolves) and ServerRefusedError
 * ('permission' for NO_AUTH and INVALID_ACL, 'schema' for a parent that
 * cannot have children or a store cell holding what the store did not
 * write, 'statement' for BAD_ARGUMENTS and UNIMPLEMENTED), their `cause` the
 * library's error; InvalidInputError('precondition') after close() and for a
 * store value too large for a znode.
 * Conformance wraps each call in its simulated network; the lock reads
 * nothing else.
 */
export interface ZookeeperNode {
  /** A fresh session asking for `timeoutMs`, renewed only by `touch` (see zookeeperNode). */
  openSession(timeoutMs: number): Promise<ZookeeperSession>;
  /** The children of `dir` (none when it does not exist). */
  contenders(session: ZookeeperSession, dir: string): Promise<string[]>;
  /**
   * Creates an ephemeral sequential contender under `dir` (and `dir` if
   * missing); its name and create zxid, and `deleted`, which resolves when
   * the ensemble reports the contender deleted (a watch set by the request
   * that read the create zxid: no request of its own). It never settles for
   * a contender that goes with its session.
   */
  enqueue(session: ZookeeperSession, dir: string): Promise<{ readonly name: string; readonly czxid: bigint; readonly deleted?: Promise<void> }>;
  /** One round trip on the session (renewing it): the create zxid of `path`, null when it is gone. */
  touch(session: ZookeeperSession, path: string): Promise<bigint | null>;
  /**
   * Resolves when `path` is deleted (or absent at once), or after `waitMs` on the client's clock; renews nothing.
   * Rejects at once when the wait cannot go on: InvalidInputError('precondition') when the node or the session is
   * closed meanwhile (closeSession), UnavailableError when the session expires.
   */
  watchGone(session: ZookeeperSession, path: string, waitMs: number): Promise<void>;
  /** Deletes `path` only while its create zxid is `czxid` (and at the version read). */
  deleteOwned(session: ZookeeperSession, path: string, czxid: bigint): Promise<boolean>;
  /** Ends the session: the ensemble deletes its ephemeral znodes. */
  closeSession(session: ZookeeperSession): Promise<void>;
  /** The children of `dir` on the node's long-lived session (none when it does not exist): a look that renews no lease. */
  children(dir: string): Promise<string[]>;
  /** A znode's data (on the node's long-lived session), null when absent. */
  get(path: string): Promise<string | null>;
  /**
   * Judges `token` against the highest accepted, kept in the cell's own
   * data, by `policy`; if accepted writes value, token and the new highest:
   * a read, then one versioned setData (or create) that lands only if
   * nothing else wrote between, else again from the read.
   */
  fencedWrite(path: string, token: bigint, value: string, policy: 'unfenced' | 'strict' | 'monotonic'): Promise<WriteResult>;
  /**
   * Ends every client the node made: the long-lived store session, and any
   * lease session still open (one whose opener gave up on it included; a
   * held lease's session resolves `expired` with 'closed'). A connect in
   * progress fails, and every later call, with InvalidInputError
   * ('precondition'): a closed node opens no new client.
   */
  close(): void;
}

/** zookeeperNode's options: where the ensemble is and how to reach it. */
export interface ZookeeperNodeOptions {
  /** `host:port` of the member(s) to talk to, comma-separated. */
  readonly connectString: string;
  /** The client's monotonic clock: every call is bounded on it. */
  readonly clock: MonotonicClock;
  /** Bound on every call, ms. Default 2000. */
  readonly requestTimeoutMs?: number;
  /**
   * Credentials every client of the node presents when it connects, as
   * ZooKeeper's addAuthInfo takes them: `{ scheme: 'digest', credentials:
   * 'user:password' }` for an ensemble whose znodes carry digest ACLs.
   * Default none. The znodes the node creates are then open only to those
   * identities (CREATOR_ALL_ACL), else to anyone. A scheme the ensemble does not know is
   * ConnectionConfigError('authentication'); an ACL the identity does not
   * satisfy, ServerRefusedError('permission').
   */
  readonly auth?: ReadonlyArray<{ readonly scheme: string; readonly credentials: string }>;
}

/** Data of a store cell. */
interface Cell {
  readonly value: string;
  readonly token: string;
  readonly highest: string;
}

interface Session extends ZookeeperSession {
  readonly client: Client;
  /** The ensemble reported the session expired: nothing is left to close. */
  ended: boolean;
}

/**
 * The calls on node-zookeeper-client (pure JavaScript: no native build).
 * Each lease is a session of its own, and its client's idle pings are
 * switched off: the session lives exactly its timeout after the last request
 * the ensemble heard, which only `touch` (the lock's extend) and the lock's
 * own requests make. That is the lease of spec 7.6 with the session timeout
 * as ttl (spec 7.10).
 */
export function zookeeperNode(options: ZookeeperNodeOptions): ZookeeperNode {
  teachLaterCodes();
  checkObject(options, 'zookeeperNode options');
  checkNodeKeys(options);
  checkConnectString(options.connectString);
  const timeoutMs = checkTimeoutMs(options.requestTimeoutMs ?? 2000, 'requestTimeoutMs');
  // Each reading checked (impl/checkedClock.ts), a call's bound read before it goes: a bad reading rejects it, InvalidInputError, nothing sent.
  const clock = checkedClock(checkClock(options.clock));
  const auth = checkAuth(options.auth ?? []);
  // What the node creates is open to anyone, as ZooKeeper's default; with credentials, only to the identities it
  // presented (CREATOR_ALL_ACL), so that a client without them can neither take nor tamper with the tree it made.
  const acl = [new zookeeper.ACL(zookeeper.Permission.ALL, auth.length > 0 ? new zookeeper.Id('auth', '') : new zookeeper.Id('world', 'anyone'))];
  let closed = false;
  const closedError = (what: string): InvalidInputError => new InvalidInputError('precondition', `zookeeper ${what}: the node was closed`);
  // The members that failed lately: a new client (a lease's session, the store's) starts on one that has not.
  const passOver = new PassOver(clock);
  // A call with no reply in its bound marks the member its client is on (`on`): a paused or black-holed member keeps
  // the socket open, so the client is still on it. (A member that closes or refuses the socket is marked as that
  // happens: followMembers.)
  // `freeing`: a call that gives back what a lease holds (a session's close), sent even on a clock that cannot be read
  // (boundedFromNow), bounded in real time alone.
  const bounded = <T>(what: string, work: (send: Send) => Promise<T>, on?: () => Client | undefined, freeing = false): Promise<T> => {
    if (closed) return Promise.reject(closedError(what));
    // A call in flight at close() sends nothing after it: the library failed such a request as a lost connection,
    // read as an outage (an acquire denied no-quorum, a store write UnavailableError), though nothing was sent.
    const send: Send = (start) => (closed ? Promise.reject(closedError(what)) : call(start));
    const start = (): Promise<T> => {
      let started: Promise<T>;
      try {
        started = work(send);
      } catch (error) {
        started = Promise.reject(error as Error);
      }
      return withRealTimeout(timeoutMs, `zookeeper ${what}`, started);
    };
    // Bounded on the client's clock (from a reading taken before anything is sent: a refused one sends nothing) and in
    // real time: a request queued on a connection that never comes back (the library waits for a reconnect) must end
    // even while the client's clock stands still (conformance).
    return boundedFromNow(clock, timeoutMs, `zookeeper ${what}`, start, freeing ? 'send' : 'refuse').catch((error: unknown) => {
      if (error instanceof TimeoutError) {
        const client = on?.();
        const member = client === undefined ? undefined : memberOf.get(client);
        if (member !== undefined) passOver.failed(member);
        // A lease's session is moved off a member that answered nothing in time, as ZooKeeper's own clients do when
        // their heartbeats go unanswered: else it stayed there (the library leaves a member only when its socket
        // closes, which a paused member's never does), every extend timed out, and the lease ended with its session
        // while the other members served.
        if (client !== undefined && leases.has(client)) moveOff(client, passOver);
      }
      throw typed(error, what);
    });
  };
  // Every client this node made and has not ended: close() ends them all, also a session whose
  // opener gave up on it (a reply the run's network dropped) and that nobody else can close.
  const live = new Map<Client, Connecting>();
  // The lease sessions handed out and not yet over: close() tells each that it ended.
  const leases = new Map<Client, (why: 'closed') => void>();
  // The watchGone waits in progress, each with the client it waits on and how to end it: close() ends every one at once,
  // and the end of a session the ones on it (else a wait its caller gave up on, an aborted acquire's, kept its timer).
  const watches = new Set<{ readonly client: Client; readonly end: (error: Error) => void }>();
  const open = (sessionMs: number, pings: boolean): Connecting => {
    const attempt = connecting(options.connectString, sessionMs, pings, auth, passOver);
    live.set(attempt.client, attempt);
    return attempt;
  };
  const finish = (client: Client, ended: Error = new UnavailableError('zookeeper exists (watch): the session ended')): void => {
    live.delete(client);
    leases.delete(client);
    for (const w of [...watches]) if (w.client === client) w.end(ended);
    end(client);
  };
  let shared: Connecting | null = null;
  const storeAttempt = (): Connecting => {
    if (shared === null) {
      const attempt = open(30_000, true);
      shared = attempt;
      attempt.ready.catch(() => {
        if (shared === attempt) shared = null;
      });
      // An expired session never comes back (the library makes no new one): the next call opens a fresh client,
      // else every store call of the node failed from then on (after a partition or pause longer than 30 s).
      attempt.client.once('expired', () => {
        if (shared === attempt) shared = null;
        finish(attempt.client);
      });
    }
    return shared;
  };
  // A call on the store's session. One with no reply in its bound gives that session up, and the next call opens a fresh
  // client (on whichever member the library picks): the library leaves a member only when its socket closes, so the
  // store stayed on a member paused or cut off for as long as it was, every call timing out while the rest served.
  const onStore = <T>(what: string, work: (send: Send, storeClient: () => Promise<Client>) => Promise<T>): Promise<T> => {
    const used: { attempt?: Connecting } = {};
    const storeClient = (): Promise<Client> => {
      used.attempt = storeAttempt();
      return used.attempt.ready;
    };
    return bounded(what, (send) => work(send, storeClient), () => used.attempt?.client).catch((error: unknown) => {
      const attempt = used.attempt;
      if (error instanceof TimeoutError && attempt !== undefined && shared === attempt) {
        shared = null;
        finish(attempt.client);
      }
      throw error;
    });
  };
  // The clients of the sessions this node opened: a call on any other session is refused (it was a TypeError read as
  // an outage). By client, not by object: a wrapper may hand on a copy of the session (conformance, tests).
  const opened = new WeakSet<Client>();
  // The client of a session this node opened, else undefined (never throws: read as a call fails).
  const clientOf = (s: ZookeeperSession): Client | undefined => {
    const client = typeof s === 'object' && s !== null ? (s as Partial<Session>).client : undefined;
    return client !== undefined && opened.has(client) ? client : undefined;
  };
  const own = (s: ZookeeperSession): Client => clientOf(s) ?? refuse('session', 'a session openSession of this node returned', s);
  return {
    openSession: (sessionMs) => {
      if (closed) return Promise.reject(closedError('connect'));
      // Checked before a client is made: the library encodes the timeout as an int32 in a socket event, and a larger one
      // (1e308) was a RangeError thrown there, which ended the process.
      let attempt: Connecting;
      try {
        checkTtl(sessionMs);
        // A rejection, never a throw: the library asserts on what it cannot use as it makes the client.
        attempt = open(sessionMs, false);
      } catch (error) {
        return Promise.reject(typed(error, 'connect'));
      }
      // A connect that outlives its bound would leave a session (or a client reconnecting for ever) nobody owns.
      return bounded('connect', async () => {
        const client = await attempt.ready;
        // Connected as close() came: the close ended this client, and no session is handed out after it.
        if (closed) throw closedError('connect');
        // Connected after the bound gave up on it (end() closes that late session): nothing of it is kept.
        if (!live.has(client)) throw new UnavailableError('zookeeper connect: connected after its bound');
        let over!: (why: 'expired' | 'closed') => void;
        const expired = new Promise<'expired' | 'closed'>((resolve) => (over = resolve));
        client.once('expired', () => over('expired'));
        leases.set(client, over);
        const session: Session = { client, timeoutMs: client.getSessionTimeout(), expired, ended: false };
        opened.add(client);
        void expired.then((why) => {
          session.ended = true;
          // An expired session's client would reconnect forever: close it.
          if (why === 'expired') finish(client);
        });
        return session;
      }, () => attempt.client).catch((error: unknown) => {
        // A connect that did not finish in its bound is ended wherever it is: else it reconnects for ever.
        finish(attempt.client);
        throw error;
      });
    },
    contenders: (s, dir) =>
      bounded('get children', async (send) => {
        checkPath(dir, 'dir');
        try {
          return await send<string[]>((cb) => own(s).getChildren(dir, cb));
        } catch (error) {
          if (code(error) === zookeeper.Exception.NO_NODE) return [];
          throw error;
        }
      }, () => clientOf(s)),
    enqueue: (s, dir) =>
      bounded('create', async (send) => {
        const client = own(s);
        checkPath(dir, 'dir');
        const create = (): Promise<string> => send<string>((cb) => client.create(`${dir}/${CONTENDER}`, Buffer.alloc(0), acl, zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL, cb));
        let path: string;
        try {
          path = await create();
        } catch (error) {
          if (code(error) !== zookeeper.Exception.NO_NODE) throw error;
          await mkdirs(send, client, dir, acl);
          path = await create();
        }
        let deletedNow!: () => void;
        const deleted = new Promise<void>((resolve) => (deletedNow = resolve));
        const stat = await send<Stat | null>((cb) => client.exists(path, watchDeletion(client, path, deletedNow), cb));
        if (stat === null) throw new UnavailableError('zookeeper create: the new znode vanished at once');
        return { name: path.slice(dir.length + 1), czxid: zxid(stat.czxid), deleted };
      }, () => clientOf(s)),
    touch: (s, path) =>
      bounded('exists', async (send) => {
        checkPath(path, 'path');
        const stat = await send<Stat | null>((cb) => own(s).exists(path, cb));
        return stat === null ? null : zxid(stat.czxid);
      }, () => clientOf(s)),
    watchGone: (s, path, waitMs) =>
      new Promise<void>((resolve, reject) => {
        if (closed) return reject(closedError('exists (watch)'));
        let client: Client;
        let untilMs: number;
        try {
          client = own(s);
          checkPath(path, 'path');
          // Not an integer: the lock's wait is what is left of its waitMs on the client's clock (performance.now(): fractions).
          if (typeof waitMs !== 'number' || !(waitMs >= 0 && waitMs <= MAX_TTL_MS)) refuse('waitMs', `a number of ms in [0, ${MAX_TTL_MS}]`, waitMs);
          // Read before the watch is set and registered: a bad reading leaves nothing behind.
          untilMs = clock.now() + waitMs;
        } catch (error) {
          return reject(error as Error);
        }
        const done = (): void => {
          settle();
          resolve();
        };
        const event = nextEvent(client, path, done);
        const settle = (): void => {
          cancel();
          event.stop();
          watches.delete(wait);
        };
        // close() ends the wait at once as a close: the client's end resolved it as if the znode ahead were gone.
        const wait = {
          client,
          end: (error: Error): void => {
            settle();
            reject(error);
          },
        };
        watches.add(wait);
        const cancel = clock.schedule(untilMs, () => {
          event.stop();
          watches.delete(wait);
          resolve();
        });
        client.exists(
          path,
          event.watcher,
          (error, stat) => {
            if (error) {
              settle();
              reject(typed(error, 'exists (watch)'));
            } else if (stat === null) done();
          },
        );
      }),
    deleteOwned: (s, path, czxid) =>
      bounded('delete', async (send) => {
        const client = own(s);
        checkPath(path, 'path');
        if (typeof czxid !== 'bigint') refuse('czxid', 'a bigint', czxid);
        const stat = await send<Stat | null>((cb) => client.exists(path, cb));
        if (stat === null || zxid(stat.czxid) !== czxid) return false;
        try {
          await send<void>((cb) => client.remove(path, stat.version, cb));
          return true;
        } catch (error) {
          const c = code(error);
          if (c === zookeeper.Exception.NO_NODE || c === zookeeper.Exception.BAD_VERSION) return false;
          throw error;
        }
      }, () => clientOf(s)),
    closeSession: (s) =>
      bounded('close session', async () => {
        const client = own(s);
        if ((s as Session).ended) return;
        await new Promise<void>((resolve) => {
          // The client reports the end of the connection once the ensemble answered the close; a session already
          // expired or cut reports nothing more, and the bound ends the wait.
          client.once('disconnected', () => resolve());
          client.once('expired', () => resolve());
          finish(client, new InvalidInputError('precondition', 'zookeeper exists (watch): the session was closed'));
        });
      }, undefined, true),
    children: (dir) =>
      onStore('get children', async (send, storeClient) => {
        checkPath(dir, 'dir');
        const client = await storeClient();
        try {
          return await send<string[]>((cb) => client.getChildren(dir, cb));
        } catch (error) {
          if (code(error) === zookeeper.Exception.NO_NODE) return [];
          throw error;
        }
      }),
    get: (path) =>
      onStore('get data', async (send, storeClient) => {
        checkPath(path, 'path');
        const client = await storeClient();
        try {
          const data = await send<Buffer | null>((cb) => client.getData(path, cb));
          const cell = readCell(data, path);
          return JSON.stringify({ value: cell.value, token: cell.token.toString() });
        } catch (error) {
          if (code(error) === zookeeper.Exception.NO_NODE) return null;
          throw error;
        }
      }),
    fencedWrite: (path, token, value, policy) => {
      // The call's bound ended it for the caller: no more rounds.
      let over = false;
      const written = onStore('fenced write', async (send, storeClient): Promise<WriteResult> => {
        checkPath(path, 'path');
        // A token of -1n was written as the cell's highest, and every later write to the cell failed on it.
        checkToken(token);
        checkValue(value);
        checkPolicy(policy, FENCES);
        checkCellSize(path, value);
        const client = await storeClient();
        // A round is lost only to a write that landed in between (it moved the version), so the rounds end with the
        // writers racing; no count of them is a bound: 16 concurrent writers of one cell made the last one fail
        // (UnavailableError) though it was never judged. The call's time bound is the bound.
        while (!over) {
          let current: { highest: bigint; version: number } | null = null;
          try {
            const [data, stat] = await send<[Buffer | null, Stat]>((cb) => client.getData(path, (error, d, st) => cb(error, [d, st])));
            current = { highest: readCell(data, path).highest, version: stat.version };
          } catch (error) {
            if (code(error) !== zookeeper.Exception.NO_NODE) throw error;
          }
          const highest = current === null ? null : current.highest;
          if (highest !== null && !passes(policy, token, highest)) return { kind: 'rejected', highest };
          const next: Cell = { value, token: token.toString(), highest: (highest === null || token > highest ? token : highest).toString() };
          const data = Buffer.from(JSON.stringify(next), 'utf8');
          try {
            if (current === null) await createWithParents(send, client, path, data, acl);
            else await send<Stat>((cb) => client.setData(path, data, current.version, cb));
            return { kind: 'accepted' };
          } catch (error) {
            const c = code(error);
            // Someone wrote between the read and the write: judge again on what is there now.
            if (c !== zookeeper.Exception.BAD_VERSION && c !== zookeeper.Exception.NODE_EXISTS) throw error;
          }
        }
        throw new UnavailableError('zookeeper fenced write: given up at its time bound');
      });
      const end = (): void => {
        over = true;
      };
      written.then(end, end);
      return written;
    },
    close: () => {
      closed = true;
      shared = null;
      for (const w of [...watches]) w.end(closedError('exists (watch)'));
      for (const [client, attempt] of live) {
        // A lease whose session this ends must not look held: its contender goes now, and another may be granted.
        leases.get(client)?.('closed');
        attempt.abandon(closedError('connect'));
        finish(client);
      }
    },
  };
}

/** The waits for the next event on a path of a client, and the one watcher function they share. */
interface PathWaits {
  readonly watcher: () => void;
  readonly waiting: Set<() => void>;
}
const pathWaits = new WeakMap<Client, Map<string, PathWaits>>();

/**
 * Calls `wake` at the next event the ensemble reports on `path` to `client`,
 * through `watcher`, which every wait on that path shares until it fires:
 * the library adds each new function as one more listener of the path and
 * keeps one it has already once, so a wait in line that re-armed a watch of
 * its own every third of a session grew the list (past ten Node warned,
 * MaxListenersExceededWarning). `stop` takes `wake` off the list.
 */
function nextEvent(client: Client, path: string, wake: () => void): { readonly watcher: () => void; readonly stop: () => void } {
  let byPath = pathWaits.get(client);
  if (byPath === undefined) pathWaits.set(client, (byPath = new Map()));
  const paths = byPath;
  let waits = paths.get(path);
  if (waits === undefined) {
    const waiting = new Set<() => void>();
    const fired: PathWaits = {
      waiting,
      watcher: () => {
        // Fired, the library dropped it: the next wait arms a new one.
        if (paths.get(path) === fired) paths.delete(path);
        for (const w of [...waiting]) w();
      },
    };
    waits = fired;
    paths.set(path, waits);
  }
  const { watcher, waiting } = waits;
  waiting.add(wake);
  return { watcher, stop: () => waiting.delete(wake) };
}

/**
 * A watcher that calls `deleted` when `path` is deleted. A watch fires once:
 * any other event on the znode (another client's setData) arms it again,
 * with one more request; a re-arm that fails leaves the deletion to the
 * lock's next extend.
 */
function watchDeletion(client: Client, path: string, deleted: () => void): (event: zookeeper.Event) => void {
  const watcher = (event: zookeeper.Event): void => {
    if (event.getType() === zookeeper.Event.NODE_DELETED) return deleted();
    client.exists(path, watcher, (error, stat) => {
      if (!error && stat === null) deleted();
    });
  };
  return watcher;
}

/** A client and its first connection: `ready` once connected, or rejected (the client then ended). */
interface Connecting {
  readonly client: Client;
  readonly ready: Promise<Client>;
  /** Fails `ready` with `error` if it has not settled (the node was closed while connecting). */
  readonly abandon: (error: Error) => void;
}

/** The parts of node-zookeeper-client's connection manager this module adjusts (lib/ConnectionManager.js, 1.1.x). */
interface ConnectionManager {
  state: number;
  sessionTimeout: number;
  sessionId: Buffer;
  pendingBuffer: Buffer | null;
  servers: Member[];
  /** The index findNextServer takes next (modulo the list's length). */
  nextServerIndex: number;
  socket?: { destroy(): void; unref(): void; once(event: 'close', listener: () => void): void; readonly destroyed: boolean; readonly connecting: boolean };
  connectTimeoutHandler?: NodeJS.Timeout;
  connect(): void;
  findNextServer(callback: (server: Member) => void): void;
  onSocketConnected(): void;
  onSocketData(buffer: Buffer): void;
  onSocketClosed(hasError: boolean): void;
  onSocketError(error: Error): void;
  onSocketTimeout(): void;
  setState(state: number): void;
}

/** The manager's connection states (lib/ConnectionManager.js). */
const DISCONNECTED = 0;
const CONNECTING = 1;
const CONNECTED = 2;
const CONNECTED_READ_ONLY = 3;

const managerOf = (client: Client): ConnectionManager => (client as unknown as { connectionManager: ConnectionManager }).connectionManager;

/**
 * Makes the library's socket handling fail as a connection loss, never as an
 * exception thrown from a socket event (which ends the process): a reply it
 * cannot decode destroys the socket (the library then reconnects and fails
 * the calls in flight with CONNECTION_LOSS), and the bytes of a frame cut
 * short with its connection are dropped when that connection closes, instead
 * of being read as the start of the next connection's handshake.
 */
function hardened(manager: ConnectionManager): void {
  const onData = manager.onSocketData.bind(manager);
  const onClosed = manager.onSocketClosed.bind(manager);
  manager.onSocketData = (buffer) => {
    try {
      onData(buffer);
    } catch {
      manager.pendingBuffer = null;
      manager.socket?.destroy();
    }
  };
  manager.onSocketClosed = (hasError) => {
    manager.pendingBuffer = null;
    onClosed(hasError);
  };
}

/**
 * Fails the connect with ConnectionConfigError('unknown-host') once every
 * host of the connect string failed to resolve (ENOTFOUND, as PostgreSQL's):
 * the library would try them for ever, every call read as an outage. One
 * host that resolves is enough to go on trying.
 */
function unresolvable(manager: ConnectionManager, reject: (error: Error) => void): void {
  // Sorted, for a message that is the same every time (the library shuffles its list).
  const hosts = new Set(manager.servers.map((s) => s.host).sort());
  const unknown = new Set<string>();
  const onError = manager.onSocketError.bind(manager);
  manager.onSocketError = (error) => {
    onError(error);
    const e = error as NodeJS.ErrnoException & { hostname?: string };
    if (e.code !== 'ENOTFOUND' || e.hostname === undefined) return;
    unknown.add(e.hostname);
    if (unknown.size >= hosts.size && [...hosts].every((h) => unknown.has(h))) {
      reject(new ConnectionConfigError('unknown-host', `the host name does not resolve: zookeeper connect: ${[...hosts].join(', ')}`, { cause: error }));
    }
  };
}

/**
 * Moves a connected client off its member when another member has not
 * failed lately: its list is put in passOver's order (the member left, just
 * marked, goes last) and its socket cut, and the library reconnects the same
 * session to the first of the list (findNextServer), which takes the session
 * over while it has not expired. Requests still out on the cut socket fail as
 * a lost connection; watches are set again on the new one. Disconnected at
 * once, not at the socket's close event: a request made before that event
 * (the next extend, right after the one that timed out) waits for the new
 * connection instead of going out on the cut socket and failing with it.
 * With no other member to go to (one member, or all failed lately) the
 * socket is kept: a close sent on it still reaches the member when it
 * answers again, and ends the session at once instead of at its timeout.
 */
function moveOff(client: Client, passOver: PassOver): void {
  const manager = managerOf(client);
  if (manager.state !== CONNECTED && manager.state !== CONNECTED_READ_ONLY) return;
  const on = memberOf.get(client);
  const elsewhere = manager.servers.some((m) => !passOver.recent(m) && (on === undefined || m.host !== on.host || String(m.port) !== String(on.port)));
  if (!elsewhere) return;
  manager.servers = passOver.order(manager.servers);
  manager.nextServerIndex = 0;
  manager.setState(DISCONNECTED);
  manager.socket?.destroy();
}

/** The member each client's socket is on (or being opened to): the one a call with no reply in time marks. */
const memberOf = new WeakMap<Client, Member>();

/**
 * Starts the client on a member that has not failed lately (passOver), and
 * keeps passOver told: the member a client connects to served; one whose
 * socket fails (refused, reset, its host unknown) failed. The library
 * shuffled the connect string and takes its members in that order, moving on
 * only when a socket closes.
 */
function followMembers(client: Client, manager: ConnectionManager, passOver: PassOver): void {
  manager.servers = passOver.order(manager.servers);
  const next = manager.findNextServer.bind(manager);
  manager.findNextServer = (callback) =>
    next((server) => {
      memberOf.set(client, server);
      callback(server);
    });
  const onError = manager.onSocketError.bind(manager);
  manager.onSocketError = (error) => {
    const member = memberOf.get(client);
    if (member !== undefined) passOver.failed(member);
    onError(error);
  };
  client.on('connected', () => {
    const member = memberOf.get(client);
    if (member !== undefined) passOver.served(member);
  });
}

/** A client connecting; `pings` false switches its idle pings off (a lease session, renewed by requests only). */
function connecting(connectString: string, sessionMs: number, pings: boolean, auth: NonNullable<ZookeeperNodeOptions['auth']>, passOver: PassOver): Connecting {
  const client = zookeeper.createClient(connectString, { sessionTimeout: sessionMs, spinDelay: 100, retries: 0 });
  const manager = managerOf(client);
  // Before connect(): the library binds these handlers to each socket it opens.
  hardened(manager);
  followMembers(client, manager, passOver);
  // node-zookeeper-client pings on its socket's idle timeout (onSocketTimeout); the lease must not renew itself.
  if (!pings) manager.onSocketTimeout = () => undefined;
  // Sent right after each handshake, ahead of any request of the lock's.
  for (const a of auth) client.addAuthInfo(a.scheme, Buffer.from(a.credentials, 'utf8'));
  let abandon!: (error: Error) => void;
  const ready = new Promise<Client>((resolve, reject) => {
    abandon = reject;
    unresolvable(manager, reject);
    client.once('connected', () => resolve(client));
    client.once('expired', () => reject(new UnavailableError('zookeeper connect: session expired')));
    client.once('authenticationFailed', () => reject(new ConnectionConfigError('authentication', 'zookeeper connect: the ensemble refused the credentials (AUTH_FAILED)')));
    client.connect();
  }).catch((error: unknown) => {
    end(client);
    throw error;
  });
  return { client, ready, abandon };
}

/**
 * How long end() waits for a client that lost its connection to reconnect, so
 * that its close reaches the ensemble and its ephemeral znodes go at once.
 * Only a speed-up: past it the ensemble still ends the session at its timeout.
 */
const CLOSE_ON_RECONNECT_MS = 3_000;

/**
 * Ends a client in whatever state it is. node-zookeeper-client reconnects on
 * its own until a close: a client that never connected went on reconnecting
 * for ever, a timer every spinDelay that kept the process alive (seen after
 * `lockcheck run` on the ZooKeeper rows). Its close() is a request: while
 * connected it goes out at once. While a connection is being made it must
 * not be queued, because the library would then read the handshake's reply
 * as the close's (seen as "Unknown code" thrown from a socket event): a
 * session that had connected waits for its reconnect and closes then (its
 * contender goes at once), for at most CLOSE_ON_RECONNECT_MS; a client with
 * no session yet stops at once, unless its connect request is out: the
 * ensemble may still make a session of it, which closeLate waits for and
 * closes.
 */
function end(client: Client): void {
  const manager = managerOf(client);
  // No connection from here on: none opened, and one already on its way is cut as it connects.
  const stop = (): void => {
    manager.connect = () => undefined;
    manager.onSocketConnected = () => {
      clearTimeout(manager.connectTimeoutHandler);
      manager.socket?.destroy();
    };
    clearTimeout(manager.connectTimeoutHandler);
    manager.socket?.destroy();
  };
  // The close, then the socket cut if the ensemble does not answer it in time (a black-holed link).
  const close = (): void => {
    manager.connect = () => undefined;
    client.close();
    setTimeout(stop, CLOSE_ON_RECONNECT_MS).unref();
  };
  if (manager.state === CONNECTED || manager.state === CONNECTED_READ_ONLY) return close();
  if (manager.state < 0) return; // closing, closed, expired or refused: the library reconnects no more
  if (manager.sessionId.every((byte) => byte === 0)) return handshakeSent(manager) ? closeLate(client, manager, stop, close) : stop();
  // unref: the reconnect in progress keeps the process up as long as there is something to wait for.
  const giveUp = setTimeout(stop, Math.min(manager.sessionTimeout, CLOSE_ON_RECONNECT_MS)).unref();
  const settled = (): void => clearTimeout(giveUp);
  client.once('connected', () => {
    settled();
    close();
  });
  client.once('expired', settled);
}

/**
 * How long end() waits, unref'd, for the reply to a connect request it can
 * no longer take back (closeLate). Past it the socket is cut: a member that
 * answers later still makes the session, which then lives its timeout, as
 * one a crashed client leaves.
 */
const LATE_SESSION_WAIT_MS = 60_000;

/** The connect request is out on the current socket (written as it connected), and no reply has come yet. */
function handshakeSent(manager: ConnectionManager): boolean {
  const socket = manager.socket;
  return manager.state === CONNECTING && socket !== undefined && !socket.destroyed && !socket.connecting;
}

/**
 * Ends a client whose connect request is out but unanswered (a member paused
 * past the connect's bound, a black-holed link): cutting the socket would
 * not take the request back, and the member makes a session of it whenever
 * it reads it, one nobody owns or closes (it lived its whole timeout, a
 * lease's ttl). So the socket is kept, unref'd (it keeps no process alive),
 * no other connection is made, and the session the late reply brings is
 * closed at once; for at most LATE_SESSION_WAIT_MS.
 */
function closeLate(client: Client, manager: ConnectionManager, stop: () => void, close: () => void): void {
  manager.connect = () => undefined;
  const socket = manager.socket!;
  socket.unref();
  const giveUp = setTimeout(stop, LATE_SESSION_WAIT_MS).unref();
  const settled = (): void => clearTimeout(giveUp);
  client.once('connected', () => {
    settled();
    close();
  });
  // Refused (expired, the credentials) or cut: no session to close.
  client.once('expired', settled);
  client.once('authenticationFailed', settled);
  socket.once('close', settled);
}

/**
 * A store cell's data. A znode that exists without it (no data, or not what
 * the store writes) is refused as foreign. Before, data that did not parse
 * was an outage (UnavailableError), and a znode with null data (zkCli's
 * `create` without data) read as no cell: a write then lost every round to
 * its own create's NODE_EXISTS ("concurrent writers"), again an outage.
 */
function readCell(data: Buffer | null, path: string): { readonly value: string; readonly token: bigint; readonly highest: bigint } {
  const where = `zookeeper znode '${path}'`;
  if (data === null || data.length === 0) throw foreignCell(where, 'no data');
  return parseCell(data.toString('utf8'), where, ['token', 'highest'] as const);
}

/**
 * The most a store cell's data and path may take: ZooKeeper's default
 * jute.maxbuffer (1 MiB - 1) bounds the whole request, less room for its
 * header. Past it the ensemble drops the connection (CONNECTION_LOSS for
 * every call on it) and node-zookeeper-client asserts on data over 1 MiB.
 */
const MAX_CELL_BYTES = 1_047_552;
const WIDEST_TOKEN = '9'.repeat(19);

/**
 * A value whose cell cannot fit in a znode is refused before anything is
 * sent: it read as an outage (UnavailableError) that every retry met again,
 * and cut the store session's connection for the calls beside it. Judged
 * with the widest tokens, so that a value fits or not whatever they are.
 */
function checkCellSize(path: string, value: string): void {
  const bytes = Buffer.byteLength(path, 'utf8') + Buffer.byteLength(JSON.stringify({ value, token: WIDEST_TOKEN, highest: WIDEST_TOKEN }), 'utf8');
  if (bytes > MAX_CELL_BYTES) throw new InvalidInputError('precondition', `value too large for a ZooKeeper store cell: ${bytes} bytes with its path and tokens, at most ${MAX_CELL_BYTES}`);
}

/** Creates a persistent znode (NODE_EXISTS if someone was first), its parents as needed. */
async function createWithParents(send: Send, client: Client, path: string, data: Buffer, acl: ACL[]): Promise<void> {
  const create = (): Promise<string> => send<string>((cb) => client.create(path, data, acl, zookeeper.CreateMode.PERSISTENT, cb));
  try {
    await create();
  } catch (error) {
    if (code(error) !== zookeeper.Exception.NO_NODE) throw error;
    await mkdirs(send, client, path.slice(0, path.lastIndexOf('/')), acl);
    await create();
  }
}

/** `work`, or TimeoutError after `ms` of real time (the timer does not keep the process alive). */
function withRealTimeout<T>(ms: number, what: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(what, ms)), ms);
    timer.unref();
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/**
 * Creates `dir` and its missing ancestors, from the deepest one that exists.
 * Not the library's mkdirp: that creates every ancestor from the root and
 * takes NODE_EXISTS as done, but ZooKeeper checks the parent's ACL before it
 * says NODE_EXISTS, so an identity that may create in its own root (made by
 * an operator, or by lockcheck's private ensembles) but not in '/' was
 * refused (NO_AUTH) on the way there.
 */
async function mkdirs(send: Send, client: Client, dir: string, acl: ACL[]): Promise<void> {
  const parts = dir.split('/').slice(1);
  const at = (depth: number): string => `/${parts.slice(0, depth).join('/')}`;
  let depth = parts.length;
  while (depth > 0 && (await send<Stat | null>((cb) => client.exists(at(depth), cb))) === null) depth--;
  for (let d = depth + 1; d <= parts.length; d++) {
    try {
      await send<string>((cb) => client.create(at(d), Buffer.alloc(0), acl, zookeeper.CreateMode.PERSISTENT, cb));
    } catch (error) {
      // Made meanwhile by another client: as good.
      if (code(error) === zookeeper.Exception.NODE_EXISTS) continue;
      // Missing under '/' is only ever the connect string's chroot: ZooKeeper makes none, and every call meets it again
      // (it read as an outage: every acquire denied no-quorum, every first write of a cell retried).
      if (d === 1 && code(error) === zookeeper.Exception.NO_NODE) {
        throw new ServerRefusedError('schema', 'NO_NODE', "zookeeper create: the connect string's chroot does not exist (ZooKeeper makes none: create it first)", { cause: error });
      }
      throw error;
    }
  }
}

type Callback<T> = (error: Error | Exception | null, value: T) => void;
/** One request of a call: `start` hands the library its callback. */
type Send = <T>(start: (cb: Callback<T>) => void) => Promise<T>;

function call<T>(start: (cb: Callback<T>) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => start((error, value) => (error ? reject(error) : resolve(value))));
}

function code(error: unknown): number | null {
  return error instanceof zookeeper.Exception ? error.getCode() : null;
}

/**
 * A zxid as the 8 big-endian bytes ZooKeeper sends, unsigned: read signed, a
 * zxid with the top bit set (an epoch past 2^31) was a negative token, which
 * the lock granted as smaller than every earlier one; unsigned it is past
 * 2^63-1, and the lock refuses it (TokenOverflowError). Exported for tests.
 */
export function zxid(bytes: Buffer): bigint {
  return bytes.readBigUInt64BE(0);
}

/** `/`, or components after it: no empty one, no trailing slash. */
const ZNODE_SHAPE = /^\/(?:[^/]+(?:\/[^/]+)*)?$/;

/**
 * A znode path as the lock and the store make them: absolute, without an empty component or a trailing slash, and
 * one ZooKeeper takes (the library asserted on anything else, and the ensemble refused it: each read as an outage).
 */
function checkPath(path: unknown, name: string): void {
  if (typeof path !== 'string' || !ZNODE_SHAPE.test(path) || !takenByZookeeper(path)) refuse(name, `an absolute ${ZNODE_PATH.slice(2)}, without a trailing slash`, path);
  // Past jute.maxbuffer the ensemble drops the connection (CONNECTION_LOSS for every call on it), an outage each retry meets again.
  if (path.length > MAX_CELL_BYTES / 3) {
    const bytes = Buffer.byteLength(path, 'utf8');
    if (bytes > MAX_CELL_BYTES) throw new InvalidInputError('precondition', `${name} too long for a ZooKeeper request: ${bytes} bytes, at most ${MAX_CELL_BYTES}`);
  }
}

/** The credentials option, checked before any client is made. */
const checkNodeKeys = knownOptions('zookeeperNode options', ['connectString', 'clock', 'requestTimeoutMs', 'auth']);
const checkAuthKeys = knownOptions('auth[i]', ['scheme', 'credentials']);

function checkAuth(auth: unknown): NonNullable<ZookeeperNodeOptions['auth']> {
  if (!Array.isArray(auth)) refuse('auth', 'a list of { scheme, credentials }', auth);
  // Every index, holes included (forEach skips them: [, entry] passed, and each connect threw a TypeError on the hole).
  for (let i = 0; i < auth.length; i++) {
    const entry = checkObject(auth[i] as unknown, `auth[${i}]`) as Readonly<Record<string, unknown>>;
    checkAuthKeys(entry, `auth[${i}]`);
    checkCredential(entry.scheme, `auth[${i}].scheme`, true);
    checkCredential(entry.credentials, `auth[${i}].credentials`, false);
  }
  return auth as NonNullable<ZookeeperNodeOptions['auth']>;
}

type Refusal = { readonly kind: 'authentication' } | { readonly kind: 'refused'; readonly code: ServerRefusedError['code'] };

/** Replies no retry fixes, by the library's code: the refusal each is. */
const REFUSALS: ReadonlyMap<number, Refusal> = new Map<number, Refusal>([
  [zookeeper.Exception.AUTH_FAILED, { kind: 'authentication' }],
  // ZooKeeper 3.7+ enforcing authentication (enforce.auth.enabled): the session presented none of the schemes it requires.
  [LATER_CODES.SESSION_CLOSED_REQUIRE_SASL_AUTH, { kind: 'authentication' }],
  [zookeeper.Exception.NO_AUTH, { kind: 'refused', code: 'permission' }],
  [zookeeper.Exception.INVALID_ACL, { kind: 'refused', code: 'permission' }],
  [zookeeper.Exception.NO_CHILDREN_FOR_EPHEMERALS, { kind: 'refused', code: 'schema' }],
  [zookeeper.Exception.BAD_ARGUMENTS, { kind: 'refused', code: 'statement' }],
  [zookeeper.Exception.UNIMPLEMENTED, { kind: 'refused', code: 'statement' }],
]);

/**
 * The library's errors as the lock's typed ones: a refusal (above) as such, a programming error (isDefect) as it is,
 * the library's own assertion on a request it would not send InvalidInputError('precondition'), any other failure
 * UnavailableError; the cause kept.
 */
function typed(error: unknown, what: string): Error {
  if (error instanceof TimeoutError || error instanceof UnavailableError || error instanceof InvalidInputError || isRefusal(error)) return error;
  // A programming error (the library's, a wrapper's, ours) is no outage: an UnavailableError would be retried, and read as no-quorum.
  if (isDefect(error)) return error as Error;
  const message = `zookeeper ${what}: ${error instanceof Error ? error.message : String(error)}`;
  // The library asserts (node:assert) on a request it cannot send: it never goes out, and no retry sends it either (a
  // chroot with a '.' component was an UnavailableError at every call, every acquire denied no-quorum).
  if (error instanceof AssertionError) return new InvalidInputError('precondition', `${message} (refused by the client library before it was sent)`);
  const c = code(error);
  const refusal = c === null ? undefined : REFUSALS.get(c);
  if (refusal === undefined) return new UnavailableError(message, { cause: error });
  return match(refusal)
    .with({ kind: 'authentication' }, () => new ConnectionConfigError('authentication', message, { cause: error }))
    .with({ kind: 'refused' }, (r) => new ServerRefusedError(r.code, (error as Exception).getName(), message, { cause: error }))
    .exhaustive();
}
