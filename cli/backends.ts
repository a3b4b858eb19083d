import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';
import type { BackendUnderTest, FaultKind } from '../conformance/adapter.ts';
import type { RedisCluster } from '../conformance/env/redisBackend.ts';
import { realRedisBackend, startRedisCluster } from '../conformance/env/redisBackend.ts';
import { realPostgresBackend, targetOf } from '../conformance/env/postgresBackend.ts';
import { PostgresServer } from '../conformance/env/postgresServer.ts';
import type { Design, StorePolicy } from '../model/design.ts';
import { describeDesign, designs } from '../model/design.ts';
import type { FaultClass } from '../model/faultClass.ts';
import { UsageError } from './usage.ts';
import { advisoryLockBackend } from '../conformance/adapters/advisoryLock.ts';
import { redlockBackend } from '../conformance/adapters/redlock.ts';
import { sesamecareRedlockBackend } from '../conformance/adapters/sesamecareRedlock.ts';

/**
 * The built-in backends the CLI runs, on servers it starts itself (and stops
 * when done), and the fault classes of the measured matrix.
 */
export interface BuiltIn {
  readonly name: string;
  readonly design: Design;
  readonly store: StorePolicy;
  /** An npm library audited through its adapter (conformance/adapters/): its deviations are the audit's findings. */
  readonly library?: 'redlock' | 'sesamecare-redlock' | 'advisory-lock';
}

const RESTART_DELAY_MS = 61; // longer than the longest ttl the schedules use (60 ms)

/** The library audits: rows of the matrix beside the built-in backends. */
export const LIBRARY_AUDITS: readonly BuiltIn[] = [
  { name: 'lib:redlock@5.0.0-beta.2', design: designs.redlock(), store: 'unfenced', library: 'redlock' },
  { name: 'lib:@sesamecare-oss/redlock@1.4.0', design: designs.redlock(), store: 'unfenced', library: 'sesamecare-redlock' },
  { name: 'lib:advisory-lock@2.0.0', design: designs.pgSession(), store: 'unfenced', library: 'advisory-lock' },
];

export const BUILT_INS: readonly BuiltIn[] = [
  ...[designs.redisSingle(), designs.redisSingle({ persistence: 'aof-always' }), designs.redlock(), designs.redlock({ persistence: 'aof-always' }), designs.redlock({ restartDelayMs: RESTART_DELAY_MS })].flatMap(
    (design) => (['unfenced', 'strict'] as const).map((store) => ({ name: builtInName(design, store), design, store })),
  ),
  ...(['unfenced', 'strict'] as const).map((store) => ({ name: builtInName(designs.pgSession(), store), design: designs.pgSession(), store })),
  { name: builtInName(designs.pgXact(), 'transactional'), design: designs.pgXact(), store: 'transactional' },
];

function builtInName(design: Design, store: StorePolicy): string {
  const d = design;
  const variant =
    d.kind === 'redis-single' || d.kind === 'redlock' ? `${d.kind}${d.persistence === 'aof-always' ? '-aof' : ''}${d.restartDelayMs > 0 ? '-delayed-restart' : ''}` : d.kind;
  return `${variant}/${store}`;
}

/** The measured matrix's columns: fault kinds the generated schedules may use, and the model's classes that predict them. */
export interface MeasuredFaultClass {
  readonly id: string;
  readonly title: string;
  readonly faults: readonly FaultKind[];
  readonly model: readonly FaultClass[];
}

export const MEASURED_FAULT_CLASSES: readonly MeasuredFaultClass[] = [
  { id: 'client-pause', title: 'client pause (also between check and write, and with replies in flight)', faults: ['advance', 'pause'], model: ['client-pause'] },
  { id: 'clock-step', title: "a node's clock steps (with partitions)", faults: ['advance', 'clock-step', 'partition'], model: ['clock-step'] },
  { id: 'crash-restart', title: 'a node crashes and restarts (with partitions)', faults: ['advance', 'crash-restart', 'partition'], model: ['crash-restart'] },
  { id: 'partition-delay', title: 'partitions and delayed replies', faults: ['advance', 'partition', 'delay'], model: ['partition', 'delay'] },
  { id: 'connection-loss', title: 'connection loss (with pauses)', faults: ['advance', 'pause', 'kill-connection'], model: ['connection-loss'] },
];

/** Starts servers on demand, once each, and stops them all at the end. */
export class Servers {
  #redis = new Map<'none' | 'aof-always', Promise<RedisCluster>>();
  #pg: Promise<PostgresServer> | null = null;

  async backend(b: BuiltIn): Promise<BackendUnderTest> {
    const d = b.design;
    if (d.kind === 'redis-single' || d.kind === 'redlock') {
      const p = d.persistence;
      if (!this.#redis.has(p)) this.#redis.set(p, startRedisCluster({ nodes: 5, persistence: p }));
      const cluster = await this.#redis.get(p)!;
      if (b.library === 'redlock') return redlockBackend(cluster, { name: b.name });
      if (b.library === 'sesamecare-redlock') return sesamecareRedlockBackend(cluster, { name: b.name });
      return realRedisBackend(cluster, d, b.store, { name: b.name });
    }
    this.#pg ??= PostgresServer.start({ parentDir: '/dev/shm' });
    const server = await this.#pg;
    const target = targetOf(server);
    if (b.library === 'advisory-lock') return advisoryLockBackend(target, { name: b.name });
    return realPostgresBackend(target, d, b.store, { name: b.name });
  }

  async stop(): Promise<void> {
    const clusters = await Promise.allSettled([...this.#redis.values()]);
    const pg = this.#pg === null ? null : await this.#pg.catch(() => null);
    await Promise.all([...clusters.flatMap((c) => (c.status === 'fulfilled' ? [c.value.stop()] : [])), pg?.stop()]);
  }
}

/** A built-in name, or the path of a module whose default export is a BackendUnderTest (or a function returning one). */
export async function resolveBackend(spec: string, servers: Servers): Promise<BackendUnderTest> {
  const builtIn = [...BUILT_INS, ...LIBRARY_AUDITS].find((b) => b.name === spec);
  if (builtIn !== undefined) return servers.backend(builtIn);
  if (!/[/\\.]/.test(spec)) throw new UsageError(`unknown backend '${spec}'. Built-in: ${BUILT_INS.map((b) => b.name).join(', ')}; or give the path of an adapter module`);
  let mod: { default?: unknown };
  try {
    mod = (await import(pathToFileURL(resolve(spec)).href)) as { default?: unknown };
  } catch (e) {
    throw new UsageError(`cannot load adapter module '${spec}': ${(e as Error).message}`);
  }
  const exported = typeof mod.default === 'function' ? await (mod.default as () => unknown)() : mod.default;
  const b = exported as Partial<BackendUnderTest> | undefined;
  if (b === undefined || typeof b.name !== 'string' || typeof b.start !== 'function' || b.design === undefined || !Array.isArray(b.faults)) {
    throw new UsageError(`'${spec}' must export default a BackendUnderTest (name, design, capabilities, faults, start) or a function returning one`);
  }
  return b as BackendUnderTest;
}

export function describeBuiltIn(b: BuiltIn): string {
  return `${describeDesign(b.design)} / ${b.store}`;
}
