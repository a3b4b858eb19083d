import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisServer } from '../conformance/env/redisServer.ts';
import type { Lease } from '../impl/lease.ts';
import type { LeaseLock } from '../impl/leaseLock.ts';
import { createRedisLock, keysFor, redisFencedStore } from '../impl/redis/index.ts';

/**
 * What a user first asks of the Redis lock, asked of real servers with real
 * concurrent clients: can two holders act at once, can a stale write land.
 * Several LeaseLock instances (each with its own connections) race on one
 * resource with Promise.all, extending and writing to a strict fenced store
 * while the servers' connections are killed (CLIENT KILL) and the servers
 * stall (DEBUG SLEEP) at points a seeded generator picks among the grants
 * (no timer decides when a fault comes). Checked from the clients' own
 * bookkeeping: no two leases valid at once by their clock, tokens rising in
 * grant order, no write accepted with a token at or below one accepted
 * before it was sent. And across a crash: with `appendfsync always` the token
 * counter and the store's highest token survive; without persistence the
 * store forgets (DUR-1, docs/redis.md).
 */
const servers: RedisServer[] = [];
const connections: Redis[] = [];
beforeAll(async () => {
  servers.push(...(await Promise.all([0, 1, 2].map(() => RedisServer.start({ persistence: 'none' })))));
}, 30_000);
afterAll(async () => {
  for (const c of connections) c.disconnect();
  await Promise.all(servers.map((s) => s.stop()));
});

function connect(server: RedisServer): Redis {
  // Reconnects at once after CLIENT KILL; a command on a closed connection fails rather than waiting.
  const redis = new Redis({ ...server.connection, maxRetriesPerRequest: 1, retryStrategy: () => 5 });
  redis.on('error', () => undefined);
  connections.push(redis);
  return redis;
}

/** A seeded generator (mulberry32). */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

interface Hold {
  readonly token: bigint;
  readonly from: number;
  readonly to: number;
}
interface Write {
  readonly token: bigint;
  readonly sentMs: number;
  readonly doneMs: number;
}

/** Grants below which a race proves nothing (the checks below hold vacuously), and the rounds per client spent reaching them. */
const MIN_HOLDS = 20;
const MAX_ROUNDS = 60;

interface Race {
  readonly holds: Hold[];
  readonly writes: Write[];
  /** Faults whose command was answered. */
  readonly faults: number;
}

async function race(nodes: readonly RedisServer[], seed: number, resource: string): Promise<Race> {
  const random = seeded(seed);
  const store = redisFencedStore(connect(nodes[0]!), 'strict', { timeoutMs: 2_000 });
  const holds: Hold[] = [];
  const writes: Write[] = [];
  let faults = 0;
  // Each fault on a connection of its own, which another holder's CLIENT KILL may cut (ECONNRESET), or a loaded machine
  // answer late: the faults are the race's setting, not what it judges, so a fault that did not land is not the test's
  // failure (the check asks that some did).
  const fault = async (): Promise<void> => {
    const server = nodes[Math.floor(random() * nodes.length)]!;
    const pick = random();
    const command = pick < 0.3 ? ['CLIENT', 'KILL', 'TYPE', 'normal'] : pick < 0.5 ? ['DEBUG', 'SLEEP', '0.03'] : null;
    if (command !== null) await server.command(command, 10_000).then(() => faults++, () => undefined);
  };
  const client = async (lock: LeaseLock): Promise<void> => {
    // Twelve rounds each, and more (at most MAX_ROUNDS) until the race has had more than MIN_HOLDS grants: on a loaded
    // machine many attempts time out (a 100 ms bound, a 150 ms ttl), and twelve rounds of five clients granted 13.
    for (let round = 0; round < 12 || (holds.length <= MIN_HOLDS && round < MAX_ROUNDS); round++) {
      const result = await lock.acquire(resource, { ttlMs: 150, retries: 40, retryDelayMs: 2, retryJitterMs: 4 });
      if (result.kind !== 'granted') continue;
      const lease: Lease = result.lease;
      const from = performance.now();
      let lostMs = Infinity;
      lease.signal.addEventListener('abort', () => (lostMs = performance.now()));
      // The fault lands while this lease is held: its extends and writes meet it.
      const faulted = fault();
      for (let step = Math.floor(random() * 3); step >= 0 && !lease.signal.aborted; step--) {
        const sentMs = performance.now();
        const written = await store.write(resource, lease.token, `${lease.token}`).catch(() => null);
        if (written?.kind === 'accepted') writes.push({ token: lease.token, sentMs, doneMs: performance.now() });
        await lock.extend(lease, 150);
      }
      await faulted;
      // The hold ends at the release's send, the loss, or the deadline by the client's clock, whichever came first.
      holds.push({ token: lease.token, from, to: Math.min(performance.now(), lostMs, lease.validUntilMs!) });
      await lock.release(lease);
    }
    await lock.settled();
  };
  const locks = Array.from({ length: 5 }, () => createRedisLock({ nodes: nodes.map(connect), requestTimeoutMs: 100 }));
  await Promise.all(locks.map(client));
  return { holds, writes, faults };
}

function check({ holds, writes, faults }: Race): void {
  expect(holds.length).toBeGreaterThan(MIN_HOLDS);
  expect(faults).toBeGreaterThan(0);
  const byStart = [...holds].sort((a, b) => a.from - b.from);
  for (let i = 1; i < byStart.length; i++) {
    const [before, after] = [byStart[i - 1]!, byStart[i]!];
    expect(after.from, `holders of tokens ${before.token} and ${after.token} overlap`).toBeGreaterThanOrEqual(before.to);
    expect(after.token, 'tokens rise in grant order').toBeGreaterThan(before.token);
  }
  for (const w of writes) for (const v of writes) if (v !== w && v.doneMs < w.sentMs) expect(w.token, `a write with token ${w.token} landed after one with ${v.token}`).toBeGreaterThan(v.token);
}

describe('racing holders on real Redis under connection kills and stalls', () => {
  it('one node: at most one holder, rising tokens, no stale write', async () => {
    check(await race(servers.slice(0, 1), 36, 'race-single'));
  }, 120_000);

  it('Redlock on three nodes: the same', async () => {
    check(await race(servers, 37, 'race-redlock'));
  }, 120_000);
});

describe('a crash and restart', () => {
  it('with appendfsync always keeps the token counter and the store highest; without persistence the store forgets', async () => {
    for (const persistence of ['aof-always', 'none'] as const) {
      const server = await RedisServer.start({ persistence });
      try {
        const lock = createRedisLock({ nodes: [connect(server)], tokenBase: 2n ** 63n - 5n });
        const store = redisFencedStore(connect(server), 'monotonic', { timeoutMs: 5_000 });
        const first = await lock.acquire('crash', { ttlMs: 60_000 });
        if (first.kind !== 'granted') throw new Error(`not granted: ${first.kind}`);
        expect(await store.write('crash', first.lease.token, 'new')).toEqual({ kind: 'accepted' });
        await server.restart();
        const stale = await store.write('crash', first.lease.token - 1n, 'stale');
        const second = await lock.acquire('crash', { ttlMs: 1_000 });
        if (persistence === 'aof-always') {
          expect(stale).toEqual({ kind: 'rejected', highest: 2n ** 63n - 4n });
          // The first lease's key survived with its ttl: held; and the counter went on, exactly.
          expect(second).toEqual({ kind: 'denied', reason: 'held' });
          await lock.release(first.lease);
          const third = await lock.acquire('crash', { ttlMs: 1_000 });
          expect(third.kind === 'granted' && third.lease.token).toBe(2n ** 63n - 3n);
        } else {
          // DUR-1: the cell and the counter are gone with the keys.
          expect(stale).toEqual({ kind: 'accepted' });
          expect(await store.read('crash')).toEqual({ value: 'stale', token: 2n ** 63n - 5n });
          expect(second.kind === 'granted' && second.lease.token).toBe(2n ** 63n - 4n);
          expect(await server.command(['EXISTS', keysFor('crash').minted])).toBe(1);
        }
        await lock.settled();
      } finally {
        await server.stop();
      }
    }
  }, 60_000);
});
