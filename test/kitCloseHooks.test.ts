import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { LeaseHandle } from '../impl/lease.ts';
import { AdapterError, runLockstep } from '../conformance/index.ts';
import { redisLibraryBackend } from '../conformance/redisLibrary.ts';
import { postgresLibraryBackend } from '../conformance/postgresLibrary.ts';
import { runCloseHooks } from '../conformance/closeHooks.ts';
import type { Command } from '../model/command.ts';

/**
 * The kit's per-run close hooks (parts.onClose: a library's pools and
 * intervals) are the adapter's code. One that throws or never settles must
 * not keep the others from running, nor the kit from its own teardown (its
 * connections, the library clock it installed process-wide, on PostgreSQL the
 * library sessions that would hold locks into the next run); the run then
 * reports the first failure, naming the hook. Before, the first hook that
 * threw skipped every hook after it and the kit's clean-up of sessions, and
 * one that never settled held the whole close (the library clock stayed
 * installed and the run's connections open).
 */
describe('runCloseHooks', () => {
  it('runs every hook, last registered first, past one that throws (sync or not) and one that never settles; says the first failure', async () => {
    const ran: string[] = [];
    const started = performance.now();
    const failure = await runCloseHooks(
      [
        () => void ran.push('a'),
        async () => {
          ran.push('b');
          await new Promise<never>(() => undefined);
        },
        () => {
          ran.push('c');
          throw new Error('pool already closed');
        },
        async () => {
          ran.push('d');
          await Promise.reject(new RangeError('late'));
        },
      ],
      50,
    );
    expect(ran).toEqual(['d', 'c', 'b', 'a']);
    expect(failure?.message).toBe("a close hook of the run (parts.onClose) threw RangeError: late");
    expect(performance.now() - started).toBeLessThan(5000);
    expect(await runCloseHooks([async () => new Promise<never>(() => undefined)], 50)).toEqual(new Error('a close hook of the run (parts.onClose) had not settled after 50 ms of real time'));
    expect(await runCloseHooks([() => undefined, async () => undefined], 50)).toBeNull();
  });
});

describe('the Redis kit, a close hook that throws', () => {
  const ran: string[] = [];
  const backend = redisLibraryBackend({
    name: 'throws in its close hook',
    contract: { tokens: 'none', validatesInput: false },
    client: (parts) => {
      const clock = parts.clock;
      parts.onClose(() => void ran.push('registered first, runs last'));
      parts.onClose(() => {
        throw new Error('pool already closed');
      });
      return {
        acquire: async (resource, { ttlMs }) => ({ kind: 'granted', lease: new LeaseHandle(resource, 'owner', 0n, clock.now() + ttlMs, clock) }),
        release: async () => undefined,
      };
    },
  });
  afterAll(() => backend.close!());
  const acquire: Command = { kind: 'acquire', client: 0, resource: 'r', ttlMs: 1000 };

  it('is reported naming it, after the other hooks ran and the kit tore the run down (its library clock restored)', async () => {
    const realDateNow = Date.now;
    const e = await runLockstep(backend, [acquire], { clients: 1, tokenBase: 0n }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(AdapterError);
    expect((e as Error).message).toBe('adapter throws in its close hook: close() of an instance threw Error: a close hook of the run (parts.onClose) threw Error: pool already closed');
    expect(ran).toEqual(['registered first, runs last']);
    // The kit's Date.now and timers on the client's clock are gone: a later run installs them afresh.
    expect(Date.now).toBe(realDateNow);
  }, 60_000);
});

describe('the PostgreSQL kit, a close hook that throws', () => {
  const ran: string[] = [];
  /** The library sessions the adapter opened and never closed (its close hook throws before it would). */
  const leaked: pg.Client[] = [];
  const ended: string[] = [];
  /** How each session's lock attempt went, and the SQLSTATE a session was ended with. */
  const granted: boolean[] = [];
  const endedWith: string[] = [];
  // Lockcheck's own server (the fixture the kit starts on its first run), stopped by the backend's close hook.
  const backend = postgresLibraryBackend({
    name: 'throws in its close hook (pg)',
    contract: { deadline: 'none', clientTimeout: false, tokens: 'none', validatesInput: false },
    client: (parts) => {
      const { url, clock } = parts;
      parts.onClose(() => void ran.push('registered first, runs last'));
      parts.onClose(() => {
        throw new Error('pool already closed');
      });
      return {
        async acquire(resource) {
          const session = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
          session.on('error', (e: Error & { code?: string }) => void endedWith.push(e.code ?? e.message));
          session.once('end', () => ended.push(resource));
          leaked.push(session);
          await parts.call(() => session.connect());
          const r = await parts.call(() => session.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [resource]));
          granted.push(r.rows[0]!.ok);
          return r.rows[0]!.ok ? { kind: 'granted', lease: new LeaseHandle(resource, `s${leaked.length}`, 0n, null, clock) } : { kind: 'denied', reason: 'held' };
        },
        release: async () => undefined,
      };
    },
  });
  afterAll(async () => {
    await Promise.all(leaked.map((s) => s.end().catch(() => undefined)));
    await backend.close!();
  }, 60_000);
  // A session lock: no ttl.
  const sessionAcquire: Command = { kind: 'acquire', client: 0, resource: 'r' };

  it('is reported naming it, after the other hooks ran and the kit tore the run down: the library sessions it left holding locks ended, its library clock restored', async () => {
    const realDateNow = Date.now;
    const e = await runLockstep(backend, [sessionAcquire], { clients: 1, tokenBase: 0n }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(AdapterError);
    expect((e as Error).message).toBe('adapter throws in its close hook (pg): close() of an instance threw Error: a close hook of the run (parts.onClose) threw Error: pool already closed');
    expect(ran).toEqual(['registered first, runs last']);
    expect(Date.now).toBe(realDateNow);
    // The session the adapter left holding the lock was ended by the kit's teardown, not left to reach into the next run.
    expect(leaked).toHaveLength(1);
    expect(ended).toEqual(['r']);
    // 57P01, admin_shutdown: the server ended it (the kit's pg_terminate_backend), before the kit closed the client's proxy.
    expect(endedWith[0]).toBe('57P01');
    // And the next run on the same backend gets the lock: nothing of the first run holds it.
    ran.length = 0;
    const next = await runLockstep(backend, [sessionAcquire], { clients: 1, tokenBase: 0n }).catch((x: unknown) => x);
    expect((next as Error).message).toContain('pool already closed');
    expect(leaked).toHaveLength(2);
    expect(granted).toEqual([true, true]);
    expect(ran).toEqual(['registered first, runs last']);
  }, 60_000);
});
