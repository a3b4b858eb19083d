import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TcpProxy } from '../conformance/env/proxy.ts';
import { RedisServer } from '../conformance/env/redisServer.ts';
import { createRedisLock } from '../impl/redis/index.ts';

/**
 * Redlock on five real servers, each reached through a TCP proxy, in real
 * time: a black-holed, reset or slow link costs one vote, never the whole
 * acquisition, because every node call is bounded by the per-node timeout.
 */
let servers: RedisServer[] = [];
let proxies: TcpProxy[] = [];
let clients: Redis[] = [];
beforeAll(async () => {
  servers = await Promise.all([0, 1, 2, 3, 4].map(() => RedisServer.start({ persistence: 'none' })));
  proxies = await Promise.all(servers.map((s) => TcpProxy.start({ host: s.host, port: s.port })));
  clients = proxies.map((p, i) => new Redis({ host: p.host, port: p.port, password: servers[i]!.password, maxRetriesPerRequest: 0, enableOfflineQueue: false, commandTimeout: 2000, lazyConnect: true }));
  for (const c of clients) c.on('error', () => undefined);
  await Promise.all(clients.map((c) => c.connect()));
}, 30_000);
afterAll(async () => {
  for (const c of clients) c.disconnect();
  await Promise.all(proxies.map((p) => p.close()));
  await Promise.all(servers.map((s) => s.stop()));
});

/**
 * The per-node timeout: far above a healthy node's reply time even on a
 * loaded two-core machine (at load average 28, replies took over 50 ms and a
 * 50 ms timeout denied healthy quorums), far below the faulty link's delay.
 */
const requestTimeoutMs = 1000;

/** Fails instead of hanging if the acquisition is not bounded. */
function bounded<T>(work: Promise<T>, ms: number): Promise<T> {
  return Promise.race([work, new Promise<T>((_r, reject) => setTimeout(() => reject(new Error(`not settled within ${ms} ms`)), ms).unref())]);
}

describe('Redlock through faulty links (real time)', () => {
  for (const [name, mode] of [
    ['black-holed', { kind: 'blackhole' }],
    ['reset', { kind: 'reset' }],
    ['slow (3 s each way, beyond the per-node timeout)', { kind: 'delay', ms: 3000 }],
  ] as const) {
    it(`a ${name} link to one node costs that node's vote, and the acquisition still settles and is granted`, async () => {
      const lock = createRedisLock({ nodes: clients, requestTimeoutMs });
      proxies[4]!.setMode(mode);
      try {
        const r = await bounded(lock.acquire(`proxy-${mode.kind}`, { ttlMs: 10_000 }), 10_000);
        expect(r.kind).toBe('granted');
        if (r.kind === 'granted') {
          // The key is on the four healthy nodes only.
          const held = await Promise.all(servers.slice(0, 4).map((s) => new Redis({ ...s.connection, lazyConnect: true })).map(async (c) => {
            try {
              return await c.get(`lockcheck:lock:proxy-${mode.kind}`);
            } finally {
              c.disconnect();
            }
          }));
          expect(held.every((owner) => owner === r.lease.owner)).toBe(true);
          await lock.release(r.lease);
        }
      } finally {
        proxies[4]!.setMode({ kind: 'pass' });
      }
    }, 20_000);
  }

  it('with three links black-holed there is no quorum, and the attempt still settles', async () => {
    const lock = createRedisLock({ nodes: clients, requestTimeoutMs });
    for (const p of proxies.slice(2)) p.setMode({ kind: 'blackhole' });
    try {
      const r = await bounded(lock.acquire('proxy-minority', { ttlMs: 10_000 }), 10_000);
      expect(r).toEqual({ kind: 'denied', reason: 'no-quorum' });
    } finally {
      for (const p of proxies) p.setMode({ kind: 'pass' });
    }
  }, 20_000);
});
