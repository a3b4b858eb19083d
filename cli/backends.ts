import { importUserModule } from '../conformance/env/userModule.ts';
import { resolve } from 'node:path';
import type { BackendUnderTest, FaultKind } from '../conformance/adapter.ts';
import type { RedisCluster } from '../conformance/env/redisBackend.ts';
import { REAL_TIME_TOLERANCE_MS, USER_SERVER_CLOCK_MARGIN_MS, realRedisBackend, startRedisCluster } from '../conformance/env/redisBackend.ts';
import type { UserRedisCluster } from '../conformance/env/userRedis.ts';
import { connectRedisCluster } from '../conformance/env/userRedis.ts';
import { connectPostgres } from '../conformance/env/userPostgres.ts';
import { noProxyReason } from '../conformance/env/postgresLink.ts';
import type { PostgresTarget } from '../conformance/env/postgresBackend.ts';
import { realPostgresBackend, targetOf } from '../conformance/env/postgresBackend.ts';
import { PostgresServer } from '../conformance/env/postgresServer.ts';
import { ReplicatedServers, realReplicatedBackend } from '../conformance/env/replicatedBackend.ts';
import { describeDesign, designs } from '../model/design.ts';
import { UsageError } from './usage.ts';
import { redactSecrets, redactUrl } from '../conformance/env/redact.ts';
import { escapedText } from '../model/shownText.ts';
import { markImportLeftRunning } from './importsLeftRunning.ts';

export { importLeftRunning } from './importsLeftRunning.ts';
import type { BuiltIn, LibraryId, MeasuredFaultClass } from './rows.ts';
import { BUILT_INS, LIBRARY_AUDITS, LIBRARY_PACKAGES, didYouMean } from './rows.ts';

export type { BuiltIn, LibraryId, MeasuredFaultClass } from './rows.ts';
export { BUILT_INS, LIBRARY_AUDITS, LIBRARY_PACKAGES, MEASURED_FAULT_CLASSES, didYouMean } from './rows.ts';
import { valueWithin } from '../conformance/realTimeLimit.ts';
import { existsSync, statSync } from 'node:fs';
import { EnvironmentError } from '../conformance/env/faketime.ts';
import { libraryConcurrent } from '../conformance/adapters/libraries.ts';
import { concurrentOf } from '../conformance/stress/adapterRef.ts';
import type { StressAdapter } from '../conformance/stress/runner.ts';
import { layoutOf } from '../conformance/stress/runner.ts';
import type { StressBackend } from '../conformance/stress/servers.ts';
import { STRESS_BACKENDS } from '../conformance/stress/servers.ts';
import type { EtcdCell } from '../conformance/env/etcdBackend.ts';
import { realEtcdBackend, startEtcdCell } from '../conformance/env/etcdBackend.ts';
import type { ZookeeperCell } from '../conformance/env/zookeeperBackend.ts';
import { realZookeeperBackend, startZookeeperCell } from '../conformance/env/zookeeperBackend.ts';
import { checkBackendApi, offeredFaults } from '../conformance/backendApi.ts';
import { START_LIMIT_MS, callAdapter, closeLateBackend } from '../conformance/adapterCall.ts';

/** Why the library of an audit row cannot be loaded (not installed, or broken), or null if it can. */
export async function missingLibrary(b: BuiltIn): Promise<string | null> {
  if (b.library === undefined) return null;
  const pkg = LIBRARY_PACKAGES[b.library];
  try {
    await import(pkg.name);
    return null;
  } catch (e) {
    const notFound = (e as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND' && (e as Error).message.includes(`'${pkg.name}'`);
    return notFound ? `needs the npm package ${pkg.name}, which is not installed` : `needs the npm package ${pkg.name}, which does not load: ${(e as Error).message.split('\n')[0]}`;
  }
}

/** The command that installs the library an audit row needs (the fix run, stress and matrix give when it is missing). */
export function libraryInstall(...libraries: LibraryId[]): string {
  return `npm install --save-dev ${[...new Set(libraries.map((l) => `${LIBRARY_PACKAGES[l].name}@${LIBRARY_PACKAGES[l].version}`))].join(' ')}`;
}

/** Loads a library audit's adapter; EnvironmentError (one line, with the install command) when its package is missing. */
async function libraryBackend(b: BuiltIn & { library: LibraryId }, cluster: () => Promise<RedisCluster | UserRedisCluster>, pg: () => Promise<PostgresTarget>): Promise<BackendUnderTest> {
  const missing = await missingLibrary(b);
  if (missing !== null) throw new EnvironmentError(`${b.name} ${missing}`, libraryInstall(b.library));
  switch (b.library) {
    case 'redlock':
      return (await import('../conformance/adapters/redlock.ts')).redlockBackend({ cluster: await cluster() }, { name: b.name });
    case 'sesamecare-redlock':
      return (await import('../conformance/adapters/sesamecareRedlock.ts')).sesamecareRedlockBackend({ cluster: await cluster() }, { name: b.name });
    case 'advisory-lock':
      return (await import('../conformance/adapters/advisoryLock.ts')).advisoryLockBackend(await pg(), { name: b.name });
    case 'redis-semaphore-mutex':
      return (await import('../conformance/adapters/redisSemaphore.ts')).redisSemaphoreMutexBackend({ cluster: await cluster() }, { name: b.name });
    case 'redis-semaphore-redlock-mutex':
      return (await import('../conformance/adapters/redisSemaphore.ts')).redisSemaphoreRedlockMutexBackend({ cluster: await cluster() }, { name: b.name });
    case 'redlock4':
      return (await import('../conformance/adapters/redlock4.ts')).redlock4Backend({ cluster: await cluster() }, { name: b.name });
    case 'ioredis-lock':
      return (await import('../conformance/adapters/ioredisLock.ts')).ioredisLockBackend({ cluster: await cluster() }, { name: b.name });
    case 'redis-lock':
      return (await import('../conformance/adapters/redisLock.ts')).redisLockBackend({ cluster: await cluster() }, { name: b.name });
  }
}

/** Why `backend` cannot be measured under `col`, or null if it can. */
export function notMeasurable(backend: BackendUnderTest, offered: readonly FaultKind[], col: MeasuredFaultClass): string | null {
  const missing = col.essential.filter((f) => !offered.includes(f));
  return missing.length === 0 ? null : `${backend.name} takes no ${missing.join(' or ')} fault here`;
}

/** Servers the user gives instead of the ones lockcheck starts: --redis, --pg. */
export interface ServerChoice {
  /** Redis URLs: the lock nodes (the first also holds the store). */
  readonly redis?: readonly string[];
  /** A PostgreSQL database URL. */
  readonly pg?: string;
}

/**
 * Starts servers on demand, once each, and stops them all at the end; or
 * uses the user's own (checked once, never restarted, flushed or reset).
 */
export class Servers {
  #redis = new Map<'none' | 'aof-always', Promise<RedisCluster>>();
  #pg: Promise<PostgresServer> | null = null;
  #replicated: Promise<ReplicatedServers> | null = null;
  #userRedis: Promise<UserRedisCluster> | null = null;
  #userPg: ReturnType<typeof connectPostgres> | null = null;
  #etcd: Promise<EtcdCell> | null = null;
  #zookeeper: Promise<ZookeeperCell> | null = null;

  constructor(readonly choice: ServerChoice = {}) {}

  /** Checks the user's servers (reachable, usable) before any run; throws EnvironmentError or ServerUrlError. */
  async check(): Promise<string[]> {
    const lines: string[] = [];
    if (this.choice.redis !== undefined) {
      const cluster = await this.#userRedisCluster();
      for (const s of cluster.servers) lines.push(`redis ${s.shown}: Redis ${s.version}, round trip ${s.rttMs.toFixed(2)} ms`);
      lines.push(`runs on these Redis servers are paced to real time (tolerance ${REAL_TIME_TOLERANCE_MS} ms, clock margin ${USER_SERVER_CLOCK_MARGIN_MS} ms); crash-restart and clock faults need servers lockcheck starts (lockcheck --help says why)`);
    }
    if (this.choice.pg !== undefined) {
      const pg = await this.#userPostgres();
      const noProxy = noProxyReason(pg.url);
      lines.push(`postgres ${pg.server.shown}: PostgreSQL ${pg.server.version}; crash-restart needs a server lockcheck starts${noProxy === null ? '' : `; ${noProxy}`}`);
    }
    return lines;
  }

  /** Why a row cannot run on the chosen servers, or null if it can. */
  unavailable(b: BuiltIn): string | null {
    const d = b.design;
    if (d.kind === 'redis-replicated' && this.choice.redis !== undefined) return 'it needs a primary, a replica and Sentinel that lockcheck starts (the failover kills the primary)';
    if ((d.kind === 'redis-single' || d.kind === 'redlock') && this.choice.redis !== undefined) {
      const n = this.choice.redis.length;
      if (d.persistence !== 'none' || d.restartDelayMs > 0) return 'its persistence and restart only matter under crash-restart, which needs servers lockcheck starts';
      if (b.library !== undefined && d.kind === 'redlock' && n < 5) return `the library audit runs Redlock on 5 nodes; --redis gave ${n}`;
      if (d.kind === 'redlock' && n < 3) return `Redlock needs at least 3 independent nodes; --redis gave ${n}`;
    }
    return null;
  }

  async backend(b: BuiltIn): Promise<BackendUnderTest> {
    const why = this.unavailable(b);
    if (why !== null) throw new UsageError(`${b.name} cannot run on the given servers: ${why}`);
    const d = b.design;
    const redis = (): Promise<RedisCluster | UserRedisCluster> => (this.choice.redis !== undefined ? this.#userRedisCluster() : this.#localRedis(d.kind === 'redis-single' || d.kind === 'redlock' ? d.persistence : 'none'));
    const pg = async (): Promise<PostgresTarget> => (this.choice.pg !== undefined ? await this.#userPostgres() : targetOf(await (this.#pg ??= PostgresServer.start({ parentDir: '/dev/shm' }))));
    if (b.library !== undefined) return libraryBackend({ ...b, library: b.library }, redis, pg);
    // etcd and ZooKeeper always run on clusters lockcheck starts (--redis and --pg do not name one).
    if (b.lockService === 'zookeeper') return realZookeeperBackend(await (this.#zookeeper ??= startZookeeperCell()), b.store, { name: b.name });
    if (d.kind === 'etcd-lease') return realEtcdBackend(await (this.#etcd ??= startEtcdCell()), b.store, { name: b.name });
    if (d.kind === 'redis-replicated') return realReplicatedBackend(await (this.#replicated ??= ReplicatedServers.start()), d, b.store, { name: b.name });
    if (d.kind === 'redis-single' || d.kind === 'redlock') {
      const cluster = await redis();
      // On servers with their own clocks the lease needs the wider margin the pacing asks for.
      const design =
        this.choice.redis === undefined
          ? d
          : d.kind === 'redis-single'
            ? designs.redisSingle({ driftFactor: d.driftFactor, clockMarginMs: USER_SERVER_CLOCK_MARGIN_MS })
            : designs.redlock({ nodes: Math.min(cluster.nodes.length, 15), driftFactor: d.driftFactor, clockMarginMs: USER_SERVER_CLOCK_MARGIN_MS });
      return realRedisBackend(cluster, design, b.store, { name: b.name });
    }
    return realPostgresBackend(await pg(), d, b.store, { name: b.name });
  }

  #localRedis(p: 'none' | 'aof-always'): Promise<RedisCluster> {
    if (!this.#redis.has(p)) this.#redis.set(p, startRedisCluster({ nodes: 5, persistence: p }));
    return this.#redis.get(p)!;
  }

  #userRedisCluster(): Promise<UserRedisCluster> {
    return (this.#userRedis ??= connectRedisCluster(this.choice.redis ?? []));
  }

  #userPostgres(): ReturnType<typeof connectPostgres> {
    return (this.#userPg ??= connectPostgres(this.choice.pg ?? ''));
  }

  async stop(): Promise<void> {
    const clusters = await Promise.allSettled([...this.#redis.values()]);
    const pg = this.#pg === null ? null : await this.#pg.catch(() => null);
    const etcd = this.#etcd === null ? null : await this.#etcd.catch(() => null);
    const zookeeper = this.#zookeeper === null ? null : await this.#zookeeper.catch(() => null);
    const replicated = this.#replicated === null ? null : await this.#replicated.catch(() => null);
    await Promise.all([...clusters.flatMap((c) => (c.status === 'fulfilled' ? [c.value.stop()] : [])), pg?.stop(), etcd?.stop(), zookeeper?.stop(), replicated?.stop()]);
  }
}

/**
 * A built-in name, or the path of a module whose default export is a
 * BackendUnderTest, or a function of the ServerChoice returning one.
 */
/** A built-in backend or library audit name (no module to load). */
export function isBuiltIn(spec: string): boolean {
  return [...BUILT_INS, ...LIBRARY_AUDITS].some((b) => b.name === spec);
}

export async function resolveBackend(spec: string, servers: Servers, factoryLimitMs = START_LIMIT_MS): Promise<BackendUnderTest> {
  const builtIn = [...BUILT_INS, ...LIBRARY_AUDITS].find((b) => b.name === spec);
  if (builtIn !== undefined) return servers.backend(builtIn);
  const names = [...BUILT_INS, ...LIBRARY_AUDITS].map((b) => b.name);
  if (!/[/\\.]/.test(spec)) throw new UsageError(`unknown backend '${spec}'${didYouMean(spec, names)} (built-in: ${BUILT_INS.map((b) => b.name).join(', ')}; or give the path of an adapter module)`);
  const mod = (await importAdapterModule(spec, names)) as { default?: unknown };
  // A function gets the servers the user gave (--redis, --pg), so that an adapter can use them too.
  const factory = mod.default;
  const exported = typeof factory === 'function' ? await callAdapter(spec, 'its default export (a function of the servers given)', () => (factory as (choice: ServerChoice) => unknown)(servers.choice), factoryLimitMs, closeLateBackend(spec)) : factory;
  checkBackendApi(exported, `'${spec}' must export default a BackendUnderTest or a function returning one: its export`);
  // Loading it reads the faults it takes from one instance: an environment of the old API is refused here, before any run.
  await offeredFaults(exported);
  return exported;
}

/** How long an adapter module may take to load (LOCKCHECK_IMPORT_LIMIT_MS): one whose top-level code never ends must not hang the CLI. */
function importLimitMs(): number {
  const raw = process.env['LOCKCHECK_IMPORT_LIMIT_MS'];
  if (raw === undefined || raw === '') return 60_000;
  const n = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 1) throw new UsageError(`LOCKCHECK_IMPORT_LIMIT_MS must be a positive integer of milliseconds, got '${escapedText(redactSecrets(raw).slice(0, 40))}'`);
  return n;
}

/**
 * Loads the adapter module at `spec`, bounded in time. A path with no file
 * that is near a built-in name (' redis-single/strict', 'REDLOCK/STRICT') is
 * a mistyped name, and said to be one, not a module that cannot be found.
 */
async function importAdapterModule(spec: string, names: readonly string[]): Promise<Record<string, unknown>> {
  // A server URL given as --backend: named by its redacted form only (as a path, its password was in the message twice).
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(spec)) throw new UsageError(`--backend takes a backend's name or an adapter module's path, not a URL (got ${redactUrl(spec)}): servers go in --redis and --pg`);
  const path = resolve(spec);
  const near = didYouMean(spec, names);
  if (near !== '' && !existsSync(path)) throw new UsageError(`unknown backend '${spec}'${near} (no built-in has that name, and there is no adapter module at ${path})`);
  // Said plainly, not as Node's resolver says it (a "Cannot find module ... imported from" lockcheck's own file).
  if (!existsSync(path)) throw new UsageError(`cannot load adapter module '${spec}': there is no file at ${path}`);
  if (statSync(path).isDirectory()) throw new UsageError(`cannot load adapter module '${spec}': ${path} is a directory; give the module file`);
  const limit = importLimitMs();
  let loaded;
  try {
    loaded = await valueWithin(importUserModule(path), limit);
  } catch (e) {
    const message = (e as Error).message;
    // What only a CommonJS module cannot do (top-level await, require of an ES module): the way out is to make it an ES module.
    const commonJs = /\.(c?ts|tsx)$/.test(path) && /"cjs" output format|Cannot require\(\) ES Module|ERR_REQUIRE_(ESM|ASYNC_MODULE)|require\(\) of ES Module/.test(`${message} ${String((e as { code?: unknown }).code)}`);
    const hint = commonJs ? ' (it is loaded as CommonJS: its package.json has no "type": "module"; name it .mts, or add "type": "module" to its package.json, to load it as an ES module)' : '';
    throw new UsageError(`cannot load adapter module '${spec}': ${message}${hint}`);
  }
  if (!loaded.done) {
    markImportLeftRunning();
    throw new UsageError(`cannot load adapter module '${spec}': its top-level code did not finish within ${limit} ms (LOCKCHECK_IMPORT_LIMIT_MS sets the limit)`);
  }
  return loaded.value;
}


/**
 * What `lockcheck stress --backend` names: a built-in stress backend, a
 * library audit row (its adapter's concurrent client), or the path of an
 * adapter module whose backend has a `concurrent` member. The client
 * processes load that module from the path given here, and from nowhere else.
 */
export async function resolveStressTarget(spec: string): Promise<{ backend: StressBackend; adapter?: StressAdapter }> {
  if (STRESS_BACKENDS.includes(spec as StressBackend)) return { backend: spec as StressBackend };
  const library = LIBRARY_AUDITS.find((b) => b.name === spec);
  if (library?.library !== undefined) {
    const missing = await missingLibrary(library);
    if (missing !== null) throw new EnvironmentError(`${library.name} ${missing}`, libraryInstall(library.library));
    const client = await libraryConcurrent(library.library);
    return { backend: layoutOf(client), adapter: { name: library.name, ref: { kind: 'library', library: library.library }, client } };
  }
  if (spec.startsWith('lib:') || !/[/\\.]/.test(spec)) {
    throw new UsageError(`unknown stress backend '${spec}'${didYouMean(spec, [...STRESS_BACKENDS, ...LIBRARY_AUDITS.map((b) => b.name)])} (--backend takes one of ${STRESS_BACKENDS.join(', ')}, a library audit (${LIBRARY_AUDITS.map((b) => b.name).join(', ')}) or the path of an adapter module)`);
  }
  const path = resolve(spec);
  const mod = await importAdapterModule(spec, [...STRESS_BACKENDS, ...LIBRARY_AUDITS.map((b) => b.name)]);
  let client;
  try {
    client = concurrentOf(mod, spec);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const d = mod['default'];
  const name = typeof d === 'object' && d !== null && typeof (d as { name?: unknown }).name === 'string' ? (d as { name: string }).name : spec;
  return { backend: layoutOf(client), adapter: { name, ref: { kind: 'module', path }, client } };
}

export function describeBuiltIn(b: BuiltIn): string {
  return `${describeDesign(b.design)} / ${b.store}`;
}
