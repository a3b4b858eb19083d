import type { Clock } from '../../model/clock.ts';
import { clockAt, setDrift } from '../../model/clock.ts';
import type { StorePolicy } from '../../model/design.ts';
import { DEFAULT_STATEMENT_TIMEOUT_MS, designs } from '../../model/design.ts';
import { checkResource, InvalidInputError } from '../../model/errors.ts';
import { sleep } from '../../impl/clock.ts';
import { TimeoutError, withTimeout } from '../../impl/errors.ts';
import type { MonotonicClock } from '../../impl/clock.ts';
import { LeaseHandle } from '../../impl/lease.ts';
import type { Lease } from '../../impl/lease.ts';
import type { AcquireResult } from '../../impl/leaseLock.ts';
import type { BackendInstance, BackendUnderTest, Environment, InstanceOptions, LockClient } from '../adapter.ts';
import type { Endpoint, Server } from './network.ts';
import { SimNetwork } from './network.ts';
import { SimStore, storeOver } from './store.ts';
import { VirtualTime } from './time.ts';

/**
 * An in-memory session-bound lock service, as PostgreSQL's session advisory
 * locks behave: a lock belongs to the session (connection) that took it and
 * stacks when that session takes it again; a new grant draws its token from
 * a durable per-resource counter in the same step; ending a session frees
 * its locks, and the client learns it (its leases' signals fire with
 * 'connection-lost') and opens a new session. The session-bound paths of
 * the runner (lost sessions, held signals with no deadline) run in memory
 * with this backend, checked against the pg-session model.
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
    this.#locks.set(resource, { session, count: 1 });
    const token = (this.#counters.get(resource) ?? this.tokenBase) + 1n;
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
    const retries = options.retries ?? 0;
    if (!Number.isInteger(retries) || retries < 0 || retries > 100) throw new InvalidInputError('precondition', 'retries must be an integer in [0, 100]');
    for (let attempt = 0; ; attempt++) {
      const session = this.#session;
      const r = await withTimeout(this.clock, this.statementTimeoutMs, 'statement', this.network.call(this.client, 0, () => this.server.tryLock(session, resource))).catch((e: unknown) => {
        if (e instanceof TimeoutError) return null;
        throw e;
      });
      if (r === null) return this.lateReply(session);
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
      await sleep(this.clock, options.retryDelayMs ?? 0);
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
    await this.network.call(this.client, 0, () => this.server.unlock(session, lease.resource));
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
    this.endSession(session);
    return { kind: 'timed-out' };
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

export interface SimSessionParts {
  /** A client's session lock. Default: SimSessionLock. */
  readonly lock?: (...args: ConstructorParameters<typeof SimSessionLock>) => SimSessionLock;
}

export function simSessionBackend(store: StorePolicy, parts: SimSessionParts = {}, name = `memory pg-session / ${store}`): BackendUnderTest {
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
  const locks = clocks.map((_c, client) => {
    const clock = time.clockOf(() => clocks[client]!);
    const args: ConstructorParameters<typeof SimSessionLock> = [network, client, server, clock, () => ++sessions];
    return { lock: parts.lock?.(...args) ?? new SimSessionLock(...args), clock };
  });
  const clients: LockClient[] = locks.map(({ lock, clock }, client) => ({
    acquire: (resource, o) => lock.acquire(resource, o),
    release: (lease) => lock.release(lease),
    store: storeOver(network, client, store),
    clock,
  }));
  const env: Environment = {
    nowMs: () => time.nowMs(),
    advanceTo: (t) => time.advanceTo(t),
    runUntil: (work, limitMs) => time.runUntil(work, limitMs),
    // No clock step (advisory locks have no expiry: no server clock matters), no crash, no partition.
    faults: {
      clockDrift: async (target, driftPpm) => {
        if ('client' in target) clocks[target.client] = setDrift(clocks[target.client]!, time.nowMs(), driftPpm);
      },
      pause: network.faults().pause,
      delay: network.faults().delay,
      killConnection: async (client) => {
        const { lock } = locks[client]!;
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
