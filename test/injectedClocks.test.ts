import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkedClock } from '../impl/checkedClock.ts';
import { systemClock, type MonotonicClock } from '../impl/clock.ts';
import { WireConnection } from '../impl/postgres/wire/connection.ts';
import { ensureSchema, openPostgresFencedStore, PostgresSessionLock, PostgresTransactionLock, postgresFencedStore } from '../impl/postgres/index.ts';
import type { AcquireResult } from '../impl/leaseLock.ts';
import type { Lease } from '../impl/lease.ts';
import { HandClock } from './handClock.ts';
import { sharedEtcd, sharedPostgres, sharedZookeeper } from './impl/servers.ts';
import { EtcdLock, etcd3Node, etcdClient, etcdFencedStore, type EtcdNode } from '../impl/etcd/index.ts';
import { lockKey } from '../impl/etcd/keys.ts';
import { ZookeeperLock, zookeeperFencedStore, zookeeperNode, type ZookeeperNode } from '../impl/zookeeper/index.ts';
import { lockDir } from '../impl/zookeeper/paths.ts';

/**
 * Every lock client and fenced store that reads a user's clock reads it
 * checked (impl/checkedClock.ts), on real servers: a reading that is no
 * finite number, goes back, or throws is InvalidInputError('invalid-config')
 * before anything is sent; a clock that turns bad while a call is out or a
 * lease is held fails safe (the bound over, the lease lost), never a throw
 * from a timer or an unhandled rejection (vitest fails the file on either).
 */

/** How a clock goes bad: each `reading(goodMs)` is what now() gives once it has. */
const BAD: ReadonlyArray<readonly [string, (goodMs: number) => unknown]> = [
  ['NaN', () => Number.NaN],
  ['Infinity', () => Number.POSITIVE_INFINITY],
  ['a numeric string', (ms) => String(Math.round(ms))],
  ['a reading that goes back', (ms) => ms - 60_000],
  ['a throw', () => {
    throw new Error('clock unplugged');
  }],
];

/** A clock that reads `base` until `bad()`, then `reading`. */
function turning(reading: (goodMs: number) => unknown, bad: () => boolean, base: MonotonicClock = systemClock): MonotonicClock {
  return { now: () => (bad() ? reading(base.now()) : base.now()) as number, schedule: (atMs, fn) => base.schedule(atMs, fn) };
}

const refused = expect.objectContaining({ name: 'InvalidInputError', code: 'invalid-config', message: expect.stringMatching(/clock\.now\(\) must/) });

function granted(r: AcquireResult): Lease {
  if (r.kind !== 'granted') throw new Error(`expected granted, got ${r.kind}`);
  return r.lease;
}

describe('PostgreSQL', () => {
  const server = sharedPostgres();
  let admin: pg.Client;
  beforeAll(async () => {
    admin = new pg.Client({ ...server(), connectionTimeoutMillis: 5_000, query_timeout: 5_000 });
    await admin.connect();
    await ensureSchema(admin);
  });
  afterAll(async () => {
    await admin?.end().catch(() => undefined);
  });
  const advisoryHeld = async (): Promise<number> => (await admin.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted")).rows[0]!.n;

  it.each(BAD)('%s: the session and transaction locks refuse before sending, mid-hold too, and nothing stays held', async (_name, reading) => {
    let bad = false;
    const clock = turning(reading, () => bad);
    for (const lock of [new PostgresSessionLock({ connection: server(), clock }), new PostgresTransactionLock({ connection: server(), clock })]) {
      try {
        // A good reading first: a reading that goes back is one lower than the last.
        await lock.release(granted(await lock.acquire('pg-clock')));
        bad = true;
        await expect(lock.acquire('pg-clock')).rejects.toEqual(refused);
        await expect(lock.acquire('pg-clock', { retries: 2 })).rejects.toEqual(refused);
        expect(await advisoryHeld()).toBe(0);
        bad = false;
        const lease = granted(await lock.acquire('pg-clock'));
        bad = true;
        // The release cannot be bounded: refused, nothing sent, the lease still held; released once the clock reads again.
        await expect(lock.release(lease)).rejects.toEqual(refused);
        expect(await advisoryHeld()).toBe(1);
        bad = false;
        expect(lease.signal.aborted).toBe(false);
        await lock.release(lease);
        expect(await advisoryHeld()).toBe(0);
        await lock.release(granted(await lock.acquire('pg-clock')));
      } finally {
        bad = false;
        await lock.close();
      }
    }
    {
      const lock = new PostgresTransactionLock({ connection: server(), clock });
      try {
        expect(await lock.withLock('pg-clock', 0, async () => 0)).toBe(0);
        bad = true;
        await expect(lock.withLock('pg-clock', 0, async () => 1)).rejects.toEqual(refused);
        bad = false;
        // Turned bad inside fn: the COMMIT cannot be bounded, so it is not sent; the transaction is rolled back or dropped, the lock freed.
        await expect(lock.withLock('pg-clock', 0, async () => {
          bad = true;
          return 1;
        })).rejects.toEqual(refused);
        bad = false;
        expect(await advisoryHeld()).toBe(0);
        expect(await lock.withLock('pg-clock', 0, async () => 2)).toBe(2);
      } finally {
        bad = false;
        await lock.close();
      }
    }
  });

  it.each(BAD)('%s, every third reading: each call is granted, released or refused, and nothing stays held', async (_name, reading) => {
    // Two good readings, then a bad one, so that a check passes and the next reading (the wire client's, the statement's bound) is refused.
    let reads = 0;
    let flipping = false;
    const clock: MonotonicClock = { now: () => (flipping && ++reads % 3 === 0 ? reading(performance.now()) : performance.now()) as number, schedule: (atMs, fn) => systemClock.schedule(atMs, fn) };
    for (const lock of [new PostgresSessionLock({ connection: server(), clock }), new PostgresTransactionLock({ connection: server(), clock })]) {
      try {
        // The connection opened on good readings.
        await lock.release(granted(await lock.acquire('pg-flip-0')));
        flipping = true;
        for (let i = 0; i < 9; i++) {
          const r = await lock.acquire(`pg-flip-${i % 2}`).catch((e: unknown) => (expect(e).toEqual(refused), null));
          // Granted or refused: a refusal read as an outage (no-quorum) hid the caller's error.
          if (r !== null) expect(r.kind).toBe('granted');
          if (r?.kind === 'granted') await lock.release(r.lease).catch((e: unknown) => expect(e).toEqual(refused));
        }
      } finally {
        flipping = false;
        await lock.close();
      }
      await expect.poll(advisoryHeld, { timeout: 10_000 }).toBe(0);
    }
  });

  it.each(BAD)('%s: both PostgreSQL stores refuse a write and a read, nothing written', async (_name, reading) => {
    const resource = `pg-store-${_name}`;
    let bad = false;
    const own = openPostgresFencedStore({ connection: server(), clock: turning(reading, () => bad) }, 'strict');
    try {
      expect(await own.write(resource, 1n, 'v1')).toEqual({ kind: 'accepted' });
      bad = true;
      await expect(own.write(resource, 2n, 'v2')).rejects.toEqual(refused);
      await expect(own.read(resource)).rejects.toEqual(refused);
    } finally {
      await own.close();
    }
    const client = new pg.Client(server());
    await client.connect();
    try {
      bad = false;
      const store = postgresFencedStore(client, 'strict', { clock: turning(reading, () => bad) });
      expect(await store.read(resource)).toEqual({ value: 'v1', token: 1n });
      bad = true;
      await expect(store.write(resource, 3n, 'v3')).rejects.toEqual(refused);
      await expect(store.read(resource)).rejects.toEqual(refused);
      bad = false;
      expect(await store.read(resource)).toEqual({ value: 'v1', token: 1n });
    } finally {
      await client.end();
    }
  });

  it.each(BAD)('%s: the wire client, its clock gone bad with a call out, fails the call and drops the connection; no timer throws', async (_name, reading) => {
    const hand = new HandClock();
    let bad = false;
    // As the locks give it: checked (lockSettings).
    const clock = checkedClock(turning(reading, () => bad, hand));
    const c = await WireConnection.connect({ ...server(), timeoutMs: 1_000, clock });
    const lost = new Promise<Error>((resolve) => c.onLost(resolve));
    const out = c.simpleQuery('SELECT pg_sleep(30)');
    bad = true;
    expect(() => hand.advance(1_000)).not.toThrow();
    await expect(out).rejects.toMatchObject({ name: 'TimeoutError' });
    await lost;
    // A call on a clock that cannot be read is refused with nothing sent.
    const next = await WireConnection.connect({ ...server(), timeoutMs: 1_000, clock }).catch((e: unknown) => e);
    expect(next).toEqual(refused);
  });
});

/** Generous real-time bounds: a loaded machine's servers answer late, and a close or a revoke is sent without being awaited. */
const CALL_BOUND_MS = 30_000;
const GONE_WITHIN = { timeout: 10_000, interval: 50 };

describe('etcd', () => {
  const server = sharedEtcd();
  let prefixes = 0;
  it.each(BAD)('%s: the lock and the store refuse before sending; turned bad with the key ours, the key is revoked', async (name, reading) => {
    const prefix = `clock-${process.pid}-${++prefixes}/`;
    let bad = false;
    const clock = turning(reading, () => bad);
    const client = etcdClient({ hosts: server().hosts, tls: server().tls, clock });
    try {
      const raw = etcd3Node(client, { clock, requestTimeoutMs: CALL_BOUND_MS });
      // Goes bad as the put's reply comes: the lock reads the clock next, with the key ours.
      let badAfterPut = false;
      const node: EtcdNode = { ...raw, putIfAbsent: async (...args) => {
        const put = await raw.putIfAbsent(...args);
        if (badAfterPut) bad = true;
        return put;
      } };
      const lock = new EtcdLock({ node, clock, prefix });
      const store = etcdFencedStore(raw, 'strict', { prefix });
      expect(await lock.release(granted(await lock.acquire('r', { ttlMs: 30_000 })))).toBe(true);
      expect(await store.write('r', 1n, 'v1')).toEqual({ kind: 'accepted' });
      bad = true;
      await expect(lock.acquire('r', { ttlMs: 30_000 })).rejects.toEqual(refused);
      await expect(store.write('r', 2n, 'v2')).rejects.toEqual(refused);
      await expect(store.read('r')).rejects.toEqual(refused);
      bad = false;
      expect(await store.read('r')).toEqual({ value: 'v1', token: 1n });
      expect(await raw.get(lockKey('r', prefix))).toBeNull();
      badAfterPut = true;
      await expect(lock.acquire('r', { ttlMs: 30_000 }), name).rejects.toEqual(refused);
      // Revoked (the key with it) though the clock still cannot be read: the lock is free at once, not in 30 s.
      await expect.poll(async () => (await client.get(lockKey('r', prefix).toString())), GONE_WITHIN).toBeNull();
      bad = false;
    } finally {
      bad = false;
      client.close();
    }
  });
});

describe('ZooKeeper', () => {
  const server = sharedZookeeper();
  const nodes: ZookeeperNode[] = [];
  afterAll(() => {
    for (const n of nodes) n.close();
  });
  let roots = 0;
  it.each(BAD)('%s: the lock and the store refuse before sending; turned bad mid-acquire, no contender stays in line', async (name, reading) => {
    const root = `/clock-${process.pid}-${++roots}`;
    let bad = false;
    const clock = turning(reading, () => bad);
    const raw = zookeeperNode({ connectString: server().connectString, auth: server().auth, clock, requestTimeoutMs: CALL_BOUND_MS });
    nodes.push(raw);
    // Goes bad as the contender is made (the next call, the line's read, is refused), or as the line is read with it
    // first (the lock reads the clock next, to judge the grant).
    let badAfter: 'enqueue' | 'line' | null = null;
    let enqueued = false;
    const node: ZookeeperNode = {
      ...raw,
      enqueue: async (...args) => {
        const own = await raw.enqueue(...args);
        enqueued = true;
        if (badAfter === 'enqueue') bad = true;
        return own;
      },
      contenders: async (...args) => {
        const line = await raw.contenders(...args);
        if (badAfter === 'line' && enqueued) bad = true;
        return line;
      },
    };
    const lock = new ZookeeperLock({ node, clock, root });
    const store = zookeeperFencedStore(raw, 'strict', { root });
    expect(await lock.release(granted(await lock.acquire('r', { ttlMs: 30_000 })))).toBe(true);
    expect(await store.write('r', 1n, 'v1')).toEqual({ kind: 'accepted' });
    bad = true;
    await expect(lock.acquire('r', { ttlMs: 30_000 })).rejects.toEqual(refused);
    await expect(store.write('r', 2n, 'v2')).rejects.toEqual(refused);
    await expect(store.read('r')).rejects.toEqual(refused);
    bad = false;
    expect(await store.read('r')).toEqual({ value: 'v1', token: 1n });
    for (const when of ['enqueue', 'line'] as const) {
      badAfter = when;
      enqueued = false;
      await expect(lock.acquire('r', { ttlMs: 30_000 }), `${name}, bad after ${when}`).rejects.toEqual(refused);
      expect(bad).toBe(true);
      badAfter = null;
      // The session closed though the clock still could not be read, and its contender with it: the line is empty at once, not in 30 s.
      bad = false;
      await expect.poll(() => raw.children(lockDir('r', root)), GONE_WITHIN).toEqual([]);
      expect(lock.trackedLeases).toBe(0);
    }
  });
});

describe('etcd and ZooKeeper, a quarter of the readings bad (seeded)', () => {
  const etcd = sharedEtcd();
  const zk = sharedZookeeper();
  it.each(BAD)('%s: each acquire is granted or refused, each release answered or refused, and nothing stays held', async (_name, reading) => {
    // A seeded stream (a 31-bit LCG) picks the bad readings: each path meets one at some reading.
    let seed = 7;
    const badNow = (): boolean => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31 < 0.25;
    let flipping = false;
    const clock: MonotonicClock = { now: () => (flipping && badNow() ? reading(performance.now()) : performance.now()) as number, schedule: (atMs, fn) => systemClock.schedule(atMs, fn) };
    const root = `/flip-${process.pid}-${_name.replace(/\W/g, '')}`;
    const prefix = `flip-${process.pid}-${_name.replace(/\W/g, '')}/`;
    const client = etcdClient({ hosts: etcd().hosts, tls: etcd().tls, clock });
    const zkNode = zookeeperNode({ connectString: zk().connectString, auth: zk().auth, clock, requestTimeoutMs: CALL_BOUND_MS });
    const etcdNode = etcd3Node(client, { clock, requestTimeoutMs: CALL_BOUND_MS });
    try {
      for (const lock of [new EtcdLock({ node: etcdNode, clock, prefix }), new ZookeeperLock({ node: zkNode, clock, root })]) {
        flipping = true;
        for (let i = 0; i < 12; i++) {
          const r = await lock.acquire('r', { ttlMs: 30_000 }).catch((e: unknown) => (expect(e).toEqual(refused), null));
          if (r === null) continue;
          // Granted, or held by the contender or key of a refused attempt whose close or revoke is still on its way; a
          // refusal read as an outage (no-quorum) would hide the caller's error.
          if (r.kind === 'denied') expect(r.reason).toBe('held');
          else expect(r.kind).toBe('granted');
          if (r.kind === 'granted') await lock.release(r.lease).catch((e: unknown) => expect(e).toEqual(refused));
          // A release refused (or unanswered) is asked again on good readings, as a caller would.
          if (r.kind === 'granted' && !r.lease.signal.aborted) {
            flipping = false;
            await lock.release(r.lease);
            flipping = true;
          }
        }
        flipping = false;
      }
      await expect.poll(async () => (await client.getAll().prefix(prefix).keys()).length, GONE_WITHIN).toBe(0);
      await expect.poll(() => zkNode.children(lockDir('r', root)).catch(() => []), GONE_WITHIN).toEqual([]);
    } finally {
      flipping = false;
      zkNode.close();
      client.close();
    }
  });
});
