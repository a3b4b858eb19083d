import { createServer, type AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ConnectionConfigError, ReplicationError, ServerRefusedError, TimeoutError, TokenOverflowError, UnavailableError } from '../../impl/errors.ts';
import { InvalidInputError } from '../../model/errors.ts';
import { createRedisLock, keysFor, redisFencedStore, redisLeaseNode } from '../../impl/redis/index.ts';
import { acquireScript, JOINED_MAX, LuaScript } from '../../impl/redis/commands.ts';
import { ACQUIRE } from '../../impl/redis/scripts.ts';
import { ManualClock, sharedRedis } from './servers.ts';
import { RedisServer } from '../../conformance/env/redisServer.ts';
import { LeaseLock } from '../../impl/leaseLock.ts';

/**
 * impl/redis against one real redis-server (flushed before each test): the
 * scripts' replies and the keys they leave, token bases, prefixes, WAIT for
 * replicas, and the errors typed from the server's. Quick on purpose: these
 * are what `npm run mutation` kills the TypeScript of impl/redis with.
 */
const server = sharedRedis();
let redis: Redis;
const MAX = 2n ** 63n - 1n;

beforeAll(() => {
  const s = server();
  redis = new Redis({ ...s, lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 5_000, commandTimeout: 5_000 });
});
afterAll(() => redis?.disconnect());
beforeEach(async () => {
  await redis.flushall();
});

function client(options: { password?: string; username?: string } = {}): Redis {
  const s = server();
  const c = new Redis({ host: s.host, port: s.port, password: options.password ?? s.password, ...(options.username !== undefined ? { username: options.username } : {}), lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 5_000, commandTimeout: 5_000, retryStrategy: () => null, enableReadyCheck: false });
  // Refusals are what these tests read from the commands; the connection's own error events are expected.
  c.on('error', () => undefined);
  return c;
}

/** Runs `fn` on a connection to a server of its own (for what would disturb the shared one), stopped after it whatever happens. */
async function onOwnServer(fn: (c: Redis) => Promise<void>): Promise<void> {
  const own = await RedisServer.start({ persistence: 'none' });
  const c = new Redis({ ...own.connection, lazyConnect: true, maxRetriesPerRequest: 1, commandTimeout: 5_000 });
  try {
    await c.connect();
    await fn(c);
  } finally {
    c.disconnect();
    await own.stop();
  }
}

async function thrown(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    (v) => new Error(`expected a rejection, got ${String(v)}`),
    (e: unknown) => e,
  );
}

describe('keysFor', () => {
  it('names the lock, counter and cell under the prefix', () => {
    expect(keysFor('a/b')).toEqual({ lock: 'lockcheck:lock:a/b', counter: 'lockcheck:token:a/b', minted: 'lockcheck:minted:a/b', cell: 'lockcheck:store:a/b' });
    expect(keysFor('r', 'app')).toEqual({ lock: 'app:lock:r', counter: 'app:token:r', minted: 'app:minted:r', cell: 'app:store:r' });
    expect(() => keysFor('')).toThrow(InvalidInputError);
  });
});

describe('redisLeaseNode', () => {
  it('acquire mints tokenBase + 1, + 2, ... and sets the lock to the owner with the ttl', async () => {
    const node = redisLeaseNode(redis);
    expect(await node.acquire('r', 'o1', 60_000)).toBe(1n);
    expect(await redis.get('lockcheck:lock:r')).toBe('o1');
    const pttl = await redis.pttl('lockcheck:lock:r');
    expect(pttl).toBeGreaterThan(50_000);
    expect(pttl).toBeLessThanOrEqual(60_000);
    expect(await node.acquire('r', 'o2', 60_000)).toBeNull();
    expect(await redis.get('lockcheck:token:r')).toBe('1');
    expect(await node.release('r', 'o1')).toBe(true);
    expect(await node.acquire('r', 'o2', 60_000)).toBe(2n);
  });

  it('a token base across 2^53 is exact; the counter holds digits', async () => {
    const base = 2n ** 53n + 7n;
    const node = redisLeaseNode(redis, { tokenBase: base, prefix: 'p' });
    expect(await node.acquire('r', 'o', 1000)).toBe(base + 1n);
    expect(await redis.get('p:token:r')).toBe((base + 1n).toString());
    expect(await redis.exists('lockcheck:lock:r')).toBe(0);
    expect(() => redisLeaseNode(redis, { tokenBase: -1n })).toThrow(InvalidInputError);
    // Small bases too: the script skips setting the base only when it is 0.
    expect(await redisLeaseNode(redis, { tokenBase: 1n, prefix: 'q' }).acquire('r', 'o', 1000)).toBe(2n);
  });

  it('tokens on both sides of 2^53 are exact, always a digit string on the wire (never a Lua or JS number); a counter that is not a number fails and sets no lock', async () => {
    const node = redisLeaseNode(redis);
    await redis.set('lockcheck:token:edge', (2n ** 53n - 2n).toString());
    const tokens: Array<bigint | null> = [];
    for (let i = 0; i < 3; i++) {
      tokens.push(await node.acquire('edge', `o${i}`, 1000));
      await node.release('edge', `o${i}`);
    }
    expect(tokens).toEqual([2n ** 53n - 1n, 2n ** 53n, 2n ** 53n + 1n]);
    // The script's own reply, small tokens included: digits, never an integer reply (a Lua double, a JS number).
    expect(await redis.eval(ACQUIRE, 3, 'lockcheck:lock:raw', 'lockcheck:token:raw', 'lockcheck:minted:raw', 'o', '1000', '0', '1')).toBe('1');
    await redis.set('lockcheck:token:junk', 'x');
    // A counter holding what lockcheck did not write is a schema refusal (no retry fixes it), and nothing stays held.
    await expect(node.acquire('junk', 'o', 1000)).rejects.toThrow(expect.objectContaining({ name: 'ServerRefusedError', code: 'schema', serverCode: 'ERR', message: expect.stringMatching(/not an integer/) as string }));
    expect(await redis.exists('lockcheck:lock:junk')).toBe(0);
  });

  it('release and extend act only for the owner', async () => {
    const node = redisLeaseNode(redis);
    await node.acquire('r', 'o', 5_000);
    expect(await node.release('r', 'other')).toBe(false);
    expect(await node.extend('r', 'other', 60_000)).toBe(false);
    expect(await redis.pttl('lockcheck:lock:r')).toBeLessThanOrEqual(5_000);
    expect(await node.extend('r', 'o', 60_000)).toBe(true);
    expect(await redis.pttl('lockcheck:lock:r')).toBeGreaterThan(50_000);
    expect(await redis.get('lockcheck:lock:r')).toBe('o');
    expect(await node.release('r', 'o')).toBe(true);
    expect(await redis.exists('lockcheck:lock:r')).toBe(0);
    expect(await node.release('r', 'o')).toBe(false);
    expect(await node.extend('r', 'o', 1000)).toBe(false);
  });

  it('raiseToken raises the counter, never lowers it, and starts from the base', async () => {
    const node = redisLeaseNode(redis, { tokenBase: 10n });
    await node.raiseToken('r', 5n);
    expect(await redis.get('lockcheck:token:r')).toBeNull();
    await node.raiseToken('r', 12n);
    expect(await redis.get('lockcheck:token:r')).toBe('12');
    await node.raiseToken('r', 9n);
    expect(await redis.get('lockcheck:token:r')).toBe('12');
    await node.raiseToken('r', 100n);
    expect(await redis.get('lockcheck:token:r')).toBe('100');
    expect(await node.acquire('r', 'o', 1000)).toBe(101n);
    await expect(node.raiseToken('r', -1n)).rejects.toThrow(InvalidInputError);
  });

  it("a counter deleted, or set back to the base, behind lockcheck is ServerRefusedError('schema', 'TOKENLOST') naming it, never a token issued again; nothing is held; setting it to the highest issued restores the lock", async () => {
    for (const base of [0n, 41n]) {
      const prefix = `p${base}`;
      const node = redisLeaseNode(redis, { tokenBase: base, prefix });
      const counter = `${prefix}:token:r`;
      expect(await node.acquire('r', 'o1', 60_000)).toBe(base + 1n);
      expect(await redis.get(`${prefix}:minted:r`)).toBe('1');
      await node.release('r', 'o1');
      expect(await node.acquire('r', 'o2', 60_000)).toBe(base + 2n);
      await node.release('r', 'o2');
      for (const tamper of [() => redis.del(counter), () => redis.set(counter, base.toString())]) {
        await tamper();
        for (let i = 0; i < 2; i++) {
          const e = await thrown(node.acquire('r', 'o3', 60_000));
          expect(e, `base ${base}`).toMatchObject({ name: 'ServerRefusedError', code: 'schema', serverCode: 'TOKENLOST' });
          expect((e as Error).message).toContain(`'r': the token counter ${counter} was deleted or set back to the base`);
          expect(await redis.exists(`${prefix}:lock:r`)).toBe(0);
          expect(await redis.exists(counter)).toBe(0);
        }
      }
      // The operator puts the counter back at (or above) the highest token issued: tokens go on from there.
      await redis.set(counter, (base + 2n).toString());
      expect(await node.acquire('r', 'o4', 60_000)).toBe(base + 3n);
    }
    // The lock throws it (one node: no quorum can grant without it).
    const lock = createRedisLock({ nodes: [redis], clock: new ManualClock() });
    const first = await lock.acquire('s', { ttlMs: 1000 });
    if (first.kind !== 'granted') throw new Error(first.kind);
    await lock.release(first.lease);
    await redis.del('lockcheck:token:s');
    await expect(lock.acquire('s', { ttlMs: 1000, retries: 3 })).rejects.toMatchObject({ name: 'ServerRefusedError', serverCode: 'TOKENLOST' });
  });

  it('Redlock: a node whose counter was deleted refuses, the quorum grants above every earlier token and restores that counter in the background', async () => {
    const nodes = ['n0', 'n1', 'n2'].map((prefix) => redisLeaseNode(redis, { prefix }));
    const lock = new LeaseLock({ nodes, clock: new ManualClock() });
    const tokens: bigint[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await lock.acquire('r', { ttlMs: 10_000 });
      if (r.kind !== 'granted') throw new Error(r.kind);
      tokens.push(r.lease.token);
      await lock.release(r.lease);
      await lock.settled();
      if (i === 0) await redis.del('n1:token:r');
    }
    expect(tokens).toEqual([1n, 2n, 3n]);
    // n1 refused the second grant and was raised to its token; it granted the third.
    expect(await Promise.all(['n0', 'n1', 'n2'].map((p) => redis.get(`${p}:token:r`)))).toEqual(['3', '3', '3']);
  });

  it('a counter at 2^63-1 is a TokenOverflowError naming the resource, and the lock is not set', async () => {
    await redis.set('lockcheck:token:full', MAX.toString());
    const e = await thrown(redisLeaseNode(redis).acquire('full', 'o', 1000));
    expect(e).toBeInstanceOf(TokenOverflowError);
    expect((e as TokenOverflowError).resource).toBe('full');
    expect((e as Error).message).toBe("the fencing token of 'full' reached 2^63-1; no further grant is possible");
    expect(await redis.exists('lockcheck:lock:full')).toBe(0);
    // One below the end still grants the last token.
    await redis.set('lockcheck:token:last', (MAX - 1n).toString());
    expect(await redisLeaseNode(redis).acquire('last', 'o', 1000)).toBe(MAX);
  });

  it("a key lockcheck uses holding another type (a list at the counter) is ServerRefusedError('schema', 'WRONGTYPE'): no retry fixes it", async () => {
    await redis.rpush('lockcheck:token:list', 'x');
    const e = await thrown(redisLeaseNode(redis).acquire('list', 'o', 1000));
    expect(e).toBeInstanceOf(ServerRefusedError);
    expect(e).toMatchObject({ code: 'schema', serverCode: 'WRONGTYPE', message: expect.stringMatching(/^schema \(WRONGTYPE\): WRONGTYPE/) as string });
    expect(await redis.exists('lockcheck:lock:list')).toBe(0);
  });

  it('wrong credentials are ConnectionConfigError authentication', async () => {
    for (const password of ['wrong-password', '']) {
      const c = client({ password });
      try {
        const e = await thrown(redisLeaseNode(c).acquire('r', 'o', 1000));
        expect(e).toBeInstanceOf(ConnectionConfigError);
        expect((e as ConnectionConfigError).code).toBe('authentication');
        expect((e as Error).message).toMatch(/^authentication: (WRONGPASS|NOAUTH)/);
        expect((e as Error).cause).toBeInstanceOf(Error);
      } finally {
        c.disconnect();
      }
    }
  });

  it('an ACL user without the scripts is ServerRefusedError permission NOPERM; without the keys too', async () => {
    const s = server();
    await redis.call('ACL', 'SETUSER', 'noscripts', 'on', '>pw1', '~*', '+get');
    await redis.call('ACL', 'SETUSER', 'nokeys', 'on', '>pw2', '~other:*', '+@all');
    try {
      for (const [username, password] of [['noscripts', 'pw1'], ['nokeys', 'pw2']] as const) {
        const c = new Redis({ host: s.host, port: s.port, username, password, lazyConnect: true, maxRetriesPerRequest: 0, commandTimeout: 5_000, retryStrategy: () => null, enableReadyCheck: false });
        c.on('error', () => undefined);
        try {
          const e = await thrown(redisLeaseNode(c).acquire('r', 'o', 1000));
          expect(e).toBeInstanceOf(ServerRefusedError);
          expect(e).toMatchObject({ code: 'permission', serverCode: 'NOPERM' });
          expect((e as Error).cause).toBeInstanceOf(Error);
          expect((e as Error).message).toMatch(/^permission \(NOPERM\): NOPERM/);
        } finally {
          c.disconnect();
        }
      }
    } finally {
      await redis.call('ACL', 'DELUSER', 'noscripts', 'nokeys');
    }
  });

  it('a server without the script commands is ServerRefusedError statement ERR (unknown command)', async () => {
    const { RedisServer } = await import('../../conformance/env/redisServer.ts');
    const bare = await RedisServer.start({ persistence: 'none', config: ['rename-command EVALSHA ""', 'rename-command EVAL ""'] });
    const c = new Redis({ ...bare.connection, lazyConnect: true, maxRetriesPerRequest: 0, commandTimeout: 5_000, retryStrategy: () => null });
    c.on('error', () => undefined);
    try {
      const e = await thrown(redisLeaseNode(c).acquire('r', 'o', 1000));
      expect(e).toBeInstanceOf(ServerRefusedError);
      expect(e).toMatchObject({ code: 'statement', serverCode: 'ERR' });
      expect((e as Error).message).toMatch(/^statement \(ERR\): ERR unknown command/);
      expect((e as Error).cause).toBeInstanceOf(Error);
    } finally {
      c.disconnect();
      await bare.stop();
    }
  });

  it('commands sent in one tick while others await replies go out in one write, in the order they were made', async () => {
    const node = redisLeaseNode(redis);
    await redis.ping();
    const stream = redis.stream as unknown as { _write: (...a: unknown[]) => void; _writev: (chunks: unknown[], cb: unknown) => void };
    const writes: number[] = [];
    const write = stream._write.bind(stream);
    const writev = stream._writev.bind(stream);
    stream._write = (...a) => (writes.push(1), write(...a));
    stream._writev = (chunks, cb) => (writes.push(chunks.length), writev(chunks, cb));
    try {
      // 20 acquires, then a release of the first behind them: on the server it runs after its acquire.
      // The first goes out alone (nothing awaited a reply yet); the rest wait for the tick's end.
      const acquired = Array.from({ length: 20 }, (_, i) => node.acquire(`t${i}`, `o${i}`, 60_000));
      const released = node.release('t0', 'o0');
      expect(await Promise.all(acquired)).toEqual(Array.from({ length: 20 }, () => 1n));
      expect(await released).toBe(true);
      expect(writes).toEqual([1, 20]);
      // A command on an idle connection is written at once.
      expect(await node.extend('t1', 'o1', 60_000)).toBe(true);
      expect(writes).toEqual([1, 20, 1]);
    } finally {
      stream._write = write;
      stream._writev = writev;
    }
    expect(await redis.exists('lockcheck:lock:t0')).toBe(0);
  });

  it('a connection that is not open yet is left to ioredis (its offline queue)', async () => {
    const c = new Redis({ ...server(), lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 5_000, commandTimeout: 5_000 });
    try {
      expect(await redisLeaseNode(c).acquire('q', 'o', 60_000)).toBe(1n);
    } finally {
      c.disconnect();
    }
  });

  it('replicas: bad settings are refused (WAIT 0 would block forever)', () => {
    for (const replicas of [{ count: 0, timeoutMs: 10 }, { count: 1, timeoutMs: 0 }, { count: 1.5, timeoutMs: 10 }, { count: 1, timeoutMs: 2.5 }]) {
      expect(() => redisLeaseNode(redis, { replicas })).toThrow(expect.objectContaining({ code: 'invalid-config', message: expect.stringMatching(/replicas needs an integer count >= 1/) }));
    }
    expect(() => redisLeaseNode(redis, { replicas: { count: 1, timeoutMs: 1 } })).not.toThrow();
  });

  it('replicas on a server without any: every write is a ReplicationError after WAIT, a denial is not', async () => {
    const node = redisLeaseNode(redis, { replicas: { count: 1, timeoutMs: 1 }, prefix: 'w', tokenBase: 5n });
    const e = await thrown(node.acquire('r', 'o', 60_000));
    expect(e).toBeInstanceOf(ReplicationError);
    expect(e).toMatchObject({ wanted: 1, acknowledged: 0, message: 'WAIT: 0 of 1 replicas acknowledged' });
    // The write is on the primary: the lock is set, and a second acquire is a plain denial (no WAIT).
    expect(await redis.get('w:lock:r')).toBe('o');
    expect(await redis.get('w:token:r')).toBe('6');
    expect(await node.acquire('r', 'o2', 60_000)).toBeNull();
    await expect(node.extend('r', 'o', 60_000)).rejects.toBeInstanceOf(ReplicationError);
    await expect(node.raiseToken('r', 50n)).rejects.toBeInstanceOf(ReplicationError);
    expect(await redis.get('w:token:r')).toBe('50');
    await expect(node.raiseToken('r', -2n)).rejects.toThrow(InvalidInputError);
    await expect(node.release('r', 'o')).rejects.toBeInstanceOf(ReplicationError);
    expect(await redis.exists('w:lock:r')).toBe(0);
    await redis.set('w:token:full', MAX.toString());
    await expect(node.acquire('full', 'o', 1000)).rejects.toBeInstanceOf(TokenOverflowError);
  });

  it('replicas met (WAIT for 1 answered by a replica): the replies are the scripts\' own', async () => {
    // A replica of the shared server, so WAIT 1 is answered.
    const { RedisServer } = await import('../../conformance/env/redisServer.ts');
    const s = server();
    await redis.config('SET', 'repl-diskless-sync-delay', '0');
    const replica = await RedisServer.start({ persistence: 'none', password: s.password, config: [`replicaof ${s.host} ${s.port}`, `masterauth ${s.password}`] });
    try {
      const deadline = Date.now() + 20_000;
      while (Number(await redis.call('WAIT', '1', '100')) < 1) if (Date.now() > deadline) throw new Error('the replica never connected');
      const node = redisLeaseNode(redis, { replicas: { count: 1, timeoutMs: 5_000 } });
      expect(await node.acquire('r', 'o', 60_000)).toBe(1n);
      expect(await node.acquire('r', 'x', 60_000)).toBeNull();
      expect(await node.extend('r', 'x', 60_000)).toBe(false);
      expect(await node.extend('r', 'o', 60_000)).toBe(true);
      await node.raiseToken('r', 7n);
      expect(await redis.get('lockcheck:token:r')).toBe('7');
      expect(await node.release('r', 'x')).toBe(false);
      expect(await node.release('r', 'o')).toBe(true);
    } finally {
      await replica.stop();
    }
  });
});

describe('createRedisLock', () => {
  it('refuses no nodes', () => {
    expect(() => createRedisLock({ nodes: [] })).toThrow(expect.objectContaining({ code: 'invalid-config', message: 'invalid-config: nodes must be a non-empty array of ioredis connections, got an array of 0' }));
  });

  it('passes prefix, tokenBase and the timing options on to the lease lock', async () => {
    const clock = new ManualClock();
    const lock = createRedisLock({ nodes: [redis], clock, prefix: 'q', tokenBase: 41n, driftFactor: 0.1, clockMarginMs: 5, safetyMarginMs: 7, requestTimeoutMs: 4_000 });
    const r = await lock.acquire('r', { ttlMs: 1000 });
    expect(r.kind).toBe('granted');
    if (r.kind !== 'granted') return;
    expect(r.lease.token).toBe(42n);
    // The round's deadline is the request timeout, not the ttl.
    expect(clock.delays).toContain(4_000);
    // Validity: started + ttl - (ceil(0.1 * 1000) + 5).
    expect(r.lease.validUntilMs).toBe(1000 + 1000 - 105);
    expect(await redis.get('q:lock:r')).toBe(r.lease.owner);
    // The signal fires safetyMarginMs before the deadline.
    clock.advance(1000 - 105 - 7 - 1);
    expect(r.lease.signal.aborted).toBe(false);
    clock.advance(1);
    expect(r.lease.signal.aborted).toBe(true);
    await lock.release(r.lease);
    expect(await redis.exists('q:lock:r')).toBe(0);
  });

  it('a safetyMarginMs that leaves no usable time is validity-exhausted, the key released; one that leaves a millisecond is a grant', async () => {
    const clock = new ManualClock();
    // validity 1000 - (ceil(0.1 * 1000) + 5) = 895 ms: a margin of 895 leaves none (the signal would fire at the grant), 894 leaves 1 ms.
    const none = createRedisLock({ nodes: [redis], clock, prefix: 'sm', driftFactor: 0.1, clockMarginMs: 5, safetyMarginMs: 895 });
    expect(await none.acquire('r', { ttlMs: 1000 })).toEqual({ kind: 'denied', reason: 'validity-exhausted' });
    // The release went out on this connection before the acquire answered: the GET behind it sees the key gone.
    expect(await redis.exists('sm:lock:r')).toBe(0);
    expect(none.trackedLeases).toBe(0);
    const one = createRedisLock({ nodes: [redis], clock, prefix: 'sm', driftFactor: 0.1, clockMarginMs: 5, safetyMarginMs: 894 });
    const r = await one.acquire('r', { ttlMs: 1000 });
    if (r.kind !== 'granted') throw new Error(`expected a grant, got ${JSON.stringify(r)}`);
    expect(r.lease.signal.aborted).toBe(false);
    clock.advance(1);
    expect(r.lease.signal.aborted).toBe(true);
    await one.release(r.lease);
  });

  it("a lock key deleted or replaced behind the holder's back (DEL, SET to another owner, on one node or a Redlock quorum) is never extended; the release leaves the other owner's key", async () => {
    const clock = new ManualClock();
    const single = createRedisLock({ nodes: [redis], clock });
    const redlock = new LeaseLock({ nodes: ['n0', 'n1', 'n2'].map((prefix) => redisLeaseNode(redis, { prefix })), clock });
    const tamperings: Array<[string, (key: string) => Promise<unknown>]> = [
      ['DEL', (key) => redis.del(key)],
      ['SET to another owner', (key) => redis.set(key, 'someone-else', 'PX', 60_000)],
    ];
    for (const [name, tamper] of tamperings) {
      for (const [lock, keys] of [
        [single, ['lockcheck:lock:r']],
        // Two of three: no quorum is ours any more (one node's key alone still is a quorum's worth of nothing).
        [redlock, ['n0:lock:r', 'n1:lock:r']],
      ] as const) {
        const r = await lock.acquire('r', { ttlMs: 10_000 });
        if (r.kind !== 'granted') throw new Error(`expected a grant, got ${r.kind}`);
        expect((await lock.extend(r.lease, 10_000)).kind).toBe('extended');
        for (const key of keys) await tamper(key);
        expect(await lock.extend(r.lease, 10_000), `${name}, ${keys.length} keys`).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
        const before = await Promise.all(keys.map((key) => redis.get(key)));
        await lock.release(r.lease);
        await lock.settled();
        expect(await Promise.all(keys.map((key) => redis.get(key))), name).toEqual(before);
        for (const key of keys) await redis.del(key);
      }
    }
  });

  it('passes replicas on: without a replica every grant is a vote against', async () => {
    const lock = createRedisLock({ nodes: [redis], clock: new ManualClock(), replicas: { count: 1, timeoutMs: 1 } });
    expect(await lock.acquire('r', { ttlMs: 1000 })).toEqual({ kind: 'denied', reason: 'no-quorum' });
  });

  it('defaults: prefix lockcheck, base 0, driftFactor 0.01, margin 2, the system clock', async () => {
    const lock = createRedisLock({ nodes: [redis] });
    const r = await lock.acquire('d', { ttlMs: 10_000 });
    if (r.kind !== 'granted') throw new Error(r.kind);
    expect(r.lease.token).toBe(1n);
    expect(await redis.get('lockcheck:lock:d')).toBe(r.lease.owner);
    const left = r.lease.validUntilMs! - performance.now();
    expect(left).toBeLessThanOrEqual(10_000 - 102);
    expect(left).toBeGreaterThan(5_000);
    await lock.release(r.lease);
  });
});

describe('a connection that reads integer replies as strings (ioredis stringNumbers, for numbers past 2^53)', () => {
  it('the fenced store accepts a write that landed and names the highest exactly; the lock extends and releases its key', async () => {
    const c = new Redis({ ...server(), stringNumbers: true, maxRetriesPerRequest: 1, connectTimeout: 5_000, commandTimeout: 5_000 });
    try {
      const store = redisFencedStore(c, 'strict', { prefix: 'sn' });
      expect(await store.write('r', MAX - 1n, 'a')).toEqual({ kind: 'accepted' });
      expect(await store.write('r', MAX - 1n, 'b')).toEqual({ kind: 'rejected', highest: MAX - 1n });
      expect(await store.write('r', MAX, 'c')).toEqual({ kind: 'accepted' });
      expect(await store.read('r')).toEqual({ value: 'c', token: MAX });
      const lock = createRedisLock({ nodes: [c], prefix: 'snl' });
      const r = await lock.acquire('r', { ttlMs: 5_000 });
      if (r.kind !== 'granted') throw new Error(`expected a grant, got ${r.kind}`);
      expect((await lock.extend(r.lease, 60_000)).kind).toBe('extended');
      expect(await redis.pttl('snl:lock:r')).toBeGreaterThan(5_000);
      await lock.release(r.lease);
      expect(await redis.exists('snl:lock:r')).toBe(0);
    } finally {
      c.disconnect();
    }
  });
});

describe('redisFencedStore', () => {
  it('refuses a transactional policy and a value that is no string', async () => {
    expect(() => redisFencedStore(redis, 'transactional')).toThrow(expect.objectContaining({ code: 'invalid-config', message: 'invalid-config: a Redis store cannot be transactional' }));
    const store = redisFencedStore(redis, 'strict');
    await expect(store.write('r', 1n, 5 as unknown as string)).rejects.toThrow(expect.objectContaining({ code: 'precondition', message: 'precondition: value must be a string' }));
    await expect(store.write('r', -1n, 'v')).rejects.toThrow(InvalidInputError);
    expect(await redis.exists('lockcheck:store:r')).toBe(0);
  });

  it('a value past Redis\'s 512 MiB bulk string limit is refused before it is sent (precondition), and the connection stays up', async () => {
    const store = redisFencedStore(redis, 'strict', { prefix: 'huge' });
    // 2^28 + 1 characters of two UTF-8 bytes each: 512 MiB + 2 bytes (a one-byte string in memory, never encoded).
    const e = await thrown(store.write('r', 1n, '\u00e9'.repeat(2 ** 28 + 1)));
    expect(e).toBeInstanceOf(InvalidInputError);
    expect(e).toMatchObject({ code: 'precondition', message: `precondition: value too large for a Redis store cell: ${2 ** 29 + 2} bytes, at most ${2 ** 29} (Redis's default proto-max-bulk-len)` });
    expect(await redis.exists('huge:store:r')).toBe(0);
    expect(await store.write('r', 1n, 'small')).toEqual({ kind: 'accepted' });
  });

  it("a cell holding data the store did not write is ServerRefusedError('schema'), never a SyntaxError or an outage; a lock over such a counter throws the same", async () => {
    const store = redisFencedStore(redis, 'strict', { prefix: 'foreign' });
    await redis.hset('foreign:store:r', 'value', 'v', 'token', 'not-a-token');
    await expect(store.read('r')).rejects.toThrow(expect.objectContaining({ name: 'ServerRefusedError', code: 'schema', serverCode: 'UnexpectedValue', message: 'schema (UnexpectedValue): redis key foreign:store:r does not hold a lockcheck cell (token is not a token)' }));
    await redis.hset('foreign:store:h', 'highest', 'zzzzzzzzzzzzzzzzzzzzzzzzz');
    await expect(store.write('h', 5n, 'x')).rejects.toThrow(expect.objectContaining({ code: 'schema', serverCode: 'UnexpectedValue', message: expect.stringContaining('highest is not a token') as string }));
    // A highest token with leading zeros (edited by hand) compares wrongly as text: refused as foreign, not a rejection naming 5.
    await redis.hset('foreign:store:z', 'highest', '005');
    await expect(store.write('z', 10n, 'x')).rejects.toThrow(expect.objectContaining({ code: 'schema', serverCode: 'UnexpectedValue', message: 'schema (UnexpectedValue): redis key foreign:store:z does not hold a lockcheck cell (highest is not a token as the store writes it)' }));
    await redis.set('foreign:store:s', 'a plain string');
    for (const call of [() => store.write('s', 5n, 'x'), () => store.read('s')]) await expect(call()).rejects.toThrow(expect.objectContaining({ name: 'ServerRefusedError', code: 'schema', serverCode: 'WRONGTYPE' }));
    expect(await redis.get('foreign:store:s')).toBe('a plain string');
    const lock = createRedisLock({ nodes: [redis], prefix: 'foreign', requestTimeoutMs: 20_000 });
    await redis.set('foreign:token:c', 'x');
    await expect(lock.acquire('c', { ttlMs: 1000, retries: 3 })).rejects.toThrow(expect.objectContaining({ name: 'ServerRefusedError', code: 'schema' }));
    expect(await redis.exists('foreign:lock:c')).toBe(0);
  });

  it('strict: only a larger token writes; the rejection names the highest', async () => {
    const store = redisFencedStore(redis, 'strict', { prefix: 's' });
    expect(await store.read('r')).toEqual({ value: null, token: null });
    expect(await store.write('r', 5n, 'a')).toEqual({ kind: 'accepted' });
    expect(await store.write('r', 5n, 'b')).toEqual({ kind: 'rejected', highest: 5n });
    expect(await store.write('r', 4n, 'c')).toEqual({ kind: 'rejected', highest: 5n });
    expect(await store.write('r', MAX, 'd')).toEqual({ kind: 'accepted' });
    expect(await store.read('r')).toEqual({ value: 'd', token: MAX });
    expect(await redis.hget('s:store:r', 'highest')).toBe(MAX.toString());
  });

  it('monotonic: an equal token writes, a smaller one does not', async () => {
    const store = redisFencedStore(redis, 'monotonic');
    expect(await store.write('r', 10n, 'a')).toEqual({ kind: 'accepted' });
    expect(await store.write('r', 10n, 'b')).toEqual({ kind: 'accepted' });
    expect(await store.write('r', 9n, 'c')).toEqual({ kind: 'rejected', highest: 10n });
    expect(await store.read('r')).toEqual({ value: 'b', token: 10n });
  });

  it('a write or read with no reply in time is a TimeoutError on the store\'s clock (the write\'s outcome unknown); a bad timeoutMs is refused', async () => {
    // A server that accepts and never answers (a black hole): the connection's commands wait until the bound.
    const hole = createServer(() => undefined);
    await new Promise<void>((resolve) => hole.listen(0, '127.0.0.1', resolve));
    const dead = new Redis({ host: '127.0.0.1', port: (hole.address() as AddressInfo).port, enableReadyCheck: false, maxRetriesPerRequest: null });
    dead.on('error', () => undefined);
    const clock = new ManualClock();
    const store = redisFencedStore(dead, 'strict', { timeoutMs: 250, clock });
    try {
      const write = thrown(store.write('r', 1n, 'v'));
      const read = thrown(store.read('r'));
      clock.advance(249);
      clock.advance(1);
      for (const e of [await write, await read]) {
        expect(e).toBeInstanceOf(TimeoutError);
        expect((e as Error).message).toMatch(/redis fenced store (write|read).*250/);
      }
    } finally {
      dead.disconnect();
      await new Promise<void>((resolve) => hole.close(() => resolve()));
    }
    for (const timeoutMs of [0, -1, 1.5, Number.NaN]) expect(() => redisFencedStore(redis, 'strict', { timeoutMs })).toThrow(InvalidInputError);
  });

  it('failures are typed: a closed connection UnavailableError, wrong credentials ConnectionConfigError, an ACL without the script or the keys ServerRefusedError NOPERM; each with its cause', async () => {
    const closed = client();
    closed.disconnect();
    const gone = await thrown(redisFencedStore(closed, 'strict').write('r', 1n, 'v'));
    expect(gone).toBeInstanceOf(UnavailableError);
    expect((gone as Error).cause).toBeInstanceOf(Error);
    const wrong = client({ password: 'wrong-password' });
    try {
      expect(await thrown(redisFencedStore(wrong, 'strict').write('r', 1n, 'v'))).toMatchObject({ name: 'ConnectionConfigError', code: 'authentication' });
    } finally {
      wrong.disconnect();
    }
    await redis.call('ACL', 'SETUSER', 'storenoscripts', 'on', '>pw1', '~*', '+hmget');
    await redis.call('ACL', 'SETUSER', 'storenokeys', 'on', '>pw2', '~other:*', '+@all');
    try {
      for (const [username, password] of [['storenoscripts', 'pw1'], ['storenokeys', 'pw2']] as const) {
        const c = client({ username, password });
        try {
          const e = await thrown(redisFencedStore(c, 'strict').write('r', 1n, 'v'));
          expect(e).toBeInstanceOf(ServerRefusedError);
          expect(e).toMatchObject({ code: 'permission', serverCode: 'NOPERM' });
          expect((e as Error).cause).toBeInstanceOf(Error);
        } finally {
          c.disconnect();
        }
      }
      const reader = client({ username: 'storenokeys', password: 'pw2' });
      try {
        expect(await thrown(redisFencedStore(reader, 'strict').read('r'))).toMatchObject({ name: 'ServerRefusedError', code: 'permission' });
      } finally {
        reader.disconnect();
      }
    } finally {
      await redis.call('ACL', 'DELUSER', 'storenoscripts', 'storenokeys');
    }
    expect(await redis.exists('lockcheck:store:r')).toBe(0);
  });

  it('unfenced: every write lands; highest stays the largest', async () => {
    const store = redisFencedStore(redis, 'unfenced');
    expect(await store.write('r', 10n, 'a')).toEqual({ kind: 'accepted' });
    expect(await store.write('r', 2n, 'b')).toEqual({ kind: 'accepted' });
    expect(await store.read('r')).toEqual({ value: 'b', token: 2n });
    expect(await redis.hget('lockcheck:store:r', 'highest')).toBe('10');
  });
});

describe('LuaScript', () => {
  it('a command longer than JOINED_MAX goes out as a Buffer with the same bytes as the string form; a store value that long (multibyte) round-trips, on a connection still opening too', async () => {
    const script = new LuaScript(`return redis.call('SET', KEYS[1], ARGV[1])`, 1);
    const socket = {};
    const small = script.writable(socket, ['sha', '1', 'k', 'v']);
    expect(typeof small).toBe('string');
    // JOINED_MAX + 1 characters, half of them two bytes in UTF-8.
    const value = 'é'.repeat(JOINED_MAX / 2) + 'x'.repeat(JOINED_MAX / 2 + 1);
    const big = script.writable(socket, ['sha', '1', 'k', value]);
    expect(Buffer.isBuffer(big)).toBe(true);
    const evalsha = (s: string): string => `$${Buffer.byteLength(s)}\r\n${s}\r\n`;
    expect((big as Buffer).equals(Buffer.from(`*5\r\n${evalsha('evalsha')}${evalsha(script.sha)}${evalsha('1')}${evalsha('k')}${evalsha(value)}`))).toBe(true);
    // Through a fenced store, the write queued while the connection opens (ioredis writes it from its connect handler).
    const c = new Redis({ ...server(), lazyConnect: true, maxRetriesPerRequest: 1, commandTimeout: 10_000 });
    try {
      const store = redisFencedStore(c, 'strict', { prefix: 'big', timeoutMs: 10_000 });
      const written = store.write('r', 1n, value);
      void c.connect().catch(() => undefined);
      expect(await written).toEqual({ kind: 'accepted' });
      const read = await store.read('r');
      expect(read.token).toBe(1n);
      expect(read.value === value).toBe(true);
    } finally {
      c.disconnect();
    }
  });

  it('sends EVAL the first time on a socket, EVALSHA after; honours the connection keyPrefix', async () => {
    const c = new Redis({ ...server(), lazyConnect: true, keyPrefix: 'kp:', maxRetriesPerRequest: 1, commandTimeout: 5_000 });
    const script = new LuaScript(`return redis.call('SET', KEYS[1], ARGV[1])`, 1);
    try {
      await c.connect();
      const sent: string[] = [];
      const write = c.stream.write.bind(c.stream);
      c.stream.write = ((chunk: string | Buffer, ...rest: never[]) => (sent.push(String(chunk).split('\r\n')[2]!), write(chunk, ...rest))) as typeof c.stream.write;
      expect(await script.run(c, ['k', 'v1'])).toBe('OK');
      expect(await script.run(c, ['k', 'v2'])).toBe('OK');
      expect(sent).toEqual(['eval', 'evalsha']);
      expect(await redis.get('kp:k')).toBe('v2');
      expect(script.sha).toBe(await redis.script('LOAD', script.lua));
    } finally {
      c.disconnect();
    }
  });

  it('a script command shows ioredis its keys as sent, prefixed (the user-servers run records and deletes keys by them)', async () => {
    const c = new Redis({ ...server(), lazyConnect: true, keyPrefix: 'kp:', maxRetriesPerRequest: 1, commandTimeout: 5_000 });
    try {
      await c.connect();
      const keys: string[][] = [];
      const send = c.sendCommand.bind(c);
      c.sendCommand = ((command: Parameters<Redis['sendCommand']>[0], stream?: never) => (keys.push(command.getKeys().map(String)), send(command, stream))) as Redis['sendCommand'];
      const node = redisLeaseNode(c);
      expect(await node.acquire('r', 'o', 60_000)).toBe(1n);
      expect(await node.release('r', 'o')).toBe(true);
      expect(keys).toEqual([['kp:lockcheck:lock:r', 'kp:lockcheck:token:r', 'kp:lockcheck:minted:r'], ['kp:lockcheck:lock:r']]);
      expect(await redis.get('kp:lockcheck:token:r')).toBe('1');
    } finally {
      c.disconnect();
    }
  });

  it('a NOSCRIPT reply fails that call and the calls already sent behind it, in order; the next call loads the script again (LeaseNode order)', async () => {
    // Its own server: SCRIPT FLUSH would fail other files' script calls on the shared one.
    await onOwnServer(async (c) => {
      const node = redisLeaseNode(c);
      expect(await node.acquire('r', 'o1', 60_000)).toBe(1n);
      expect(await node.release('r', 'o1')).toBe(true);
      await c.script('FLUSH');
      // An acquire and the release sent behind it: defineCommand would resend the acquire as EVAL after the release ran, leaving the key held.
      const [acquired, released] = await Promise.allSettled([node.acquire('r', 'o2', 60_000), node.release('r', 'o2')]);
      expect(acquired.status === 'rejected' && String(acquired.reason)).toMatch(/NOSCRIPT/);
      expect(released.status === 'rejected' && String(released.reason)).toMatch(/NOSCRIPT/);
      expect(await c.get('lockcheck:lock:r')).toBeNull();
      expect(await node.acquire('r', 'o3', 60_000)).toBe(2n);
      expect(await c.script('EXISTS', acquireScript.sha)).toEqual([1]);
    });
  });
});

describe('the script command on connections other than a plain ioredis Redis', () => {
  /** A connection object that passes the calls to the real one, with the prototype given (no PING of its own on it). */
  const wrapper = (proto: object | null, options: object = {}): Redis =>
    Object.assign(Object.create(proto) as object, {
      sendCommand: (c: Parameters<Redis['sendCommand']>[0]) => redis.sendCommand(c),
      call: (...a: Parameters<Redis['call']>) => redis.call(...a),
      options,
    }) as unknown as Redis;

  it("a wrapper whose prototype has no PING, or none at all, or a PING that throws or makes no command, sends with lockcheck's own Command class; without a keyPrefix the keys are as they are", async () => {
    const protos: Array<[string, object | null]> = [
      ['a plain object', Object.prototype],
      ['no prototype', null],
      ['a PING that throws', { ping: () => { throw new Error('no'); } }],
      ['a PING that makes no command', { ping: () => undefined }],
      ['a PING that makes a number', { ping(this: { sendCommand(c: unknown): void }) { this.sendCommand(5); } }],
    ];
    for (const [what, proto] of protos) {
      const node = redisLeaseNode(wrapper(proto));
      expect(await node.acquire(`w-${what}`, 'o', 60_000), what).toBe(1n);
      expect(await redis.get(`lockcheck:lock:w-${what}`), what).toBe('o');
    }
  });

  it('a connection whose ioredis makes commands lockcheck cannot extend (no toWritable) is refused at construction, naming it', () => {
    class Foreign {
      transformReply(): unknown {
        return null;
      }
    }
    const odd = wrapper({ ping(this: { sendCommand(c: unknown): void }) { this.sendCommand(new Foreign()); } });
    expect(() => createRedisLock({ nodes: [redis, odd] })).toThrow(expect.objectContaining({ name: 'InvalidInputError', code: 'invalid-config', message: expect.stringMatching(/^invalid-config: nodes\[1\]: its ioredis has no Command class lockcheck can extend \(toWritable, transformReply\): lockcheck supports ioredis >=5\.0\.0 <7/) }));
  });

  it('a script argument that is not a string is InvalidInputError before anything is queued', () => {
    expect(() => acquireScript.run(redis, ['k1', 'k2', 'k3', 'o', 5 as unknown as string])).toThrow(expect.objectContaining({ name: 'InvalidInputError', code: 'invalid-config', message: 'invalid-config: script argument 4 must be a string, got number' }));
  });

  it('an error reply other than NOSCRIPT keeps the scripts loaded: the next call on the socket is EVALSHA', async () => {
    // Its own server: the command counts are the server's, and other files' calls would add to them.
    await onOwnServer(async (c) => {
      const node = redisLeaseNode(c);
      expect(await node.acquire('a', 'o', 60_000)).toBe(1n);
      // A counter that is no string: the acquire script's INCR fails (WRONGTYPE), a refusal.
      await c.hset('lockcheck:token:b', 'f', 'v');
      await expect(node.acquire('b', 'o', 60_000)).rejects.toMatchObject({ name: 'ServerRefusedError', serverCode: 'WRONGTYPE' });
      await c.config('RESETSTAT');
      expect(await node.acquire('c', 'o', 60_000)).toBe(1n);
      const stats = await c.info('commandstats');
      expect(stats).toMatch(/cmdstat_evalsha:calls=1,/);
      expect(stats).not.toMatch(/cmdstat_eval:/);
    });
  });
});
