import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdCluster } from '../../conformance/env/etcdCluster.ts';
import { RedisServer } from '../../conformance/env/redisServer.ts';
import { ZookeeperEnsemble } from '../../conformance/env/zookeeperEnsemble.ts';
import { systemClock } from '../../impl/clock.ts';
import { TimeoutError, UnavailableError } from '../../impl/errors.ts';
import { EtcdLock, etcd3Node, etcdClient, etcdFencedStore } from '../../impl/etcd/index.ts';
import { createRedisLock, redisFencedStore } from '../../impl/redis/index.ts';
import { ZookeeperLock, zookeeperFencedStore, zookeeperNode } from '../../impl/zookeeper/index.ts';
import { backToBaseline, cutPoints, CutProxy, resolvesWithin, settles, steadyResources, uncutBytes } from './blackhole.ts';

/**
 * Redis, etcd and ZooKeeper clients meeting a server that goes silent at any
 * point of the connection's start-up or of the first call's reply: a proxy
 * passes the server's first N bytes, then nothing, keeping the connection
 * open. Each acquire and store write settles typed within its timeout (10x,
 * loaded machine), and closing leaves no handle.
 */
const TIMEOUT_MS = 300;
const BOUND_MS = 10 * TIMEOUT_MS + 2000;

let redis: RedisServer;
let etcd: EtcdCluster;
let zk: ZookeeperEnsemble;
beforeAll(async () => {
  [redis, etcd, zk] = await Promise.all([
    RedisServer.start({ persistence: 'none' }),
    EtcdCluster.start({ members: 1, parentDir: '/dev/shm' }),
    ZookeeperEnsemble.start({ members: 1, parentDir: '/dev/shm' }),
  ]);
}, 120_000);
afterAll(async () => {
  await Promise.all([redis?.stop(), etcd?.stop(), zk?.stop()]);
});

/**
 * ioredis ends a socket on disconnect() and destroys it only after its disconnectTimeout (2 s by default) if the
 * server never closes its side, as a cut link never does: the connection's own timer, not the lock's or the store's,
 * so shortened here, where every cut point waits for it.
 */
const DISCONNECT_MS = 100;

const NO_REPLY = [{ kind: 'timed-out' }, { kind: 'denied', reason: 'no-quorum' }];
/** An acquire's outcome when the server may have gone silent before its reply: granted (the reply came whole), or no reply. */
const acquired = (v: unknown): boolean => {
  const r = v as { kind?: unknown; reason?: unknown };
  return r.kind === 'granted' || NO_REPLY.some((x) => x.kind === r.kind && (x as { reason?: unknown }).reason === r.reason);
};
/** A store write's: accepted (the reply came whole), or a typed outage. */
const written = (o: Awaited<ReturnType<typeof settles>>): boolean => (o.ok ? (o.value as { kind?: unknown }).kind === 'accepted' : typedOutage(o.error));
const typedOutage = (e: unknown): boolean => e instanceof TimeoutError || e instanceof UnavailableError;

type Client = { run(resource: string): Promise<unknown>; close(): Promise<void> | void; ok(outcome: Awaited<ReturnType<typeof settles>>): boolean };
type Backend = { target(): { host: string; port: number }; clients: Record<string, (port: number) => Client> };

const backends: Record<string, Backend> = {
  redis: {
    target: () => ({ host: redis.connection.host, port: redis.connection.port }),
    clients: {
      lock: (port) => {
        const c = new Redis({ ...redis.connection, port, lazyConnect: true, disconnectTimeout: DISCONNECT_MS });
        c.on('error', () => undefined);
        const lock = createRedisLock({ nodes: [c], requestTimeoutMs: TIMEOUT_MS });
        return {
          run: (r) => lock.acquire(r, { ttlMs: 60_000 }),
          close: async () => {
            await lock.settled();
            c.disconnect();
          },
          ok: (o) => o.ok && acquired(o.value),
        };
      },
      store: (port) => {
        const c = new Redis({ ...redis.connection, port, lazyConnect: true, disconnectTimeout: DISCONNECT_MS });
        c.on('error', () => undefined);
        const store = redisFencedStore(c, 'strict', { timeoutMs: TIMEOUT_MS });
        return { run: (r) => store.write(r, 1n, 'v'), close: () => c.disconnect(), ok: written };
      },
    },
  },
  etcd: {
    target: () => {
      const [host, port] = etcd.clientOptions().hosts[0]!.replace(/^https?:\/\//, '').split(':');
      return { host: host!, port: Number(port) };
    },
    clients: {
      lock: (port) => {
        const o = etcd.clientOptions();
        const c = etcdClient({ ...o, hosts: [o.hosts[0]!.replace(/:\d+$/, `:${port}`)], dialTimeoutMs: TIMEOUT_MS });
        const lock = new EtcdLock({ node: etcd3Node(c, { clock: systemClock, requestTimeoutMs: TIMEOUT_MS }), clock: systemClock, prefix: `cut${port}/` });
        return { run: (r) => lock.acquire(r, { ttlMs: 60_000 }), close: () => c.close(), ok: (x) => x.ok && acquired(x.value) };
      },
      store: (port) => {
        const o = etcd.clientOptions();
        const c = etcdClient({ ...o, hosts: [o.hosts[0]!.replace(/:\d+$/, `:${port}`)], dialTimeoutMs: TIMEOUT_MS });
        const store = etcdFencedStore(etcd3Node(c, { clock: systemClock, requestTimeoutMs: TIMEOUT_MS }), 'strict', { prefix: `cut${port}/` });
        return { run: (r) => store.write(r, 1n, 'v'), close: () => c.close(), ok: written };
      },
    },
  },
  zookeeper: {
    target: () => {
      const [host, port] = zk.clientOptions().connectString.split(',')[0]!.split(':');
      return { host: host!, port: Number(port) };
    },
    clients: {
      lock: (port) => {
        const node = zookeeperNode({ ...zk.clientOptions(`127.0.0.1:${port}`), clock: systemClock, requestTimeoutMs: TIMEOUT_MS });
        const lock = new ZookeeperLock({ node, clock: systemClock, root: '/cut' });
        return { run: (r) => lock.acquire(r, { ttlMs: 60_000 }), close: () => node.close(), ok: (x) => x.ok && acquired(x.value) };
      },
      store: (port) => {
        const node = zookeeperNode({ ...zk.clientOptions(`127.0.0.1:${port}`), clock: systemClock, requestTimeoutMs: TIMEOUT_MS });
        const store = zookeeperFencedStore(node, 'strict', { root: '/cut' });
        return { run: (r) => store.write(r, 1n, 'v'), close: () => node.close(), ok: written };
      },
    },
  },
};

const cases = Object.entries(backends).flatMap(([b, backend]) => Object.keys(backend.clients).map((c) => [b, c] as const));

describe('the server silent from any byte of the start-up on', () => {
  it.each(cases)('%s %s: every cut settles typed; closing leaves no handle', async (b, name) => {
    const backend = backends[b]!;
    const proxy = await CutProxy.start(backend.target());
    try {
      const make = backend.clients[name]!;
      // The bytes the server sends for a connect and the first call, measured on a link that passes everything.
      const total = await uncutBytes(proxy, 'cut-000', () => make(proxy.port), BOUND_MS);
      proxy.dropAll();
      const baseline = await steadyResources();
      // Fewer points than PostgreSQL's: each etcd and Redis cut costs a second or two of reconnects and background calls.
      for (const n of cutPoints(total, 8, 10)) {
        proxy.cutAfter = n;
        const c = make(proxy.port);
        // A resource of its own: what an earlier cut call sent may have landed (its reply cut), and holds its own.
        const outcome = await settles(`cut after ${n} of ${total} bytes`, c.run(`cut-${String(n).padStart(3, '0')}`), BOUND_MS);
        expect(c.ok(outcome), `cut after ${n} of ${total} bytes: ${outcome.ok ? JSON.stringify(outcome.value, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)) : String(outcome.error)}`).toBe(true);
        await resolvesWithin(`close, cut after ${n}`, Promise.resolve(c.close()), BOUND_MS);
        proxy.dropAll();
        try {
          await backToBaseline(baseline);
        } catch (error) {
          throw new Error(`cut after ${n} of ${total} bytes: ${(error as Error).message}`, { cause: error });
        }
        proxy.cutAfter = Number.POSITIVE_INFINITY;
      }
    } finally {
      await proxy.close();
    }
  });
});
