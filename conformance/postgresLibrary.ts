import pg from 'pg';
import type { MonotonicClock } from '../impl/clock.ts';
import { ensureSchema } from '../impl/postgres/schema.ts';
import { postgresFencedStore } from '../impl/postgres/store.ts';
import type { Clock } from '../model/clock.ts';
import { clockAt, setDrift } from '../model/clock.ts';
import { designs } from '../model/design.ts';
import type { BackendInstance, BackendUnderTest, Capabilities, Environment, LibraryContract, LockClient } from './adapter.ts';
import type { PostgresTarget } from './env/postgresBackend.ts';
import { inSlot, slotOf } from './env/runSlot.ts';
import { targetOf, underOwnNames } from './env/postgresBackend.ts';
import { PostgresServer } from './env/postgresServer.ts';
import { connectPostgres } from './env/userPostgres.ts';
import { clockWarnings, installLibraryClock, libraryClockNotes, offClientClock, onClientClock } from './libraryClock.ts';
import { checkLockCalls } from './kitInput.ts';
import type { LockCalls } from './redisLibrary.ts';
import { SimNetwork } from './sim/network.ts';
import { KEEPALIVE_MS } from './sim/sessionBackend.ts';
import type { TcpProxy } from './env/proxy.ts';
import { noProxyReason, startLink, throughLink } from './env/postgresLink.ts';
import { dyingWith } from './dyingLease.ts';
import type { Lease } from '../impl/lease.ts';
import { VirtualTime } from './sim/time.ts';
import type { Stalled } from './env/stalls.ts';
import { rejectAfter } from './realTimeLimit.ts';
import { checkLibraryAdapter } from './options.ts';
import { runCloseHooks } from './closeHooks.ts';

/**
 * The adapter kit for a lock library over PostgreSQL (session advisory
 * locks, judged by the pg-session model): the server (lockcheck's own,
 * started on the first run and stopped by the backend's close hook; or the
 * user's, from `--pg`, where each run works under resource names of its own
 * and deletes its rows), a connection string per client (its own
 * application_name, and a TCP proxy of its own unless the URL asks for TLS), the
 * store, a close hook per run, and the library's Date.now() and timers on
 * the client's clock. A library opens its own connections, so the kit
 * cannot see its round trips: the adapter passes each call it makes to the
 * server through `parts.call`, which is where a pause holds the reply, a
 * delay or latency slows it, a slow or black-holed server delays it or
 * swallows it, and a cut link or a server that is down fails it at once
 * (UnavailableError).
 *
 * Faults: pause, delay, latency, slow-node, client clock drift and
 * connection loss (pg_terminate_backend of the client's library sessions;
 * the fault waits until the library has read the server's goodbye) and
 * partition (the client's proxy black-holes the real link, so its sessions
 * keep their locks until keepalive ends them, KEEPALIVE_MS of true time
 * after the cut, at an advance; healing lets what was held on the link
 * through; not over TLS, see postgresLink.ts) on any server; on lockcheck's
 * own also crash-restart of the server. A library
 * whose connections have no 'error' listener would die of an uncaught
 * exception when the server ends its session: the kit catches that, warns,
 * and counts the client as dead (the signals of the leases it held fire,
 * connection-lost); what it does after that is a restarted process's.
 */
export interface PostgresLibraryAdapter {
  /** The row's name, e.g. 'my-lock@1.2.3'. */
  readonly name: string;
  /** What the library promises (docs/adapter.md); absent: the pg-session model's own behaviour. */
  readonly contract?: LibraryContract;
  /** The library's settings the adapter uses (recorded in counterexample files). */
  readonly options?: Readonly<Record<string, string | number | boolean | null>>;
  /** Beyond the kit's: store 'unfenced', no ttl, session-bound, not reentrant (a session per call), tokens as the contract says. */
  readonly capabilities?: Partial<Pick<Capabilities, 'reentrant' | 'tokens'>>;
  /** One client's lock calls, built on its parts. The kit adds its store and clock, and runs the calls on the client's clocks. */
  client(parts: PostgresClientParts): LockCalls | Promise<LockCalls>;
}

/** What the kit gives an adapter to build one client's lock on (PostgresLibraryAdapter.client). */
export interface PostgresClientParts {
  /** The simulated client's index. */
  readonly client: number;
  /** Where the run's token counters start: a library with fencing tokens has its first grant on a resource answer tokenBase + 1 (RedisClientParts.tokenBase). */
  readonly tokenBase: bigint;
  /** The connection string this client's library connects with (its own application_name; the run's, on the user's server). */
  readonly url: string;
  /** The client's monotonic clock: Date.now() and timers inside its calls follow it. */
  readonly clock: MonotonicClock;
  /** One call of the library to the server, through the run's faults (pause, delay). Bounded in real time. */
  readonly call: <T>(work: () => Promise<T>) => Promise<T>;
  /** Runs `fn` on this client's clocks (for library work outside acquire, extend and release, e.g. building it). */
  readonly onClock: <T>(fn: () => T) => T;
  /** Clean-up at the end of the run (the library's pools): the run's close hook. */
  readonly onClose: (fn: () => Promise<void> | void) => void;
}

/** Where the server comes from: lockcheck's own (default), or the user's (`--pg`). */
export interface PostgresServerChoice {
  /** The user's database URL (`--pg`): checked by connectPostgres before the first run. */
  readonly pg?: string;
  /** A server the caller already runs or reaches (the CLI's): used as it is, neither started nor stopped here. */
  readonly target?: PostgresTarget;
}

/** Bound on every real wait: a library's connections may have no timeout at all. */
const CALL_TIMEOUT_MS = 10_000;

/**
 * A lock library over PostgreSQL as a backend judged by the pg-session
 * model (see PostgresLibraryAdapter): lockcheck's own server started on the
 * first run and stopped by the backend's close hook, or the user's. Throws
 * InvalidInputError('invalid-config') naming a bad adapter or choice key.
 */
export function postgresLibraryBackend(adapter: PostgresLibraryAdapter, choice: PostgresServerChoice = {}): BackendUnderTest {
  checkLibraryAdapter(adapter, choice, 'pg');
  let own: Promise<PostgresServer> | null = null;
  let target: Promise<PostgresTarget> | null = null;
  const server = (): Promise<PostgresTarget> =>
    (target ??= choice.target !== undefined ? Promise.resolve(choice.target) : choice.pg !== undefined ? connectPostgres(choice.pg) : (own = PostgresServer.start({ parentDir: '/dev/shm' })).then(targetOf));
  return {
    name: adapter.name,
    design: designs.pgSession(),
    capabilities: { store: 'unfenced', ttl: false, sessionBound: true, reentrant: false, tokens: adapter.contract?.tokens !== 'none', ...adapter.capabilities },
    ...(adapter.contract !== undefined ? { contract: adapter.contract } : {}),
    ...(adapter.options !== undefined ? { options: adapter.options } : {}),
    start: async ({ clients, tokenBase }) => {
      const t = await server();
      const start = () => underOwnNames(t, (run) => startInstance(adapter, t, run.applicationName, clients, tokenBase));
      // On lockcheck's server a run truncates the store and may crash the server: one run at a time (runSlot.ts).
      return t.process === undefined ? start() : inSlot(slotOf(t.url, 'postgres conformance run'), start);
    },
    close: async () => {
      const started = own;
      own = null;
      target = null;
      await (await started?.catch(() => null))?.stop();
    },
  };
}

/**
 * Rejects when `work` takes longer than CALL_TIMEOUT_MS of real time (a real
 * timer, outside the client's clock). No fault makes a call take real time,
 * so that stalls the run (env/stalls.ts): judged neither way, tried again.
 */
function bounded<T>(work: Promise<T>, stalled: Stalled): Promise<T> {
  return offClientClock(() =>
    rejectAfter(work, CALL_TIMEOUT_MS, () => {
      const what = `a library call took more than ${CALL_TIMEOUT_MS} ms of real time`;
      stalled(what);
      return new Error(what);
    }),
  );
}

/** Waits (bounded) until no session whose application_name starts with `prefix` holds an advisory lock. */
async function noLockHeld(admin: pg.Client, prefix: string): Promise<void> {
  for (const deadline = Date.now() + CALL_TIMEOUT_MS; ; ) {
    const r = await admin.query(`SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.locktype = 'advisory' AND l.granted AND starts_with(a.application_name, $1)`, [prefix]);
    if ((r.rows[0] as { n: number }).n === 0) return;
    if (Date.now() > deadline) throw new Error(`the library's sessions still hold advisory locks ${CALL_TIMEOUT_MS} ms after the run ended them`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function startInstance(adapter: PostgresLibraryAdapter, server: PostgresTarget, applicationName: string, clients: number, tokenBase: bigint): Promise<BackendInstance> {
  const open = async (): Promise<pg.Client> => {
    const c = new pg.Client({ connectionString: server.url, connectionTimeoutMillis: CALL_TIMEOUT_MS, query_timeout: CALL_TIMEOUT_MS, application_name: applicationName });
    c.on('error', () => undefined);
    await c.connect();
    return c;
  };
  const connections: pg.Client[] = [];
  const proxies: TcpProxy[] = [];
  const closeHooks: Array<() => Promise<void> | void> = [];
  const restoreClocks = installLibraryClock();
  const notes = libraryClockNotes();
  const guard = guardUnheardErrors();
  /** The library's would-be uncaught exceptions, for the run's warnings. */
  const deaths: string[] = [];
  /** The application_name of a client's library sessions. */
  const nameOf = (client: number): string => `${applicationName}-c${client}`;
  let up = true;
  const owned = server.process;
  const close = async (): Promise<void> => {
    let failed: Error | null = null;
    try {
      // A run that stopped between a crash and its restart: the server comes back, for the clean-up and the next run.
      if (!up && owned !== undefined) {
        await owned.restart();
        up = true;
        await connections[0]?.end().catch(() => undefined);
        if (connections[0] !== undefined) connections[0] = await open();
      }
      // The run is over: every link is whole again, so the library's clean-up reaches the server.
      for (const p of proxies) p.setMode({ kind: 'pass' });
      // The adapter's hooks, each bounded and none skipped: the sessions they leave are ended below whatever they did.
      failed = await runCloseHooks(closeHooks.splice(0));
      if (connections[0] !== undefined) {
        // No lock of this run's library sessions may reach into the next run: a session the library left open (an unlock
        // that a cut link refused, a client it never closed) is ended here, and the kit waits until its locks are gone.
        await connections[0].query('SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE starts_with(application_name, $1)', [`${applicationName}-c`]);
        await noLockHeld(connections[0], `${applicationName}-c`);
      }
    } finally {
      guard.restore();
      restoreClocks();
      await Promise.all(connections.map((c) => c.end().catch(() => undefined)));
      await Promise.all(proxies.map((p) => p.close()));
    }
    if (failed !== null) throw failed;
  };
  try {
    connections.push(await open());
    await ensureSchema(connections[0]!);
    // A reset on purpose (our own server): the schema's triggers refuse a TRUNCATE otherwise.
    if (server.process !== undefined) await connections[0]!.query('SET lockcheck.reset_tokens = on; TRUNCATE lockcheck_store; RESET lockcheck.reset_tokens');
    const time: VirtualTime = new VirtualTime({ settle: () => network.settled() });
    const network: SimNetwork = new SimNetwork(time, () => ({ reachable: () => up }));
    // A slow server is one slow round trip per operation, as the pg-session model has it (spec 7.4): an acquire's retries, each
    // a call of the library's own, are not slowed again (slowing each one made a slow server's acquire outlast the model's).
    const timing = network.serverTiming();
    const clocks: Clock[] = Array.from({ length: clients }, () => clockAt());
    // Each client's library reaches the server (lockcheck's or the user's) through a TCP proxy of its own: a partition cuts the real link.
    if (noProxyReason(server.url) === null) for (let c = 0; c < clients; c++) proxies.push(await startLink(server.url));
    const lockClients: LockClient[] = [];
    const crashed: Array<AbortController> = [];
    for (let client = 0; client < clients; client++) {
      const clock = network.pausable(client, time.clockOf(() => clocks[client]!));
      const onClock = <T>(fn: () => T): T => onClientClock(clock, fn, notes);
      const proxy = proxies[client];
      const url = new URL(proxy !== undefined ? throughLink(server.url, proxy) : server.url);
      url.searchParams.set('application_name', nameOf(client));
      const calls = await onClock(() =>
        adapter.client({ client, tokenBase, url: url.href, clock, call: (work) => network.call(client, 0, () => bounded(work(), (w) => time.stalled(w))), onClock, onClose: (fn) => closeHooks.push(fn) }),
      );
      checkLockCalls(calls, adapter.name, client);
      const storeConnection = await open();
      connections.push(storeConnection);
      const fenced = postgresFencedStore({ query: ((...args: Parameters<pg.Client['query']>) => connections[client + 1]!.query(...args)) as pg.Client['query'] }, 'unfenced');
      crashed.push(new AbortController());
      const leases = new Map<Lease, { readonly original: Lease; detach(): void }>();
      lockClients.push({
        acquire: async (resource, options) => {
          timing.slowOperation(client);
          const r = await onClock(() => calls.acquire(resource, options));
          if (r.kind !== 'granted') return r;
          // The process would have died (see guardUnheardErrors): user code holding its leases does not go on.
          const died = crashed[client]!.signal;
          const { lease, detach } = dyingWith(r.lease, () => died);
          leases.set(lease, { original: r.lease, detach });
          return { ...r, lease };
        },
        ...(calls.extend !== undefined
          ? {
              extend: (lease, ttlMs) => {
                timing.slowOperation(client);
                return onClock(() => calls.extend!(leases.get(lease)?.original ?? lease, ttlMs));
              },
            }
          : {}),
        release: (lease) => {
          timing.slowOperation(client);
          const held = leases.get(lease);
          // Once the release has answered, user code is done with the lease: it no longer dies with the client (a failed release may be retried).
          return onClock(() => calls.release(held?.original ?? lease)).then((r) => (held?.detach(), r));
        },
        store: { write: (r, t, v) => network.call(client, 'store', () => fenced.write(r, t, v)), read: (r) => network.call(client, 'store', () => fenced.read(r)) },
        clock,
      });
      guard.watch(nameOf(client), (error) => {
        deaths.push(`client ${client}'s library connection emitted 'error' with no listener (${error}): in a real process that is an uncaught exception, and the process dies`);
        crashed[client]!.abort();
        // What the client does next is a new process's (the model's client goes on after its session ended): its leases live.
        crashed[client] = new AbortController();
      });
    }
    const admin = (): pg.Client => connections[0]!;
    /** The backend pids of a client's library sessions now. */
    const sessions = async (client: number): Promise<number[]> =>
      (await admin().query('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [nameOf(client)])).rows.map((r: { pid: number }) => r.pid);
    /** Ends these backends (waiting until each has exited, and so released its locks). */
    const terminate = async (pids: readonly number[]): Promise<void> => {
      if (pids.length > 0) await admin().query('SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE pid = ANY($1::int[]) AND starts_with(application_name, $2)', [pids, `${applicationName}-c`]);
    };
    /** Waits (bounded) until the client's side of its proxied connections is closed: the library has read the server's goodbye. */
    const heard = async (client: number, left: number): Promise<void> => {
      const proxy = proxies[client];
      for (const deadline = Date.now() + CALL_TIMEOUT_MS; proxy !== undefined && proxy.connections > left && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 5));
    };
    /** Cut clients: since when (true time), and their sessions' pids at the cut (null once keepalive ended them). */
    const cut = new Map<number, { readonly sinceMs: number; pids: number[] | null }>();
    let settledMs = 0;
    const env: Environment = {
      nowMs: () => time.nowMs(),
      advanceTo: async (t) => {
        const advancing = t > time.nowMs() && time.nowMs() === settledMs;
        await time.advanceTo(t);
        settledMs = time.nowMs();
        if (!advancing) return;
        // Keepalive, at an advance as the model has it: the server ends a session cut long enough; its goodbye is held on the link.
        for (const c of cut.values()) {
          if (c.pids === null || t - c.sinceMs < KEEPALIVE_MS) continue;
          await terminate(c.pids);
          c.pids = null;
        }
      },
      runUntil: (work, limitMs) => time.runUntil(work, limitMs),
      faults: {
        // Not the network layer's partition: a cut that left the real sessions open would never meet keepalive (below, through the proxies).
        pause: network.faults().pause,
        delay: network.faults().delay,
        ...timing.faults,
        clockDrift: async (target, driftPpm) => {
          if ('client' in target) clocks[target.client] = setDrift(clocks[target.client]!, time.nowMs(), driftPpm);
        },
        // The server ends the client's library sessions (pg_terminate_backend), and the library reads the goodbye.
        killConnection: async (client) => {
          const pids = await sessions(client);
          const before = proxies[client]?.connections ?? 0;
          await terminate(pids);
          if (!cut.has(client)) await heard(client, before - pids.length);
        },
        // Only on a server lockcheck started: the user's server process is not the runner's.
        ...(owned === undefined
          ? {}
          : {
              crash: {
                crash: async () => {
                  up = false;
                  await owned.crash();
                  for (let c = 0; c < clients; c++) if (!cut.has(c)) await heard(c, 0);
                },
                restart: async () => {
                  await owned.restart();
                  // A connection to the old server process cannot come back: open new ones.
                  for (let i = 0; i < connections.length; i++) {
                    await connections[i]!.end().catch(() => undefined);
                    connections[i] = await open();
                  }
                  up = true;
                },
              },
            }),
        // On any server the clients reach through proxies of their own (not over TLS).
        ...(proxies.length === 0
          ? {}
          : {
              partition: {
                cut: async (client: number, node: number) => {
                  network.cut(client, node);
                  if (cut.has(client)) return;
                  proxies[client]!.setMode({ kind: 'blackhole' });
                  cut.set(client, { sinceMs: time.nowMs(), pids: await sessions(client) });
                },
                heal: async (client: number, node: number) => {
                  network.heal(client, node);
                  if (!cut.delete(client)) return;
                  // What was held on the link crosses both ways: closes the library sent, the server's goodbye to a session keepalive ended.
                  proxies[client]!.setMode({ kind: 'pass' });
                  // The library reads the goodbyes before the heal is over, as at a connection loss: its leases' signals have fired by then.
                  await heard(client, (await sessions(client)).length);
                },
              },
            }),
      },
    };
    return { clients: lockClients, env, warnings: () => [...clockWarnings(notes), ...deaths], close };
  } catch (e) {
    await close();
    throw e;
  }
}

/**
 * A library whose pg.Client has no 'error' listener dies when the server
 * ends its session: pg emits 'error', and with no listener that is an
 * uncaught exception. In the runner's process it would end the run, so the
 * kit takes it over: for the clients of a run (by their sessions'
 * application_name, unique per run) the error is swallowed and reported,
 * and the signals of the leases the client held fire.
 * A run's library connections may still report their end after the run
 * closed (their sockets close later): those are swallowed too, so the
 * patch on pg.Client stays once installed; it touches no other client.
 */
const unheard = { watched: new Map<string, (error: string) => void>(), ended: new Set<string>(), installed: false };

function guardUnheardErrors(): { watch(applicationName: string, died: (error: string) => void): void; restore(): void } {
  if (!unheard.installed) {
    unheard.installed = true;
    const proto = pg.Client.prototype as unknown as { emit(this: pg.Client, event: string | symbol, ...args: unknown[]): boolean };
    // oxlint-disable-next-line unbound-method -- the original, called below with the client as `this`
    const emit = proto.emit;
    proto.emit = function (this: pg.Client, event: string | symbol, ...args: unknown[]): boolean {
      if (event === 'error' && this.listenerCount('error') === 0) {
        const name = (this as unknown as { connectionParameters?: { application_name?: string } }).connectionParameters?.application_name;
        const died = name === undefined ? undefined : unheard.watched.get(name);
        if (died !== undefined) {
          died(args[0] instanceof Error ? args[0].message : String(args[0]));
          return false;
        }
        if (name !== undefined && unheard.ended.has(name)) return false;
      }
      return emit.call(this, event, ...args);
    };
  }
  const mine: string[] = [];
  return {
    watch: (applicationName, died) => {
      mine.push(applicationName);
      unheard.watched.set(applicationName, died);
    },
    restore: () => {
      for (const name of mine.splice(0)) {
        unheard.watched.delete(name);
        unheard.ended.add(name);
      }
    },
  };
}
