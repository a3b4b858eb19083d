import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withPostgres } from './postgresFixture.ts';
import { RedisServer } from '../conformance/env/redisServer.ts';
import { ServerRefusedError, UnavailableError } from '../impl/errors.ts';
import type { LeaseLock } from '../impl/leaseLock.ts';
import { lockSettings, refusal } from '../impl/postgres/attempts.ts';
import { PostgresSessionLock } from '../impl/postgres/sessionLock.ts';
import { PostgresTransactionLock } from '../impl/postgres/xactLock.ts';
import { createRedisLock, redisLeaseNode } from '../impl/redis/index.ts';
import { replyCode } from '../impl/redis/replyErrors.ts';

/**
 * Issue 17 item 4: a server that refuses only because it is in a passing
 * state (loading, read-only, busy, out of memory for now, short of replicas;
 * PostgreSQL read-only, a transaction already failed, a session terminated)
 * is an outage: `denied: no-quorum`, never a ServerRefusedError (which says
 * no retry can help). Each state is provoked on a real server and checked
 * first on the node itself (its reply carries the state's code), so the
 * lock's answer is known to come from that state.
 */

describe('Redis: a node in a passing state is a vote against, not a refusal', () => {
  let server: RedisServer;
  const clients: Redis[] = [];
  const connect = (): Redis => {
    const c = new Redis({ ...server.connection, maxRetriesPerRequest: 0, retryStrategy: () => null, commandTimeout: 5_000 });
    c.on('error', () => undefined);
    clients.push(c);
    return c;
  };
  let admin: Redis;
  let single: LeaseLock;
  let redlock: LeaseLock;
  let node: ReturnType<typeof redisLeaseNode>;
  beforeAll(async () => {
    // DEBUG for DEBUG RELOAD (a load the test can hold open); events served every 1 KiB loaded; BUSY after 20 ms of a script.
    server = await RedisServer.start({ persistence: 'none', config: ['enable-debug-command local', 'loading-process-events-interval-bytes 1024', 'busy-reply-threshold 20'] });
    admin = connect();
    const lockConnection = connect();
    single = createRedisLock({ nodes: [lockConnection], requestTimeoutMs: 4_000 });
    // Three nodes on one server: every node is in the same state.
    redlock = createRedisLock({ nodes: [connect(), connect(), connect()], requestTimeoutMs: 4_000, prefix: 'rl' });
    node = redisLeaseNode(lockConnection, { prefix: 'probe' });
  });
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await server?.stop();
  });

  /** The node's own reply in the state (an UnavailableError whose cause is the server's reply), then both locks' answers. */
  async function inState(code: string): Promise<void> {
    const probe: unknown = await node.acquire('probe', 'o', 5_000).then(
      (r) => new Error(`the node granted (${String(r)}): the state was not provoked`),
      (e: unknown) => e,
    );
    expect(probe).toBeInstanceOf(UnavailableError);
    expect(((probe as Error).cause as Error).message.startsWith(`${code} `), (probe as Error).message).toBe(true);
    for (const lock of [single, redlock]) expect(await lock.acquire(`r-${code}`, { ttlMs: 5_000 })).toEqual({ kind: 'denied', reason: 'no-quorum' });
  }

  async function grantsAgain(): Promise<void> {
    const r = await single.acquire('after', { ttlMs: 5_000 });
    expect(r.kind).toBe('granted');
    if (r.kind === 'granted') await single.release(r.lease);
  }

  it('READONLY (a replica) and MASTERDOWN (a replica serving no stale data)', async () => {
    // A primary on a port nothing listens on: the node stays a replica with its link down.
    await admin.call('REPLICAOF', '127.0.0.1', '1');
    try {
      await inState('READONLY');
      await admin.call('CONFIG', 'SET', 'replica-serve-stale-data', 'no');
      await inState('MASTERDOWN');
    } finally {
      await admin.call('CONFIG', 'SET', 'replica-serve-stale-data', 'yes');
      await admin.call('REPLICAOF', 'NO', 'ONE');
    }
    await grantsAgain();
  });

  it('OOM (maxmemory reached) and NOREPLICAS (min-replicas-to-write unmet)', async () => {
    await admin.call('CONFIG', 'SET', 'maxmemory', '1');
    try {
      await inState('OOM');
    } finally {
      await admin.call('CONFIG', 'SET', 'maxmemory', '0');
    }
    await admin.call('CONFIG', 'SET', 'min-replicas-to-write', '1');
    try {
      await inState('NOREPLICAS');
    } finally {
      await admin.call('CONFIG', 'SET', 'min-replicas-to-write', '0');
    }
    await grantsAgain();
  });

  it('BUSY (another client\'s script running long)', async () => {
    const looping = connect();
    const loop = looping.call('EVAL', 'while true do end', '0').then(
      () => 'returned',
      (e: Error) => e.message,
    );
    try {
      // Bounded: the server answers BUSY once the script ran busy-reply-threshold.
      await until(async () => (await admin.call('PING').then(() => '', (e: Error) => e.message)).startsWith('BUSY'));
      await inState('BUSY');
    } finally {
      await admin.call('SCRIPT', 'KILL').catch(() => undefined);
    }
    expect(await loop).toMatch(/Script killed/);
    await grantsAgain();
  });

  it('LOADING (a dataset being loaded)', async () => {
    // 3000 keys of 1 KiB at 1 ms each would load for 3 s; the test ends the load as soon as it has seen it.
    await admin.call('DEBUG', 'POPULATE', '3000', 'fill', '1024');
    await admin.call('CONFIG', 'SET', 'key-load-delay', '1000');
    const reloading = connect();
    const reload = reloading.call('DEBUG', 'RELOAD').then(
      () => 'reloaded',
      (e: Error) => e.message,
    );
    try {
      await until(async () => /^loading:1/m.test(String(await admin.call('INFO', 'persistence'))));
      await inState('LOADING');
    } finally {
      await admin.call('CONFIG', 'SET', 'key-load-delay', '0');
    }
    expect(await reload).toBe('reloaded');
    await admin.call('FLUSHALL');
    await grantsAgain();
  });

  it('the code of a script\'s error as Redis before 7 wrapped it is the wrapped reply\'s', () => {
    expect(replyCode("ERR Error running script (call to f_1f8f4cfba6f3375f8c4ec02b9de4361a5dea5c64): @user_script:1: @user_script: 1: -READONLY You can't write against a read only replica.")).toBe('READONLY');
    expect(replyCode("READONLY You can't write against a read only replica. script: 1f8f, on @user_script:1.")).toBe('READONLY');
    expect(replyCode('ERR Error running script (call to f_1f8f): @user_script:1: user_script:1: attempt to compare nil with number')).toBe('ERR');
    expect(replyCode('NOPERM this user has no permissions to run the \'evalsha\' command')).toBe('NOPERM');
  });
});

/** Polls `condition` until it holds, for at most 5 s (the states above come within milliseconds). */
async function until(condition: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('the state did not come within 5 s');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('PostgreSQL: a passing state is no-quorum, not a refusal', () => {
  const db = withPostgres();

  it.each(['session', 'transaction'] as const)('%s lock: a read-only server (25006, a standby not yet promoted) is no-quorum', async (kind) => {
    const readOnly = { ...db.server.connection, options: '-c default_transaction_read_only=on' };
    // The schema exists (made by a writable lock); the read-only one fails at its grant.
    const writable = kind === 'session' ? new PostgresSessionLock({ connection: db.server.connection }) : new PostgresTransactionLock({ connection: db.server.connection });
    const r = await writable.acquire('ro');
    expect(r.kind).toBe('granted');
    await writable.close();
    const probe = new pg.Client(readOnly);
    await probe.connect();
    const code = await probe.query("UPDATE lockcheck_tokens SET token = token WHERE resource = 'ro'").then(
      () => 'updated',
      (e: { code?: string }) => e.code,
    );
    await probe.end();
    expect(code).toBe('25006');
    const lock = kind === 'session' ? new PostgresSessionLock({ connection: readOnly }) : new PostgresTransactionLock({ connection: readOnly });
    try {
      expect(await lock.acquire('ro')).toEqual({ kind: 'denied', reason: 'no-quorum' });
    } finally {
      await lock.close();
    }
  });

  it('transaction lock: taken again inside a transaction that an earlier statement failed (25P02) is no-quorum', async () => {
    const lock = new PostgresTransactionLock({ connection: db.server.connection });
    try {
      const r = await lock.acquire('stacked');
      if (r.kind !== 'granted') throw new Error(`expected a grant, got ${r.kind}`);
      await expect(lock.queryable(r.lease).query('SELECT 1/0')).rejects.toMatchObject({ code: '22012' });
      expect(await lock.acquire('stacked')).toEqual({ kind: 'denied', reason: 'no-quorum' });
      await lock.rollback(r.lease);
    } finally {
      await lock.close();
    }
  });

  it('statements sent together: the first failure is reported (22012, a refusal), not the follow-on 25P02', async () => {
    const client = new pg.Client(db.server.connection);
    await client.connect();
    try {
      (client as unknown as { pipeline: boolean }).pipeline = true;
      const e: unknown = await lockSettings({ connection: db.server.connection })
        .pipelined(client, [['BEGIN'], ['SELECT 1/0'], ['SELECT 1']])
        .then(
          () => new Error('the pipeline succeeded'),
          (error: unknown) => error,
        );
      expect((e as { code?: string }).code).toBe('22012');
      expect(refusal(e)).toBeInstanceOf(ServerRefusedError);
      expect(refusal(e)).toMatchObject({ code: 'statement', serverCode: '22012' });
    } finally {
      await client.end();
    }
  });

  it('session lock: its backend terminated (57P01) between acquires is no-quorum or a fresh session, never a refusal', async () => {
    const lock = new PostgresSessionLock({ connection: db.server.connection });
    try {
      const r = await lock.acquire('terminated');
      if (r.kind !== 'granted') throw new Error(`expected a grant, got ${r.kind}`);
      const { rows } = await db.admin.query<{ ok: boolean }>('SELECT pg_terminate_backend($1) AS ok', [lock.backendPid]);
      expect(rows[0]!.ok).toBe(true);
      const again = await lock.acquire('terminated');
      expect(again.kind === 'granted' || (again.kind === 'denied' && again.reason === 'no-quorum'), JSON.stringify(again.kind)).toBe(true);
    } finally {
      await lock.close();
    }
  });
});
