import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import pg from 'pg';
import { PostgresServer } from '../conformance/env/postgresServer.ts';
import { RedisServer } from '../conformance/env/redisServer.ts';
import { LeaseLostError } from '../impl/errors.ts';
import type { FencedStore } from '../impl/fencedStore.ts';
import type { Lease } from '../impl/lease.ts';
import { LeaseLock } from '../impl/leaseLock.ts';
import { PostgresSessionLock } from '../impl/postgres/sessionLock.ts';
import { postgresFencedStore } from '../impl/postgres/store.ts';
import { redisFencedStore, redisLeaseNode } from '../impl/redis/index.ts';
import { LockNotAcquiredError, using } from '../impl/using.ts';
import { PausableClient } from './pausable.ts';

/**
 * The soak (issue 17 item 6): many concurrent holders on Redis (one node),
 * Redlock (three nodes) and PostgreSQL session locks, each writing through
 * a fenced store (monotonic: a holder writes more than once) while it holds its lease, with auto-extension
 * (using()), while servers restart, connections are killed in bursts and
 * clients pause. It samples heap, handles and acquisitions over time and
 * counts what must stay zero: unhandled rejections, stale writes a fenced
 * store accepted, and uses of a ttl lease that its signal allowed although
 * the servers' keys could have expired (the safety consequence: the lease
 * judges its deadline at the moment of use); and, beside it, for ttl leases
 * lost by expiry, whether the signal's event fired before that expiry (a
 * timer is as punctual as the event loop).
 */
export interface SoakOptions {
  readonly durationMs: number;
  /** Concurrent holders, split evenly over the three backends. */
  readonly holders: number;
  /** Resources per backend (holders contend for them). */
  readonly resources: number;
  readonly sampleEveryMs: number;
  /** One fault every this many ms, the kinds in turn. */
  readonly faultEveryMs: number;
  readonly ttlMs: number;
  /** Progress lines, one per sample. */
  readonly onSample?: (sample: SoakSample) => void;
}

export type FaultKind = 'redis-restart' | 'kill-connections' | 'client-pause' | 'postgres-restart';
const FAULTS: readonly FaultKind[] = ['redis-restart', 'kill-connections', 'client-pause', 'postgres-restart'];

export interface SoakSample {
  readonly atS: number;
  readonly acquisitionsPerS: { readonly redis: number; readonly redlock: number; readonly postgres: number };
  readonly heapMb: number;
  /** Active handles and requests (process.getActiveResourcesInfo()). */
  readonly handles: number;
  /** Leases the Redis lock objects still track, and their rounds still awaiting replies. */
  readonly trackedLeases: number;
  readonly backgroundRounds: number;
  readonly faults: readonly FaultKind[];
}

export interface SoakReport {
  readonly samples: readonly SoakSample[];
  readonly acquisitions: number;
  readonly unhandledRejections: number;
  readonly writesAccepted: number;
  readonly writesRejected: number;
  readonly writeErrors: number;
  readonly staleWritesAccepted: number;
  /**
   * Before every write a Redis or Redlock holder reads its signal at the
   * moment of use, as a careful client does (and then writes anyway, for the
   * fence). Uses the signal allowed, and of those the ones later than the
   * servers' earliest expiry of the lease's keys (must be 0); uses it refused.
   */
  readonly usesAllowed: number;
  readonly usesAllowedAfterExpiry: number;
  readonly usesRefused: number;
  /** ttl leases whose signal fired for expiry: all, and those that fired no later than the servers' earliest expiry. */
  readonly expired: number;
  readonly expiredInTime: number;
  /**
   * Expiry signals (client not paused) that fired later than scheduled by
   * more than the event loop's worst stall, beyond the lateness of the timer
   * that fired them: a late signal the machine's load does not explain (must
   * be 0). The worst such lateness and stall, in ms.
   */
  readonly expiredLateUnexplained: number;
  readonly worstLatenessMs: number;
  readonly worstLoopDelayMs: number;
  /** Of those, the ones whose client was paused during the lease (a paused process runs no timer: its signal comes at resume). */
  readonly expiredWhilePaused: number;
  readonly expiredWhilePausedInTime: number;
  readonly lostConnection: number;
  readonly notAcquired: number;
  /** Errors other than a denial, by name. */
  readonly otherErrors: Readonly<Record<string, number>>;
  /** The first error of each name in `otherErrors`: where it came from and its message (and its cause's). */
  readonly otherErrorSamples: Readonly<Record<string, string>>;
  readonly faults: Readonly<Record<FaultKind, number>>;
}

type Backend = 'redis' | 'redlock' | 'postgres';
const REDLOCK_NODES = 3;
const CLIENTS_PER_BACKEND = 5;
const DRIFT_FACTOR = 0.01;
const CLOCK_MARGIN_MS = 2;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A small seeded generator (xorshift32): the soak's choices repeat run to run (its timing does not). */
function seeded(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 2 ** 32;
  };
}

export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const random = seeded(20161010);
  let unhandled = 0;
  const onUnhandled = (): void => void unhandled++;
  process.on('unhandledRejection', onUnhandled);
  const redisServers: RedisServer[] = [];
  let postgres: PostgresServer | null = null;
  const connections: Redis[] = [];
  const sessionLocks: PostgresSessionLock[] = [];
  let storePool: pg.Pool | null = null;
  let admin: pg.Pool | null = null;
  const started = performance.now();
  try {
    // AOF with fsync always: a restarted node keeps its keys and counters, so a restart is an outage, not a reset.
    for (let i = 0; i < 1 + REDLOCK_NODES; i++) redisServers.push(await RedisServer.start({ persistence: 'aof-always' }));
    postgres = await PostgresServer.start({ parentDir: '/dev/shm', startTimeoutMs: 60_000 });
    const pgServer = postgres;
    const pgConfig: pg.ClientConfig = { ...pgServer.connection, connectionTimeoutMillis: 5_000, statement_timeout: 5_000, query_timeout: 5_000 };
    storePool = new pg.Pool({ ...pgConfig, max: 8 });
    storePool.on('error', () => undefined);
    admin = new pg.Pool({ ...pgConfig, max: 1 });
    admin.on('error', () => undefined);
    await admin.query('CREATE TABLE IF NOT EXISTS lockcheck_store (resource text PRIMARY KEY, value text NOT NULL, token bigint NOT NULL CHECK (token >= 0), highest bigint NOT NULL CHECK (highest >= 0))');
    const connect = (server: RedisServer): Redis => {
      const redis = new Redis({ ...server.connection, maxRetriesPerRequest: 1, commandTimeout: 2_000, connectTimeout: 2_000, retryStrategy: () => 100 });
      redis.on('error', () => undefined);
      connections.push(redis);
      return redis;
    };
    const [single, ...quorum] = redisServers as [RedisServer, ...RedisServer[]];
    const redisStore = redisFencedStore(connect(single), 'monotonic', { prefix: 'soak' });
    const pgStore = postgresFencedStore(storePool, 'monotonic');
    const stores: Record<Backend, FencedStore> = { redis: redisStore, redlock: pgStore, postgres: pgStore };

    const safetyMarginMs = Math.round(options.ttlMs / 10);
    const leaseClients: Array<{ readonly client: PausableClient; readonly lock: LeaseLock; readonly backend: 'redis' | 'redlock' }> = [];
    for (const backend of ['redis', 'redlock'] as const) {
      for (let c = 0; c < CLIENTS_PER_BACKEND; c++) {
        const client = new PausableClient();
        const servers = backend === 'redis' ? [single] : quorum;
        const nodes = servers.map((s) => client.node(redisLeaseNode(connect(s), { prefix: backend === 'redis' ? 'soak' : 'soak5' })));
        const lock = new LeaseLock({ nodes, clock: client.clock, requestTimeoutMs: 500, driftFactor: DRIFT_FACTOR, clockMarginMs: CLOCK_MARGIN_MS, safetyMarginMs });
        leaseClients.push({ client, lock, backend });
      }
    }
    for (let c = 0; c < CLIENTS_PER_BACKEND; c++) sessionLocks.push(new PostgresSessionLock({ connection: pgConfig, statementTimeoutMs: 5_000 }));

    // ---------------------------------------------------------------- counters
    const acquisitions: Record<Backend, number> = { redis: 0, redlock: 0, postgres: 0 };
    let acquisitionsTotal = 0;
    let accepted = 0;
    let rejected = 0;
    let writeErrors = 0;
    let stale = 0;
    let usesAllowed = 0;
    let usesAllowedLate = 0;
    let usesRefused = 0;
    let expired = 0;
    let expiredInTime = 0;
    let expiredPaused = 0;
    /** How late each expiry signal of a client that was not paused fired, against its schedule (validUntilMs - safety margin), less its timer's own lateness. */
    const lateness: number[] = [];
    const loopDelay = monitorEventLoopDelay({ resolution: 10 });
    loopDelay.enable();
    let expiredPausedInTime = 0;
    let lostConnection = 0;
    let notAcquired = 0;
    const otherErrors: Record<string, number> = {};
    const faultCounts: Record<FaultKind, number> = { 'redis-restart': 0, 'kill-connections': 0, 'client-pause': 0, 'postgres-restart': 0 };
    /** Per backend and resource: the highest token whose write the store accepted, as replies arrived. */
    const acceptedUpTo = new Map<string, bigint>();
    const otherErrorSamples: Record<string, string> = {};
    const other = (where: string, during: string) => (e: unknown): void => {
      const name = e instanceof Error ? e.name : typeof e;
      otherErrors[name] = (otherErrors[name] ?? 0) + 1;
      const cause = e instanceof Error && e.cause instanceof Error ? ` (cause: ${e.cause.message})` : '';
      otherErrorSamples[name] ??= `${where} ${during}: ${e instanceof Error ? e.message : String(e)}${cause}`;
    };

    /** A fenced write (monotonic: a holder writes several times with its token); stale if accepted although a higher token's write had been accepted before it was sent. */
    const write = async (backend: Backend, resource: string, token: bigint): Promise<void> => {
      const key = `${backend}/${resource}`;
      const before = acceptedUpTo.get(key) ?? -1n;
      try {
        const r = await stores[backend].write(`${backend}-${resource}`, token, `by ${token}`);
        if (r.kind === 'accepted') {
          accepted++;
          if (token < before) stale++;
          if (token > (acceptedUpTo.get(key) ?? -1n)) acceptedUpTo.set(key, token);
        } else rejected++;
      } catch {
        writeErrors++;
      }
    };

    /** The servers set a key's expiry when a request arrives, after the client sent it; validUntilMs is that send time + ttl - the drift allowance. */
    const serversEarliestExpiry = (validUntilMs: number): number => validUntilMs + Math.ceil(DRIFT_FACTOR * options.ttlMs) + CLOCK_MARGIN_MS;

    /** A use of a ttl lease, judged by its signal read now: one the signal allows must come before the servers' keys can expire. */
    const use = (lease: Lease, signal: AbortSignal, client: PausableClient): void => {
      if (signal.aborted) {
        usesRefused++;
        return;
      }
      usesAllowed++;
      if (lease.validUntilMs === null || client.clock.now() > serversEarliestExpiry(lease.validUntilMs)) usesAllowedLate++;
    };

    /** Watches a ttl lease's signal: an expiry must come no later than the servers' earliest expiry of its keys. */
    const watch = (lease: Lease, client: PausableClient): void => {
      const pausesAtGrant = client.pauses;
      const wasPaused = (): boolean => client.paused || client.pauses !== pausesAtGrant;
      lease.signal.addEventListener(
        'abort',
        () => {
          const reason = lease.signal.reason as unknown;
          if (!(reason instanceof LeaseLostError) || reason.reason !== 'expired' || lease.validUntilMs === null) return;
          const inTime = client.clock.now() <= serversEarliestExpiry(lease.validUntilMs);
          if (wasPaused()) {
            expiredPaused++;
            if (inTime) expiredPausedInTime++;
          } else {
            expired++;
            if (inTime) expiredInTime++;
            // Fired by its timer: only what comes on top of the timer's own lateness (the loaded machine's) is the lease's.
            lateness.push(client.clock.now() - (lease.validUntilMs - safetyMarginMs) - (client.timerLateMs ?? 0));
          }
        },
        { once: true },
      );
    };

    let stopping = false;
    /** Work while holding: 1-3 steps, each a pause of up to 60 % of the ttl (so auto-extension is needed) and a fenced write. */
    const work = async (backend: Backend, resource: string, token: bigint, wait: (ms: number) => Promise<void>, rnd: () => number, beforeWrite?: () => void): Promise<void> => {
      const steps = 1 + Math.floor(rnd() * 3);
      for (let k = 0; k < steps; k++) {
        await wait(Math.floor(rnd() * options.ttlMs * 0.6));
        beforeWrite?.();
        // Written whatever the signal says: the fence, not the client's good manners, must stop a stale write.
        await write(backend, resource, token);
      }
    };

    const holder = async (index: number): Promise<void> => {
      const rnd = seeded(1000 + index);
      const backend: Backend = (['redis', 'redlock', 'postgres'] as const)[index % 3]!;
      const slot = Math.floor(index / 3);
      // Holders slot, slot + resources, ... contend for one resource, each on another client (PostgreSQL session locks of one client would stack, not contend).
      const resource = `r${slot % options.resources}`;
      const c = Math.floor(slot / options.resources) % CLIENTS_PER_BACKEND;
      while (!stopping) {
        try {
          if (backend === 'postgres') {
            const lock = sessionLocks[c]!;
            const r = await lock.acquire(resource, { retries: 3, retryDelayMs: 50 });
            if (r.kind !== 'granted') {
              notAcquired++;
              await sleep(50 + Math.floor(rnd() * 100));
            }
            else {
              acquisitions.postgres++;
              acquisitionsTotal++;
              const lease = r.lease;
              const lost = (): void => void ((lease.signal.reason as LeaseLostError).reason === 'connection-lost' && lostConnection++);
              // A connection can end between the grant and this line: a listener added to a fired signal never runs.
              if (lease.signal.aborted) lost();
              else lease.signal.addEventListener('abort', lost, { once: true });
              try {
                await work(backend, resource, lease.token, sleep, rnd);
              } finally {
                await lock.release(lease).catch(other(backend, 'release'));
              }
            }
          } else {
            const { client, lock } = leaseClients.filter((l) => l.backend === backend)[c]!;
            await using(lock, resource, { ttlMs: options.ttlMs, retries: 3, retryDelayMs: 50, retryJitterMs: 50 }, async (signal, lease) => {
              acquisitions[backend]++;
              acquisitionsTotal++;
              watch(lease, client);
              await work(backend, resource, lease.token, (ms) => client.sleep(ms), rnd, () => use(lease, signal, client));
            });
          }
        } catch (e) {
          if (e instanceof LockNotAcquiredError) notAcquired++;
          else other(backend, backend === 'postgres' ? 'acquire' : 'using()')(e);
        }
        await sleep(20 + Math.floor(rnd() * 100));
      }
    };

    // ---------------------------------------------------------------- faults
    const faultsInInterval: FaultKind[] = [];
    let faultIndex = 0;
    const redisAdmins = redisServers.map((s) => {
      const r = new Redis({ ...s.connection, maxRetriesPerRequest: 1, commandTimeout: 2_000, retryStrategy: () => 100 });
      r.on('error', () => undefined);
      connections.push(r);
      return r;
    });
    const fault = async (kind: FaultKind): Promise<void> => {
      faultCounts[kind]++;
      faultsInInterval.push(kind);
      if (kind === 'redis-restart') await redisServers[faultIndex % redisServers.length]!.restart();
      else if (kind === 'postgres-restart') await pgServer.restart();
      else if (kind === 'client-pause') {
        const { client } = leaseClients[Math.floor(random() * leaseClients.length)]!;
        client.pause();
        await sleep(Math.round(options.ttlMs * 1.5));
        client.resume();
      } else {
        // A burst: every client connection on every server at once (the admin connections stay).
        await Promise.all(redisAdmins.map((r) => r.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes').catch(() => undefined)));
        await admin!.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = 'client backend' AND datname = current_database()").catch(() => undefined);
      }
    };
    let cycleDone: () => void = () => undefined;
    /** The run lasts its duration and at least one fault of every kind, however slow the machine. */
    const everyKindOnce = new Promise<void>((resolve) => (cycleDone = resolve));
    const faults = (async () => {
      while (!stopping) {
        await sleep(options.faultEveryMs);
        if (stopping) break;
        const kind = FAULTS[faultIndex % FAULTS.length]!;
        await fault(kind).catch(other('fault', kind));
        if (++faultIndex === FAULTS.length) cycleDone();
      }
    })();

    // ---------------------------------------------------------------- samples
    const samples: SoakSample[] = [];
    let lastAt = performance.now();
    let last = { ...acquisitions };
    const sampler = setInterval(() => {
      const now = performance.now();
      const dt = (now - lastAt) / 1000;
      const rate = (b: Backend): number => Math.round((acquisitions[b] - last[b]) / dt);
      const sample: SoakSample = {
        atS: Math.round((now - started) / 1000),
        acquisitionsPerS: { redis: rate('redis'), redlock: rate('redlock'), postgres: rate('postgres') },
        heapMb: Math.round(process.memoryUsage().heapUsed / 2 ** 20),
        handles: process.getActiveResourcesInfo().length,
        trackedLeases: leaseClients.reduce((n, l) => n + l.lock.trackedLeases, 0),
        backgroundRounds: leaseClients.reduce((n, l) => n + l.lock.backgroundRounds, 0),
        faults: faultsInInterval.splice(0),
      };
      samples.push(sample);
      options.onSample?.(sample);
      lastAt = now;
      last = { ...acquisitions };
    }, options.sampleEveryMs);

    const holders = Array.from({ length: options.holders }, (_, i) => holder(i));
    await sleep(options.durationMs);
    await everyKindOnce;
    stopping = true;
    await Promise.all(holders);
    await faults;
    clearInterval(sampler);
    for (const l of leaseClients) l.client.resume();
    await Promise.all(leaseClients.map((l) => l.lock.settled()));
    loopDelay.disable();
    const worstLoopDelayMs = loopDelay.max / 1e6;
    return {
      expiredLateUnexplained: lateness.filter((ms) => ms > worstLoopDelayMs + 10).length,
      worstLatenessMs: Math.round(Math.max(0, ...lateness)),
      worstLoopDelayMs: Math.round(worstLoopDelayMs),
      samples,
      acquisitions: acquisitionsTotal,
      unhandledRejections: unhandled,
      writesAccepted: accepted,
      writesRejected: rejected,
      writeErrors,
      staleWritesAccepted: stale,
      usesAllowed,
      usesAllowedAfterExpiry: usesAllowedLate,
      usesRefused,
      expired,
      expiredInTime,
      expiredWhilePaused: expiredPaused,
      expiredWhilePausedInTime: expiredPausedInTime,
      lostConnection,
      notAcquired,
      otherErrors,
      otherErrorSamples,
      faults: faultCounts,
    };
  } finally {
    await Promise.all(sessionLocks.map((l) => l.close().catch(() => undefined)));
    for (const c of connections) c.disconnect();
    await storePool?.end().catch(() => undefined);
    await admin?.end().catch(() => undefined);
    await Promise.all(redisServers.map((s) => s.stop()));
    await postgres?.stop();
    // Rejections of the last disconnects still arrive in the next turns; count them before letting go.
    await sleep(50);
    process.off('unhandledRejection', onUnhandled);
  }
}
