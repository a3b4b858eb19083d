import { describe, expect, it } from 'vitest';
import { withPostgres } from './postgresFixture.ts';
import type { MonotonicClock } from '../impl/clock.ts';
import { systemClock } from '../impl/clock.ts';
import type { Lease } from '../impl/lease.ts';
import { advisoryKey } from '../impl/postgres/keys.ts';
import { PostgresSessionLock } from '../impl/postgres/sessionLock.ts';
import type { Row } from '../impl/postgres/wire/connection.ts';
import { EncodedCall, PreparedStatement, WireConnection } from '../impl/postgres/wire/connection.ts';
import { WireConnectionError, WireServerError } from '../impl/postgres/wire/errors.ts';

/**
 * Calls encoded once and sent many times (EncodedCall; the session lock keeps
 * a resource's calls per lock): each must reach its own statement with its
 * own parameters however the calls interleave, on every connection that
 * prepared the statement, and a lock's cached calls must grant, mint and
 * unlock the resource they were made for, past the cache's bound and across
 * a reconnection. Checked against a real PostgreSQL 15: the advisory keys
 * the session holds (pg_locks) and the tokens minted.
 */
const db = withPostgres();

const connect = (): Promise<WireConnection> => WireConnection.connect({ ...db.server.connection, timeoutMs: 5_000, clock: systemClock });

/** A seeded generator (mulberry32): the interleavings are the same on every run. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The advisory keys `pid` holds, as the signed 64-bit keys the lock takes (classid the high half, objid the low). */
async function heldKeys(pid: number | null): Promise<bigint[]> {
  const r = await db.admin.query<{ classid: string; objid: string }>("SELECT classid::text, objid::text FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = $1 ORDER BY classid, objid", [pid]);
  return r.rows.map((x) => BigInt.asIntN(64, (BigInt(x.classid) << 32n) | BigInt(x.objid))).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

const keys = (...resources: string[]): bigint[] => resources.map((r) => advisoryKey(r)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));

describe('calls encoded once', () => {
  it('go to their own statement with their own parameters, interleaved and pipelined, on any connection that prepared it; elsewhere the server says so', async () => {
    const one = new PreparedStatement('t_enc_one', "SELECT 'one:' || $1::text");
    const two = new PreparedStatement('t_enc_two', "SELECT 'two:' || $1::text || ':' || coalesce($2::text, 'null')");
    const calls: [EncodedCall, Row[]][] = [
      [new EncodedCall(one, ['a']), [['one:a']]],
      [new EncodedCall(one, ['bé']), [['one:bé']]],
      [new EncodedCall(two, ['x', 'y']), [['two:x:y']]],
      [new EncodedCall(two, ['x', null]), [['two:x:null']]],
      [new EncodedCall(two, ['', 'z']), [['two::z']]],
    ];
    const a = await connect();
    const b = await connect();
    const c = await connect();
    try {
      await a.prepare([one, two]);
      // Another connection, its statements parsed in the other order: the bytes name a statement, not a connection.
      await b.prepare([two, one]);
      const next = random(17);
      for (const conn of [a, b]) {
        const sent: Promise<[Row[], Row[]]>[] = [];
        for (let i = 0; i < 300; i++) {
          const [call, expected] = calls[Math.floor(next() * calls.length)]!;
          // Both forms, mixed in one pipeline: the promise and the callback from the read loop.
          const got =
            next() < 0.5
              ? conn.send(call)
              : new Promise<Row[]>((resolve, reject) => conn.sendWith(call, (e, rows) => (e === null ? resolve(rows) : reject(e))));
          sent.push(got.then((rows) => [rows, expected]));
        }
        for (const [rows, expected] of await Promise.all(sent)) expect(rows).toEqual(expected);
      }
      // A connection that never prepared the statement: the server's error (26000), for that call only.
      await c.prepare([one]);
      await expect(c.send(calls[2]![0])).rejects.toMatchObject({ name: 'WireServerError', code: '26000' });
      expect(await c.send(calls[0]![0])).toEqual([['one:a']]);
      // On a connection gone, the callback runs at once with the loss.
      c.destroy();
      let late: Error | null = null;
      c.sendWith(calls[0]![0], (e) => (late = e));
      expect(late).toBeInstanceOf(WireConnectionError);
      expect(late).not.toBeInstanceOf(WireServerError);
    } finally {
      c.destroy();
      await a.end();
      await b.end();
    }
  });

  it('a call whose send throws before anything is written (the clock) fails through its callback, once, and leaves no stray call to take the next reply', async () => {
    let broken = false;
    const clock: MonotonicClock = {
      now: () => {
        if (broken) throw new Error('clock broken');
        return systemClock.now();
      },
      schedule: (at, fn) => systemClock.schedule(at, fn),
    };
    const c = await WireConnection.connect({ ...db.server.connection, timeoutMs: 5_000, clock });
    try {
      const one = new PreparedStatement('t_enc_clock', "SELECT 'one:' || $1::text");
      await c.prepare([one]);
      broken = true;
      const seen: (Error | null)[] = [];
      expect(() => c.sendWith(new EncodedCall(one, ['lost']), (e) => seen.push(e))).not.toThrow();
      broken = false;
      expect(seen).toHaveLength(1);
      expect(seen[0]).toMatchObject({ message: 'clock broken' });
      // The next call gets its own reply (a stray call left in the queue would take it).
      expect(await c.send(new EncodedCall(one, ['next']))).toEqual([['one:next']]);
      expect(seen).toHaveLength(1);
    } finally {
      await c.end();
    }
  });

  it("a session lock's cached calls grant, mint and unlock their own resource: past the cache's bound, stacked, per lock's tokenBase, and across a reconnection", async () => {
    const lock = new PostgresSessionLock({ connection: db.server.connection });
    const based = new PostgresSessionLock({ connection: db.server.connection, tokenBase: 1000n });
    try {
      const first = await lock.acquire('enc-held');
      if (first.kind !== 'granted') throw new Error(`enc-held: ${first.kind}`);
      expect(first.lease.token).toBe(1n);
      const pid = lock.backendPid;
      // More resources than the lock keeps calls for (1024), so the cache empties while enc-held's lease still holds its calls.
      for (let i = 0; i < 1100; i++) {
        const r = await lock.acquire(`enc-${i}`);
        if (r.kind !== 'granted') throw new Error(`enc-${i}: ${r.kind}`);
        expect(r.lease.token, `enc-${i}`).toBe(1n);
        // Every 50th (and the first few): the session holds exactly enc-held and this resource's keys.
        if (i < 3 || i % 50 === 0) expect(await heldKeys(pid), `enc-${i}`).toEqual(keys('enc-held', `enc-${i}`));
        await lock.release(r.lease);
      }
      expect(await heldKeys(pid)).toEqual(keys('enc-held'));
      await lock.release(first.lease);
      expect(await heldKeys(pid)).toEqual([]);

      // A second grant of a resource whose calls were made before the cache emptied: its own row's next token.
      const again = await lock.acquire('enc-5');
      if (again.kind !== 'granted') throw new Error(`enc-5: ${again.kind}`);
      expect(again.lease.token).toBe(2n);
      // Stacked: taken once more (the same lease), freed only by the second release.
      const stacked = await lock.acquire('enc-5');
      expect(stacked).toEqual({ kind: 'granted', lease: again.lease });
      await lock.release(again.lease);
      expect(await heldKeys(pid)).toEqual(keys('enc-5'));
      // The stacked take minted nothing.
      expect((await db.admin.query("SELECT token::text FROM lockcheck_tokens WHERE resource = 'enc-5'")).rows).toEqual([{ token: '2' }]);
      await lock.release(again.lease);
      expect(await heldKeys(pid)).toEqual([]);

      // Another lock's calls carry its own tokenBase: a fresh resource starts there, a known one goes on from its row.
      const fresh = await based.acquire('enc-based');
      const known = await based.acquire('enc-6');
      expect(fresh.kind === 'granted' && fresh.lease.token).toBe(1001n);
      expect(known.kind === 'granted' && known.lease.token).toBe(2n);
      for (const r of [fresh, known]) if (r.kind === 'granted') await based.release(r.lease);
      // Both locks encode a resource not yet minted (the other lock is denied while an admin session holds its key): each lock's grant starts from its own base.
      await db.admin.query('SELECT pg_advisory_lock($1::bigint)', [advisoryKey('enc-shared').toString()]);
      expect(await based.acquire('enc-shared')).toEqual({ kind: 'denied', reason: 'held' });
      await db.admin.query('SELECT pg_advisory_unlock($1::bigint)', [advisoryKey('enc-shared').toString()]);
      const mine = await lock.acquire('enc-shared');
      expect(mine.kind === 'granted' && mine.lease.token).toBe(1n);
      if (mine.kind === 'granted') await lock.release(mine.lease);

      // A reconnection: the new connection parses the same statements under the same names, and the cached calls go to them.
      const held = await lock.acquire('enc-7');
      if (held.kind !== 'granted') throw new Error(`enc-7: ${held.kind}`);
      const lost = new Promise<void>((resolve) => held.lease.signal.addEventListener('abort', () => resolve(), { once: true }));
      await db.admin.query('SELECT pg_terminate_backend($1, 5000)', [pid]);
      await bounded(lost, 'the lease on the terminated session to fire');
      const after = await lock.acquire('enc-7');
      if (after.kind !== 'granted') throw new Error(`enc-7 after the reconnection: ${after.kind}`);
      expect(lock.backendPid).not.toBe(pid);
      expect(after.lease.token).toBe(3n);
      expect(await heldKeys(lock.backendPid)).toEqual(keys('enc-7'));
      await lock.release(after.lease as Lease);
      expect(await heldKeys(lock.backendPid)).toEqual([]);
    } finally {
      await lock.close();
      await based.close();
    }
  }, 60_000);
});

function bounded<T>(p: Promise<T>, what: string, ms = 10_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms)))]).finally(() => clearTimeout(timer));
}
