import { checkSimNaming } from './backend.ts';
import type { Clock } from '../../model/clock.ts';
import { clockAt, setDrift } from '../../model/clock.ts';
import type { StorePolicy } from '../../model/design.ts';
import { DEFAULT_STATEMENT_TIMEOUT_MS, designs } from '../../model/design.ts';
import { checkDuration, checkRetries, checkResource, InvalidInputError } from '../../model/errors.ts';
import { sleep } from '../../impl/clock.ts';
import { TimeoutError, UnavailableError, withTimeout } from '../../impl/errors.ts';
import type { MonotonicClock } from '../../impl/clock.ts';
import { LeaseHandle } from '../../impl/lease.ts';
import type { Lease } from '../../impl/lease.ts';
import type { AcquireResult } from '../../impl/leaseLock.ts';
import type { BackendInstance, BackendUnderTest, Environment, InstanceOptions, LockClient } from '../adapter.ts';
import type { Endpoint, Server } from './network.ts';
import { SimNetwork } from './network.ts';
import { SimStore, storeOver } from './store.ts';
import { VirtualTime } from './time.ts';
import { mintAfter } from './mint.ts';

/**
 * An in-memory session-bound lock service, as PostgreSQL's session advisory
 * locks behave: a lock belongs to the session (connection) that took it and
 * stacks when that session takes it again; a new grant draws its token from
 * a durable per-resource counter in the same step; ending a session frees
 * its locks, and the client learns it (its leases' signals fire with
 * 'connection-lost') and opens a new session. The session-bound paths of
 * the runner (lost sessions, held signals with no deadline) run in memory
 * with this backend, checked against the pg-session model.
 *
 * A partition is one-sided, as spec 3 has it: a statement on a cut link
 * fails, and the client then closes its session (7.4, "Unknown outcomes"),
 * but the close does not cross the link: the server keeps that session's
 * locks until the link heals or keepalive ends it (the environment's
 * `keepaliveMs` of cut time, at the next advance). A session the server ends
 * that way is not told to the client until the link heals.
 */
export class SimSessionServer implements Server {
  readonly #locks = new Map<string, { session: number; count: number }>();
  readonly #counters = new Map<string, bigint>();

  constructor(private readonly tokenBase: bigint) {}

  reachable(): boolean {
    return true;
  }

  /** pg_try_advisory_lock and, for a new grant, the token in the same transaction. */
  tryLock(session: number, resource: string): { kind: 'granted'; token: bigint } | { kind: 'stacked' } | { kind: 'held' } {
    const lock = this.#locks.get(resource);
    if (lock !== undefined) {
      if (lock.session !== session) return { kind: 'held' };
      lock.count++;
      return { kind: 'stacked' };
    }
    // A token past 2^63-1 fails the statement: the lock is not taken (the real lock also ends the session).
    const token = mintAfter(this.#counters.get(resource) ?? this.tokenBase, resource);
    this.#locks.set(resource, { session, count: 1 });
    this.#counters.set(resource, token);
    return { kind: 'granted', token };
  }

  /** pg_advisory_unlock: one level of the session's stack. */
  unlock(session: number, resource: string): boolean {
    const lock = this.#locks.get(resource);
    if (lock === undefined || lock.session !== session) return false;
    if (--lock.count === 0) this.#locks.delete(resource);
    return true;
  }

  /** pg_terminate_backend: the session's locks go with it. */
  endSession(session: number): void {
    for (const [resource, lock] of [...this.#locks]) if (lock.session === session) this.#locks.delete(resource);
  }

  /** The session holding `resource`, for white-box checks. */
  holder(resource: string): number | null {
    return this.#locks.get(resource)?.session ?? null;
  }
}

/** One client's session lock: its session, and the leases it holds with their stack depth. */
export class SimSessionLock {
  #session: number;
  #attempt = 0;
  readonly #held = new Map<string, { lease: LeaseHandle; count: number }>();
  /** Sessions this client closed on a cut link: the server ends them when the close gets through. */
  readonly closedUnheard: number[] = [];

  constructor(
    private readonly network: SimNetwork,
    private readonly client: number,
    private readonly server: SimSessionServer,
    private readonly clock: MonotonicClock,
    private readonly newSession: () => number,
    /** Bound on each lock statement's reply, on the client's clock (as impl/postgres's statementTimeoutMs). */
    private readonly statementTimeoutMs: number = DEFAULT_STATEMENT_TIMEOUT_MS,
  ) {
    this.#session = newSession();
  }

  get session(): number {
    return this.#session;
  }

  async acquire(resource: string, options: { readonly ttlMs?: number; readonly retries?: number; readonly retryDelayMs?: number }): Promise<AcquireResult> {
    checkResource(resource);
    if (options.ttlMs !== undefined) throw new InvalidInputError('unsupported-operation', 'a session lock has no ttl');
    const retries = checkRetries(options.retries);
    const retryDelayMs = checkDuration(options.retryDelayMs ?? 0, 'retryDelayMs');
    for (let attempt = 0; ; attempt++) {
      const session = this.#session;
      const r = await withTimeout(this.clock, this.statementTimeoutMs, 'statement', this.network.call(this.client, 0, () => this.server.tryLock(session, resource))).catch((e: unknown) => {
        if (e instanceof TimeoutError) return 'late' as const;
        if (e instanceof UnavailableError) return 'cut' as const;
        throw e;
      });
      if (r === 'late') return this.lateReply(session);
      if (r === 'cut') {
        // The statement failed on the open connection: its outcome is unknown, so the session is closed.
        this.closeUnheard(session);
        if (attempt >= retries) return { kind: 'denied', reason: 'no-quorum' };
        await sleep(this.clock, options.retryDelayMs ?? 0);
        continue;
      }
      if (r.kind === 'granted') {
        const lease = new LeaseHandle(resource, `sim-pg:${session}:${++this.#attempt}`, r.token, null, this.clock);
        this.#held.set(resource, { lease, count: 1 });
        return { kind: 'granted', lease };
      }
      const held = this.#held.get(resource);
      if (r.kind === 'stacked' && held !== undefined) {
        held.count++;
        return { kind: 'granted', lease: held.lease };
      }
      if (attempt >= retries) return { kind: 'denied', reason: 'held' };
      await sleep(this.clock, retryDelayMs);
    }
  }

  async release(lease: Lease): Promise<void> {
    const held = this.#held.get(lease.resource);
    if (held === undefined || held.lease !== lease) return;
    if (--held.count === 0) {
      this.#held.delete(lease.resource);
      held.lease.lose('released');
    }
    const session = this.#session;
    try {
      await withTimeout(this.clock, this.statementTimeoutMs, 'statement', this.network.call(this.client, 0, () => this.server.unlock(session, lease.resource)));
    } catch (e) {
      if (e instanceof TimeoutError) {
        // No reply in time: the unlock may or may not have run; the client drops the connection (7.4).
        this.dropConnection(session);
        throw new UnavailableError(`release of '${lease.resource}' got no reply in time; the session was ended, so the server frees the lock`, { cause: e });
      }
      if (!(e instanceof UnavailableError)) throw e;
      this.releaseFailed(session, lease.resource, e);
    }
  }

  /**
   * The unlock did not get through: its outcome is unknown, so the client
   * closes the session (every lease on it is lost) and says so (spec 7.4).
   * Overridable only to build broken fixtures.
   */
  protected releaseFailed(session: number, resource: string, cause: UnavailableError): void {
    this.closeUnheard(session);
    throw new UnavailableError(`release of '${resource}' failed; the session was closed, so the server frees the lock once it sees the close`, { cause });
  }

  /** Closes `session` on a cut link: the client's leases on it are lost now, the server hears of it when the link heals. */
  private closeUnheard(session: number): void {
    if (session !== this.#session) return;
    this.closedUnheard.push(session);
    this.connectionLost();
  }

  /** The owner value of this client's lease on `resource` if `session` is its current one (for inspect). */
  ownerOf(resource: string, session: number): string[] {
    const held = this.#held.get(resource);
    return session === this.#session && held !== undefined ? [held.lease.owner] : [];
  }

  /**
   * No reply within the statement timeout: the statement may have taken the
   * lock, so the session is ended (the server frees all its locks) and the
   * outcome is `timed-out` (spec 7.4). Overridable only to build broken fixtures.
   */
  protected lateReply(session: number): AcquireResult {
    this.dropConnection(session);
    return { kind: 'timed-out' };
  }

  /** The client drops its connection: the server ends the session, or on a cut link only when the close gets through. */
  private dropConnection(session: number): void {
    if (this.network.isCut(this.client, 0)) this.closeUnheard(session);
    else this.endSession(session);
  }

  /** Drops the connection of `session`: the server ends it, and the client's leases on it are lost. */
  protected endSession(session: number): void {
    this.server.endSession(session);
    if (session === this.#session) this.connectionLost();
  }

  /** Tells a lease its session is gone. Overridable only to build broken fixtures. */
  protected signalLoss(lease: LeaseHandle): void {
    lease.lose('connection-lost');
  }

  /** The server ended the session: every lease on it is lost; the next call opens a new one. */
  connectionLost(): void {
    for (const { lease } of this.#held.values()) this.signalLoss(lease);
    this.#held.clear();
    this.#session = this.newSession();
  }
}

/** Cut time after which the server's keepalive ends a cut client's session (at the next advance), by default. */
export const KEEPALIVE_MS = 20;

export interface SimSessionParts {
  /** A client's session lock. Default: SimSessionLock. */
  readonly lock?: (...args: ConstructorParameters<typeof SimSessionLock>) => SimSessionLock;
  /** Cut time after which keepalive ends a cut session (default KEEPALIVE_MS). */
  readonly keepaliveMs?: number;
}

export function simSessionBackend(store: StorePolicy, parts: SimSessionParts = {}, name?: string): BackendUnderTest {
  checkSimNaming(store, name);
  name ??= `memory pg-session / ${store}`;
  return {
    name,
    design: designs.pgSession(),
    capabilities: { store, ttl: false, sessionBound: true, reentrant: true },
    start: async (options) => startSession(store, parts, options),
  };
}

function startSession(policy: StorePolicy, parts: SimSessionParts, options: InstanceOptions): BackendInstance {
  const time = new VirtualTime();
  const server = new SimSessionServer(options.tokenBase);
  const store = new SimStore(policy);
  const network = new SimNetwork(time, (e: Endpoint) => (e === 'store' ? store : server));
  let sessions = 0;
  const clocks: Clock[] = Array.from({ length: options.clients }, () => clockAt());
  const timing = network.serverTiming();
  const locks = clocks.map((_c, client) => {
    // A paused client runs no timers until it resumes (then they fire before its replies): a statement in flight across a pause.
    const clock = network.pausable(client, time.clockOf(() => clocks[client]!));
    const args: ConstructorParameters<typeof SimSessionLock> = [network, client, server, clock, () => ++sessions];
    return { lock: parts.lock?.(...args) ?? new SimSessionLock(...args), clock };
  });
  const clients: LockClient[] = locks.map(({ lock, clock }, client) => ({
    acquire: (resource, o) => {
      timing.slowOperation(client);
      return lock.acquire(resource, o);
    },
    release: (lease) => {
      timing.slowOperation(client);
      return lock.release(lease);
    },
    store: storeOver(network, client, store),
    clock,
  }));
  const keepaliveMs = parts.keepaliveMs ?? KEEPALIVE_MS;
  /** Cut clients, with the true time of the cut; and those whose session the server ended unheard. */
  const cutSince = new Map<number, number>();
  const endedUnheard = new Set<number>();
  let settledMs = 0;
  const env: Environment = {
    nowMs: () => time.nowMs(),
    advanceTo: async (t) => {
      // Only an `advance` moves time here from where the last one left it (an operation's latency moves it in runUntil):
      // the model has keepalive act at an advance only.
      const advancing = t > time.nowMs() && time.nowMs() === settledMs;
      await time.advanceTo(t);
      settledMs = time.nowMs();
      if (!advancing) return;
      // Keepalive: a session cut long enough is ended by the server; nobody tells the client.
      for (const [client, since] of cutSince) {
        if (t - since < keepaliveMs) continue;
        const { lock } = locks[client]!;
        for (const session of lock.closedUnheard.splice(0)) server.endSession(session);
        server.endSession(lock.session);
        endedUnheard.add(client);
      }
    },
    runUntil: (work, limitMs) => time.runUntil(work, limitMs),
    // No clock step (advisory locks have no expiry: no server clock matters), no crash.
    faults: {
      clockDrift: async (target, driftPpm) => {
        if ('client' in target) clocks[target.client] = setDrift(clocks[target.client]!, time.nowMs(), driftPpm);
      },
      pause: network.faults().pause,
      delay: network.faults().delay,
      ...timing.faults,
      partition: {
        cut: async (client, node) => {
          network.cut(client, node);
          if (!cutSince.has(client)) cutSince.set(client, time.nowMs());
        },
        heal: async (client, node) => {
          network.heal(client, node);
          cutSince.delete(client);
          // The closes held back cross now: the client's closed sessions end, and it hears of one the server ended.
          const { lock } = locks[client]!;
          for (const session of lock.closedUnheard.splice(0)) server.endSession(session);
          if (endedUnheard.delete(client)) lock.connectionLost();
        },
      },
      killConnection: async (client) => {
        const { lock } = locks[client]!;
        // Every session of the client's on the server: also one it closed that the server has not heard of.
        for (const session of lock.closedUnheard.splice(0)) server.endSession(session);
        server.endSession(lock.session);
        lock.connectionLost();
      },
    },
    inspect: async (resource) => {
      const session = server.holder(resource);
      // A lock whose session no client knows any more shows as an owner no lease has.
      const owner = session === null ? null : (locks.flatMap(({ lock }) => lock.ownerOf(resource, session))[0] ?? `sim-pg:${session}:orphan`);
      return [owner];
    },
  };
  return { clients, env, close: async () => undefined };
}
