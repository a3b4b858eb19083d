/**
 * A replicated Redis (spec 7.9, redis-replicated) under the test environment's
 * control: one primary, one replica replicating from it asynchronously, and
 * one Sentinel that promotes the replica when the primary fails. All three on
 * free loopback ports, each in its own temporary directory, sharing one random
 * password (requirepass, masterauth, sentinel auth-pass); the Sentinel has a
 * random password of its own.
 *
 * The failover fault: `holdReplication()` drops the replica's link and gives
 * the replica a wrong masterauth, so it cannot sync again (later writes stay
 * on the primary only) while it keeps answering Sentinel; `failover()` kills the primary,
 * lets the replica run again and waits until Sentinel names it primary.
 * Deterministic: no write reaches the replica between the two, whatever the timing.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { redisConfigArgument } from './configText.ts';
import type { FakeClockFile } from './faketime.ts';
import { EnvironmentError, RedisServer, StoppedWhileStarting } from './redisServer.ts';
import { RespError, type RespValue } from './resp.ts';
import { RunEnvironmentError } from './runEnvironment.ts';
import { rejectAfter } from '../realTimeLimit.ts';
import { leftWithin, pauseWithin } from './deadline.ts';
import { systemClock } from '../../impl/clock.ts';
import { withTimeout } from '../../impl/errors.ts';

/** The name Sentinel monitors the primary under. */
export const MASTER_NAME = 'lockcheck';

export interface ReplicatedOptions {
  /**
   * Sentinel's down-after-milliseconds: how long the primary must be silent before Sentinel judges it
   * down by itself. Default 60000, longer than any run: the failover is asked for (SENTINEL FAILOVER),
   * so a loaded machine that stalls a primary never fails it over behind the run's back; and Sentinel
   * promotes only a replica whose link has been down less than ten times this, so a replica held for
   * a whole run (holdReplication) stays promotable.
   */
  readonly downAfterMs?: number;
  /** Sentinel's failover-timeout. Default 3000. */
  readonly failoverTimeoutMs?: number;
  /** Bound on each wait of start-up and failover. Default 60000: Sentinel took over 20 s to promote on a 2-core machine at load 16 (docs/ci.md). */
  readonly timeoutMs?: number;
  /** One wall clock for both data servers (the model's node clock, spec 7.9); their timers run on real time. */
  readonly clockFile?: FakeClockFile;
}

const POLL_MS = 50;
const INSTALL_SENTINEL = 'apt-get update && apt-get install -y --no-install-recommends redis-sentinel';

export class RedisReplicated {
  readonly #timeoutMs: number;
  #replicationHeld = false;
  #primary: RedisServer;
  #replica: RedisServer;

  private constructor(
    primary: RedisServer,
    replica: RedisServer,
    readonly sentinel: RedisServer,
    timeoutMs: number,
  ) {
    this.#primary = primary;
    this.#replica = replica;
    this.#timeoutMs = timeoutMs;
  }

  /** The data server serving as primary (after a failover and rejoin, the one that started as the replica). */
  get primary(): RedisServer {
    return this.#primary;
  }

  get replica(): RedisServer {
    return this.#replica;
  }

  /** Starts primary, replica and Sentinel; resolves once the replica is in sync and Sentinel knows it. */
  static async start(options: ReplicatedOptions = {}): Promise<RedisReplicated> {
    const downAfterMs = options.downAfterMs ?? 60_000;
    const failoverTimeoutMs = options.failoverTimeoutMs ?? 3000;
    const timeoutMs = options.timeoutMs ?? 60_000;
    const password = randomBytes(24).toString('base64url');
    const started: RedisServer[] = [];
    // A stopAllRedisServers() meanwhile stopped what had started: nothing more is started, and no wait runs on to its bound.
    const stopped = (): boolean => started.some((s) => s.stopped);
    const stillStarting = (next: string): void => {
      if (stopped()) throw new StoppedWhileStarting(`RedisReplicated: a server was stopped while it was starting, before ${next}`);
    };
    try {
      // The primary also carries masterauth: it comes back as a replica after a failover.
      // A full sync starts at once, not after the default 5 s wait for more replicas (either may serve one).
      const serving = [`masterauth ${redisConfigArgument(password)}`, 'repl-diskless-sync-delay 0'];
      const clock = options.clockFile === undefined ? {} : { clockFile: options.clockFile, realMonotonic: true };
      const primary = await RedisServer.start({ persistence: 'none', password, config: serving, ...clock });
      started.push(primary);
      const replica = await RedisServer.start({
        persistence: 'none',
        password,
        config: [...serving, `replicaof ${primary.host} ${primary.port}`],
        ...clock,
      });
      started.push(replica);
      stillStarting('the replica synced');
      // Sentinel learns of replicas from the primary's INFO, which it asks for at once and then every 10 s:
      // started after the replica is in sync, it knows the replica from its first look.
      await pollUntil(timeoutMs, 'the replica in sync', async () => {
        const [p, r] = await Promise.all([info(primary, 'replication'), info(replica, 'replication')]);
        return inSync(p, r);
      }, () => replica.logTail(), stopped);
      stillStarting('Sentinel was started');
      const sentinel = await RedisServer.start({
        persistence: 'none',
        sentinel: true,
        config: [
          `sentinel monitor ${MASTER_NAME} ${primary.host} ${primary.port} 1`,
          `sentinel auth-pass ${MASTER_NAME} ${redisConfigArgument(password)}`,
          `sentinel down-after-milliseconds ${MASTER_NAME} ${downAfterMs}`,
          `sentinel failover-timeout ${MASTER_NAME} ${failoverTimeoutMs}`,
          `sentinel parallel-syncs ${MASTER_NAME} 1`,
        ],
      }).catch((e: unknown) => {
        throw e instanceof EnvironmentError && /not installed|ENOENT/.test(e.message) ? new EnvironmentError('redis-sentinel is not installed', INSTALL_SENTINEL) : e;
      });
      started.push(sentinel);
      stillStarting('Sentinel was tuned');
      await tuneSentinel(sentinel);
      const cluster = new RedisReplicated(primary, replica, sentinel, timeoutMs);
      await cluster.#until('the replica in sync and known to Sentinel', async () => (await cluster.replicaInSync()) && (await cluster.#sentinelKnowsReplica()));
      stillStarting('start() returned');
      return cluster;
    } catch (error) {
      // What failed after a stop is the stop's doing (a server gone, a wait cut short), not the environment's.
      const stoppedWhileStarting = stopped() || error instanceof StoppedWhileStarting;
      await Promise.all(started.map((s) => s.stop()));
      if (stoppedWhileStarting && !(error instanceof StoppedWhileStarting)) throw new StoppedWhileStarting('RedisReplicated: a server was stopped while it was starting', { cause: error });
      throw error;
    }
  }

  /** The fields an ioredis client needs to follow the primary through Sentinel. Holds the passwords: never print. */
  get sentinelConnection(): { sentinels: Array<{ host: string; port: number }>; name: string; password: string; sentinelPassword: string } {
    return { sentinels: [{ host: this.sentinel.host, port: this.sentinel.port }], name: MASTER_NAME, password: this.primary.password, sentinelPassword: this.sentinel.password };
  }

  /**
   * A connection that follows the primary through Sentinel (ioredis asks it
   * for the primary's address and checks its role), ready, every wait bounded.
   */
  async connect(commandTimeoutMs = 5000): Promise<Redis> {
    const c = this.sentinelConnection;
    const redis = new Redis({
      sentinels: c.sentinels,
      name: c.name,
      password: c.password,
      sentinelPassword: c.sentinelPassword,
      role: 'master',
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: commandTimeoutMs,
      connectTimeout: commandTimeoutMs,
      sentinelRetryStrategy: () => 50,
      retryStrategy: () => 50,
      lazyConnect: true,
    });
    // Errors reach the commands that fail; reconnect attempts need no report.
    redis.on('error', () => undefined);
    try {
      // rejectAfter clears its timer when the connect settles: a race with a sleep left it running for the whole bound.
      await rejectAfter(redis.connect(), this.#timeoutMs, () => new EnvironmentError(`no connection to the primary through Sentinel within ${this.#timeoutMs} ms`));
    } catch (e) {
      redis.disconnect();
      throw e;
    }
    return redis;
  }

  /** The primary's port as Sentinel names it now. */
  async primaryPort(): Promise<number> {
    const reply = await this.sentinel.command(['SENTINEL', 'get-master-addr-by-name', MASTER_NAME]);
    if (!Array.isArray(reply) || typeof reply[1] !== 'string') throw new Error(`Sentinel named no primary: ${describe(reply)}`);
    return Number(reply[1]);
  }

  /** Whether the replica's link to its primary is up and it has applied everything the primary sent. */
  async replicaInSync(): Promise<boolean> {
    const [p, r] = await Promise.all([info(this.primary, 'replication'), info(this.replica, 'replication')]);
    return inSync(p, r);
  }

  /**
   * Stops replication once the replica has caught up: the replica is given a
   * wrong masterauth and the primary drops its link (the reset discards
   * whatever was in flight), so no write made from now on can reach it. The
   * replica keeps running: Sentinel only promotes a replica that has answered
   * its PING and INFO lately (a paused one was "no good slave" after a few s).
   */
  async holdReplication(): Promise<void> {
    // Everything before the hold reaches the replica first (a replicate step): only later writes are held back.
    await this.#until('the replica to catch up', () => this.replicaInSync());
    await this.#configSet(this.replica, 'masterauth', randomBytes(24).toString('base64url'));
    this.#replicationHeld = true;
    const killed = await this.primary.command(['CLIENT', 'KILL', 'TYPE', 'replica']);
    if (killed !== 1) throw new Error(`the primary dropped ${describe(killed)} replica links, expected 1`);
  }

  /**
   * Kills the primary (SIGKILL), asks Sentinel to fail over (SENTINEL FAILOVER:
   * at once, rather than after down-after-milliseconds) and waits until it has
   * promoted the replica. Sentinel refuses while its last look at the replica
   * is stale (NOGOODSLAVE): it is asked again until the bound. Throws
   * RunEnvironmentError when the replica is not promoted within the bound.
   */
  async failover(): Promise<void> {
    // Sentinel decides on its last look at the replica (INFO): let it be one taken now, not seconds ago.
    await this.#sentinelLooksAgain();
    await this.primary.crash();
    let refusal = '';
    await this.#until(
      'Sentinel to accept the failover',
      async () => {
        const reply = await this.sentinel.command(['SENTINEL', 'FAILOVER', MASTER_NAME]);
        // INPROG: a failover already under way (its own, or one asked for before a lost reply) will do.
        if (reply === 'OK' || (reply instanceof RespError && reply.message.startsWith('INPROG'))) return true;
        refusal = describe(reply);
        return false;
      },
      () => `last refusal: ${refusal}`,
    );
    await this.#until('Sentinel to promote the replica', async () => (await this.primaryPort()) === this.replica.port && (await info(this.replica, 'replication'))['role'] === 'master');
    // The promoted one will be a replica again one day (after a later failover): it needs the right password then.
    if (this.#replicationHeld) await this.#configSet(this.replica, 'masterauth', this.replica.password);
    this.#replicationHeld = false;
  }

  /**
   * Restarts the failed primary (empty: no persistence), makes it the new
   * primary's replica (REPLICAOF, as Sentinel would on its next look at it,
   * up to its 10 s INFO period later) and waits until it is in sync. Until
   * then WAIT 1 on the new primary cannot succeed.
   */
  async rejoin(): Promise<void> {
    const [old, promoted] = [this.#primary, this.#replica];
    await old.restart();
    // Its config file may carry the wrong masterauth of a hold (Sentinel rewrote it at a promotion): set the right one.
    await this.#configSet(old, 'masterauth', old.password);
    const reply = await old.command(['REPLICAOF', promoted.host, String(promoted.port)]);
    if (reply !== 'OK') throw new Error(`REPLICAOF: ${describe(reply)}`);
    await this.#until('the old primary to rejoin as a replica', async () => {
      const r = await info(old, 'replication');
      return r['role'] === 'slave' && r['master_port'] === String(promoted.port) && r['master_link_status'] === 'up';
    });
    // The roles have changed places: a later failover fails the promoted one over to the rejoined one.
    this.#primary = promoted;
    this.#replica = old;
  }

  /** Whether replication is held back now (holdReplication, until a failover or releaseReplication). */
  get replicationHeld(): boolean {
    return this.#replicationHeld;
  }

  /** The number of keys the replica holds (DBSIZE): 0 means nothing was replicated since the last reset. */
  async replicaKeys(): Promise<number> {
    const reply = await this.replica.command(['DBSIZE']);
    if (typeof reply !== 'number') throw new Error(`DBSIZE: ${describe(reply)}`);
    return reply;
  }

  /** Lets a held replica sync again (the end of holdReplication), waiting until it has caught up. */
  async releaseReplication(): Promise<void> {
    if (this.#replicationHeld) await this.#configSet(this.replica, 'masterauth', this.replica.password);
    this.#replicationHeld = false;
    await this.#until('the replica to catch up', () => this.replicaInSync());
  }

  async #configSet(server: RedisServer, name: string, value: string): Promise<void> {
    const reply = await server.command(['CONFIG', 'SET', name, value]);
    if (reply !== 'OK') throw new Error(`CONFIG SET ${name}: ${describe(reply)}`);
  }

  /** Stops all three and removes their directories. Idempotent. */
  async stop(): Promise<void> {
    await Promise.all([this.sentinel.stop(), this.replica.stop(), this.primary.stop()]);
  }

  /** Sentinel's view of the replica, as SENTINEL REPLICAS gives it (field name to value). */
  async sentinelViewOfReplica(): Promise<Record<string, string> | null> {
    const reply = await this.sentinel.command(['SENTINEL', 'replicas', MASTER_NAME]);
    if (!Array.isArray(reply)) return null;
    for (const fields of reply) {
      if (!Array.isArray(fields)) continue;
      const view: Record<string, string> = {};
      for (let i = 0; i + 1 < fields.length; i += 2) if (typeof fields[i] === 'string' && typeof fields[i + 1] === 'string') view[fields[i] as string] = fields[i + 1] as string;
      if (view['port'] === String(this.replica.port)) return view;
    }
    return null;
  }

  /**
   * Waits until Sentinel has had an INFO reply from the replica taken at
   * least 250 ms after this call (bounded): the replica reads its clock into
   * a cache every 100 ms, so a reply right after a clock step may still
   * carry the time before it.
   */
  async #sentinelLooksAgain(): Promise<void> {
    const since = Date.now() + 250;
    await this.#until("Sentinel's fresh look at the replica", async () => {
      const view = await this.sentinelViewOfReplica();
      return view !== null && Date.now() - Number(view['info-refresh']) > since;
    });
  }

  async #sentinelKnowsReplica(): Promise<boolean> {
    const reply = await this.sentinel.command(['SENTINEL', 'replicas', MASTER_NAME]);
    return Array.isArray(reply) && reply.some((fields) => Array.isArray(fields) && fields.includes(String(this.replica.port)));
  }

  /** Polls until `check` holds; RunEnvironmentError, with Sentinel's log, when it does not within the bound. */
  #until(what: string, check: () => Promise<boolean>, detail: () => string = () => ''): Promise<void> {
    const stopped = (): boolean => this.primary.stopped || this.replica.stopped || this.sentinel.stopped;
    return pollUntil(this.#timeoutMs, what, check, () => `${detail()}\n${this.sentinel.logTail()}`, stopped).catch((e: unknown) => {
      throw e instanceof EnvironmentError && !(e instanceof StoppedWhileStarting) ? new RunEnvironmentError(e.message) : e;
    });
  }
}

/**
 * Sentinel's timing for a test bed (SENTINEL DEBUG, Redis 7.0 and later): INFO
 * every second instead of every 10 s, as it already asks a replica whose link
 * is down, so that its view of the replica is fresh when a failover is asked
 * for (it trusts a view up to three periods old: shorter periods than the
 * held replica's fixed second would make that view stale, "no good slave");
 * and no TILT mode unless its timer stalls a minute (a loaded machine's stall
 * of 2 s would make it refuse to act for 30 s).
 */
async function tuneSentinel(sentinel: RedisServer): Promise<void> {
  await sentinel.command(['SENTINEL', 'DEBUG', 'info-period', String(SENTINEL_INFO_PERIOD_MS), 'tilt-trigger', '60000']);
}

/** How often Sentinel asks primary and replica for INFO here (its default: 10 s). */
const SENTINEL_INFO_PERIOD_MS = 1_000;

/** Polls `check` until it holds, at most `timeoutMs`; a failing check counts as not yet. Ends at once, StoppedWhileStarting, once `stopped()`: a stopped server never comes to pass the check. */
export async function pollUntil(timeoutMs: number, what: string, check: () => Promise<boolean>, log: () => string, stopped: () => boolean): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown = null;
  while (Date.now() < deadline) {
    if (stopped()) throw new StoppedWhileStarting(`RedisReplicated: a server was stopped while waiting for ${what}`);
    try {
      // Each check cut to what is left: its commands' own bounds (1 s each) may be longer.
      if (await withTimeout(systemClock, leftWithin(timeoutMs, deadline), what, check())) return;
    } catch (e) {
      last = e;
    }
    await sleep(pauseWithin(POLL_MS, deadline));
  }
  throw new EnvironmentError(`waited ${timeoutMs} ms for ${what}${last instanceof Error ? ` (last error: ${last.message})` : ''}\n--- log tail ---\n${log()}`);
}

function inSync(primary: Record<string, string>, replica: Record<string, string>): boolean {
  return replica['master_link_status'] === 'up' && replica['slave_repl_offset'] !== undefined && replica['slave_repl_offset'] === primary['master_repl_offset'];
}

async function info(server: RedisServer, section: string): Promise<Record<string, string>> {
  const reply = await server.command(['INFO', section]);
  if (typeof reply !== 'string') throw new Error(`INFO ${section}: ${describe(reply)}`);
  return Object.fromEntries(
    reply
      .split('\r\n')
      .filter((l) => l.includes(':'))
      .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1)]),
  );
}

function describe(v: RespValue): string {
  return v instanceof RespError ? `error ${v.message}` : JSON.stringify(v);
}

