import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { systemClock } from '../impl/clock.ts';
import { InvalidInputError } from '../impl/errors.ts';
import { LeaseLock } from '../impl/leaseLock.ts';
import type { LeaseNode } from '../impl/leaseNode.ts';
import { closest, knownOptions } from '../impl/options.ts';
import { using } from '../impl/using.ts';
import { createRedisLock, redisFencedStore, redisLeaseNode } from '../impl/redis/index.ts';
import { openPostgresFencedStore, PostgresSessionLock, PostgresTransactionLock } from '../impl/postgres/index.ts';
import { ZookeeperLock, zookeeperFencedStore, zookeeperNode } from '../impl/zookeeper/index.ts';
import { EtcdLock, etcd3Node, etcdClient, etcdFencedStore } from '../impl/etcd/index.ts';
import { AdapterApiError, checkConformance, runLockstep, scheduleArb, simLeaseBackend } from '../conformance/index.ts';
import { conformanceSuite } from '../conformance/suite.ts';
import { PostgresServer, postgresLibraryBackend, realPostgresBackend, realRedisBackend, RedisServer, redisLibraryBackend, startRedisCluster, startRedisRun, VirtualTime } from '../conformance/kit.ts';
import { checkHistory } from '../conformance/history/index.ts';
import { designs } from '../model/index.ts';

/**
 * Every public options object refuses a key it does not know (a typo, an
 * option of another backend) with InvalidInputError('invalid-config') naming
 * the object, the key and the keys it knows, instead of running with the
 * default in the key's place. Each call below is valid but for the one
 * unknown key, so without the check it would be accepted. Nothing here
 * connects anywhere (the acquire options, which are checked on a live lock,
 * are in acquireOptions.test.ts, on real servers).
 */

const redis = new Redis({ lazyConnect: true });
const zk = zookeeperNode({ connectString: '127.0.0.1:1', clock: systemClock });
const etcd = etcdClient({ hosts: ['http://127.0.0.1:1'] });
const etcdNode = etcd3Node(etcd, { clock: systemClock });
afterAll(() => {
  redis.disconnect();
  zk.close();
  etcd.close();
});

const node: LeaseNode = { acquire: async () => null, release: async () => false, extend: async () => false, raiseToken: async () => undefined };
const sim = simLeaseBackend(designs.redisSingle(), 'strict');
const adapter = { name: 'a library', client: () => ({ acquire: async () => ({ kind: 'timed-out' }) as const, release: async () => undefined }) };
const task = async (): Promise<number> => 1;

/** What `call` threw or rejected with; what it built, if it was accepted, is closed or stopped (a server, a client) and the test fails. */
async function refusal(call: () => unknown): Promise<unknown> {
  let made: unknown;
  try {
    made = await call();
  } catch (e) {
    return e;
  }
  const m = made as { close?: () => unknown; stop?: () => unknown; disconnect?: () => unknown } | undefined;
  await (m?.stop?.() ?? m?.close?.());
  return new Error('accepted');
}

/** An options object: what takes it, the call with one unknown key `bogus`, and the name its refusal must give. */
type Case = readonly [what: string, call: (extra: Record<string, unknown>) => unknown, names: string];

const CASES: readonly Case[] = [
  ['LeaseLock', (x) => new LeaseLock({ nodes: [node], clock: systemClock, ...x }), 'LeaseLock options'],
  ['LeaseLock.acquire', (x) => new LeaseLock({ nodes: [node], clock: systemClock }).acquire('r', { ttlMs: 100, ...x }), 'acquire options'],
  ['using', (x) => using(new LeaseLock({ nodes: [node], clock: systemClock }), 'r', { ttlMs: 100, extendAtFraction: 0.5, ...x }, task), 'acquire options'],
  ['createRedisLock', (x) => createRedisLock({ nodes: [redis], ...x }), 'createRedisLock options'],
  ['redisLeaseNode', (x) => redisLeaseNode(redis, { prefix: 'p', ...x }), 'redisLeaseNode options'],
  ['redisLeaseNode replicas', (x) => redisLeaseNode(redis, { replicas: { count: 1, timeoutMs: 10, ...x } }), 'replicas'],
  ['createRedisLock replicas', (x) => createRedisLock({ nodes: [redis], replicas: { count: 1, timeoutMs: 10, ...x } }), 'replicas'],
  ['redisFencedStore', (x) => redisFencedStore(redis, 'strict', { prefix: 'p', ...x }), 'redisFencedStore options'],
  ['PostgresSessionLock', (x) => new PostgresSessionLock({ connection: {}, ...x }), 'PostgresSessionLock options'],
  ['PostgresTransactionLock', (x) => new PostgresTransactionLock({ connection: {}, ...x }), 'PostgresTransactionLock options'],
  ['openPostgresFencedStore', (x) => openPostgresFencedStore({ connection: {}, ...x }, 'strict'), 'openPostgresFencedStore options'],
  ['zookeeperNode', (x) => zookeeperNode({ connectString: '127.0.0.1:1', clock: systemClock, ...x }), 'zookeeperNode options'],
  ['zookeeperNode auth', (x) => zookeeperNode({ connectString: '127.0.0.1:1', clock: systemClock, auth: [{ scheme: 'digest', credentials: 'u:p' }, { scheme: 'digest', credentials: 'v:q', ...x }] }), 'auth[1]'],
  ['ZookeeperLock', (x) => new ZookeeperLock({ node: zk, clock: systemClock, ...x }), 'ZookeeperLock options'],
  ['zookeeperFencedStore', (x) => zookeeperFencedStore(zk, 'strict', { root: '/r', ...x }), 'zookeeperFencedStore options'],
  ['etcdClient', (x) => etcdClient({ hosts: ['http://127.0.0.1:1'], ...x }), 'etcdClient options'],
  ['etcdClient auth', (x) => etcdClient({ hosts: ['http://127.0.0.1:1'], auth: { username: 'u', password: 'p', ...x } }), 'auth'],
  ['etcd3Node', (x) => etcd3Node(etcd, { clock: systemClock, ...x }), 'etcd3Node options'],
  ['EtcdLock', (x) => new EtcdLock({ node: etcdNode, clock: systemClock, ...x }), 'EtcdLock options'],
  ['etcdFencedStore', (x) => etcdFencedStore(etcdNode, 'strict', { prefix: 'p/', ...x }), 'etcdFencedStore options'],
  ['checkConformance', (x) => checkConformance(sim, { runs: 1, ...x }), 'checkConformance options'],
  ['checkConformance failOn', (x) => checkConformance(sim, { runs: 1, failOn: { properties: ['MUTEX-1'], ...x } }), 'failOn'],
  ['conformanceSuite', (x) => conformanceSuite(sim, { runs: 1, ...x }), 'conformanceSuite options'],
  ['redisLibraryBackend adapter', (x) => redisLibraryBackend({ ...adapter, ...x }), 'adapter'],
  ['redisLibraryBackend contract', (x) => redisLibraryBackend({ ...adapter, contract: { tokens: 'none', ...x } }), 'adapter.contract'],
  ['redisLibraryBackend capabilities', (x) => redisLibraryBackend({ ...adapter, capabilities: { reentrant: false, ...x } }), 'adapter.capabilities'],
  ['redisLibraryBackend server choice', (x) => redisLibraryBackend(adapter, { redis: ['redis://127.0.0.1:1'], ...x }), 'the server choice'],
  ['postgresLibraryBackend adapter', (x) => postgresLibraryBackend({ ...adapter, ...x }), 'adapter'],
  ['postgresLibraryBackend server choice', (x) => postgresLibraryBackend(adapter, { pg: 'postgres://127.0.0.1:1/x', ...x }), 'the server choice'],
  ['simLeaseBackend parts', (x) => simLeaseBackend(designs.redisSingle(), 'strict', { ...x }), 'parts'],
  ['startRedisCluster', (x) => startRedisCluster({ nodes: 1, persistence: 'none', ...x }), 'startRedisCluster options'],
  ['startRedisRun', (x) => startRedisRun({} as never, designs.redisSingle(), { clients: 1, ...x }), 'startRedisRun options'],
  ['realRedisBackend', (x) => realRedisBackend({ nodes: [{}], persistence: 'unknown', local: { servers: [], clockFiles: [] } } as never, designs.redisSingle(), 'strict', { name: 'r', ...x }), 'realRedisBackend options'],
  ['realPostgresBackend', (x) => realPostgresBackend({} as never, designs.pgSession(), 'strict', { name: 'p', ...x }), 'realPostgresBackend options'],
  ['RedisServer.start', (x) => RedisServer.start({ persistence: 'none', ...x }), 'RedisServer options'],
  ['PostgresServer.start', (x) => PostgresServer.start({ parentDir: '/dev/shm', ...x }), 'PostgresServer options'],
  ['VirtualTime', (x) => new VirtualTime({ onTick: () => undefined, ...x }), 'VirtualTime options'],
  ['VirtualTime realTime', (x) => new VirtualTime({ realTime: { toleranceMs: 10, ...x } }), 'realTime'],
  ['runLockstep', (x) => runLockstep(sim, [], { clients: 1, tokenBase: 0n, ...x }), 'runLockstep options'],
  ['scheduleArb', (x) => scheduleArb({ design: designs.redisSingle(), faults: [], clients: 1, resources: 1, maxCommands: 1, ...x }), 'scheduleArb options'],
  ['checkHistory', (x) => checkHistory([], { maxFindings: 1, ...x }), 'checkHistory options'],
];

function refusedFor(e: unknown, names: string, key: string): void {
  expect(e).toBeInstanceOf(InvalidInputError);
  expect((e as InvalidInputError).code).toBe('invalid-config');
  expect((e as Error).message).toContain(`${names}: unknown option "${key}"`);
  expect((e as Error).message).toContain('known: ');
}

describe('every public options object refuses a key it does not know', () => {
  it.for(CASES)('%s', async ([, call, names]) => {
    refusedFor(await refusal(() => call({ bogus: 1 })), names, 'bogus');
  });

  it.for(CASES)('%s, also when the unknown key is undefined', async ([, call, names]) => {
    refusedFor(await refusal(() => call({ bogus: undefined })), names, 'bogus');
  });

  it('names every unknown key of the object, and the known ones', async () => {
    const e = await refusal(() => new LeaseLock({ nodes: [node], clock: systemClock, colour: 'red', size: 3 } as never));
    expect((e as Error).message).toBe('invalid-config: LeaseLock options: unknown options "colour", "size"; known: nodes, clock, driftFactor, clockMarginMs, requestTimeoutMs, random, safetyMarginMs');
  });

  it("takes the CLI's server choice, with both URLs, in a library backend of either kind", () => {
    const choice = { redis: ['redis://127.0.0.1:1'], pg: 'postgres://127.0.0.1:1/x' };
    expect(redisLibraryBackend(adapter, choice).name).toBe('a library');
    expect(postgresLibraryBackend(adapter, choice).name).toBe('a library');
  });

  it('accepts a known key whose value is undefined (the default)', async () => {
    expect(new LeaseLock({ nodes: [node], clock: systemClock, requestTimeoutMs: undefined } as never).quorum).toBe(1);
    expect(await new LeaseLock({ nodes: [node], clock: systemClock }).acquire('r', { ttlMs: 100, retries: undefined } as never)).toEqual({ kind: 'denied', reason: 'held' });
  });
});

describe("a backend's declarations (capabilities, contract) are refused with a key they do not take", () => {
  it.for([
    ['conformanceSuite, capabilities', () => conformanceSuite({ ...sim, capabilities: { ...sim.capabilities, sessionbound: true } as never }), 'capabilities: unknown option "sessionbound" (did you mean sessionBound?)'],
    ['checkConformance, contract', () => checkConformance({ ...sim, contract: { clientTimeOut: false } as never }, { runs: 1 }), 'contract: unknown option "clientTimeOut" (did you mean clientTimeout?)'],
  ] as const)('%s', async ([, call, says]) => {
    const e = await refusal(call);
    expect(e).toBeInstanceOf(AdapterApiError);
    expect((e as Error).message).toBe(`${sim.name}: ${says}; known: ${says.startsWith('capabilities') ? 'store, ttl, sessionBound, reentrant, tokens, expiryToleranceMs, ttlGrainMs, tokensComparedBy' : 'deadline, clientTimeout, decidesAt, refreshTtl, failedExtend, denialReasons, tokens, validatesInput, driftMargin'}`);
  });
});

describe('a typo gets the nearest known key as a suggestion', () => {
  const lock = new LeaseLock({ nodes: [node], clock: systemClock });
  it.for([
    ['acquire { retry }', () => lock.acquire('r', { ttlMs: 5000, retry: 3 } as never), 'acquire options: unknown option "retry" (did you mean retries?)'],
    ['acquire { retryDelay }', () => lock.acquire('r', { ttlMs: 5000, retries: 1, retryDelay: 3 } as never), 'unknown option "retryDelay" (did you mean retryDelayMs?)'],
    ['acquire { ttl }', () => lock.acquire('r', { ttlMs: 5000, ttl: 3 } as never), 'unknown option "ttl" (did you mean ttlMs?)'],
    ['using { extendAtFractoin }', () => using(lock, 'r', { ttlMs: 5000, extendAtFractoin: 0.5 } as never, task), 'using options: unknown option "extendAtFractoin" (did you mean extendAtFraction?)'],
    ['LeaseLock { requestTimeout }', () => new LeaseLock({ nodes: [node], clock: systemClock, requestTimeout: 50 } as never), 'LeaseLock options: unknown option "requestTimeout" (did you mean requestTimeoutMs?)'],
    ['createRedisLock { tokenbase }', () => createRedisLock({ nodes: [redis], tokenbase: 5n } as never), 'unknown option "tokenbase" (did you mean tokenBase?)'],
    ['PostgresSessionLock { statementTimeout }', () => new PostgresSessionLock({ connection: {}, statementTimeout: 50 } as never), 'unknown option "statementTimeout" (did you mean statementTimeoutMs?)'],
    ['etcdClient { dialTimeout }', () => etcdClient({ hosts: ['http://127.0.0.1:1'], dialTimeout: 50 } as never), 'unknown option "dialTimeout" (did you mean dialTimeoutMs?)'],
    ['checkConformance { run }', () => checkConformance(sim, { run: 5 } as never), 'unknown option "run" (did you mean runs?)'],
    ['contract { clientTimeOut }', () => redisLibraryBackend({ ...adapter, contract: { clientTimeOut: false } as never }), 'adapter.contract: unknown option "clientTimeOut" (did you mean clientTimeout?)'],
  ] as const)('%s', async ([, call, says]) => {
    const e = await refusal(call);
    expect(e).toBeInstanceOf(InvalidInputError);
    expect((e as Error).message).toContain(says);
  });

  it('suggests nothing for a key near none of them', async () => {
    const e = await refusal(() => lock.acquire('r', { ttlMs: 5000, colour: 'red' } as never));
    expect((e as Error).message).toBe('invalid-config: acquire options: unknown option "colour"; known: ttlMs, retries, retryDelayMs, retryJitterMs, signal');
  });

  it.for([
    ['retry', 'retries'],
    ['Retries', 'retries'],
    ['retires', 'retries'],
    ['ttl', 'ttlMs'],
    ['ttlms', 'ttlMs'],
    ['x', undefined],
    ['timeout', undefined],
    ['', undefined],
    // Near only as the start of a known name (three letters at least), or with a known name as its own start.
    ['ret', 'retries'],
    ['re', undefined],
    ['ttlMsValue', 'ttlMs'],
  ] as const)('closest(%j) among the acquire options is %j', ([key, near]) => {
    expect(closest(key, ['ttlMs', 'retries', 'retryDelayMs', 'retryJitterMs'])).toBe(near);
  });

  it('two letters swapped count as one edit: a short key is still near', () => {
    expect(closest('tlt', ['ttl'])).toBe('ttl');
    expect(closest('sginal', ['signal'])).toBe('signal');
    // Two edits in three letters is too far; so is a letter that only moved and one that changed.
    expect(closest('lxt', ['ttl'])).toBeUndefined();
    expect(closest('ab', ['ca'])).toBeUndefined();
    expect(closest('ab', ['bc'])).toBeUndefined();
  });

  it('keys of up to 200 characters are compared; a longer one is near nothing (the comparison would cost too much)', () => {
    expect(closest('x'.repeat(200), ['x'.repeat(199)])).toBe('x'.repeat(199));
    expect(closest('x'.repeat(199), ['x'.repeat(200)])).toBe('x'.repeat(200));
    expect(closest('x'.repeat(201), ['x'.repeat(200)])).toBeUndefined();
    expect(closest('x'.repeat(200), ['x'.repeat(201)])).toBeUndefined();
  });

  it('a key as near to two names is offered the first listed', () => {
    expect(closest('ab', ['ax', 'xb'])).toBe('ax');
    expect(closest('ab', ['xb', 'ax'])).toBe('xb');
  });

  it('an object that takes no options says so; a very long unknown key is cut short at 60 characters', () => {
    expect(() => knownOptions('close options', [])({ force: true })).toThrow('invalid-config: close options: unknown option "force"; it takes none');
    const long = 'k'.repeat(61);
    expect(() => knownOptions('o', ['a'])({ [long]: 1 })).toThrow(`o: unknown option "${'k'.repeat(57)}..."; known: a`);
    const sixty = 'k'.repeat(60);
    expect(() => knownOptions('o', ['a'])({ [sixty]: 1 })).toThrow(`o: unknown option "${sixty}"; known: a`);
  });
});

describe('the PostgreSQL locks list the acquire options they take', () => {
  // ttlMs is known only to be refused as unsupported: listing it among the known keys invited it.
  it.for([PostgresSessionLock, PostgresTransactionLock])('%o: known are retries, retryDelayMs and signal, not ttlMs', async (Lock) => {
    const pg = new Lock({ connection: { host: '127.0.0.1', port: 1 } });
    try {
      const e = await refusal(() => pg.acquire('r', { waitMs: 5 } as never));
      expect((e as Error).message).toBe('invalid-config: acquire options: unknown option "waitMs"; known: retries, retryDelayMs, signal');
    } finally {
      await pg.close();
    }
  });
});
