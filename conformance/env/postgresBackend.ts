import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { Clock } from '../../model/clock.ts';
import { clockAt, setDrift } from '../../model/clock.ts';
import type { Design, StorePolicy } from '../../model/design.ts';
import { describeDesign, replyTimeoutMs } from '../../model/design.ts';
import { checkResource, checkToken, InvalidInputError } from '../../model/errors.ts';
import type { FencedStore } from '../../impl/fencedStore.ts';
import { ensureSchema } from '../../impl/postgres/schema.ts';
import { PostgresSessionLock } from '../../impl/postgres/sessionLock.ts';
import { postgresFencedStore } from '../../impl/postgres/store.ts';
import { destroyConnection } from '../../impl/postgres/attempts.ts';
import { ConnectionConfigError, ServerRefusedError, TimeoutError, UnavailableError, withTimeout } from '../../impl/errors.ts';
import { PostgresTransactionLock } from '../../impl/postgres/xactLock.ts';
import type { BackendInstance, BackendUnderTest, Environment, LockClient } from '../adapter.ts';
import type { Endpoint } from '../sim/network.ts';
import { SimNetwork } from '../sim/network.ts';
import { KEEPALIVE_MS } from '../sim/sessionBackend.ts';
import { VirtualTime } from '../sim/time.ts';
import { namespaced } from './namespace.ts';
import { noProxyReason, startLink, throughLink } from './postgresLink.ts';
import type { TcpProxy } from './proxy.ts';
import { onInterrupt, settleWithin } from './processes.ts';
import { PostgresServer } from './postgresServer.ts';
import { EnvironmentError } from './faketime.ts';
import { failsTheRun, RunEnvironmentError } from './runEnvironment.ts';
import { inSlot, slotOf } from './runSlot.ts';
import { LossNotices } from './lossNotices.ts';
import { watchedRoundTrip } from './stalls.ts';
import { checkObject, knownOptions, refuse } from '../../impl/options.ts';
import { checkDesignOf, checkFunction, checkPostgresTarget, checkStorePolicy } from '../kitInput.ts';

/**
 * PostgreSQL advisory-lock backends on a real server. Clients are in process
 * on virtual time; every round trip to the server goes through the network
 * layer (cut, delay, hold while paused). Connection loss is real
 * (pg_terminate_backend), and so are crashes and restarts of the server.
 *
 * A partition (pg-session, on lockcheck's server or the user's) is one-sided, as
 * spec 3 has it, and cuts the real socket too: each client's session runs
 * through a TCP proxy of its own, which black-holes the link. A statement on
 * the cut link fails at once and the client closes its session (7.4,
 * "Unknown outcomes"); the close is held on the link, so the server keeps
 * the session's locks. Keepalive is the server ending the cut session once
 * the link has been cut `keepaliveMs` of true time, at the next advance
 * (pg_terminate_backend; its goodbye is held on the link too, so the client
 * is not told). Healing the link lets the held closes through, both ways.
 * pg-xact takes no partition here.
 */

/** A PostgreSQL database runs work in: lockcheck's own server (targetOf) or the user's (connectPostgres). */
export interface PostgresTarget {
  /** postgres:// URL of the database (user, password, host, port, database, options). */
  readonly url: string;
  /**
   * A server lockcheck started: its process is the runner's (crash-restart),
   * and a run may reset it (end every other session, empty the tables).
   * Absent on the user's own server: there a run touches only its own
   * sessions and rows (resources under a prefix of its own, deleted at the end).
   */
  readonly process?: { crash(): Promise<void>; restart(): Promise<void> };
}

/** The target of a server lockcheck started. */
export function targetOf(server: PostgresServer): PostgresTarget {
  if (!(server instanceof PostgresServer)) refuse('server', 'a PostgresServer (from PostgresServer.start)', server);
  return {
    url: server.url,
    process: { crash: () => server.crash(), restart: () => server.restart() },
  };
}

/** Servers lockcheck started that a run crashed and did not restart (it stopped in between): the next run's reset restarts them. */
const leftDown = new Set<string>();

const checkBackendKeys = knownOptions('realPostgresBackend options', ['name', 'keepaliveMs']);

/** Real waits are bounded too: a connection that never reports its loss fails the run, it does not hang it. */
const NOTICE_TIMEOUT_MS = 10_000;
/** The harness's own connections (admin, the store's): connect and query timeouts, in real time. */
const HARNESS_TIMEOUT_MS = 10_000;

/**
 * lockcheck's own PostgreSQL locks (PostgresSessionLock for pg-session,
 * PostgresTransactionLock for pg-xact) on `server` as a backend for
 * `design`, writing through a store with `store`'s policy. Runs on
 * lockcheck's server reset it, one at a time; on the user's each run keeps
 * to its own sessions and rows. Throws InvalidInputError('invalid-config')
 * for bad arguments.
 */
export function realPostgresBackend(
  server: PostgresTarget,
  design: Design,
  store: StorePolicy,
  options: { readonly name?: string; /** Cut time after which keepalive ends a cut session (default KEEPALIVE_MS). */ readonly keepaliveMs?: number } = {},
): BackendUnderTest {
  checkBackendKeys(checkObject(options, 'realPostgresBackend options'));
  if (options.name !== undefined && typeof options.name !== 'string') refuse('name', 'a string', options.name);
  const k = options.keepaliveMs;
  if (k !== undefined && (typeof k !== 'number' || !Number.isInteger(k) || k < 1)) refuse('keepaliveMs', 'a positive integer number of ms', k);
  checkPostgresTarget(server);
  checkDesignOf(design, ['pg-session', 'pg-xact'], 'realPostgresBackend');
  checkStorePolicy(store);
  return {
    name: options.name ?? `postgres ${describeDesign(design)} / ${store}`,
    design,
    capabilities: { store, ttl: false, sessionBound: true, reentrant: true },
    start: (o) => {
      const start = () =>
        underOwnNames(server, (run) =>
          startInstance(server, server.process ?? null, design as Extract<Design, { kind: 'pg-session' | 'pg-xact' }>, store, o.clients, o.tokenBase, run.applicationName, options.keepaliveMs ?? KEEPALIVE_MS),
        );
      // A run on lockcheck's server resets it (ends every other session, empties the tables) and may crash it: one run at a time (runSlot.ts).
      // On the user's server each run keeps to its own sessions and names.
      return server.process === undefined ? start() : inSlot(slotOf(server.url, 'postgres conformance run'), start);
    },
  };
}

/**
 * Starts a run. On a shared server (no process of lockcheck's) it works
 * under resource names of its own, whose rows are deleted at the end.
 */
export async function underOwnNames(server: PostgresTarget, start: (run: { readonly applicationName: string }) => Promise<BackendInstance>): Promise<BackendInstance> {
  checkPostgresTarget(server);
  checkFunction(start, 'start');
  const id = randomUUID();
  // Every session of the run carries it: sessions are ended by pid and this name, never by pid alone.
  const run = { applicationName: `lockcheck-${id}` };
  if (server.process !== undefined) return start(run);
  const prefix = `lockcheck-run:${id}:`;
  let instance: BackendInstance | undefined;
  // Interrupted (Ctrl-C, SIGTERM): the run's sessions end and its rows go all the same, bounded. Its clients are
  // closed first (bounded), so that none of them reconnects and adds a row after the delete.
  const stopInterrupt = onInterrupt(async () => {
    if (instance !== undefined) await settleWithin(instance.close(), INTERRUPT_CLOSE_MS);
    await endRun(server, prefix, run.applicationName);
  });
  try {
    instance = await start(run);
  } catch (e) {
    stopInterrupt();
    await endRun(server, prefix, null).catch(() => undefined);
    throw e;
  }
  const close = async (): Promise<void> => {
    try {
      await instance.close();
    } finally {
      try {
        await endRun(server, prefix, null);
      } finally {
        stopInterrupt();
      }
    }
  };
  return namespaced({ ...instance, close }, prefix);
}

/** How long an interrupted run's clients get to close before its sessions are ended anyway (within INTERRUPT_CLEANUP_MS). */
const INTERRUPT_CLOSE_MS = 1_500;

/**
 * Deletes a run's rows (resources under `prefix`) from lockcheck's tables on
 * a shared server; when interrupted, first ends the run's own sessions
 * (`applicationName`), so none of them adds a row after the delete.
 */
async function endRun(server: PostgresTarget, prefix: string, applicationName: string | null): Promise<void> {
  const c = new pg.Client({ connectionString: server.url, connectionTimeoutMillis: 4_000, query_timeout: 4_000 });
  c.on('error', () => undefined);
  try {
    await c.connect();
    // The run's token rows go on purpose: the tokens they held are the run's only (impl/postgres/schema.ts).
    await c.query('SET lockcheck.reset_tokens = on');
    // A session that connects while the run is being ended could add a row after the delete: repeat until none of the run's is left (bounded).
    for (let round = 0; round < 5; round++) {
      if (applicationName !== null) {
        await c.query('SELECT pg_terminate_backend(pid, 1000) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()', [applicationName]);
      }
      for (const table of ['lockcheck_tokens', 'lockcheck_store']) await c.query(`DELETE FROM ${table} WHERE starts_with(resource, $1)`, [prefix]);
      if (applicationName === null) break;
      const left = await c.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()', [applicationName]);
      if (left.rows[0]!.n === 0) break;
    }
  } finally {
    await c.end().catch(() => undefined);
  }
}

async function startInstance(
  server: PostgresTarget,
  owned: NonNullable<PostgresTarget['process']> | null,
  design: Extract<Design, { kind: 'pg-session' | 'pg-xact' }>,
  policy: StorePolicy,
  clients: number,
  tokenBase: bigint,
  applicationName: string,
  keepaliveMs: number,
): Promise<BackendInstance> {
  // A session is ended only by its pid *and* the run's name: a pid reused by someone else's session is never hit.
  const connection: pg.ClientConfig = { connectionString: server.url, application_name: applicationName };
  const open = async (): Promise<pg.Client> => {
    const c = new pg.Client({ ...connection, connectionTimeoutMillis: HARNESS_TIMEOUT_MS, query_timeout: HARNESS_TIMEOUT_MS });
    c.on('error', () => undefined);
    await c.connect();
    return c;
  };
  // Reset: a server an earlier run crashed and left down (it stopped before the restart) comes back first.
  if (owned !== null && leftDown.has(server.url)) {
    await failsTheRun('the reset (restarting the server a run left down)', () => owned.restart());
    leftDown.delete(server.url);
  }
  // The harness's own connection, not the backend's: a connect that times out on a loaded machine fails this run only.
  let admin = await failsTheRun("the run's admin connection", open);
  try {
    await ensureSchema(admin);
    if (owned !== null) {
      // Reset: no session of an earlier run left holding a lock, empty tables. (On a shared server the run's own names are the reset.)
      await admin.query('SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND datname = current_database()');
      await admin.query('SET lockcheck.reset_tokens = on');
      await admin.query('TRUNCATE lockcheck_tokens, lockcheck_store');
    }
  } catch (e) {
    await admin.end().catch(() => undefined);
    // A refusal is the server's configuration (say so loudly); anything else fails this run only.
    throw e instanceof EnvironmentError || e instanceof ServerRefusedError || e instanceof ConnectionConfigError ? e : new RunEnvironmentError(`the run's reset: ${e instanceof Error ? e.message : String(e)}`);
  }
  let up = true;
  const time: VirtualTime = new VirtualTime({ settle: () => network.settled() });
  const network: SimNetwork = new SimNetwork(time, (e: Endpoint) => (e === 'store' ? { reachable: () => true } : { reachable: () => up }));
  // pg-session clients reach the server (lockcheck's or the user's) through proxies of their own: a partition cuts the real socket (spec 3).
  const proxies: Array<TcpProxy | null> = [];
  try {
    for (let c = 0; c < clients; c++) proxies.push(design.kind === 'pg-session' && noProxyReason(server.url) === null ? await startLink(server.url) : null);
  } catch (e) {
    await Promise.all(proxies.flatMap((p) => (p === null ? [] : [p.close()])));
    await admin.end().catch(() => undefined);
    throw e;
  }
  const clientClocks: Clock[] = Array.from({ length: clients }, () => clockAt());
  // A paused client runs no timers until it resumes (then they fire before its replies): statements in flight across a pause.
  const clocks = clientClocks.map((_c, client) => network.pausable(client, time.clockOf(() => clientClocks[client]!)));
  const timing = network.serverTiming();
  const statementTimeoutMs = replyTimeoutMs(design)!;
  const losses = new LossNotices(clients, NOTICE_TIMEOUT_MS);
  const noticed = (client: number): void => losses.noticed(client);
  /**
   * A round trip of client `client`'s that may fail only after `boundMs` of real time (the lock's own pg timers, the
   * store's, the harness's waits): one that does was held up by the machine, and stalls the run (stalls.ts).
   */
  const watched = <T>(client: number, what: string, boundMs: number, roundTrip: () => Promise<T>): Promise<T> =>
    watchedRoundTrip(roundTrip, boundMs, () => `client ${client}'s ${what}`, (w) => time.stalled(w));
  const locks = clientClocks.map((_c, client) => {
    const proxy = proxies[client];
    const options = {
      connection: proxy ? { ...connection, connectionString: throughLink(server.url, proxy) } : connection,
      clock: clocks[client]!,
      tokenBase,
      // The lock's connect, statement and query timeouts are real-time timers of statementTimeoutMs (impl/postgres).
      link: <T>(roundTrip: () => Promise<T>) => network.call(client, 0, () => watched(client, 'lock statement', statementTimeoutMs, roundTrip)),
      onConnectionLost: () => noticed(client),
      // The design's statement timeout: a reply later than it is an unknown outcome (spec 7.4), as the model has it.
      statementTimeoutMs,
    };
    return design.kind === 'pg-session' ? new PostgresSessionLock(options) : new PostgresTransactionLock(options);
  });
  // The store's own connections (outside the locks' sessions); replaced after a server restart.
  // A failed start closes what it opened: no connection outlives it.
  const opened = await Promise.allSettled(locks.map(open));
  const failed = opened.find((o): o is PromiseRejectedResult => o.status === 'rejected');
  if (failed !== undefined) {
    await Promise.all([admin, ...opened.flatMap((o) => (o.status === 'fulfilled' ? [o.value] : []))].map((c) => c.end().catch(() => undefined)));
    await Promise.all(locks.map((l) => l.close()));
    await Promise.all(proxies.flatMap((p) => (p === null ? [] : [p.close()])));
    throw failed.reason;
  }
  const storeConnections = opened.map((o) => (o as PromiseFulfilledResult<pg.Client>).value);
  const lockClients: LockClient[] = locks.map((lock, client) => {
    const outside = postgresFencedStore({ query: ((...args: Parameters<pg.Client['query']>) => storeConnections[client]!.query(...args)) as pg.Client['query'] }, policy);
    // pg-xact writes go into the lease's own transaction; without an open lease there is nothing to write with.
    const store: FencedStore =
      lock instanceof PostgresTransactionLock
        ? {
            write: async (resource, token, value) => {
              // Bad input first: it is refused with InvalidInputError whatever else is wrong.
              checkResource(resource);
              checkToken(token);
              const lease = lock.leaseFor(resource);
              if (lease === undefined) throw new InvalidInputError('precondition', `client ${client} has no open transaction on '${resource}'`);
              const connection = lock.queryable(lease) as pg.Client;
              const tx = postgresFencedStore(connection, 'transactional');
              timing.slowOperation(client);
              try {
                return await withTimeout(clocks[client]!, statementTimeoutMs, 'statement', network.call(client, 0, () => watched(client, 'write in its transaction', statementTimeoutMs, () => tx.write(resource, token, value))));
              } catch (e) {
                if (!(e instanceof TimeoutError)) throw e;
                // No reply in time: the client drops the transaction's connection (7.4); the server aborts it, and its lock goes.
                const pid = (connection as unknown as { processID: number }).processID;
                destroyConnection(connection);
                await network.call(client, 'store', () => backendsGone([pid]));
                throw new UnavailableError(`the write to '${resource}' got no reply within ${statementTimeoutMs} ms; the transaction was dropped`, { cause: e });
              }
            },
            read: (resource) => network.call(client, 'store', () => watched(client, 'store read', HARNESS_TIMEOUT_MS, () => outside.read(resource))),
          }
        : {
            write: (r, t, v) => network.call(client, 'store', () => watched(client, 'store write', HARNESS_TIMEOUT_MS, () => outside.write(r, t, v))),
            read: (r) => network.call(client, 'store', () => watched(client, 'store read', HARNESS_TIMEOUT_MS, () => outside.read(r))),
          };
    return {
      acquire: async (resource, o) => {
        const before = pids(client);
        timing.slowOperation(client);
        const r = await lock.acquire(resource, { retries: o.retries ?? 0, retryDelayMs: o.retryDelayMs ?? 0 });
        // A late reply: the client dropped its connection. The model has the server end that session at once; wait until it has.
        // Carried as one real request on the network, so virtual time waits for it.
        if (r.kind === 'timed-out') await network.call(client, 'store', () => backendsGone(before.filter((pid) => !pids(client).includes(pid))));
        return r;
      },
      release: async (lease) => {
        const before = pids(client);
        timing.slowOperation(client);
        try {
          await lock.release(lease);
        } catch (e) {
          // No reply in time: the client dropped its connection; the model has the server end it at once: wait until it has.
          // (On a cut link the close is held there: the server keeps the session until heal or keepalive.)
          if (!cut.has(client)) await network.call(client, 'store', () => backendsGone(before.filter((pid) => !pids(client).includes(pid))));
          throw e;
        }
      },
      store,
      clock: clocks[client]!,
    };
  });
  const pids = (client: number): number[] => {
    const lock = locks[client]!;
    return lock instanceof PostgresSessionLock ? (lock.backendPid === null ? [] : [lock.backendPid]) : lock.backendPids;
  };
  /** Waits (bounded) until the server has ended these backends, and so released their locks. */
  const backendsGone = async (gone: readonly number[]): Promise<void> => {
    for (const deadline = Date.now() + NOTICE_TIMEOUT_MS; gone.length > 0; ) {
      const r = await admin.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = ANY($1::int[]) AND application_name = $2', [gone, applicationName]);
      if ((r.rows[0] as { n: number }).n === 0) return;
      if (Date.now() > deadline) {
        // No fault makes a server take real time to end a closed session: the machine held it up (stalls.ts).
        const what = `the server did not end backends ${gone.join(', ')} within ${NOTICE_TIMEOUT_MS} ms of their connections' close`;
        time.stalled(what);
        throw new Error(what);
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  };
  /** Ends these clients' sessions on the server and waits until each client has seen it. */
  const endSessions = async (clientsToEnd: readonly number[]): Promise<void> => {
    const told = losses.expect(clientsToEnd.filter((c) => pids(c).length > 0));
    try {
      const all = clientsToEnd.flatMap(pids);
      // With a timeout, pg_terminate_backend waits until the backend has exited, and so released its locks.
      if (all.length > 0) {
        await admin.query('SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE pid = ANY($1::int[]) AND application_name = $2', [all, applicationName]);
      }
      await told.done;
    } finally {
      told.cancel();
    }
  };
  /** Cut clients: since when (true time), their backends on the server at the cut, and whether keepalive has ended them. */
  const cut = new Map<number, { readonly sinceMs: number; pids: number[]; ended: boolean }>();
  /** True time where the last advanceTo left it: only an `advance` moves on from there (an operation's latency moves time in runUntil). */
  let settledMs = 0;
  const terminate = async (backends: readonly number[]): Promise<void> => {
    if (backends.length === 0) return;
    await admin.query('SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE pid = ANY($1::int[]) AND application_name = $2', [backends, applicationName]);
  };
  /** Breaks a cut client's real socket (RST both ways), as the model has a crash or a kill heard through a cut link; the link stays cut. */
  const resetThrough = (client: number): void => {
    proxies[client]?.setMode({ kind: 'reset' });
    proxies[client]?.setMode({ kind: 'blackhole' });
  };
  const env: Environment = {
    nowMs: () => time.nowMs(),
    advanceTo: async (t) => {
      const advancing = t > time.nowMs() && time.nowMs() === settledMs;
      await time.advanceTo(t);
      settledMs = time.nowMs();
      if (!advancing) return;
      // Keepalive, at an advance as the model has it: the server ends a session cut long enough; its goodbye is held on the link.
      for (const c of cut.values()) {
        if (c.ended || t - c.sinceMs < keepaliveMs) continue;
        await terminate(c.pids);
        c.ended = true;
      }
    },
    runUntil: (work, limitMs) => time.runUntil(work, limitMs),
    // No clock step: advisory locks have no expiry, no server clock matters.
    faults: {
      clockDrift: async (target, driftPpm) => {
        if ('client' in target) clientClocks[target.client] = setDrift(clientClocks[target.client]!, time.nowMs(), driftPpm);
      },
      // Only on a server lockcheck started: the user's server process is not the runner's.
      ...(owned === null
        ? {}
        : {
            crash: {
              crash: async () => {
                up = false;
                leftDown.add(server.url);
                const told = losses.expect(locks.map((_l, c) => c).filter((c) => pids(c).length > 0));
                try {
                  await owned.crash();
                  // A cut client's connection breaks with the server's process all the same (spec 7.7).
                  for (const [client, c] of cut) {
                    resetThrough(client);
                    c.pids = [];
                  }
                  await told.done;
                } finally {
                  told.cancel();
                }
              },
              restart: async () => {
                await owned.restart();
                leftDown.delete(server.url);
                // A connection to the old server process cannot come back: open new ones.
                for (const c of [admin, ...storeConnections]) await c.end().catch(() => undefined);
                admin = await open();
                for (let i = 0; i < storeConnections.length; i++) storeConnections[i] = await open();
                up = true;
              },
            },
          }),
      // A one-sided partition (pg-session, through the clients' proxies: on any server not reached over TLS).
      ...(proxies.every((p) => p === null)
        ? {}
        : {
            partition: {
              cut: async (client: number, node: number) => {
                network.cut(client, node);
                const proxy = proxies[client];
                if (proxy === null || proxy === undefined || cut.has(client)) return;
                proxy.setMode({ kind: 'blackhole' });
                cut.set(client, { sinceMs: time.nowMs(), pids: pids(client), ended: false });
              },
              heal: async (client: number, node: number) => {
                network.heal(client, node);
                const c = cut.get(client);
                if (c === undefined) return;
                cut.delete(client);
                const current = pids(client);
                // The closes held on the link cross: the server ends the sessions the client closed, and the client hears of the one the server ended.
                const told = losses.expect(c.ended && c.pids.some((pid) => current.includes(pid)) ? [client] : []);
                try {
                  proxies[client]!.setMode({ kind: 'pass' });
                  await backendsGone(c.pids.filter((pid) => c.ended || !current.includes(pid)));
                  await told.done;
                } finally {
                  told.cancel();
                }
              },
            },
          }),
      pause: network.faults().pause,
      delay: network.faults().delay,
      // Late statements, a slow or black-holed server: virtual time, so on the user's server too.
      ...timing.faults,
      killConnection: async (client) => {
        const c = cut.get(client);
        if (c === undefined) return endSessions([client]);
        // Every session of the client's ends (also one it closed unheard), and the client hears of it through the cut link too.
        const told = losses.expect(pids(client).length > 0 ? [client] : []);
        try {
          await terminate([...new Set([...c.pids, ...pids(client)])]);
          c.pids = [];
          resetThrough(client);
          await told.done;
        } finally {
          told.cancel();
        }
      },
    },
  };
  return {
    clients: lockClients,
    env,
    close: async () => {
      await Promise.all(locks.map((l) => l.close()));
      await Promise.all([admin, ...storeConnections].map((c) => c.end().catch(() => undefined)));
      await Promise.all(proxies.flatMap((p) => (p === null ? [] : [p.close()])));
    },
  };
}
