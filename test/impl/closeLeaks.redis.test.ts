/**
 * The Redis and Redlock clients after their error paths (a server that is
 * not there, a server killed while a call is out, an acquire that times out
 * on a paused server): once the lock's connections are closed, nothing of
 * the lock is left in this process (no timer, no socket), counted by
 * process.getActiveResourcesInfo() against the count before the lock was made.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freeLoopbackPort } from '../../conformance/env/processes.ts';
import { RedisServer } from '../../conformance/env/redisServer.ts';
import { createRedisLock } from '../../impl/redis/index.ts';
import { activeResources, backToBaseline } from './resources.ts';

let server: RedisServer;
beforeAll(async () => {
  server = await RedisServer.start({ persistence: 'none' });
}, 60_000);
afterAll(async () => {
  await server?.stop();
});

/** A connection as a user of the lock makes one: it fails fast (no retries), its timeouts well above the leak wait's. */
function connection(port: number): Redis {
  const c = new Redis({ host: '127.0.0.1', port, password: server.password, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 20_000, commandTimeout: 20_000, disconnectTimeout: 50 });
  // disconnectTimeout: ioredis's own 2 s timer on a stream it ended (its, not the lock's) ends before the leak wait does.
  c.on('error', () => undefined);
  return c;
}

/** What an acquire ended with: its result's kind, or the rejection's name. */
async function outcome(p: Promise<{ readonly kind: string }>): Promise<string> {
  return p.then(
    (r) => r.kind,
    (e: unknown) => (e instanceof Error ? e.name : String(e)),
  );
}

describe('createRedisLock: nothing left after close, whatever the acquire met', () => {
  it('a server that is not there (connection refused): single node and Redlock', async () => {
    const nowhere = await freeLoopbackPort();
    const baseline = activeResources();
    const single = [connection(nowhere)];
    expect(await outcome(createRedisLock({ nodes: single, requestTimeoutMs: 10_000 }).acquire('r-refused', { ttlMs: 30_000 }))).not.toBe('granted');
    const redlock = [connection(nowhere), connection(nowhere), connection(server.port)];
    expect(await outcome(createRedisLock({ nodes: redlock, requestTimeoutMs: 10_000 }).acquire('r-refused', { ttlMs: 30_000 }))).not.toBe('granted');
    for (const c of [...single, ...redlock]) c.disconnect();
    await backToBaseline(baseline, 'after a refused connection');
  }, 30_000);

  it('an acquire that times out on a paused server', async () => {
    const baseline = activeResources();
    const nodes = [connection(server.port)];
    await nodes[0]!.connect();
    server.pause();
    try {
      expect(await outcome(createRedisLock({ nodes, requestTimeoutMs: 300 }).acquire('r-paused', { ttlMs: 30_000 }))).not.toBe('granted');
    } finally {
      server.resume();
    }
    for (const c of nodes) c.disconnect();
    await backToBaseline(baseline, 'after a timed-out acquire');
  }, 30_000);

  it('a server killed while the acquire is out', async () => {
    const baseline = activeResources();
    const nodes = [connection(server.port), connection(server.port), connection(server.port)];
    await Promise.all(nodes.map((c) => c.connect()));
    server.pause();
    const acquiring = outcome(createRedisLock({ nodes, requestTimeoutMs: 10_000 }).acquire('r-killed', { ttlMs: 30_000 }));
    await server.crash();
    expect(await acquiring).not.toBe('granted');
    for (const c of nodes) c.disconnect();
    const afterCrash = activeResources();
    await server.restart();
    // The restarted server's process and pipes are the environment's: counted in from here.
    const base = new Map(baseline);
    for (const [kind, n] of activeResources()) if ((afterCrash.get(kind) ?? 0) < n) base.set(kind, (base.get(kind) ?? 0) + n - (afterCrash.get(kind) ?? 0));
    await backToBaseline(base, 'after a server killed mid-call');
  }, 30_000);
});
