import { Redis as Redis6 } from 'ioredis6';
import { Redis as Redis5 } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TcpProxy } from '../conformance/env/proxy.ts';
import { RedisServer } from '../conformance/env/redisServer.ts';
import { InvalidInputError, UnavailableError } from '../impl/errors.ts';
import { using } from '../impl/using.ts';
import { acquireScript } from '../impl/redis/commands.ts';
import { createRedisLock, keysFor, redisFencedStore, redisLeaseNode, type RedisConnection, type RedisStoreConnection } from '../impl/redis/index.ts';
import { LeaseLock } from '../impl/leaseLock.ts';
import type { LeaseNode } from '../impl/leaseNode.ts';
import { systemClock } from '../impl/clock.ts';

/**
 * A user who runs `npm i lockcheck ioredis` gets the newest ioredis (6) at the
 * top level, lockcheck's own (5) nested: the README's example passes an
 * ioredis 6 connection. The scripts' commands are built from the
 * connection's own ioredis (impl/redis/commands.ts): with lockcheck's copy's
 * Command, ioredis 6's sendCommand threw a TypeError on every call, read as a
 * vote against (every acquire no-quorum). This file also type-checks the
 * example's call (an ioredis 6 Redis is a RedisConnection).
 */
let server: RedisServer;
let admin: Redis5;
beforeAll(async () => {
  server = await RedisServer.start({ persistence: 'none' });
  admin = new Redis5({ ...server.connection, lazyConnect: true, maxRetriesPerRequest: 0 });
  await admin.connect();
}, 30_000);
afterAll(async () => {
  admin?.disconnect();
  await server?.stop();
});

async function v6<T>(fn: (redis: Redis6) => Promise<T>, options: { keyPrefix?: string } = {}): Promise<T> {
  const redis = new Redis6({ ...server.connection, ...options, lazyConnect: true, maxRetriesPerRequest: 1, commandTimeout: 5_000 });
  try {
    await redis.connect();
    return await fn(redis);
  } finally {
    redis.disconnect();
  }
}

describe('an ioredis 6 connection', () => {
  it('is the ioredis 6 this file means (its Command has setReplyContext, lockcheck 5 copy has not)', () => {
    expect(typeof (Redis6.Command.prototype as unknown as Record<string, unknown>).setReplyContext).toBe('function');
    expect((Redis5.Command.prototype as unknown as Record<string, unknown>).setReplyContext).toBeUndefined();
  });

  it("the README's example: createRedisLock({ nodes: [new Redis(...)] }) with using(): acquire, extend, release", async () => {
    await v6(async (node) => {
      await node.ping();
      const lock = createRedisLock({ nodes: [node], requestTimeoutMs: 2_000, prefix: 'io6-readme' });
      const key = keysFor('order-42', 'io6-readme').lock;
      const seen: bigint[] = [];
      await using(lock, 'order-42', { ttlMs: 10_000 }, async (signal, lease) => {
        expect(signal.aborted).toBe(false);
        seen.push(lease.token);
        expect(await admin.get(key)).toBe(lease.owner);
        const extended = await lock.extend(lease, 20_000);
        expect(extended.kind).toBe('extended');
        expect(await admin.pttl(key)).toBeGreaterThan(10_000);
      });
      expect(await admin.exists(key)).toBe(0);
      const again = await lock.acquire('order-42', { ttlMs: 10_000 });
      expect(again.kind).toBe('granted');
      if (again.kind !== 'granted') return;
      expect(again.lease.token).toBe(seen[0]! + 1n);
      await lock.release(again.lease);
      expect(await admin.exists(key)).toBe(0);
    });
  });

  it('Redlock over ioredis 5 and ioredis 6 connections at once (one script command class per ioredis)', async () => {
    await v6(async (six) => {
      const five = new Redis5({ ...server.connection, lazyConnect: true, maxRetriesPerRequest: 1, commandTimeout: 5_000 });
      try {
        await five.connect();
        // Three nodes on one server under three prefixes are three independent nodes for the lock's arithmetic.
        const nodes = [redisLeaseNode(six, { prefix: 'io6-mix-a' }), redisLeaseNode(five, { prefix: 'io6-mix-b' }), redisLeaseNode(six, { prefix: 'io6-mix-c' })];
        const tokens = await Promise.all(nodes.map((n, i) => n.acquire('r', `o${i}`, 60_000)));
        expect(tokens).toEqual([1n, 1n, 1n]);
        expect(await Promise.all(nodes.map((n, i) => n.extend('r', `o${i}`, 60_000)))).toEqual([true, true, true]);
        expect(await Promise.all(nodes.map((n, i) => n.release('r', `o${i}`)))).toEqual([true, true, true]);
        const lock = new LeaseLock({ nodes, clock: systemClock });
        const r = await lock.acquire('r', { ttlMs: 10_000 });
        expect(r.kind === 'granted' && r.lease.token).toBe(2n);
        expect(r.kind).toBe('granted');
        if (r.kind === 'granted') await lock.release(r.lease);
      } finally {
        five.disconnect();
      }
    });
  });

  it("the connection's keyPrefix is put before the keys; the fenced store writes and reads", async () => {
    await v6(
      async (redis) => {
        const node = redisLeaseNode(redis, { prefix: 'io6-kp' });
        expect(await node.acquire('r', 'o', 60_000)).toBe(1n);
        expect(await admin.get(`kp6:${keysFor('r', 'io6-kp').lock}`)).toBe('o');
        expect(await node.release('r', 'o')).toBe(true);
        const store = redisFencedStore(redis, 'strict', { prefix: 'io6-store' });
        expect(await store.write('r', 5n, 'v')).toEqual({ kind: 'accepted' });
        expect(await store.write('r', 4n, 'w')).toEqual({ kind: 'rejected', highest: 5n });
        expect(await store.read('r')).toEqual({ value: 'v', token: 5n });
      },
      { keyPrefix: 'kp6:' },
    );
  });

  it('EVAL the first time on a socket, EVALSHA after; a NOSCRIPT reply fails that call and the next loads the script again', async () => {
    const own = await RedisServer.start({ persistence: 'none' });
    const c = new Redis6({ ...own.connection, lazyConnect: true, maxRetriesPerRequest: 1, commandTimeout: 5_000 });
    const monitor = new Redis5({ ...own.connection, lazyConnect: true });
    try {
      await c.connect();
      await monitor.connect();
      const watcher = await monitor.monitor();
      const sent: string[] = [];
      watcher.on('monitor', (_time: string, args: string[]) => {
        if (args[0] === 'eval' || args[0] === 'evalsha') sent.push(args[0]);
      });
      const node = redisLeaseNode(c);
      expect(await node.acquire('r', 'o1', 60_000)).toBe(1n);
      expect(await node.release('r', 'o1')).toBe(true);
      await c.script('FLUSH');
      const [acquired, released] = await Promise.allSettled([node.acquire('r', 'o2', 60_000), node.release('r', 'o2')]);
      expect(acquired.status === 'rejected' && String(acquired.reason)).toMatch(/NOSCRIPT/);
      expect(released.status === 'rejected' && String(released.reason)).toMatch(/NOSCRIPT/);
      expect(await node.acquire('r', 'o3', 60_000)).toBe(2n);
      expect(await c.script('EXISTS', acquireScript.sha)).toEqual([1]);
      await c.ping();
      watcher.disconnect();
      // acquire: EVAL, release: EVAL (each script's first time on the socket); after the flush EVALSHA twice (NOSCRIPT), then EVAL.
      expect(sent).toEqual(['eval', 'eval', 'evalsha', 'evalsha', 'eval']);
    } finally {
      c.disconnect();
      monitor.disconnect();
      await own.stop();
    }
  });

  it('an acquire whose reply was lost is not resent after the reconnect: no-quorum, its key released', async () => {
    const proxy = await TcpProxy.start({ host: server.host, port: server.port });
    const redis = new Redis6({ host: proxy.host, port: proxy.port, password: server.password, lazyConnect: true, retryStrategy: () => 10 });
    redis.on('error', () => undefined);
    try {
      await redis.connect();
      const lock = createRedisLock({ nodes: [redis], prefix: 'io6-resend', requestTimeoutMs: 10_000 });
      const key = keysFor('r', 'io6-resend').lock;
      proxy.hold();
      const outcome = lock.acquire('r', { ttlMs: 60_000 });
      await until(async () => (await admin.exists(key)) === 1);
      proxy.setMode({ kind: 'reset' });
      proxy.release();
      proxy.setMode({ kind: 'pass' });
      expect(await outcome).toEqual({ kind: 'denied', reason: 'no-quorum' });
      await until(async () => (await admin.exists(key)) === 0);
      // The connection works for the next call.
      const next = await lock.acquire('r', { ttlMs: 10_000 });
      expect(next.kind).toBe('granted');
      if (next.kind === 'granted') await lock.release(next.lease);
    } finally {
      redis.disconnect();
      await proxy.close();
    }
  }, 30_000);

  it('the store: a write whose reply was lost is UnavailableError, not resent', async () => {
    const proxy = await TcpProxy.start({ host: server.host, port: server.port });
    const redis = new Redis6({ host: proxy.host, port: proxy.port, password: server.password, lazyConnect: true, retryStrategy: () => 10 });
    redis.on('error', () => undefined);
    try {
      await redis.connect();
      const store = redisFencedStore(redis, 'strict', { prefix: 'io6-resend-store' });
      const cell = keysFor('r', 'io6-resend-store').cell;
      proxy.hold();
      const outcome = store.write('r', 7n, 'v').then(
        (value) => ({ value }),
        (reason: unknown) => ({ reason }),
      );
      await until(async () => (await admin.hget(cell, 'highest')) === '7');
      proxy.setMode({ kind: 'reset' });
      proxy.release();
      proxy.setMode({ kind: 'pass' });
      expect((await outcome as { reason?: unknown }).reason).toBeInstanceOf(UnavailableError);
    } finally {
      redis.disconnect();
      await proxy.close();
    }
  }, 30_000);
});

describe('a connection the scripts cannot be sent on', () => {
  it('a connection whose commands are of a class without toWritable is refused at construction, naming the supported range', () => {
    // Its PING makes a command of a class the script command cannot extend (no toWritable, no transformReply).
    class OddCommand {}
    class Odd {
      options = {};
      ping(): unknown {
        return this.sendCommand(new OddCommand());
      }
      sendCommand(_command: object): void {}
      call(): Promise<unknown> {
        return Promise.resolve(null);
      }
      status = 'ready';
      commandQueue = { length: 0 };
    }
    const odd = new Odd() as unknown as RedisConnection;
    expect(() => createRedisLock({ nodes: [odd] })).toThrow(InvalidInputError);
    expect(() => createRedisLock({ nodes: [odd] })).toThrow(/ioredis >=5\.0\.0 <7/);
    expect(() => redisLeaseNode(odd)).toThrow(InvalidInputError);
  });

  it("a TypeError while sending a vote (ioredis 5's command on ioredis 6's sendCommand, as before the fix) rejects the acquire, extend and release with it: never no-quorum", async () => {
    await v6(async (six) => {
      // A wrapper object has no Command of its own: lockcheck's copy's (ioredis 5) is used, and ioredis 6 throws on it.
      const wrapper: RedisStoreConnection = {
        options: six.options,
        status: 'ready',
        commandQueue: { length: 0 },
        sendCommand: (c) => six.sendCommand(c as never),
        call: (c, ...a) => six.call(c, ...a),
        hmget: (k, ...f) => six.hmget(k, ...f),
      };
      const lock = createRedisLock({ nodes: [wrapper], requestTimeoutMs: 2_000, prefix: 'io6-defect' });
      await expect(lock.acquire('r', { ttlMs: 10_000 })).rejects.toThrow(TypeError);
      await expect(using(lock, 'r', { ttlMs: 10_000 }, async () => undefined)).rejects.toThrow(TypeError);
      // The store passes it on as it is, not as an UnavailableError.
      await expect(redisFencedStore(wrapper, 'strict', { prefix: 'io6-defect' }).write('r', 1n, 'v')).rejects.toThrow(TypeError);
      expect(await admin.exists(keysFor('r', 'io6-defect').lock)).toBe(0);
    });
  });

  it('a TypeError from one node of three, thrown or rejected, rejects acquire, extend and release with it, also where the other two would make a quorum', async () => {
    const fault = { acquire: false, extend: false, release: false };
    const ok: LeaseNode = { acquire: async () => 1n, extend: async () => true, release: async () => true, raiseToken: async () => undefined };
    const broken: LeaseNode = {
      // Thrown synchronously (as ioredis 6's sendCommand did) or as a rejection: both the same.
      acquire: (() => {
        if (fault.acquire) throw new TypeError('command.setReplyContext is not a function');
        return Promise.resolve(1n);
      }) as LeaseNode['acquire'],
      extend: async () => {
        if (fault.extend) throw new TypeError('extend broke');
        return true;
      },
      release: async () => {
        if (fault.release) throw new TypeError('release broke');
        return true;
      },
      raiseToken: async () => undefined,
    };
    const lock = new LeaseLock({ nodes: [ok, broken, ok], clock: systemClock });
    const granted = await lock.acquire('r', { ttlMs: 10_000 });
    expect(granted.kind).toBe('granted');
    if (granted.kind !== 'granted') return;
    fault.extend = true;
    await expect(lock.extend(granted.lease, 10_000)).rejects.toThrow('extend broke');
    fault.release = true;
    await expect(lock.release(granted.lease)).rejects.toThrow('release broke');
    fault.acquire = true;
    await expect(lock.acquire('r', { ttlMs: 10_000 })).rejects.toThrow('setReplyContext');
    await lock.settled();
  });
});

async function until(done: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error('not within 10 s');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
