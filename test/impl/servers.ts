import { afterAll, beforeAll, inject } from 'vitest';
import { EtcdCluster } from '../../conformance/env/etcdCluster.ts';
import { PostgresServer } from '../../conformance/env/postgresServer.ts';
import { RedisServer } from '../../conformance/env/redisServer.ts';
import { ZookeeperEnsemble } from '../../conformance/env/zookeeperEnsemble.ts';
import type { MonotonicClock } from '../../impl/clock.ts';

/**
 * Where the impl/ tests find their server. Each test file starts one server
 * in beforeAll and stops it in afterAll; under `npm run mutation` the servers
 * come from mutation/servers.ts (one set per Stryker worker, started once), so
 * that a mutant's run costs only the tests that reach it, not a server start.
 */
export interface SharedServers {
  readonly redis: { readonly host: string; readonly port: number; readonly password: string };
  readonly postgres: { readonly host: string; readonly port: number; readonly user: string; readonly password: string; readonly database: string };
  /** `tls`: the cluster's CA and the client certificate it requires (every member refuses a client without it). */
  readonly etcd: { readonly hosts: readonly string[]; readonly tls: { readonly ca: string; readonly cert: string; readonly key: string } };
  /** A one-member ensemble, closed to clients without `auth`; `pid` is its JVM's (a test pauses it with SIGSTOP to hold every reply back). */
  readonly zookeeper: { readonly connectString: string; readonly auth: ReadonlyArray<{ readonly scheme: 'digest'; readonly credentials: string }>; readonly pid: number };
}

declare module 'vitest' {
  export interface ProvidedContext {
    lockcheckServers: SharedServers | undefined;
  }
}

function provided(): SharedServers | undefined {
  try {
    return inject('lockcheckServers');
  } catch {
    return undefined;
  }
}

/** A server for this file: `get()` after beforeAll. */
function shared<K extends keyof SharedServers, S extends { stop(): Promise<void> }>(kind: K, start: () => Promise<S>, address: (s: S) => SharedServers[K]): () => SharedServers[K] {
  let value: SharedServers[K] | undefined;
  let own: S | undefined;
  beforeAll(async () => {
    const given = provided()?.[kind];
    if (given !== undefined) {
      value = given;
      return;
    }
    own = await start();
    value = address(own);
  }, 60_000);
  afterAll(async () => {
    await own?.stop();
  });
  return () => {
    if (value === undefined) throw new Error(`no ${kind} server: call get() inside a test`);
    return value;
  };
}

export const sharedRedis = (): (() => SharedServers['redis']) => shared('redis', () => RedisServer.start({ persistence: 'none' }), (s) => s.connection);
export const sharedPostgres = (): (() => SharedServers['postgres']) =>
  shared('postgres', () => PostgresServer.start({ parentDir: '/dev/shm' }), (s) => s.connection);
export const sharedZookeeper = (): (() => SharedServers['zookeeper']) =>
  shared('zookeeper', () => ZookeeperEnsemble.start({ members: 1, parentDir: '/dev/shm' }), (s) => ({ ...s.clientOptions(), pid: s.pid(0) }));
export const sharedEtcd = (): (() => SharedServers['etcd']) => shared('etcd', () => EtcdCluster.start({ members: 1, parentDir: '/dev/shm' }), (s) => s.clientOptions());

/** A monotonic clock moved only by the test: `advance` runs what falls due, in order. */
export class ManualClock implements MonotonicClock {
  #now: number;
  #due: Array<{ atMs: number; fn: () => void; cancelled: boolean }> = [];
  /** Every `schedule` call's delay from now, in order (retries sleep on this clock). */
  readonly delays: number[] = [];
  constructor(startMs = 1000) {
    this.#now = startMs;
  }
  now(): number {
    return this.#now;
  }
  set(ms: number): void {
    this.#now = ms;
  }
  schedule(atMs: number, fn: () => void): () => void {
    const entry = { atMs, fn, cancelled: false };
    this.delays.push(atMs - this.#now);
    if (atMs <= this.#now) queueMicrotask(() => entry.cancelled || fn());
    else this.#due.push(entry);
    return () => {
      entry.cancelled = true;
    };
  }
  /** Timers scheduled and neither run nor cancelled: what a released resource must leave at 0. */
  get armed(): number {
    return this.#due.filter((e) => !e.cancelled).length;
  }
  advance(ms: number): void {
    this.#now += ms;
    const due = this.#due.filter((e) => e.atMs <= this.#now).sort((a, b) => a.atMs - b.atMs);
    this.#due = this.#due.filter((e) => e.atMs > this.#now);
    for (const e of due) if (!e.cancelled) e.fn();
  }
}
