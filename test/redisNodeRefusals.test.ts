import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisServer } from '../conformance/env/redisServer.ts';
import { ReplicationError, ServerRefusedError } from '../impl/errors.ts';
import { createRedisLock, redisLeaseNode } from '../impl/redis/index.ts';
import type { LeaseNode } from '../impl/leaseNode.ts';
import { InvalidInputError } from '../model/errors.ts';

/**
 * A Redis node's every call, and the WAIT after it with `replicas`, types
 * what the server refuses (NOPERM a ServerRefusedError with the reply as its
 * cause), and the lock throws it on every vote path (extend and release as
 * acquire), never `no-quorum`. The node checks every argument and rejects
 * with InvalidInputError before anything is sent, never throwing
 * synchronously or from inside ioredis. One real redis-server, ACL users.
 */
let server: RedisServer;
const clients: Redis[] = [];
let admin: Redis;

beforeAll(async () => {
  server = await RedisServer.start({ persistence: 'none' });
  admin = connect('default', server.password);
});
afterAll(async () => {
  for (const c of clients) c.disconnect();
  await server?.stop();
});

function connect(username: string, password: string, lazy = true): Redis {
  const c = new Redis({ host: server.host, port: server.port, username, password, lazyConnect: lazy, maxRetriesPerRequest: 0, retryStrategy: () => null, commandTimeout: 5_000, enableReadyCheck: false });
  c.on('error', () => undefined);
  clients.push(c);
  return c;
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    (v) => new Error(`expected a rejection, got ${JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x))}`),
    (e: unknown) => e,
  );
}

function expectNoperm(e: unknown): void {
  expect(e).toBeInstanceOf(ServerRefusedError);
  expect(e).toMatchObject({ code: 'permission', serverCode: 'NOPERM' });
  expect((e as Error).cause).toBeInstanceOf(Error);
}

describe('Redis: a refusal on extend and release is thrown, not no-quorum', () => {
  it('the scripts taken from a user under a held lease: extend and release throw ServerRefusedError NOPERM; the release drops the lease', async () => {
    await admin.call('ACL', 'SETUSER', 'app', 'reset', 'on', '>pw', '~*', '+@all');
    const lock = createRedisLock({ nodes: [connect('app', 'pw')], requestTimeoutMs: 5_000 });
    const acquired = await lock.acquire('r', { ttlMs: 10_000 });
    if (acquired.kind !== 'granted') throw new Error(`not granted: ${acquired.kind}`);
    await admin.call('ACL', 'SETUSER', 'app', '-evalsha', '-eval');
    expectNoperm(await rejection(lock.extend(acquired.lease, 10_000)));
    expect(acquired.lease.signal.aborted).toBe(false);
    expectNoperm(await rejection(lock.release(acquired.lease)));
    expect(acquired.lease.signal.aborted).toBe(true);
    // The refused release left the key: it goes with its ttl.
    expect(await admin.exists('lockcheck:lock:r')).toBe(1);
  });

  it("each of the node's four calls types NOPERM (a user without the scripts)", async () => {
    await admin.call('ACL', 'SETUSER', 'noscripts', 'reset', 'on', '>pw', '~*', '+get');
    const node = redisLeaseNode(connect('noscripts', 'pw'));
    for (const call of [() => node.acquire('r', 'o', 1000), () => node.release('r', 'o'), () => node.extend('r', 'o', 1000), () => node.raiseToken('r', 5n)]) {
      expectNoperm(await rejection(call()));
    }
  });
});

describe('Redis replicas: WAIT is typed, and its options bounded', () => {
  it('a user without WAIT: acquire throws ServerRefusedError NOPERM (was denied no-quorum every attempt); each node call after a write too', async () => {
    await admin.call('ACL', 'SETUSER', 'nowait', 'reset', 'on', '>pw', '~*', '+@all', '-wait');
    const redis = connect('nowait', 'pw');
    const lock = createRedisLock({ nodes: [redis], replicas: { count: 1, timeoutMs: 100 }, requestTimeoutMs: 5_000 });
    expectNoperm(await rejection(lock.acquire('w', { ttlMs: 5_000, retries: 2 })));
    const node = redisLeaseNode(redis, { replicas: { count: 1, timeoutMs: 100 }, prefix: 'n' });
    for (const call of [() => node.acquire('x', 'o', 5_000), () => node.extend('x', 'o', 5_000), () => node.release('x', 'o'), () => node.raiseToken('x', 3n)]) {
      expectNoperm(await rejection(call()));
    }
  });

  it('a WAIT reply that is no number is no acknowledgement: ReplicationError', async () => {
    // A connection whose scripts answer 1 and whose WAIT answers what no server would.
    const fake = { options: {}, sendCommand: (c: { resolve: (v: unknown) => void }) => c.resolve(1), call: () => Promise.resolve('not a number') };
    const node = redisLeaseNode(fake as never, { replicas: { count: 1, timeoutMs: 10 } });
    expect(await rejection(node.release('x', 'o'))).toBeInstanceOf(ReplicationError);
  });

  it('count and timeoutMs out of range are InvalidInputError (1e21 went to WAIT as "1e+21")', () => {
    for (const replicas of [{ count: 1, timeoutMs: 1e21 }, { count: 1, timeoutMs: 2 ** 31 }, { count: 2 ** 31, timeoutMs: 100 }, { count: 1e21, timeoutMs: 100 }]) {
      expect(() => redisLeaseNode(admin, { replicas })).toThrow(expect.objectContaining({ name: 'InvalidInputError', code: 'invalid-config', message: expect.stringMatching(/replicas/) }));
      expect(() => createRedisLock({ nodes: [admin], replicas })).toThrow(InvalidInputError);
    }
    expect(() => redisLeaseNode(admin, { replicas: { count: 2 ** 31 - 1, timeoutMs: 2 ** 31 - 1 } })).not.toThrow();
  });
});

describe('redisLeaseNode checks every argument: a rejection, never a throw', () => {
  const bad: ReadonlyArray<[string, (node: LeaseNode) => Promise<unknown>, string]> = [
    ['acquire with a number as owner', (n) => n.acquire('a4', 42 as never, 1000), 'invalid-config'],
    ['acquire with an empty owner', (n) => n.acquire('a4', '', 1000), 'invalid-config'],
    ['acquire with an owner holding NUL', (n) => n.acquire('a4', 'o\0', 1000), 'invalid-config'],
    ['acquire with an owner of 257 characters', (n) => n.acquire('a4', 'o'.repeat(257), 1000), 'invalid-config'],
    ['acquire with a ttl of 1.5', (n) => n.acquire('a1', 'o', 1.5), 'invalid-ttl'],
    ['acquire with a ttl of 0', (n) => n.acquire('a2', 'o', 0), 'invalid-ttl'],
    ['acquire with a ttl of 2^31', (n) => n.acquire('a2', 'o', 2 ** 31), 'invalid-ttl'],
    ['acquire with a string ttl', (n) => n.acquire('a2', 'o', '1000' as never), 'invalid-ttl'],
    ['acquire with a number as resource', (n) => n.acquire(7 as never, 'o', 1000), 'invalid-resource'],
    ['release with an undefined owner', (n) => n.release('a4', undefined as never), 'invalid-config'],
    ['release with an empty resource', (n) => n.release('', 'o'), 'invalid-resource'],
    ['extend with a ttl of 0', (n) => n.extend('a4', 'o', 0), 'invalid-ttl'],
    ['extend with a NaN ttl', (n) => n.extend('a4', 'o', Number.NaN), 'invalid-ttl'],
    ['extend with an object as owner', (n) => n.extend('a4', {} as never, 1000), 'invalid-config'],
    ['raiseToken with a number token', (n) => n.raiseToken('a4', 5 as never), 'invalid-token'],
    ['raiseToken with a negative token', (n) => n.raiseToken('a4', -1n), 'invalid-token'],
    ['raiseToken with a null resource', (n) => n.raiseToken(null as never, 5n), 'invalid-resource'],
  ];

  for (const replicas of [undefined, { count: 1, timeoutMs: 10 }]) {
    it(`${replicas === undefined ? 'plain' : 'with replicas'}: each bad argument rejects with InvalidInputError and its code, and nothing is sent`, async () => {
      const redis = connect('default', server.password);
      await redis.connect();
      const node = redisLeaseNode(redis, replicas === undefined ? {} : { replicas });
      await redis.flushall();
      for (const [what, call, code] of bad) {
        let p: Promise<unknown> | undefined;
        expect(() => (p = call(node)), what).not.toThrow();
        const e = await rejection(p!);
        expect(e, what).toBeInstanceOf(InvalidInputError);
        expect((e as InvalidInputError).code, what).toBe(code);
      }
      expect(await redis.dbsize()).toBe(0);
    });
  }

  it('an owner of 256 characters, the most, is taken; the refusal of one more names the bound (mutation testing, session h34: the bound itself was unchecked)', async () => {
    const redis = connect('default', server.password);
    await redis.connect();
    const node = redisLeaseNode(redis);
    const owner = 'o'.repeat(256);
    const granted = await node.acquire('owner-bound', owner, 10_000);
    expect(typeof granted).toBe('bigint');
    expect(await node.release('owner-bound', owner)).toBe(true);
    const e = await rejection(node.acquire('owner-bound', `${owner}o`, 10_000));
    expect((e as Error).message).toBe('invalid-config: owner must be a non-empty string of at most 256 characters, well-formed Unicode without NUL, got a string of 257 characters');
  });

  it('while the connection is still opening: a bad owner rejects (it threw inside ioredis, uncaught, and never settled); a good call then runs', async () => {
    const redis = connect('default', server.password, false);
    expect(redis.status).toBe('connecting');
    const node = redisLeaseNode(redis, { prefix: 'opening' });
    let p: Promise<unknown> | undefined;
    expect(() => (p = node.acquire('a4', 42 as never, 1000))).not.toThrow();
    const e = await rejection(p!);
    expect(e).toBeInstanceOf(InvalidInputError);
    expect(await node.acquire('a4', 'o', 1000)).toBe(1n);
  });
});
