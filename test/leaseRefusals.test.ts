import { describe, expect, it } from 'vitest';
import { systemClock } from '../impl/clock.ts';
import { ConnectionConfigError, ServerRefusedError } from '../impl/errors.ts';
import { EtcdLock } from '../impl/etcd/lock.ts';
import { LeaseLock } from '../impl/leaseLock.ts';
import type { LeaseNode } from '../impl/leaseNode.ts';
import { using } from '../impl/using.ts';
import { InvalidInputError } from '../model/errors.ts';
import { clockAt } from '../model/clock.ts';
import { SimNetwork } from '../conformance/sim/network.ts';
import { leaseNodeOver, SimRedisNode } from '../conformance/sim/redisNode.ts';
import { VirtualTime } from '../conformance/sim/time.ts';

/**
 * Every vote path of the lease lock (acquire, its token write-back, extend,
 * release) reads a refusal no retry fixes the same way: when it kept the
 * round off a quorum it is thrown, with its cause, never read as an outage
 * (`no-quorum`); on a minority of Redlock's nodes, with a quorum answering,
 * it is a vote against like an outage. Nodes in memory, answering at once.
 */

type Method = keyof LeaseNode;

/** An in-memory node; `refuse` makes the named methods reject with the error it gives. */
function memoryNode(refuse: Partial<Record<Method, () => unknown>> = {}, counter = 0n): LeaseNode & { holder(resource: string): string | undefined } {
  const holders = new Map<string, string>();
  const counters = new Map<string, bigint>();
  const refused = (m: Method): Promise<never> | undefined => (refuse[m] === undefined ? undefined : Promise.reject(refuse[m]() as Error));
  return {
    acquire: (resource, owner) => {
      const r = refused('acquire');
      if (r !== undefined) return r;
      if (holders.has(resource)) return Promise.resolve(null);
      holders.set(resource, owner);
      const token = (counters.get(resource) ?? counter) + 1n;
      counters.set(resource, token);
      return Promise.resolve(token);
    },
    release: (resource, owner) => {
      const r = refused('release');
      if (r !== undefined) return r;
      if (holders.get(resource) !== owner) return Promise.resolve(false);
      holders.delete(resource);
      return Promise.resolve(true);
    },
    extend: (resource, owner) => refused('extend') ?? Promise.resolve(holders.get(resource) === owner),
    raiseToken: (resource, token) => {
      const r = refused('raiseToken');
      if (r !== undefined) return r;
      if ((counters.get(resource) ?? 0n) < token) counters.set(resource, token);
      return Promise.resolve();
    },
    holder: (resource) => holders.get(resource),
  };
}

const noperm = (): ServerRefusedError => new ServerRefusedError('permission', 'NOPERM', "NOPERM User app has no permissions to run the 'evalsha' command", { cause: new Error('NOPERM') });
const wrongpass = (): ConnectionConfigError => new ConnectionConfigError('authentication', 'WRONGPASS invalid username-password pair');
const outage = (): Error => new Error('connect ECONNREFUSED');

async function granted(lock: LeaseLock, resource: string) {
  const r = await lock.acquire(resource, { ttlMs: 10_000 });
  if (r.kind !== 'granted') throw new Error(`expected a grant, got ${r.kind}`);
  return r.lease;
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    (v) => new Error(`expected a rejection, got ${JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x))}`),
    (e: unknown) => e,
  );
}

/** `n` nodes that grant; after `refuse()`, node i rejects the named methods with `error(i)`, for each i in `refusing`. */
function lockOf(n: number, refusing: number[], methods: Method[], error: (i: number) => unknown) {
  let on = false;
  const nodes = Array.from({ length: n }, () => memoryNode());
  const wrapped = nodes.map((node, i): LeaseNode => {
    const gate = <T>(m: Method, call: () => Promise<T>): Promise<T> => (on && refusing.includes(i) && methods.includes(m) ? Promise.reject(error(i) as Error) : call());
    return {
      acquire: (r, o, t) => gate('acquire', () => node.acquire(r, o, t)),
      release: (r, o) => gate('release', () => node.release(r, o)),
      extend: (r, o, t) => gate('extend', () => node.extend(r, o, t)),
      raiseToken: (r, t) => gate('raiseToken', () => node.raiseToken(r, t)),
    };
  });
  const lock = new LeaseLock({ nodes: wrapped, clock: systemClock, requestTimeoutMs: 5_000 });
  return {
    lock,
    nodes,
    refuse: () => {
      on = true;
    },
  };
}

describe('extend: a refusal is thrown, not no-quorum', () => {
  it('one node: NOPERM is the ServerRefusedError with its cause; WRONGPASS the ConnectionConfigError; a node InvalidInputError too', async () => {
    for (const error of [noperm, wrongpass, () => new InvalidInputError('precondition', 'node closed')]) {
      const w = lockOf(1, [0], ['extend'], error);
      const lease = await granted(w.lock, 'r');
      w.refuse();
      const e = await rejection(w.lock.extend(lease, 10_000));
      expect(e).toBeInstanceOf(error().constructor);
      if (e instanceof ServerRefusedError) expect(e).toMatchObject({ code: 'permission', serverCode: 'NOPERM', cause: expect.any(Error) });
      // The lease is still the holder's until its deadline: the refusal changed nothing on the node.
      expect(lease.signal.aborted).toBe(false);
    }
    // An outage is still no-quorum.
    const down = lockOf(1, [0], ['extend'], outage);
    const lease = await granted(down.lock, 'r');
    down.refuse();
    expect(await down.lock.extend(lease, 10_000)).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
  });

  it('Redlock: a refusal on two of five nodes is a vote against (extended on the quorum); on three it is thrown', async () => {
    const minority = lockOf(5, [0, 1], ['extend'], noperm);
    const lease = await granted(minority.lock, 'r');
    minority.refuse();
    expect(await minority.lock.extend(lease, 10_000)).toMatchObject({ kind: 'extended' });
    const majority = lockOf(5, [0, 1, 2], ['extend'], noperm);
    const held = await granted(majority.lock, 'r');
    majority.refuse();
    expect(await rejection(majority.lock.extend(held, 10_000))).toBeInstanceOf(ServerRefusedError);
  });

  it('Redlock: refusals on two nodes and an outage on a third (no quorum answered) throw the refusal, on extend and on acquire alike', async () => {
    const w = lockOf(5, [0, 1, 2], ['extend', 'acquire'], (i) => (i === 2 ? outage() : noperm()));
    const lease = await granted(w.lock, 'r');
    w.refuse();
    expect(await rejection(w.lock.extend(lease, 10_000))).toBeInstanceOf(ServerRefusedError);
    expect(await rejection(w.lock.acquire('other', { ttlMs: 10_000 }))).toBeInstanceOf(ServerRefusedError);
    // Outages alone on three of five are no-quorum.
    const outages = lockOf(5, [0, 1, 2], ['extend'], outage);
    const held = await granted(outages.lock, 'r');
    outages.refuse();
    expect(await outages.lock.extend(held, 10_000)).toEqual({ kind: 'not-extended', reason: 'no-quorum' });
  });

});

describe('release: a refusal that kept it off a quorum is thrown, after the lease is dropped', () => {
  it('one node: NOPERM is thrown; the lease signal fired; the key stays on the node; an outage or a refusal on a minority of five resolves', async () => {
    const w = lockOf(1, [0], ['release'], noperm);
    const lease = await granted(w.lock, 'r');
    w.refuse();
    const e = await rejection(w.lock.release(lease));
    expect(e).toBeInstanceOf(ServerRefusedError);
    expect(lease.signal.aborted).toBe(true);
    expect(w.nodes[0]!.holder('r')).toBe(lease.owner);
    expect(w.lock.trackedLeases).toBe(0);
    // An outage still resolves, unknown (false); so does a refusal on a minority of five, known (released on the quorum).
    const down = lockOf(1, [0], ['release'], outage);
    const gone = await granted(down.lock, 'r');
    down.refuse();
    await expect(down.lock.release(gone)).resolves.toBe(false);
    const minority = lockOf(5, [3, 4], ['release'], noperm);
    const held = await granted(minority.lock, 'r');
    minority.refuse();
    await expect(minority.lock.release(held)).resolves.toBe(true);
    expect(minority.nodes.slice(0, 3).map((n) => n.holder('r'))).toEqual([undefined, undefined, undefined]);
    // A node used after its close (InvalidInputError) is no refusal for a release, as on etcd and ZooKeeper: it resolves, unknown.
    const closed = lockOf(1, [0], ['release'], () => new InvalidInputError('precondition', 'node closed'));
    const last = await granted(closed.lock, 'r');
    closed.refuse();
    await expect(closed.lock.release(last)).resolves.toBe(false);
  });

  it('Redlock: refusals on two of five, one release done and two still on their way: it waits for them and resolves (the lock is freed on a quorum), in virtual time', async () => {
    const time = new VirtualTime();
    const servers = [0, 1, 2, 3, 4].map(() => new SimRedisNode(time, false, 0, 0n));
    const network = new SimNetwork(time, (e) => (e === 'store' ? { reachable: () => true } : servers[e as number]!));
    let refusing = false;
    let held = false;
    const waiting: Array<() => void> = [];
    const nodes = servers.map((server, i): LeaseNode => {
      const node = leaseNodeOver(network, 0, i, server);
      return {
        ...node,
        acquire: (r, o, t) => node.acquire(r, o, t),
        extend: (r, o, t) => node.extend(r, o, t),
        raiseToken: (r, t) => node.raiseToken(r, t),
        release: (r, o) => {
          if (refusing && i < 2) return Promise.reject(noperm());
          // Nodes 3 and 4 answer only when let go: slow, not down.
          if (held && i >= 3) return new Promise<void>((go) => waiting.push(go)).then(() => node.release(r, o));
          return node.release(r, o);
        },
      };
    });
    const lock = new LeaseLock({ nodes, clock: time.clockOf(() => clockAt()), requestTimeoutMs: 50 });
    const acquired = lock.acquire('job', { ttlMs: 1000 });
    await time.runUntil(acquired, 10_000);
    const r = await acquired;
    if (r.kind !== 'granted') throw new Error(`not granted: ${r.kind}`);
    refusing = true;
    held = true;
    const released = lock.release(r.lease);
    let outcome: unknown = 'pending';
    released.then(
      () => (outcome = 'resolved'),
      (e: unknown) => (outcome = e),
    );
    // Two refusals and one release done: with two nodes still to answer, neither a quorum nor its impossibility is known.
    await time.runUntil(released, 10);
    expect(outcome).toBe('pending');
    for (const go of waiting.splice(0)) go();
    await time.runUntil(released, 40);
    expect(outcome).toBe('resolved');
    expect(servers.slice(2).map((s) => s.holder('job'))).toEqual([null, null, null]);
  });

  it('using(): a refused release rejects it when fn resolved; fn\'s own error wins when fn threw', async () => {
    const w = lockOf(1, [0], ['release'], noperm);
    expect(await rejection(using(w.lock, 'a', { ttlMs: 10_000, extendAtFraction: 0 }, async () => w.refuse()))).toBeInstanceOf(ServerRefusedError);
    const v = lockOf(1, [0], ['release'], noperm);
    const mine = new Error('fn failed');
    expect(
      await rejection(
        using(v.lock, 'b', { ttlMs: 10_000, extendAtFraction: 0 }, async () => {
          v.refuse();
          throw mine;
        }),
      ),
    ).toBe(mine);
  });
});

describe('acquire: the token write-back refused on too many nodes is thrown, and the grant released', () => {
  it('three nodes, the two behind refuse raiseToken: ServerRefusedError, nothing left held', async () => {
    const nodes = [memoryNode({}, 10n), memoryNode({ raiseToken: noperm }), memoryNode({ raiseToken: noperm })];
    const lock = new LeaseLock({ nodes, clock: systemClock, requestTimeoutMs: 5_000 });
    const e = await rejection(lock.acquire('r', { ttlMs: 10_000 }));
    expect(e).toBeInstanceOf(ServerRefusedError);
    await lock.settled();
    expect(nodes.map((n) => n.holder('r'))).toEqual([undefined, undefined, undefined]);
  });
});

describe('etcd release: a refusal that kept the lock from being freed is thrown, by the same rule', () => {
  /** An EtcdNode in memory that grants; deleteIfOwned and revoke answer as `answers` says. */
  function etcdLock(answers: { delete: () => Promise<boolean>; revoke: () => Promise<void> }) {
    const node = {
      grant: () => Promise.resolve({ id: '7', ttlSeconds: 10 }),
      putIfAbsent: () => Promise.resolve({ kind: 'created' as const, createRevision: 5n }),
      keepAlive: () => Promise.resolve(10),
      owns: () => Promise.resolve(true),
      deleteIfOwned: answers.delete,
      revoke: answers.revoke,
      get: () => Promise.resolve(null),
      fencedWrite: () => Promise.resolve({ kind: 'accepted' as const }),
    };
    return new EtcdLock({ node, clock: systemClock });
  }
  const refused = () => Promise.reject(new ServerRefusedError('permission', 'PermissionDenied', 'etcdserver: permission denied'));
  const down = () => Promise.reject(new Error('14 UNAVAILABLE'));

  it('delete and revoke both refused (or one refused, the other out): thrown after the lease is dropped; either one done, or outages alone, resolve', async () => {
    for (const [answers, throws] of [
      [{ delete: refused, revoke: refused }, true],
      [{ delete: down, revoke: refused }, true],
      [{ delete: refused, revoke: () => Promise.resolve() }, false],
      [{ delete: () => Promise.resolve(true), revoke: refused }, false],
      [{ delete: down, revoke: down }, false],
    ] as const) {
      const lock = etcdLock(answers);
      const r = await lock.acquire('r', { ttlMs: 10_000 });
      if (r.kind !== 'granted') throw new Error(`not granted: ${r.kind}`);
      const e = await rejection(lock.release(r.lease));
      if (throws) expect(e).toBeInstanceOf(ServerRefusedError);
      else expect(e).toMatchObject({ message: expect.stringMatching(/^expected a rejection/) });
      expect(r.lease.signal.aborted).toBe(true);
      expect(lock.trackedLeases).toBe(0);
    }
  });
});
