import { inspect } from 'node:util';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisServer } from '../conformance/env/redisServer.ts';
import { SimNetwork } from '../conformance/sim/network.ts';
import { leaseNodeOver, SimRedisNode } from '../conformance/sim/redisNode.ts';
import { VirtualTime } from '../conformance/sim/time.ts';
import { ConnectionConfigError, TokenOverflowError } from '../impl/errors.ts';
import { LeaseLock } from '../impl/leaseLock.ts';
import { PostgresSessionLock } from '../impl/postgres/sessionLock.ts';
import { createRedisLock, redisFencedStore } from '../impl/redis/index.ts';
import { using } from '../impl/using.ts';
import { clockAt } from '../model/clock.ts';
import { checkResource, InvalidInputError } from '../model/errors.ts';

/** Three in-memory Redis nodes and one client on virtual time. */
function world() {
  const time = new VirtualTime();
  const nodes = [0, 1, 2].map(() => new SimRedisNode(time, false, 0, 0n));
  const network = new SimNetwork(time, (e) => (e === 'store' ? { reachable: () => true } : nodes[e as number]!));
  const lock = new LeaseLock({ nodes: nodes.map((n, i) => leaseNodeOver(network, 0, i, n)), clock: time.clockOf(() => clockAt()) });
  return { time, nodes, lock };
}

describe('low findings of issue 15', () => {
  it('leases that expire without a release are forgotten: the lock tracks at most about twice the live ones', async () => {
    const w = world();
    for (let i = 0; i < 1_000; i++) {
      const r = w.lock.acquire(`r${i}`, { ttlMs: 50 });
      await w.time.runUntil(r, 10_000);
      expect((await r).kind).toBe('granted');
      await w.time.advanceTo(w.time.nowMs() + 60); // the lease runs out, never released
    }
    expect(w.lock.trackedLeases).toBeLessThanOrEqual(64);
  });

  it('using() rejects an extendAtFraction outside [0, 1) before acquiring (2, NaN and Infinity would spin)', async () => {
    const w = world();
    for (const extendAtFraction of [2, 1, Number.NaN, Number.POSITIVE_INFINITY, -0.5, '0.5' as unknown as number]) {
      await expect(using(w.lock, 'job', { ttlMs: 100, extendAtFraction }, async () => 'ran')).rejects.toMatchObject({ code: 'invalid-config' });
    }
    expect(w.nodes.map((n) => n.holder('job'))).toEqual([null, null, null]);
  });

  it('retryDelayMs and retryJitterMs must be integers in range (NaN, -1 and strings are rejected, sending nothing)', async () => {
    const w = world();
    for (const bad of [Number.NaN, -1, 'x' as unknown as number, 1.5]) {
      await expect(w.lock.acquire('r', { ttlMs: 100, retries: 1, retryDelayMs: bad })).rejects.toMatchObject({ code: 'invalid-duration' });
      await expect(w.lock.acquire('r', { ttlMs: 100, retries: 1, retryJitterMs: bad })).rejects.toMatchObject({ code: 'invalid-duration' });
      const pg = new PostgresSessionLock({ connection: { host: '127.0.0.1', port: 1 } });
      await expect(pg.acquire('r', { retries: 1, retryDelayMs: bad })).rejects.toMatchObject({ code: 'invalid-duration' });
    }
    expect(w.nodes.map((n) => n.holder('r'))).toEqual([null, null, null]);
  });

  it('resource names must be well-formed Unicode without NUL (lone surrogates would collide on the wire)', () => {
    for (const bad of ['\uD800', 'a\uDC00b', 'x\uD83D', 'a\0b']) expect(() => checkResource(bad)).toThrow(InvalidInputError);
    for (const good of ['😀', 'a-b', 'é']) expect(checkResource(good)).toBe(good);
  });
});

describe('typed errors on a real redis-server', () => {
  let server: RedisServer;
  const clients: Redis[] = [];
  beforeAll(async () => {
    server = await RedisServer.start({ persistence: 'none' });
  });
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await server?.stop();
  });
  const client = (password: string): Redis => {
    const c = new Redis({ host: server.host, port: server.port, password, maxRetriesPerRequest: 0, retryStrategy: () => null, commandTimeout: 2_000, lazyConnect: true });
    c.on('error', () => undefined);
    clients.push(c);
    return c;
  };

  it('a wrong password is a ConnectionConfigError, not no-quorum', async () => {
    const lock = createRedisLock({ nodes: [client('wrong-pw-904413')], requestTimeoutMs: 20_000 });
    const e = await lock.acquire('r', { ttlMs: 5_000 }).then(() => null, (error: unknown) => error);
    expect(e).toBeInstanceOf(ConnectionConfigError);
    // Printed whole, causes and properties included (ioredis keeps a failed command's arguments), the error holds neither password.
    expect(inspect(e, { depth: 20, showHidden: true })).not.toMatch(new RegExp(`wrong-pw-904413|${server.password}`));
    const store = redisFencedStore(client('wrong-pw-904413'), 'strict', { timeoutMs: 20_000 });
    const w = await store.write('r', 1n, 'v').then(() => null, (error: unknown) => error);
    expect(w).toBeInstanceOf(ConnectionConfigError);
    expect(inspect(w, { depth: 20, showHidden: true })).not.toMatch(new RegExp(`wrong-pw-904413|${server.password}`));
  });

  it('a token counter at 2^63-1 is a TokenOverflowError, and the lock is not left set', async () => {
    const redis = client(server.password);
    await redis.set('lockcheck:token:full', '9223372036854775807');
    const lock = createRedisLock({ nodes: [redis], requestTimeoutMs: 20_000 });
    await expect(lock.acquire('full', { ttlMs: 5_000 })).rejects.toBeInstanceOf(TokenOverflowError);
    expect(await redis.exists('lockcheck:lock:full')).toBe(0);
  });
});
