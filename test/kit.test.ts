import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import type { Lease } from '../impl/lease.ts';
import { LeaseHandle } from '../impl/lease.ts';
import type { BackendUnderTest } from '../conformance/adapter.ts';
import { checkConformance } from '../conformance/check.ts';
import { runLockstep } from '../conformance/lockstep.ts';
import type { Command } from '../model/command.ts';
import { AdapterApiError, offeredFaults } from '../conformance/backendApi.ts';
import { AdapterError } from '../conformance/adapterCall.ts';
import { redisLibraryBackend } from '../conformance/redisLibrary.ts';
import { postgresLibraryBackend } from '../conformance/postgresLibrary.ts';
import { advisoryLock } from '../conformance/adapters/advisoryLock.ts';
import type { TimerLockHandle } from './fixtures/timerLock.ts';
import { TimerLock } from './fixtures/timerLock.ts';

const SEED = Number(process.env.LOCKCHECK_SEED ?? 20161010);

/** An adapter written with the kit alone: the library's calls mapped onto LockClient, nothing else. */
function timerLockBackend(sleep: 'global' | 'promises'): BackendUnderTest {
  return redisLibraryBackend({
    name: `timer-lock (sleeps on ${sleep === 'global' ? 'setTimeout' : 'node:timers/promises'})`,
    // Its deadline is start + ttl (no drift allowance), it has no tokens and takes any input.
    contract: { tokens: 'none', validatesInput: false, driftMargin: { factor: 0, fixedMs: 0, rounding: 'ceil' } },
    lockKey: (resource) => `lock:${resource}`,
    client: ({ nodes, clock }) => {
      const held = new Map<Lease, { handle: LeaseHandle; lock: TimerLockHandle; library: TimerLock }>();
      // The library's deadline is on Date.now(), which the kit runs on the client's clock: convert it to the monotonic clock.
      const onClock = (expiresAt: number): number => clock.now() + (expiresAt - Date.now());
      return {
        async acquire(resource, { ttlMs, retries = 0, retryDelayMs = 0 }) {
          const library = new TimerLock(nodes[0]!, { retries, retryDelayMs, sleep });
          const lock = await library.lock(`lock:${resource}`, ttlMs).catch(() => null);
          if (lock === null) return { kind: 'denied', reason: 'held' };
          const handle = new LeaseHandle(resource, lock.id, 0n, onClock(lock.expiresAt), clock);
          held.set(handle, { handle, lock, library });
          return { kind: 'granted', lease: handle };
        },
        async extend(lease, ttlMs) {
          const h = held.get(lease);
          if (h === undefined || h.handle.signal.aborted) return { kind: 'not-extended', reason: 'expired' };
          if (!(await h.library.extend(h.lock, ttlMs).catch(() => false))) return { kind: 'not-extended', reason: 'expired' };
          const validUntilMs = onClock(h.lock.expiresAt);
          h.handle.extendTo(validUntilMs);
          return { kind: 'extended', validUntilMs };
        },
        async release(lease) {
          const h = held.get(lease);
          if (h === undefined) return;
          held.delete(lease);
          h.handle.lose('released');
          await h.library.unlock(h.lock).catch(() => undefined);
        },
      };
    },
  });
}

const onSetTimeout = timerLockBackend('global');
const onTimersPromises = timerLockBackend('promises');
afterAll(async () => {
  await onSetTimeout.close?.();
  await onTimersPromises.close?.();
});

describe('the adapter kit (lockcheck/kit) for a Redis lock library', () => {
  it("runs the library's own setTimeout retries and Date.now() on the runner's clock: it agrees with the model, and the clocks are restored", async () => {
    const realSetTimeout = globalThis.setTimeout;
    const realNow = Date.now;
    // Every fault on lockcheck's own servers, read from the kit's environment.
    expect(await offeredFaults(onSetTimeout)).toEqual(['advance', 'clock-step', 'clock-drift', 'pause', 'crash-restart', 'partition', 'delay', 'latency', 'slow-node']);
    let retried = 0;
    const r = await checkConformance(onSetTimeout, {
      runs: 25,
      seed: SEED,
      faults: ['advance'],
      onRun: (_run, report) => (retried += report.steps.filter((s) => s.command.kind === 'acquire' && (s.command.retries ?? 0) > 0 && s.endMs > s.startMs).length),
    });
    expect(r.failure?.message ?? null).toBeNull();
    expect(r.warnings).toEqual({});
    // Acquires that retried slept on the client's virtual clock (true time moved during the call), exactly as long as the model says.
    expect(retried).toBeGreaterThan(0);
    expect(globalThis.setTimeout).toBe(realSetTimeout);
    expect(Date.now).toBe(realNow);
  }, 120_000);

  it('warns when the library sleeps on a real timer past the kit (node:timers/promises): its retries leave the model behind', async () => {
    const r = await checkConformance(onTimersPromises, { runs: 25, seed: SEED, faults: ['advance'] });
    expect(Object.keys(r.warnings).join('\n')).toMatch(/real timer\(s\) started inside the library's calls/);
    // The retry that waits on the machine's clock has not finished when the model has it done.
    expect(r.failure?.properties).toEqual(['LIVE-1']);
  }, 120_000);
});

describe("the Redis kit routes every way ioredis sends a command through the run's faults", () => {
  const RETURN_1_SHA = createHash('sha1').update('return 1').digest('hex');
  /** When (on the client's clock) each path's reply reached the library. */
  const heard = new Map<string, number>();
  const paths = redisLibraryBackend({
    name: 'every ioredis path',
    contract: { tokens: 'none', validatesInput: false, deadline: 'none' },
    client: ({ nodes, clock }) => {
      const redis = nodes[0]! as Redis & { lockcheckDel?: (key: string, value: string, cb: (e: unknown, r: unknown) => void) => void };
      redis.defineCommand('lockcheckDel', { numberOfKeys: 1, lua: "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0" });
      const note = (path: string) => (): void => void heard.set(path, clock.now());
      return {
        async acquire(resource, { ttlMs }) {
          // All sent at once, before true time moves on: the client's delay holds every reply.
          const sent = [
            new Promise<void>((resolve, reject) => void redis.set(resource, 'me', 'PX', ttlMs, 'NX', (e) => (e ? reject(e) : (note('callback')(), resolve())))),
            redis.get(resource).then(note('promise')),
            redis.pipeline().get(resource).pttl(resource).exec().then(note('pipeline')),
            redis.multi().get(resource).exec().then(note('multi')),
            new Promise<void>((resolve, reject) => redis.lockcheckDel!(`${resource}:other`, 'x', (e) => (e ? reject(e) : (note('defineCommand')(), resolve())))),
            redis.eval('return 1', 0).then(note('eval')),
            // The script the EVAL above just cached (sent after it on the same connection): a NOSCRIPT is the cache's answer,
            // which the kit gives at once (scriptFallback.ts), so the path is pinned with a script the server has.
            redis.evalsha(RETURN_1_SHA, 0).then(note('evalsha')),
            redis.evalsha('0000000000000000000000000000000000000000', 0).then(note('noscript'), note('noscript')),
          ];
          await Promise.all(sent);
          return { kind: 'granted', lease: new LeaseHandle(resource, 'me', 0n, null, clock) };
        },
        async release() {},
      };
    },
  });
  afterAll(async () => paths.close?.());

  it('promise, callback, pipeline, MULTI, scripts: each reply reaches the library when the delay has passed, not before', async () => {
    const instance = await paths.start({ clients: 1, tokenBase: 0n });
    try {
      await instance.env.faults.delay!(0, 50);
      const work = instance.clients[0]!.acquire('k', { ttlMs: 1000 });
      expect(await instance.env.runUntil(work, 50)).toBe(true);
      expect((await work).kind).toBe('granted');
      expect(Object.fromEntries(heard)).toEqual({ callback: 50, promise: 50, pipeline: 50, multi: 50, defineCommand: 50, eval: 50, evalsha: 50, noscript: 0 });
      expect(instance.warnings?.() ?? []).toEqual([]);
    } finally {
      await instance.close();
    }
  }, 60_000);
});

describe('the Redis kit, for a library with fencing tokens', () => {
  // A fenced lease over one Redis: SET NX PX and a counter per resource, seeded with the run's tokenBase (the kit gives it).
  // The token comes back as the counter's string: a Lua number (a double) would round it past 2^53.
  const ACQUIRE = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then redis.call('SET', KEYS[2], ARGV[3], 'NX') redis.call('INCR', KEYS[2]) return redis.call('GET', KEYS[2]) end return false";
  const RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";
  const fenced = redisLibraryBackend({
    name: 'fenced lease (kit)',
    // Its deadline is start + ttl, as timer-lock's; tokens are the default, bigint.
    contract: { validatesInput: false, driftMargin: { factor: 0, fixedMs: 0, rounding: 'ceil' } },
    lockKey: (resource) => `lock:${resource}`,
    client: ({ client, nodes, clock, tokenBase }) => {
      let grants = 0;
      return {
        async acquire(resource, { ttlMs }) {
          const owner = `c${client}-${++grants}`;
          const startedMs = clock.now();
          const token = (await nodes[0]!.eval(ACQUIRE, 2, `lock:${resource}`, `fence:${resource}`, owner, String(ttlMs), String(tokenBase))) as string | null;
          if (token === null) return { kind: 'denied', reason: 'held' };
          return { kind: 'granted', lease: new LeaseHandle(resource, owner, BigInt(token), startedMs + ttlMs, clock) };
        },
        async release(lease) {
          (lease as LeaseHandle).lose('released');
          return nodes[0]!.eval(RELEASE, 1, `lock:${lease.resource}`, lease.owner).then((n) => n === 1, () => false);
        },
      };
    },
  });
  afterAll(async () => fenced.close?.());

  // The kit read no tokenBase: a library's counter could not start where the model's does, and a correct fenced lock
  // failed FENCE-1 at its first grant (token 1 where the model has tokenBase + 1).
  it.each([0n, 2n ** 53n - 2n, 2n ** 63n - 4n])('gives the adapter the run\'s tokenBase (%s): its grants agree with the model', async (tokenBase) => {
    const schedule: Command[] = [
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 1000 },
      { kind: 'release', client: 0, resource: 'r' },
      { kind: 'acquire', client: 1, resource: 'r', ttlMs: 1000 },
    ];
    const r = await runLockstep(fenced, schedule, { clients: 2, tokenBase });
    expect(r.verdict, JSON.stringify(r.verdict, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}` : v))).toEqual({ kind: 'pass' });
    expect(r.steps.map((s) => (s.actual.kind === 'granted' ? s.actual.token : null))).toEqual([tokenBase + 1n, null, tokenBase + 2n]);
  }, 60_000);
});

describe('the adapter kit for a PostgreSQL lock library', () => {
  /** What each client() was given as tokenBase (the kit passes the run's on, as the Redis kit does). */
  const tokenBases: bigint[] = [];
  // advisory-lock@2.0.0 through the kit alone: a session per call, no deadline, no tokens, no client-side timeout.
  const advisory = postgresLibraryBackend({
    name: 'advisory-lock@2.0.0 (kit)',
    contract: { deadline: 'none', clientTimeout: false, tokens: 'none', validatesInput: false },
    client: ({ url, clock, call, onClose, tokenBase }) => {
      tokenBases.push(tokenBase);
      const unlocks = new Map<Lease, () => Promise<void>>();
      let grants = 0;
      onClose(async () => {
        for (const unlock of unlocks.values()) await unlock().catch(() => undefined);
      });
      return {
        async acquire(resource, { retries = 0, retryDelayMs = 0 }) {
          for (let tries = 0; ; tries++) {
            const unlock = await call(() => advisoryLock(url)(resource).tryLock());
            if (unlock !== undefined) {
              const lease = new LeaseHandle(resource, `c${++grants}`, 0n, null, clock);
              unlocks.set(lease, unlock);
              return { kind: 'granted', lease };
            }
            if (tries >= retries) return { kind: 'denied', reason: 'held' };
            // The retry sleeps on setTimeout: the kit runs it on the client's clock.
            await new Promise((resolve) => setTimeout(resolve, retryDelayMs));
          }
        },
        async release(lease) {
          const unlock = unlocks.get(lease);
          if (unlock === undefined) return;
          unlocks.delete(lease);
          (lease as LeaseHandle).lose('released');
          await call(unlock).catch(() => undefined);
        },
      };
    },
  });
  afterAll(async () => advisory.close?.());

  it('gives it its server, pauses, delays and clock drift; judged by its contract, it agrees with the model', async () => {
    expect(await offeredFaults(advisory)).toEqual(['advance', 'clock-drift', 'pause', 'crash-restart', 'partition', 'delay', 'latency', 'slow-node', 'kill-connection']);
    const r = await checkConformance(advisory, { runs: 10, seed: SEED, faults: ['advance', 'clock-drift', 'pause', 'delay'] });
    expect(r.failure?.message ?? null).toBeNull();
    expect(r.warnings).toEqual({});
  }, 180_000);

  // Each fault that ends the library's session: the lock goes with it, and client 1 gets it.
  const ended: ReadonlyArray<readonly [string, readonly Command[]]> = [
    ['connection loss', [{ kind: 'kill-connection', client: 0 }]],
    ['a server crash and restart', [{ kind: 'crash', node: 0 }, { kind: 'restart', node: 0 }]],
    ['a partition, keepalive past', [{ kind: 'partition', client: 0, node: 0 }, { kind: 'advance', ms: 30 }]],
  ];
  it.each(ended)('%s: the session and its lock end, as the model has it; a library with no error listener is caught dying, and warned of', async (_what, fault) => {
    const schedule: Command[] = [{ kind: 'acquire', client: 0, resource: 'r' }, ...fault, { kind: 'acquire', client: 1, resource: 'r' }];
    const r = await runLockstep(advisory, schedule, { clients: 2, tokenBase: 0n });
    const shown = JSON.stringify(r.verdict, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}` : v));
    expect(r.steps.at(-1)!.actual.kind, shown).toBe('granted');
    // Cut off, client 0 still holds its lease when keepalive has ended its session: two holders, as the model predicts (a finding about the design).
    if (fault[0]!.kind === 'partition') expect(r.verdict.kind === 'property-violation' && r.verdict.violations.map((v) => v.property), shown).toEqual(['MUTEX-1']);
    else expect(r.verdict, shown).toEqual({ kind: 'pass' });
    // advisory-lock@2.0.0's pg.Client has no 'error' listener: the server's goodbye would kill the process (not heard through a cut link).
    if (fault[0]!.kind !== 'partition') expect((r.warnings ?? []).join('\n')).toMatch(/emitted 'error' with no listener/);
  }, 120_000);

  it("a client whose process would have died goes on as a new one, as the model's client does: a lease it gets later is alive", async () => {
    const schedule: Command[] = [{ kind: 'acquire', client: 0, resource: 'r' }, { kind: 'kill-connection', client: 0 }, { kind: 'acquire', client: 0, resource: 'r' }, { kind: 'write', client: 0, resource: 'r', value: 'after' }];
    tokenBases.length = 0;
    const r = await runLockstep(advisory, schedule, { clients: 1, tokenBase: 41n });
    expect(r.verdict, JSON.stringify(r.verdict, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}` : v))).toEqual({ kind: 'pass' });
    expect(r.steps.at(-1)!.actual.kind).toBe('accepted');
    expect(tokenBases).toEqual([41n]);
  }, 60_000);
});

describe("the kit checks the lock calls an adapter's client() gives", () => {
  // The kit wrapped them into the run's LockClient, so the instance check saw functions whatever client() returned: a
  // missing release was judged as the library's (OWN-1, "holds nothing"), a null client() a TypeError from inside the kit.
  const denied = async (): Promise<unknown> => ({ kind: 'denied', reason: 'held' });
  it.each<[string, () => unknown, string]>([
    ['without release', () => ({ acquire: denied }), 'lock calls without release()'],
    ['acquire not a function', () => ({ acquire: 'yes', release: async () => true }), 'lock calls without acquire()'],
    ['extend a string', () => ({ acquire: denied, release: async () => true, extend: 'no' }), 'lock calls without extend() (a function, or absent)'],
    ['null', () => null, 'null, not lock calls'],
  ])('calls %s: AdapterApiError naming the adapter and what is missing, before any command', async (_what, calls, says) => {
    const backend = redisLibraryBackend({ name: 'bad calls', contract: { tokens: 'none', validatesInput: false }, client: calls as never });
    try {
      const e = await runLockstep(backend, [{ kind: 'acquire', client: 0, resource: 'r', ttlMs: 100 }], { clients: 1, tokenBase: 0n }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(AdapterError);
      expect((e as Error).cause).toBeInstanceOf(AdapterApiError);
      expect((e as Error).message).toContain(`start() threw AdapterApiError: bad calls: adapter.client() for client 0 returned ${says}`);
    } finally {
      await backend.close?.();
    }
  }, 60_000);

  it('the PostgreSQL kit too', async () => {
    const backend = postgresLibraryBackend({ name: 'bad pg calls', contract: { tokens: 'none', validatesInput: false }, client: (() => ({ acquire: async () => ({ kind: 'denied', reason: 'held' }) })) as never });
    try {
      const e = await runLockstep(backend, [{ kind: 'acquire', client: 0, resource: 'r' }], { clients: 1, tokenBase: 0n }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(AdapterError);
      expect((e as Error).message).toContain('start() threw AdapterApiError: bad pg calls: adapter.client() for client 0 returned lock calls without release()');
    } finally {
      await backend.close?.();
    }
  }, 120_000);
});
