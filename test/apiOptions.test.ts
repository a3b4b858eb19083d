import { handleAll, retry } from 'cockatiel';
import { Etcd3 } from 'etcd3';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { systemClock } from '../impl/clock.ts';
import { InvalidInputError } from '../impl/errors.ts';
import { LeaseLock } from '../impl/leaseLock.ts';
import type { LeaseNode } from '../impl/leaseNode.ts';
import { using } from '../impl/using.ts';
import { createRedisLock, redisFencedStore, redisLeaseNode } from '../impl/redis/index.ts';
import { openPostgresFencedStore, PostgresSessionLock, PostgresTransactionLock, postgresFencedStore } from '../impl/postgres/index.ts';
import { ZookeeperLock, zookeeperFencedStore, zookeeperNode } from '../impl/zookeeper/index.ts';
import { EtcdLock, etcd3Node, etcdClient, etcdFencedStore } from '../impl/etcd/index.ts';
import { ManualClock } from './impl/servers.ts';
import { checkConformance, simLeaseBackend } from '../conformance/index.ts';
import { conformanceSuite } from '../conformance/suite.ts';
import { postgresLibraryBackend, redisLibraryBackend, startRedisCluster, startRedisRun } from '../conformance/kit.ts';
import { designs } from '../model/index.ts';

/**
 * Every public constructor and factory of the lock clients checks its
 * options as it is called: bad ones (not an object, a required option
 * missing, of the wrong kind, a timeout that is not a whole positive number
 * of ms, ...) throw InvalidInputError whose message names the option, never
 * a TypeError now or a failure deep inside a later call; good ones still
 * construct. Nothing here connects anywhere: the ioredis connection is lazy,
 * the PostgreSQL locks and the ZooKeeper node connect at their first call.
 */

const redis = new Redis({ lazyConnect: true });
const zk = zookeeperNode({ connectString: '127.0.0.1:1', clock: systemClock });
const etcd = etcdClient({ hosts: ['http://127.0.0.1:1'] });
const etcdNode = etcd3Node(etcd, { clock: systemClock });
// etcd3 clients that retry failed calls on their own: its default, and a retry policy given.
const etcdRetrying = new Etcd3({ hosts: ['http://127.0.0.1:1'] });
const etcdRetryPolicy = new Etcd3({ hosts: ['http://127.0.0.1:1'], faultHandling: { global: retry(handleAll, { maxAttempts: 2 }) } });
afterAll(() => {
  redis.disconnect();
  zk.close();
  etcd.close();
  etcdRetrying.close();
  etcdRetryPolicy.close();
});

const node: LeaseNode = { acquire: async () => null, release: async () => false, extend: async () => false, raiseToken: async () => undefined };
const nowOnly = { now: () => 0 };
/** An object with the calls of a connection but no hmget (what a store reads with). */
const noHmget = { sendCommand: () => undefined, call: () => undefined, options: {} };
/** A ZooKeeper node with every call of the lock but one. */
const zkWithoutWatch = Object.fromEntries(Object.entries(zk).filter(([name]) => name !== 'watchGone'));

/** A bad call: what it is, the call, the option its error must name, the code (invalid-config unless said). */
type Bad = readonly [what: string, call: () => unknown, names: string, code?: string];

/** The error `call` throws or rejects with (a test failure if it returns). */
async function refusal(call: () => unknown): Promise<unknown> {
  try {
    await call();
  } catch (e) {
    return e;
  }
  throw new Error('accepted');
}

function refuses(constructor: string, cases: readonly Bad[]): void {
  describe(constructor, () => {
    it.for(cases.map(([what, call, names, code]) => ({ what, call, names, code: code ?? 'invalid-config' })))('refuses $what naming $names', async ({ call, names, code }) => {
      const e = await refusal(call);
      expect(e).toBeInstanceOf(InvalidInputError);
      expect((e as InvalidInputError).code).toBe(code);
      expect((e as Error).message).toContain(names);
    });
  });
}

/** Options and timeouts every constructor taking one refuses alike. */
const NOT_OBJECTS: ReadonlyArray<readonly [string, unknown]> = [['undefined options', undefined], ['null options', null], ['a number for options', 5], ['a string for options', 'x'], ['an array for options', []]];
const BAD_TIMEOUTS: readonly unknown[] = [Number.NaN, -1, 0, 1.5, Number.POSITIVE_INFINITY, 2 ** 31, '100'];
const BAD_CLOCKS: ReadonlyArray<readonly [string, unknown]> = [['no clock', undefined], ['a number clock', 5], ['a clock without schedule()', nowOnly], ['a null clock', null]];

const notObjects = (name: string, make: (options: unknown) => unknown): Bad[] => NOT_OBJECTS.map(([what, value]) => [what, () => make(value), name]);
const timeouts = (name: string, make: (ms: unknown) => unknown): Bad[] => BAD_TIMEOUTS.map((ms) => [`${name} ${String(ms)}`, () => make(ms), name]);
const clocks = (make: (clock: unknown) => unknown, optional: boolean): Bad[] => BAD_CLOCKS.filter(([, c]) => !optional || c !== undefined).map(([what, clock]) => [what, () => make(clock), 'clock']);

const leaseLock = (o: object): LeaseLock => new LeaseLock({ nodes: [node], clock: systemClock, ...o } as never);
refuses('LeaseLock', [
  ...notObjects('LeaseLock options', (o) => new LeaseLock(o as never)),
  ['no nodes option', () => new LeaseLock({ clock: systemClock } as never), 'nodes'],
  ['a string for nodes', () => leaseLock({ nodes: 'x' }), 'nodes'],
  ['a null node', () => leaseLock({ nodes: [null] }), 'nodes[0]'],
  ['a node without its calls', () => leaseLock({ nodes: [node, { acquire: async () => null }] }), 'nodes[1]'],
  ...clocks((clock) => leaseLock({ clock }), false),
  ...[Number.NaN, '0.5', Number.POSITIVE_INFINITY].map((v): Bad => [`driftFactor ${String(v)}`, () => leaseLock({ driftFactor: v }), 'driftFactor']),
  ...[Number.NaN, '2', Number.POSITIVE_INFINITY].map((v): Bad => [`clockMarginMs ${String(v)}`, () => leaseLock({ clockMarginMs: v }), 'clockMarginMs']),
  ...[Number.NaN, '0', Number.POSITIVE_INFINITY].map((v): Bad => [`safetyMarginMs ${String(v)}`, () => leaseLock({ safetyMarginMs: v }), 'safetyMarginMs']),
  ...timeouts('requestTimeoutMs', (ms) => leaseLock({ requestTimeoutMs: ms })),
  ['a number for random', () => leaseLock({ random: 5 }), 'random'],
]);

const redisLock = (o: object): LeaseLock => createRedisLock({ nodes: [redis], ...o } as never);
refuses('createRedisLock', [
  ...notObjects('createRedisLock options', (o) => createRedisLock(o as never)),
  ['no nodes option', () => createRedisLock({} as never), 'nodes'],
  ['a string for nodes', () => redisLock({ nodes: 'x' }), 'nodes'],
  ['a null node', () => redisLock({ nodes: [null] }), 'nodes[0]'],
  ['a plain object node', () => redisLock({ nodes: [redis, {}] }), 'nodes[1]'],
  ['the same connection twice', () => redisLock({ nodes: [redis, new Redis({ lazyConnect: true }), redis] }), 'nodes[2] is the same connection as nodes[0]'],
  ['a number clock', () => redisLock({ clock: 5 }), 'clock'],
  ['a clock without schedule()', () => redisLock({ clock: nowOnly }), 'clock'],
  ...timeouts('requestTimeoutMs', (ms) => redisLock({ requestTimeoutMs: ms })),
  ['a number tokenBase', () => redisLock({ tokenBase: 1 }), 'tokenBase', 'invalid-token'],
  ['a number prefix', () => redisLock({ prefix: 5 }), 'prefix'],
  ['null replicas', () => redisLock({ replicas: null }), 'replicas'],
  ['replicas with a NaN timeout', () => redisLock({ replicas: { count: 1, timeoutMs: Number.NaN } }), 'replicas'],
  ['a string driftFactor', () => redisLock({ driftFactor: '0.5' }), 'driftFactor'],
]);

refuses('redisLeaseNode', [
  ['no connection', () => redisLeaseNode(undefined as never), 'redis'],
  ['a plain object for the connection', () => redisLeaseNode({} as never), 'redis'],
  ['a connection without options', () => redisLeaseNode({ sendCommand: () => undefined, call: () => undefined } as never), 'redis.options'],
  ...notObjects('redisLeaseNode options', (o) => redisLeaseNode(redis, o as never)).filter(([what]) => what !== 'undefined options'),
  ['a number tokenBase', () => redisLeaseNode(redis, { tokenBase: 1 as never }), 'tokenBase', 'invalid-token'],
  ['a number prefix', () => redisLeaseNode(redis, { prefix: 5 as never }), 'prefix'],
  ['null replicas', () => redisLeaseNode(redis, { replicas: null as never }), 'replicas'],
]);

refuses('redisFencedStore', [
  ['no connection', () => redisFencedStore(undefined as never, 'strict'), 'redis'],
  ['a connection without hmget()', () => redisFencedStore(noHmget as never, 'strict'), 'hmget()'],
  ['an unknown policy', () => redisFencedStore(redis, 'fenced' as never), 'policy'],
  ['no policy', () => redisFencedStore(redis, undefined as never), 'policy'],
  ['null options', () => redisFencedStore(redis, 'strict', null as never), 'redisFencedStore options'],
  ['a number prefix', () => redisFencedStore(redis, 'strict', { prefix: 5 as never }), 'prefix'],
]);

for (const [name, Lock] of [
  ['PostgresSessionLock', PostgresSessionLock],
  ['PostgresTransactionLock', PostgresTransactionLock],
] as const) {
  const lock = (o: object): unknown => new Lock({ connection: {}, ...o } as never);
  refuses(name, [
    ...notObjects(`${name} options`, (o) => new Lock(o as never)),
    ['no connection', () => new Lock({} as never), 'connection'],
    ['a null connection', () => lock({ connection: null }), 'connection'],
    ['a number connection', () => lock({ connection: 5 }), 'connection'],
    ...clocks((clock) => lock({ clock }), true),
    ...timeouts('statementTimeoutMs', (ms) => lock({ statementTimeoutMs: ms })),
    ['a number tokenBase', () => lock({ tokenBase: 0 }), 'tokenBase', 'invalid-token'],
    ['a number link', () => lock({ link: 5 }), 'link'],
    ['a string onConnectionLost', () => lock({ onConnectionLost: 'x' }), 'onConnectionLost'],
  ]);
}

refuses('openPostgresFencedStore', [
  ...notObjects('openPostgresFencedStore options', (o) => openPostgresFencedStore(o as never, 'strict')),
  ['no connection', () => openPostgresFencedStore({} as never, 'strict'), 'connection'],
  ['a number clock', () => openPostgresFencedStore({ connection: {}, clock: 5 as never }, 'strict'), 'clock'],
  ...timeouts('statementTimeoutMs', (ms) => openPostgresFencedStore({ connection: {}, statementTimeoutMs: ms as never }, 'strict')),
  ['an inherited name for the policy', () => openPostgresFencedStore({ connection: {} }, 'toString' as never), 'policy'],
]);

refuses('postgresFencedStore', [
  ['no connection', () => postgresFencedStore(undefined as never, 'strict'), 'db'],
  ['an object without query()', () => postgresFencedStore({} as never, 'strict'), 'db'],
  ['an unknown policy', () => postgresFencedStore({ query: () => undefined } as never, 'fenced' as never), 'policy'],
]);

const zkLock = (o: object): ZookeeperLock => new ZookeeperLock({ node: zk, clock: systemClock, ...o } as never);
refuses('ZookeeperLock', [
  ...notObjects('ZookeeperLock options', (o) => new ZookeeperLock(o as never)),
  ['no node', () => new ZookeeperLock({ clock: systemClock } as never), 'node'],
  ['a number node', () => zkLock({ node: 5 }), 'node'],
  ['a node without watchGone()', () => zkLock({ node: zkWithoutWatch }), 'watchGone()'],
  ...clocks((clock) => zkLock({ clock }), false),
  ['driftFactor NaN', () => zkLock({ driftFactor: Number.NaN }), 'driftFactor'],
]);

const zkNode = (o: object): unknown => zookeeperNode({ connectString: '127.0.0.1:1', clock: systemClock, ...o } as never);
refuses('zookeeperNode', [
  ...notObjects('zookeeperNode options', (o) => zookeeperNode(o as never)),
  ['no connectString', () => zookeeperNode({ clock: systemClock } as never), 'connectString'],
  ['an empty connectString', () => zkNode({ connectString: '' }), 'connectString'],
  ['a number connectString', () => zkNode({ connectString: 5 }), 'connectString'],
  ...clocks((clock) => zkNode({ clock }), false),
  ...timeouts('requestTimeoutMs', (ms) => zkNode({ requestTimeoutMs: ms })),
]);

refuses('zookeeperFencedStore', [
  ['no node', () => zookeeperFencedStore(undefined as never, 'strict'), 'node'],
  ['a node without fencedWrite()', () => zookeeperFencedStore({ get: async () => null } as never, 'strict'), 'fencedWrite()'],
  ['an unknown policy', () => zookeeperFencedStore(zk, 'fenced' as never), 'policy'],
  ['null options', () => zookeeperFencedStore(zk, 'strict', null as never), 'zookeeperFencedStore options'],
  ['a relative root', () => zookeeperFencedStore(zk, 'strict', { root: 'relative' }), 'root'],
]);

refuses('etcdClient', [
  ...notObjects('etcdClient options', (o) => etcdClient(o as never)),
  ['no hosts', () => etcdClient({} as never), 'hosts'],
  ['no host in hosts', () => etcdClient({ hosts: [] }), 'hosts'],
  ['a string for hosts', () => etcdClient({ hosts: 'http://x' as never }), 'hosts'],
  ['an empty host', () => etcdClient({ hosts: ['http://127.0.0.1:1', ''] }), 'hosts[1]'],
  ...timeouts('dialTimeoutMs', (ms) => etcdClient({ hosts: ['http://127.0.0.1:1'], dialTimeoutMs: ms as never })),
  ['auth without a username', () => etcdClient({ hosts: ['http://127.0.0.1:1'], auth: { password: 'x' } as never }), 'auth.username'],
  ['a number password', () => etcdClient({ hosts: ['http://127.0.0.1:1'], auth: { username: 'u', password: 5 as never } }), 'auth.password'],
  ...clocks((clock) => etcdClient({ hosts: ['http://127.0.0.1:1'], clock } as never), true),
]);

refuses('etcd3Node', [
  ['no client', () => etcd3Node(undefined as never, { clock: systemClock }), 'client'],
  ['a client without its KV calls', () => etcd3Node({ leaseClient: etcd.leaseClient } as never, { clock: systemClock }), 'client.kv'],
  ...notObjects('etcd3Node options', (o) => etcd3Node(etcd, o as never)),
  ...clocks((clock) => etcd3Node(etcd, { clock } as never), false),
  ...timeouts('requestTimeoutMs', (ms) => etcd3Node(etcd, { clock: systemClock, requestTimeoutMs: ms as never })),
  // A retried call whose first reply was lost may have run: a fenced write run twice reads as rejected.
  ['a client that retries on its own (etcd3 default)', () => etcd3Node(etcdRetrying, { clock: systemClock }), 'client retries failed calls on its own'],
  ['a client with a retry policy', () => etcd3Node(etcdRetryPolicy, { clock: systemClock }), 'client retries failed calls on its own'],
]);

const etcdLock = (o: object): unknown => new EtcdLock({ node: etcdNode, clock: systemClock, ...o } as never);
refuses('EtcdLock', [
  ...notObjects('EtcdLock options', (o) => new EtcdLock(o as never)),
  ['no node', () => new EtcdLock({ clock: systemClock } as never), 'node'],
  ['a node without revoke()', () => etcdLock({ node: { ...etcdNode, revoke: undefined } }), 'revoke()'],
  ...clocks((clock) => etcdLock({ clock }), false),
  ['driftFactor NaN', () => etcdLock({ driftFactor: Number.NaN }), 'driftFactor'],
  ['a number prefix', () => etcdLock({ prefix: 5 }), 'prefix'],
]);

refuses('etcdFencedStore', [
  ['no node', () => etcdFencedStore(undefined as never, 'strict'), 'node'],
  ['a node without fencedWrite()', () => etcdFencedStore({ get: async () => null } as never, 'strict'), 'fencedWrite()'],
  ['an unknown policy', () => etcdFencedStore(etcdNode, 'fenced' as never), 'policy'],
  ['null options', () => etcdFencedStore(etcdNode, 'strict', null as never), 'etcdFencedStore options'],
  ['a number prefix', () => etcdFencedStore(etcdNode, 'strict', { prefix: 5 as never }), 'prefix'],
]);

const lockForUsing = new LeaseLock({ nodes: [node], clock: systemClock });
const task = async (): Promise<number> => 1;
refuses('using', [
  ['no lock', () => using(undefined as never, 'r', { ttlMs: 100 }, task), 'lock'],
  ['a plain object for the lock', () => using({} as never, 'r', { ttlMs: 100 }, task), 'lock'],
  ...notObjects('using options', (o) => using(lockForUsing, 'r', o as never, task)),
  ['no task', () => using(lockForUsing, 'r', { ttlMs: 100 }, undefined as never), 'fn'],
  ['a number for the task', () => using(lockForUsing, 'r', { ttlMs: 100 }, 5 as never), 'fn'],
]);

/** The conformance entry points the adapter docs have users call: their options are checked before anything starts. */
const sim = simLeaseBackend(designs.redisSingle(), 'strict');
const runOptions = (name: string, run: (o: object) => unknown): Bad[] => [
  ...[0, -1, 1.5, Number.NaN, '10'].map((runs): Bad => [`runs ${String(runs)}`, () => run({ runs }), 'runs']),
  ['a string seed', () => run({ seed: 'x' }), 'seed'],
  ['a number path', () => run({ path: 5 }), 'path'],
  ['a string for faults', () => run({ faults: 'pause' }), 'faults'],
  ['an unknown fault', () => run({ faults: ['pause', 'bogus'] }), 'faults[1]'],
  ['maxCommands 0', () => run({ maxCommands: 0 }), 'maxCommands'],
  ['clients 0', () => run({ clients: 0 }), 'clients'],
  ['resources 0', () => run({ resources: 0 }), 'resources'],
  ['resources 5', () => run({ resources: 5 }), 'resources'],
  ['null options', () => run(null as never), name],
  ['a number for options', () => run(5 as never), name],
];
refuses('checkConformance', [
  ...runOptions('checkConformance options', (o) => checkConformance(sim, o)),
  ['an unknown failOn', () => checkConformance(sim, { failOn: 'x' as never }), 'failOn'],
  ['failOn with an unknown property', () => checkConformance(sim, { failOn: { properties: ['MUTEX-9' as never] } }), 'failOn.properties[0]'],
  ['a number onRun', () => checkConformance(sim, { onRun: 5 as never }), 'onRun'],
  ['a number clock', () => checkConformance(sim, { clock: 5 as never }), 'clock'],
  ['a string modelSeeds', () => checkConformance(sim, { modelSeeds: 'yes' as never }), 'modelSeeds'],
  ['shrinkLimitMs -1', () => checkConformance(sim, { shrinkLimitMs: -1 }), 'shrinkLimitMs'],
  ['minimise true', () => checkConformance(sim, { minimise: true as never }), 'minimise'],
  ['minimise.maxReplays -1', () => checkConformance(sim, { minimise: { maxReplays: -1 } }), 'maxReplays'],
  ['minimise.limitMs NaN', () => checkConformance(sim, { minimise: { limitMs: Number.NaN } }), 'minimise.limitMs'],
  ['a number onMinimise', () => checkConformance(sim, { onMinimise: 5 as never }), 'onMinimise'],
  ['a schedule without commands', () => checkConformance(sim, { schedule: { tokenBase: 0n } as never }), 'schedule.commands'],
  ['a schedule with a number token base', () => checkConformance(sim, { schedule: { commands: [], tokenBase: 0 as never } }), 'schedule.tokenBase'],
  ['a schedule with a path', () => checkConformance(sim, { schedule: { commands: [], tokenBase: 0n }, path: '1' }), 'path'],
]);
refuses('conformanceSuite', [
  ...runOptions('conformanceSuite options', (o) => conformanceSuite(sim, o)),
  ['timeoutMs 0', () => conformanceSuite(sim, { timeoutMs: 0 }), 'timeoutMs'],
  ['a number timelineDir', () => conformanceSuite(sim, { timelineDir: 5 as never }), 'timelineDir'],
]);
const adapter = { name: 'a library', client: () => ({ acquire: async () => ({ kind: 'timed-out' }) as const, release: async () => undefined }) };
refuses('redisLibraryBackend', [
  ['no adapter', () => redisLibraryBackend(undefined as never), 'adapter'],
  ['an adapter without a name', () => redisLibraryBackend({ client: adapter.client } as never), 'adapter.name'],
  ['an adapter without client()', () => redisLibraryBackend({ name: 'x' } as never), 'adapter.client'],
  ['a number lockKey', () => redisLibraryBackend({ ...adapter, lockKey: 5 } as never), 'adapter.lockKey'],
  ['a design of another backend', () => redisLibraryBackend({ ...adapter, design: designs.pgSession() }), 'adapter.design'],
  ['null for the server choice', () => redisLibraryBackend(adapter, null as never), 'server choice'],
  ['a string for redis', () => redisLibraryBackend(adapter, { redis: 'redis://h' as never }), 'redis'],
  ['a number URL', () => redisLibraryBackend(adapter, { redis: [5 as never] }), 'redis[0]'],
]);
refuses('postgresLibraryBackend', [
  ['no adapter', () => postgresLibraryBackend(undefined as never), 'adapter'],
  ['an adapter without client()', () => postgresLibraryBackend({ name: 'x' } as never), 'adapter.client'],
  ['an empty pg URL', () => postgresLibraryBackend(adapter, { pg: '' }), 'pg'],
]);
refuses('simLeaseBackend', [
  ['no design', () => simLeaseBackend(undefined as never, 'strict'), 'design'],
  ['a design of another backend', () => simLeaseBackend(designs.pgSession(), 'strict'), 'design'],
  ['null parts', () => simLeaseBackend(designs.redisSingle(), 'strict', null as never), 'parts'],
]);
const noCluster = {} as never;
refuses('startRedisCluster', [
  ...notObjects('startRedisCluster options', (o) => startRedisCluster(o as never)),
  ['no nodes', () => startRedisCluster({ persistence: 'none' } as never), 'nodes'],
  ['nodes 0', () => startRedisCluster({ nodes: 0, persistence: 'none' }), 'nodes'],
  ['an unknown persistence', () => startRedisCluster({ nodes: 1, persistence: 'rdb' as never }), 'persistence'],
]);
refuses('startRedisRun', [
  ...notObjects('startRedisRun options', (o) => startRedisRun(noCluster, designs.redisSingle(), o as never)),
  ['no clients', () => startRedisRun(noCluster, designs.redisSingle(), {} as never), 'clients'],
  ['clients 0', () => startRedisRun(noCluster, designs.redisSingle(), { clients: 0 }), 'clients'],
  ['a string lockKey', () => startRedisRun(noCluster, designs.redisSingle(), { clients: 1, lockKey: 'k' as never }), 'lockKey'],
]);

describe('good options still construct', () => {
  it('at the edges of each range, with class instances for nodes and clocks', async () => {
    const clock = new ManualClock();
    const lock = new LeaseLock({ nodes: Array.from({ length: 15 }, () => node), clock, requestTimeoutMs: 2 ** 31 - 1, driftFactor: 0, clockMarginMs: 1000, safetyMarginMs: 0, random: () => 0.5 });
    expect(lock.clockOf()).toBe(clock);
    expect(new LeaseLock({ nodes: [node], clock, requestTimeoutMs: 1 }).quorum).toBe(1);
    expect(createRedisLock({ nodes: [redis, new Redis({ lazyConnect: true }), new Redis({ lazyConnect: true })], clock, requestTimeoutMs: 1, tokenBase: 2n ** 63n - 1n, prefix: '', replicas: { count: 1, timeoutMs: 1 } }).quorum).toBe(2);
    expect(createRedisLock({ nodes: [redis] }).clockOf()).toBe(systemClock);
    expect(Object.keys(redisLeaseNode(redis)).sort()).toEqual(['acquire', 'extend', 'raiseToken', 'release']);
    expect(Object.keys(redisFencedStore(redis, 'monotonic', { prefix: 'p' })).sort()).toEqual(['read', 'write']);
    for (const Lock of [PostgresSessionLock, PostgresTransactionLock]) {
      const pg = new Lock({ connection: { host: '127.0.0.1', port: 1 }, clock, statementTimeoutMs: 2 ** 31 - 1, tokenBase: 0n, link: (rt) => rt(), onConnectionLost: () => undefined });
      await pg.close();
    }
    await openPostgresFencedStore({ connection: {}, statementTimeoutMs: 1, clock }, 'unfenced').close();
    expect(Object.keys(postgresFencedStore({ query: () => undefined } as never, 'transactional')).sort()).toEqual(['read', 'write']);
    expect(new ZookeeperLock({ node: zk, clock, root: '/a/b', clockMarginMs: 10_000 }).clockOf()).toBe(clock);
    const other = zookeeperNode({ connectString: '127.0.0.1:1,127.0.0.1:2', clock, requestTimeoutMs: 1, auth: [] });
    other.close();
    const etcdOther = etcdClient({ hosts: ['http://127.0.0.1:1', 'http://127.0.0.1:2'], dialTimeoutMs: 1, auth: { username: 'u', password: '' } });
    expect(new EtcdLock({ node: etcd3Node(etcdOther, { clock, requestTimeoutMs: 2 ** 31 - 1 }), clock, prefix: '' }).clockOf()).toBe(clock);
    expect(Object.keys(etcdFencedStore(etcdNode, 'monotonic', { prefix: 'p/' })).sort()).toEqual(['read', 'write']);
    etcdOther.close();
    expect(Object.keys(zookeeperFencedStore(zk, 'strict', { root: '/t' })).sort()).toEqual(['read', 'write']);
    expect(await using(lockForUsing, 'r', { ttlMs: 100, extendAtFraction: 0 }, task).catch((e: unknown) => (e as Error).name)).toBe('LockNotAcquiredError');
    expect((await checkConformance(sim, { runs: 1, seed: 1, clients: 1, resources: 4, maxCommands: 1, faults: [], failOn: { consequences: ['unsafe'] }, modelSeeds: false, shrinkLimitMs: 0, onRun: () => undefined, clock: () => 0 })).runs).toBe(1);
    expect(redisLibraryBackend({ ...adapter, lockKey: (r) => r }, { redis: ['redis://127.0.0.1:1'] }).name).toBe('a library');
    expect(postgresLibraryBackend(adapter, { pg: 'postgres://127.0.0.1:1/x' }).name).toBe('a library');
  });
});

describe('a refused option that may be a secret is never shown in the message', () => {
  it.for([
    ['a connection string with a password where a ClientConfig goes', () => new PostgresSessionLock({ connection: 'postgres://app:hunter2@db.example/ledger' } as never), 'hunter2', 'connection must be'],
    ['a store connection string with a password', () => openPostgresFencedStore({ connection: 'postgres://app:hunter2@db.example/x' as never }, 'strict'), 'hunter2', 'connection must be'],
    ['a number password', () => etcdClient({ hosts: ['http://127.0.0.1:1'], auth: { username: 'u', password: 904413 as never } }), '904413', 'auth.password must be'],
    ['a number credential', () => zookeeperNode({ connectString: '127.0.0.1:1', clock: systemClock, auth: [{ scheme: 'digest', credentials: 904413 as never }] }), '904413', 'auth[0].credentials must be'],
  ] as const)('%s', async ([, call, secret, names]) => {
    const e = await refusal(call);
    expect(e).toBeInstanceOf(InvalidInputError);
    expect((e as Error).message).toContain(names);
    expect((e as Error).message).toContain('not shown: it may hold a secret');
    expect((e as Error).message).not.toContain(secret);
  });
});
