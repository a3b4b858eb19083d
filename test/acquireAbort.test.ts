import { getEventListeners } from 'node:events';
import { Redis } from 'ioredis';
import pg from 'pg';
import type { Etcd3 } from 'etcd3';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { eventually } from './probes.ts';
import { systemClock, type MonotonicClock } from '../impl/clock.ts';
import { InvalidInputError } from '../impl/errors.ts';
import type { Lease } from '../impl/lease.ts';
import { LeaseLock, type AcquireResult } from '../impl/leaseLock.ts';
import type { LeaseNode } from '../impl/leaseNode.ts';
import { using } from '../impl/using.ts';
import { redisLeaseNode } from '../impl/redis/index.ts';
import { PostgresSessionLock, PostgresTransactionLock } from '../impl/postgres/index.ts';
import { EtcdLock, etcd3Node, etcdClient, type EtcdNode } from '../impl/etcd/index.ts';
import { ZookeeperLock, zookeeperNode, type ZookeeperNode } from '../impl/zookeeper/index.ts';
import { lockDir } from '../impl/zookeeper/paths.ts';
import { sharedEtcd, sharedPostgres, sharedRedis, sharedZookeeper } from './impl/servers.ts';

/**
 * Cancelling a waiting acquire with its `signal`, on every lock and on real
 * servers: a signal aborted before the call rejects with its reason and
 * nothing is sent; one that fires during the pause between attempts (the
 * resource held by another owner) ends the pause at once, with the
 * AbortError of a plain abort(); one that fires as a grant lands leaves
 * nothing held (another owner takes the resource at once afterwards); the
 * listeners an acquire adds are all removed (one signal over 50 acquires:
 * none left, no MaxListenersExceededWarning). Where the abort must fall
 * (after a grant's reply, in the pause, in ZooKeeper's line) the real
 * node's calls are wrapped to fire it there; the servers answer as they do.
 */

const redisServer = sharedRedis();
const postgresServer = sharedPostgres();
const etcdServer = sharedEtcd();
const zookeeperServer = sharedZookeeper();
const run = `${process.pid}-${Date.now().toString(36)}`;
let resources = 0;

/** A pause between attempts no test waits out: an acquire that returns before it was cancelled in the pause. */
const PAUSE_MS = 600_000;
/** Far below the pause: how soon a cancelled acquire must be back (bounded by the attempt in flight, a round trip). */
const PROMPT_MS = 10_000;

const closers: Array<() => unknown> = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

/** Where a test fires the abort, and what it counts: set on a client as it is made. */
interface Hooks {
  /** The lock's clock (default: the system's). */
  clock?: MonotonicClock;
  /** Requests the client sent to its server. */
  calls: number;
  /** Called once, as the next grant's reply arrives (then cleared). */
  onGrant?: (() => void) | undefined;
  /** Called as ZooKeeper's acquire starts waiting in line. */
  onLine?: (() => void) | undefined;
}

interface AnyLock {
  acquire(resource: string, options: object): Promise<AcquireResult>;
  release(lease: Lease): Promise<unknown>;
}

interface Rig {
  readonly name: string;
  /** A client on the real server, its calls observed through `h`. */
  readonly make: (h: Hooks) => AnyLock;
  /** Good acquire options. */
  readonly base: Readonly<Record<string, unknown>>;
  /** What else makes a denied acquire wait (ZooKeeper: in line too, a wait that ends by its bound). */
  readonly waits?: Readonly<Record<string, unknown>>;
}

function once(h: Hooks): void {
  const fire = h.onGrant;
  h.onGrant = undefined;
  fire?.();
}

function redisRig(h: Hooks): AnyLock {
  const s = redisServer();
  const connection = new Redis({ host: s.host, port: s.port, password: s.password, maxRetriesPerRequest: 1, commandTimeout: 5_000 });
  closers.push(() => connection.disconnect());
  const node = redisLeaseNode(connection, { prefix: `t${run}` });
  const observed: LeaseNode = {
    ...node,
    acquire: async (resource, owner, ttlMs) => {
      h.calls++;
      const token = await node.acquire(resource, owner, ttlMs);
      if (token !== null) once(h);
      return token;
    },
  };
  return new LeaseLock({ nodes: [observed], clock: h.clock ?? systemClock });
}

function etcdRig(h: Hooks): AnyLock {
  const client: Etcd3 = etcdClient({ hosts: etcdServer().hosts, tls: etcdServer().tls });
  closers.push(() => client.close());
  const node = etcd3Node(client, { clock: systemClock, requestTimeoutMs: 5_000 });
  const observed: EtcdNode = {
    ...node,
    grant: (ttlSeconds) => {
      h.calls++;
      return node.grant(ttlSeconds);
    },
    putIfAbsent: async (key, value, leaseId) => {
      const put = await node.putIfAbsent(key, value, leaseId);
      if (put.kind === 'created') once(h);
      return put;
    },
  };
  return new EtcdLock({ node: observed, clock: h.clock ?? systemClock, prefix: `t${run}/` });
}

/** The root of the ZooKeeper locks' paths. */
const ZK_ROOT = `/t${run}`;

/** A reader of the line of contenders for a resource, on a session of its own (connected by its first read). */
function zookeeperLine(): (resource: string) => Promise<string[]> {
  const s = zookeeperServer();
  const node = zookeeperNode({ connectString: s.connectString, auth: s.auth, clock: systemClock, requestTimeoutMs: 5_000 });
  closers.push(() => node.close());
  return (resource) => node.children(lockDir(resource, ZK_ROOT));
}

function zookeeperRig(h: Hooks): AnyLock {
  const s = zookeeperServer();
  const node = zookeeperNode({ connectString: s.connectString, auth: s.auth, clock: systemClock, requestTimeoutMs: 5_000 });
  closers.push(() => node.close());
  const observed: ZookeeperNode = {
    ...node,
    openSession: (ttlMs) => {
      h.calls++;
      return node.openSession(ttlMs);
    },
    enqueue: async (session, dir) => {
      const own = await node.enqueue(session, dir);
      once(h);
      return own;
    },
    watchGone: (session, path, waitMs) => {
      h.onLine?.();
      return node.watchGone(session, path, waitMs);
    },
  };
  return new ZookeeperLock({ node: observed, clock: h.clock ?? systemClock, root: ZK_ROOT });
}

/** A PostgreSQL lock whose round trips go through a link that counts them; `onGrant` fires after the next one (the tests arm it on a connected lock with the resource free, so that one is the grant). */
function postgresRig(Lock: typeof PostgresSessionLock | typeof PostgresTransactionLock): (h: Hooks) => AnyLock {
  return (h) => {
    const lock = new Lock({
      connection: postgresServer(),
      statementTimeoutMs: 5_000,
      clock: h.clock ?? systemClock,
      link: async (roundTrip) => {
        h.calls++;
        const reply = await roundTrip();
        once(h);
        return reply;
      },
    });
    closers.push(() => lock.close());
    return lock;
  };
}

const RIGS: readonly Rig[] = [
  { name: 'redis (LeaseLock)', make: redisRig, base: { ttlMs: 10_000 } },
  { name: 'etcd', make: etcdRig, base: { ttlMs: 10_000 } },
  { name: 'zookeeper', make: zookeeperRig, base: { ttlMs: 10_000 }, waits: { waitMs: 40 } },
  { name: 'postgres session', make: postgresRig(PostgresSessionLock), base: {} },
  { name: 'postgres transaction', make: postgresRig(PostgresTransactionLock), base: {} },
];

function resource(): string {
  return `a${run}-${++resources}`;
}

function granted(r: AcquireResult): Lease {
  if (r.kind !== 'granted') throw new Error(`expected granted, got ${JSON.stringify(r)}`);
  return r.lease;
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    (v) => new Error(`expected a rejection, got ${JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? String(x) : x))}`),
    (e: unknown) => e,
  );
}

/** The system clock, but a timer set `PAUSE_MS` or more ahead (the pause between attempts) aborts `controller` once it is armed. */
function pauseAborts(controller: AbortController): MonotonicClock {
  return {
    now: () => systemClock.now(),
    schedule(atMs, fn) {
      const cancel = systemClock.schedule(atMs, fn);
      // After the call: the sleep adds its listener right after it schedules.
      if (atMs - systemClock.now() >= PAUSE_MS / 2) queueMicrotask(() => controller.abort());
      return cancel;
    },
  };
}

function listeners(signal: AbortSignal): number {
  return getEventListeners(signal, 'abort').length;
}

const warnings: Error[] = [];
const onWarning = (w: Error): void => {
  warnings.push(w);
};
beforeEach(() => {
  warnings.length = 0;
  process.on('warning', onWarning);
});
afterEach(() => {
  process.off('warning', onWarning);
});

describe.each(RIGS)('$name: acquire with a signal', (rig) => {
  const fresh = (h: Partial<Hooks> = {}): { lock: AnyLock; h: Hooks } => {
    const hooks: Hooks = { calls: 0, ...h };
    return { lock: rig.make(hooks), h: hooks };
  };

  it('refuses a signal that is not an AbortSignal', async () => {
    for (const signal of [{}, 'abort', 5, null]) {
      const e = await rejection(fresh().lock.acquire(resource(), { ...rig.base, signal }));
      expect(e).toBeInstanceOf(InvalidInputError);
      expect((e as InvalidInputError).code).toBe('invalid-config');
      expect((e as Error).message).toContain('signal must be an AbortSignal');
    }
  });

  it('already aborted: rejects with its reason, and sends nothing', async () => {
    const { lock, h } = fresh();
    const controller = new AbortController();
    const reason = new Error('the caller gave up');
    controller.abort(reason);
    expect(await rejection(lock.acquire(resource(), { ...rig.base, retries: 3, signal: controller.signal }))).toBe(reason);
    expect(h.calls).toBe(0);
    expect(listeners(controller.signal)).toBe(0);
  });

  it('aborted in the pause between attempts (held by another owner): rejects at once with an AbortError, and removes its listener', async () => {
    const r = resource();
    const holder = fresh().lock;
    const lease = granted(await holder.acquire(r, rig.base));
    try {
      const controller = new AbortController();
      const { lock } = fresh({ clock: pauseAborts(controller) });
      const started = performance.now();
      const e = await rejection(lock.acquire(r, { ...rig.base, retries: 3, retryDelayMs: PAUSE_MS, signal: controller.signal }));
      expect(performance.now() - started).toBeLessThan(PROMPT_MS);
      expect(e).toBeInstanceOf(DOMException);
      expect((e as DOMException).name).toBe('AbortError');
      expect(listeners(controller.signal)).toBe(0);
    } finally {
      await holder.release(lease);
    }
  });

  it('aborted as the grant lands: rejects, and the resource is free for another owner at once', async () => {
    const r = resource();
    const { lock, h } = fresh();
    // Connected first (a PostgreSQL lock's next round trip is then the grant).
    await lock.release(granted(await lock.acquire(resource(), rig.base)));
    const controller = new AbortController();
    h.onGrant = () => controller.abort();
    expect(await rejection(lock.acquire(r, { ...rig.base, signal: controller.signal }))).toBeInstanceOf(DOMException);
    expect(h.onGrant).toBeUndefined();
    const other = fresh().lock;
    await other.release(granted(await other.acquire(r, rig.base)));
    expect(listeners(controller.signal)).toBe(0);
  });

  it('one signal over 50 acquires that wait between attempts (and in line): no listener left, no MaxListenersExceededWarning', async () => {
    const r = resource();
    const holder = fresh().lock;
    // The hold outlasts the 50 acquires however slow the machine: a 10 s one (ZooKeeper's session) ended during them at
    // load 38, and the next acquire was granted; a minute (the ensemble's longest session). Without a ttl, until the release.
    const lease = granted(await holder.acquire(r, 'ttlMs' in rig.base ? { ...rig.base, ttlMs: 60_000 } : rig.base));
    try {
      const { lock } = fresh();
      const { signal } = new AbortController();
      for (let i = 0; i < 50; i++) expect(await lock.acquire(r, { ...rig.base, ...rig.waits, retries: 1, retryDelayMs: 1, signal })).toEqual({ kind: 'denied', reason: 'held' });
      await lock.release(granted(await lock.acquire(resource(), { ...rig.base, signal })));
      expect(listeners(signal)).toBe(0);
      // A warning is emitted on a later turn.
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
    } finally {
      await holder.release(lease);
    }
  });
});

describe('zookeeper: waiting in line', () => {
  it('aborted in line: rejects at once, its contender gone (the line moves on at once), no listener left', async () => {
    const r = resource();
    const holder = zookeeperRig({ calls: 0 });
    const lease = granted(await holder.acquire(r, { ttlMs: 10_000 }));
    const line = zookeeperLine();
    expect(await line(r)).toHaveLength(1);
    const controller = new AbortController();
    const waiting = zookeeperRig({ calls: 0, onLine: () => queueMicrotask(() => controller.abort()) });
    const started = performance.now();
    const e = await rejection(waiting.acquire(r, { ttlMs: 10_000, waitMs: PAUSE_MS, signal: controller.signal }));
    expect(performance.now() - started).toBeLessThan(PROMPT_MS);
    expect((e as DOMException).name).toBe('AbortError');
    expect(listeners(controller.signal)).toBe(0);
    // Its contender went before the acquire rejected: the holder's alone is in line.
    expect(await line(r)).toHaveLength(1);
    await holder.release(lease);
    // No contender of the cancelled acquire is left in line: an acquire that waits for none is granted.
    const next = zookeeperRig({ calls: 0 });
    await next.release(granted(await next.acquire(r, { ttlMs: 10_000, waitMs: 0 })));
  });
});

describe('using() passes the signal to the lock', () => {
  it('an aborted signal: using() rejects with its reason and never calls the task', async () => {
    const controller = new AbortController();
    controller.abort();
    let called = false;
    const lock = redisRig({ calls: 0 }) as LeaseLock;
    const e = await rejection(
      using(lock, resource(), { ttlMs: 10_000, signal: controller.signal }, async () => {
        called = true;
      }),
    );
    expect((e as DOMException).name).toBe('AbortError');
    expect(called).toBe(false);
  });
});

describe('postgres transaction: withLock with a signal', () => {
  /** Advisory locks some backend is waiting for, read on a connection of its own. */
  async function waiters(): Promise<number> {
    const c = new pg.Client(postgresServer());
    await c.connect();
    try {
      return (await c.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")).rows[0]!.n;
    } finally {
      await c.end();
    }
  }
  function waitingLock(h: Hooks): PostgresTransactionLock {
    const lock = new PostgresTransactionLock({
      connection: postgresServer(),
      statementTimeoutMs: 60_000,
      link: (roundTrip) => {
        h.calls++;
        // The transaction lock's reply is the grant: pg_advisory_xact_lock returns void, one row of one empty value.
        return roundTrip().then((reply) => {
          const rows = reply as unknown;
          const isGrant = Array.isArray(rows) && rows.length === 1 && Array.isArray(rows[0]) && rows[0].length === 1 && rows[0][0] === '';
          if (h.onGrant !== undefined && isGrant) {
            const onGrant = h.onGrant;
            h.onGrant = undefined;
            onGrant();
          }
          return reply;
        });
      },
    });
    closers.push(() => lock.close());
    return lock;
  }

  it('already aborted: rejects with its reason, sends nothing, never runs fn', async () => {
    const h: Hooks = { calls: 0 };
    const controller = new AbortController();
    const reason = new Error('the caller gave up');
    controller.abort(reason);
    let ran = false;
    const e = await rejection(
      waitingLock(h).withLock(resource(), 1000, async () => {
        ran = true;
      }, { signal: controller.signal }),
    );
    expect(e).toBe(reason);
    expect(h.calls).toBe(0);
    expect(ran).toBe(false);
  });

  it('refuses an unknown option and a signal that is not one', async () => {
    const lock = waitingLock({ calls: 0 });
    expect((await rejection(lock.withLock(resource(), 1000, async () => 1, { signl: undefined } as never))) as Error).toMatchObject({ code: 'invalid-config', message: expect.stringContaining('withLock options: unknown option "signl" (did you mean signal?)') });
    expect((await rejection(lock.withLock(resource(), 1000, async () => 1, { signal: {} as never }))) as Error).toMatchObject({ code: 'invalid-config', message: expect.stringContaining('signal must be an AbortSignal') });
  });

  it('aborted as the grant lands: rejects with the reason, fn never runs, the transaction (and the lock with it) rolled back, no listener left', async () => {
    const r = resource();
    const controller = new AbortController();
    const reason = new Error('the caller gave up');
    const h: Hooks = { calls: 0, onGrant: () => controller.abort(reason) };
    let ran = false;
    const e = await rejection(
      waitingLock(h).withLock(r, 1000, async () => {
        ran = true;
      }, { signal: controller.signal }),
    );
    expect(e).toBe(reason);
    expect(h.onGrant).toBeUndefined();
    expect(ran).toBe(false);
    expect(listeners(controller.signal)).toBe(0);
    // Free at once for another owner: a session lock that does not wait is granted.
    const other = postgresRig(PostgresSessionLock)({ calls: 0 });
    await other.release(granted(await other.acquire(r, {})));
  });

  it('aborted while the server makes it wait: rejects at once, fn never runs, the wait ends on the server, no listener left', async () => {
    const r = resource();
    const holder = postgresRig(PostgresSessionLock)({ calls: 0 });
    const lease = granted(await holder.acquire(r, {}));
    try {
      const controller = new AbortController();
      let ran = false;
      const pending = rejection(
        waitingLock({ calls: 0 }).withLock(r, 30_000, async () => {
          ran = true;
        }, { signal: controller.signal }),
      );
      await eventually(async () => (await waiters()) === 1, 'withLock waits for the lock');
      const started = performance.now();
      controller.abort();
      const e = await pending;
      expect(performance.now() - started).toBeLessThan(PROMPT_MS);
      expect((e as DOMException).name).toBe('AbortError');
      expect(ran).toBe(false);
      expect(listeners(controller.signal)).toBe(0);
      // The server ends the dropped connection's transaction, and its wait with it.
      await eventually(async () => (await waiters()) === 0, 'the cancelled wait ends on the server');
    } finally {
      await holder.release(lease);
    }
    const other = postgresRig(PostgresSessionLock)({ calls: 0 });
    await other.release(granted(await other.acquire(r, {})));
  });
});
