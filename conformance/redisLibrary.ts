import type { Redis } from 'ioredis';
import type { MonotonicClock } from '../impl/clock.ts';
import { redisFencedStore } from '../impl/redis/store.ts';
import type { Design } from '../model/design.ts';
import { describeDesign, designs, nodeCount } from '../model/design.ts';
import type { BackendInstance, BackendUnderTest, Capabilities, LibraryContract, LockClient } from './adapter.ts';
import type { RedisCluster } from './env/redisBackend.ts';
import { REAL_TIME_TOLERANCE_MS, startRedisCluster, startRedisRun, toleranceOn } from './env/redisBackend.ts';
import { connectRedisCluster } from './env/userRedis.ts';
import { clockWarnings, currentNotes, installLibraryClock, libraryClockNotes, onClientClock } from './libraryClock.ts';
import { checkLockCalls } from './kitInput.ts';
import type { LibraryClockNotes } from './libraryClock.ts';
import { InvalidInputError } from '../model/errors.ts';
import { checkLibraryAdapter } from './options.ts';
import { runCloseHooks } from './closeHooks.ts';
import { ScriptFallbacks } from './scriptFallback.ts';
import type { Taken } from './scriptFallback.ts';

/**
 * The adapter kit for a lock library over Redis: everything but the mapping
 * of the library's calls onto LockClient. It brings the servers (lockcheck's
 * own, started on the first run and stopped by the backend's close(); or the
 * user's, from `--redis`), every fault on them (those of lockcheck's Redis
 * backend), a key prefix per run on the user's servers, a close hook per run,
 * late replies and slow or black-holed nodes (latency, nodeDelay; on the
 * user's servers too), and the client's clocks for the library: inside its acquire, extend and
 * release, Date.now(), setTimeout and setInterval run on the client's virtual
 * clock (libraryClock.ts), so the library's own retries and refresh timers
 * follow the runner's time. A run warns (RunReport.warnings, and the CLI on
 * stderr) when a real timer fired inside the library's calls, or a command
 * went past the faults.
 */
export interface RedisLibraryAdapter {
  /** The row's name, e.g. 'my-lock@1.2.3'. */
  readonly name: string;
  /** The model it is judged by: designs.redisSingle() (default; one node), or designs.redlock({ nodes }) for a library over several independent nodes. */
  readonly design?: Design;
  /** What the library promises: no deadline, no client timeout, a refresh that re-arms a fixed ttl, tokens... (docs/adapter.md). */
  readonly contract?: LibraryContract;
  /** The library's settings the adapter uses (recorded in counterexample files). */
  readonly options?: Readonly<Record<string, string | number | boolean | null>>;
  /** Beyond the kit's: store 'unfenced', ttl, not session-bound, not reentrant, tokens as the contract says. */
  readonly capabilities?: Partial<Pick<Capabilities, 'reentrant' | 'ttl' | 'tokens'>>;
  /** The key the library keeps a lock on `resource` under (no run prefix): lets the runner check OWN-1 on the nodes. */
  readonly lockKey?: (resource: string) => string;
  /** One client's lock calls, built on its parts. The kit adds its store and clock, and runs the calls on the client's clocks. */
  client(parts: RedisClientParts): LockCalls | Promise<LockCalls>;
}

/** The calls an adapter maps onto the library (LockClient without the store and clock the kit adds). */
export type LockCalls = Pick<LockClient, 'acquire' | 'release'> & Pick<Partial<LockClient>, 'extend'>;

/** What the kit gives an adapter to build one client's lock on (RedisLibraryAdapter.client). */
export interface RedisClientParts {
  /** The simulated client's index. */
  readonly client: number;
  /**
   * Where the run's token counters start (InstanceOptions.tokenBase): a library with fencing tokens has its first grant
   * on a resource answer tokenBase + 1 (seed its counter with it), as the model's does; the runs draw bases near 2^31,
   * 2^53 and 2^63 to catch a token that loses precision. Without tokens (contract.tokens 'none') it is not read.
   */
  readonly tokenBase: bigint;
  /** The client's ioredis connection to each lock node: every command it sends goes through the run's faults. */
  readonly nodes: readonly Redis[];
  /** The client's monotonic clock: lease deadlines are on it; Date.now() and timers inside its calls follow it. */
  readonly clock: MonotonicClock;
  /** The run's key prefix on the user's servers (the connections apply it; the library never sees it); '' on lockcheck's own. */
  readonly keyPrefix: string;
  /**
   * The run's bound on each request round, in ms, where the run has slow or
   * black-holed nodes (the `slow-node` fault); absent: the operation's ttl.
   * A library that takes a command timeout should be given it; one without
   * a client-side timeout declares `clientTimeout: false`.
   */
  readonly requestTimeoutMs?: number;
  /** Runs `fn` on this client's clocks (for library work outside acquire, extend and release, e.g. building it). */
  readonly onClock: <T>(fn: () => T) => T;
  /** Clean-up at the end of the run (a library's pools, intervals): the run's close hook. */
  readonly onClose: (fn: () => Promise<void> | void) => void;
}

/** Where the servers come from: lockcheck's own (default), or the user's (`--redis`, handed to an adapter module's default export). */
export interface RedisServerChoice {
  /** The user's server URLs (`--redis`), at least one per node of the design, the first also holding the store: checked by connectRedisCluster before the first run. */
  readonly redis?: readonly string[];
  /** Servers already running (the matrix's, a test's): used as they are; the caller stops them, not close(). */
  readonly cluster?: RedisCluster;
}

/**
 * A lock library over Redis as a backend judged by its design's model (see
 * RedisLibraryAdapter): lockcheck's own servers started on the first run
 * and stopped by the backend's close hook, or the user's, or a cluster the
 * caller runs. Throws InvalidInputError('invalid-config') naming a bad
 * adapter or choice key, or a design other than redis-single or redlock.
 */
export function redisLibraryBackend(adapter: RedisLibraryAdapter, choice: RedisServerChoice = {}): BackendUnderTest {
  checkLibraryAdapter(adapter, choice, 'redis');
  const design = adapter.design ?? designs.redisSingle();
  if (design.kind !== 'redis-single' && design.kind !== 'redlock') throw new InvalidInputError('invalid-config', `${adapter.name}: adapter.design must be redis-single or redlock (a Redis library is judged by them), not ${String(design.kind)}`);
  let cluster: Promise<RedisCluster> | null = null;
  const given = choice.cluster;
  const servers = (): Promise<RedisCluster> =>
    given !== undefined ? Promise.resolve(given) : (cluster ??= choice.redis !== undefined ? connectRedisCluster(choice.redis) : startRedisCluster({ nodes: nodeCount(design), persistence: design.persistence }));
  return {
    name: adapter.name,
    design,
    capabilities: {
      store: 'unfenced',
      ttl: true,
      sessionBound: false,
      reentrant: false,
      tokens: adapter.contract?.tokens !== 'none',
      ...adapter.capabilities,
      // The user's servers keep their own clocks: the runs are paced to them.
      ...(choice.redis !== undefined ? { expiryToleranceMs: REAL_TIME_TOLERANCE_MS } : given !== undefined ? toleranceOn(given) : {}),
    },
    ...(adapter.contract !== undefined ? { contract: adapter.contract } : {}),
    ...(adapter.options !== undefined ? { options: adapter.options } : {}),
    start: async ({ clients, tokenBase, requestTimeoutMs }) => startInstance(adapter, await servers(), design, clients, tokenBase, requestTimeoutMs),
    close: async () => {
      const started = cluster;
      cluster = null;
      await (await started?.catch(() => null))?.stop();
    },
  };
}

async function startInstance(adapter: RedisLibraryAdapter, cluster: RedisCluster, design: Design, clients: number, tokenBase: bigint, requestTimeoutMs: number | undefined): Promise<BackendInstance> {
  const persistence = 'persistence' in design ? design.persistence : 'none';
  if (cluster.persistence !== 'unknown' && cluster.persistence !== persistence) throw new Error(`${adapter.name}: ${describeDesign(design)} does not match the servers' persistence (${cluster.persistence})`);
  const run = await startRedisRun(cluster, design, { clients, ...(adapter.lockKey !== undefined ? { lockKey: adapter.lockKey } : {}) });
  try {
    // Fresh servers have no script cached: every run on lockcheck's own starts the same way (a library's first EVALSHA meets NOSCRIPT).
    // The user's servers keep their script cache: there only the first run pays it.
    if (!run.shared) await Promise.all(run.admin.map((r) => r.script('FLUSH')));
  } catch (e) {
    await run.close();
    throw e;
  }
  const restoreClocks = installLibraryClock();
  const notes: LibraryClockNotes = libraryClockNotes();
  const closeHooks: Array<() => Promise<void> | void> = [];
  const unfaulted = { commands: 0 };
  const close = async (): Promise<void> => {
    // The adapter's hooks first, each bounded and none skipped; the kit's teardown whatever they did; then their failure.
    const failed = await runCloseHooks(closeHooks.splice(0));
    try {
      restoreClocks();
    } finally {
      await run.close();
    }
    if (failed !== null) throw failed;
  };
  try {
    const lockClients: LockClient[] = [];
    for (const [client, conn] of run.connections.entries()) {
      // A paused client runs no timers until it resumes (then they fire before its replies), as a stopped process: the library's timers too.
      const clock = run.network.pausable(client, run.clocks[client]!);
      const onClock = <T>(fn: () => T): T => onClientClock(clock, fn, notes);
      const nodes = conn.nodes.map((redis, node) => throughFaults(redis, run.network.call.bind(run.network), client, node, notes, unfaulted));
      const calls = await onClock(() =>
        adapter.client({ client, tokenBase, nodes, clock, keyPrefix: run.keyPrefix, ...(requestTimeoutMs !== undefined ? { requestTimeoutMs } : {}), onClock, onClose: (fn) => closeHooks.push(fn) }),
      );
      checkLockCalls(calls, adapter.name, client);
      const fenced = redisFencedStore(conn.store, 'unfenced');
      lockClients.push({
        acquire: (resource, options) => onClock(() => calls.acquire(resource, options)),
        ...(calls.extend !== undefined ? { extend: (lease, ttlMs) => onClock(() => calls.extend!(lease, ttlMs)) } : {}),
        release: (lease) => onClock(() => calls.release(lease)),
        store: { write: (r, t, v) => run.network.call(client, 'store', () => fenced.write(r, t, v)), read: (r) => run.network.call(client, 'store', () => fenced.read(r)) },
        clock,
      });
    }
    return {
      clients: lockClients,
      // Late replies on every operation and slow or black-holed nodes too, on any servers: they act in the network layer, not on a server.
      env: { ...run.env, faults: { ...run.env.faults, ...run.network.timingFaults() } },
      warnings: () => [
        ...clockWarnings(notes),
        ...(unfaulted.commands > 0 ? [`${unfaulted.commands} command(s) the library sent outside its clients' calls (a timer or event lockcheck did not start) skipped the run's faults`] : []),
      ],
      close,
    };
  } catch (e) {
    await close();
    throw e;
  }
}

/**
 * The connection with every command through the fault layer: the network's
 * call for this client and node (pauses, delays, cuts apply). Every way
 * ioredis offers to send a command ends in sendCommand (promise and
 * callback calls, pipelines and MULTI, EVALSHA with its EVAL fallback,
 * defineCommand scripts), and every way to learn its reply reads the
 * command's own promise (a callback is chained onto it when the command is
 * made): so the command's resolve and reject are taken over, and the reply
 * reaches the library only when the fault layer delivers it. An EVALSHA the
 * server answers NOSCRIPT and the EVAL the library sends for it are one
 * round trip (scriptFallback.ts). A command sent outside any client's call
 * cannot be given a client's faults: it goes out as is, and is counted for
 * the run's warnings.
 */
function throughFaults(
  redis: Redis,
  call: <T>(client: number, node: number, request: () => T | Promise<T>) => Promise<T>,
  client: number,
  node: number,
  notes: LibraryClockNotes,
  unfaulted: { commands: number },
): Redis {
  const send = redis.sendCommand.bind(redis);
  const fallbacks = new ScriptFallbacks();
  redis.sendCommand = ((command: Parameters<Redis['sendCommand']>[0], stream?: unknown) => {
    // The EVAL a library sends on NOSCRIPT: the rest of its EVALSHA's round trip, already in the fault layer.
    const rest = fallbacks.claim(command.name, command.args);
    if (rest !== undefined) {
      rest(takeOver(command));
      Promise.resolve(send(command, stream as never)).catch(() => undefined);
      return command.promise;
    }
    if (!inClientCall(notes)) {
      // The driver's own handshake on a (re)connect is not the library's.
      if (redis.status === 'ready' && !CONNECTION_COMMANDS.has(command.name.toLowerCase())) unfaulted.commands++;
      return send(command, stream as never);
    }
    const { reply, deliver } = takeOver(command);
    // Where the round trip's reply goes: the EVAL's once a NOSCRIPT was answered at once; none if no EVAL followed it.
    let target: Taken['deliver'] | null = deliver;
    call(client, node, () => {
      Promise.resolve(send(command, stream as never)).catch(() => undefined);
      if (command.name.toLowerCase() !== 'evalsha') return reply;
      return reply.catch(async (error: unknown) => {
        if (!ScriptFallbacks.isNoScript(error)) throw error;
        const follow = fallbacks.follow(command.args);
        deliver.reject(error as Error);
        const taken = await follow;
        target = taken?.deliver ?? null;
        return taken?.reply;
      });
    }).then(
      (value) => target?.resolve(value),
      (error: unknown) => target?.reject(error instanceof Error ? error : new Error(String(error))),
    );
    return command.promise;
  }) as Redis['sendCommand'];
  return redis;
}

/** The command's reply as the driver settles it, and the library's side of it, which the kit settles. */
function takeOver(command: Parameters<Redis['sendCommand']>[0]): Taken {
  const deliver = { resolve: command.resolve, reject: command.reject };
  const reply = new Promise<unknown>((resolve, reject) => {
    command.resolve = resolve;
    command.reject = reject;
  });
  return { reply, deliver };
}

/** What ioredis sends by itself when it (re)connects. */
const CONNECTION_COMMANDS = new Set(['auth', 'hello', 'select', 'info', 'client', 'readonly', 'ping']);

/** Whether the code running now is one of this run's clients' calls. */
function inClientCall(notes: LibraryClockNotes): boolean {
  return currentNotes() === notes;
}
