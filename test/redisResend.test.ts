import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TcpProxy } from '../conformance/env/proxy.ts';
import { RedisServer } from '../conformance/env/redisServer.ts';
import { UnavailableError } from '../impl/errors.ts';
import { createRedisLock, keysFor, redisFencedStore } from '../impl/redis/index.ts';

/**
 * ioredis resends, after a reconnect, every command the closed connection
 * left unanswered (autoResendUnfulfilledCommands, on by default). For the
 * lock's scripts that is a retry of a write whose outcome is unknown: the
 * first may have run. A fenced write that ran and is run again reads as
 * rejected (strict: its own token is now the highest), an acquire that ran
 * and is run again reads as held by another (its own key, left to its ttl).
 * Here the server runs the call, its reply is held back and the link reset:
 * the call must fail as unavailable (the outcome unknown), never be resent.
 */
let server: RedisServer;
let admin: Redis;
beforeAll(async () => {
  server = await RedisServer.start({ persistence: 'none' });
  admin = new Redis({ ...server.connection, lazyConnect: true, maxRetriesPerRequest: 0 });
  await admin.connect();
}, 30_000);
afterAll(async () => {
  admin?.disconnect();
  await server?.stop();
});

/** A connection with ioredis's defaults (resend on, offline queue on, reconnect), through a proxy the test controls. */
async function viaProxy<T>(fn: (proxy: TcpProxy, redis: Redis) => Promise<T>): Promise<T> {
  const proxy = await TcpProxy.start({ host: server.host, port: server.port });
  const redis = new Redis({ host: proxy.host, port: proxy.port, password: server.password, lazyConnect: true, retryStrategy: () => 10 });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return await fn(proxy, redis);
  } finally {
    redis.disconnect();
    await proxy.close();
  }
}

/** Polls until `done` (the call ran on the server), bounded. */
async function until(done: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within 10 s`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The call runs, its reply is held, the link is reset and comes back: what the call then reports. */
async function replyLost<T>(proxy: TcpProxy, call: () => Promise<T>, ran: () => Promise<boolean>): Promise<PromiseSettledResult<T>> {
  proxy.hold();
  const settled = call().then(
    (value) => ({ status: 'fulfilled', value }) as const,
    (reason: unknown) => ({ status: 'rejected', reason }) as const,
  );
  await until(ran, 'the call to reach the server');
  proxy.setMode({ kind: 'reset' });
  proxy.release();
  proxy.setMode({ kind: 'pass' });
  return settled;
}

describe('a script call whose reply was lost is never resent after a reconnect', () => {
  it('fenced store (strict): the write ran, so it is not reported rejected: UnavailableError, the write kept once', async () => {
    await viaProxy(async (proxy, redis) => {
      const store = redisFencedStore(redis, 'strict', { prefix: 'resend-store' });
      const cell = keysFor('r', 'resend-store').cell;
      const outcome = await replyLost(proxy, () => store.write('r', 7n, 'v'), async () => (await admin.hget(cell, 'highest')) === '7');
      expect(outcome.status, String((outcome as { value?: { kind: string } }).value?.kind)).toBe('rejected');
      expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(UnavailableError);
      // The connection works again for the next call.
      await until(async () => redis.status === 'ready', 'the reconnect');
      expect(await store.read('r')).toEqual({ value: 'v', token: 7n });
    });
  }, 30_000);

  it('lock: the acquire ran, so it is not reported held: no-quorum, and its key released (not left to its ttl)', async () => {
    await viaProxy(async (proxy, redis) => {
      const lock = createRedisLock({ nodes: [redis], prefix: 'resend-lock', requestTimeoutMs: 10_000 });
      const key = keysFor('r', 'resend-lock').lock;
      const outcome = await replyLost(proxy, () => lock.acquire('r', { ttlMs: 60_000 }), async () => (await admin.exists(key)) === 1);
      expect(outcome).toEqual({ status: 'fulfilled', value: { kind: 'denied', reason: 'no-quorum' } });
      await until(async () => (await admin.exists(key)) === 0, 'the unanswered acquire to be released');
    });
  }, 30_000);
});
