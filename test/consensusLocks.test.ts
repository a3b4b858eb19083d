import type { Etcd3 } from 'etcd3';
import { noop } from 'cockatiel';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../impl/clock.ts';
import { EtcdLock, etcd3Node, etcdClient, etcdFencedStore, type EtcdNode } from '../impl/etcd/index.ts';
import type { Lease } from '../impl/lease.ts';
import type { AcquireResult } from '../impl/leaseLock.ts';
import { using } from '../impl/using.ts';
import { ZookeeperLock, zookeeperFencedStore, zookeeperNode, type ZookeeperNode, type ZookeeperSession } from '../impl/zookeeper/index.ts';
import { InvalidInputError, ServerRefusedError } from '../impl/errors.ts';

/**
 * The etcd and ZooKeeper locks as the Redis lock behaves, with nodes in
 * memory answering at once (etcd3Node over a stand-in etcd3 client). A
 * programming error (TypeError, RangeError, ...) from a node's call is no
 * outage: the lock rejects with it, as the Redis lock does (impl/round.ts),
 * instead of reading it as `no-quorum` and retrying; the nodes pass it on
 * instead of wrapping it in an UnavailableError. using() takes both locks.
 */

const bug = (): Promise<never> => Promise.reject(new TypeError('a bug in the node'));

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    (v) => new Error(`expected a rejection, got ${JSON.stringify(v)}`),
    (e: unknown) => e,
  );
}
function granted(r: AcquireResult): Lease {
  if (r.kind !== 'granted') throw new Error(`expected granted, got ${JSON.stringify(r)}`);
  return r.lease;
}

/** An EtcdNode in memory that grants, with some calls replaced; `revoked` counts the revokes. */
function etcdNode(over: Partial<EtcdNode> = {}): EtcdNode & { revoked: number } {
  const node = {
    revoked: 0,
    grant: () => Promise.resolve({ id: '7', ttlSeconds: 10 }),
    putIfAbsent: () => Promise.resolve({ kind: 'created' as const, createRevision: 5n }),
    keepAlive: () => Promise.resolve(10),
    owns: () => Promise.resolve(true),
    deleteIfOwned: () => Promise.resolve(true),
    revoke: () => {
      node.revoked++;
      return Promise.resolve();
    },
    get: () => Promise.resolve(null),
    fencedWrite: () => Promise.resolve({ kind: 'accepted' as const }),
    ...over,
  };
  return node;
}

/** A ZookeeperNode in memory that grants, with some calls replaced; `closed` counts the sessions closed. */
function zookeeperNodeInMemory(over: Partial<ZookeeperNode> = {}): ZookeeperNode & { closed: number } {
  const session: ZookeeperSession = { timeoutMs: 10_000, expired: new Promise(() => undefined) };
  const line: string[] = [];
  const node = {
    closed: 0,
    openSession: () => Promise.resolve(session),
    contenders: () => Promise.resolve([...line]),
    enqueue: () => {
      line.push('c-0000000000');
      return Promise.resolve({ name: 'c-0000000000', czxid: 9n });
    },
    touch: () => Promise.resolve(9n),
    watchGone: () => Promise.resolve(),
    deleteOwned: () => Promise.resolve(true),
    closeSession: () => {
      node.closed++;
      return Promise.resolve();
    },
    children: () => Promise.resolve([] as string[]),
    get: () => Promise.resolve(null),
    fencedWrite: () => Promise.resolve({ kind: 'accepted' as const }),
    close: () => undefined,
    ...over,
  };
  return node;
}

describe('EtcdLock: a programming error from its node is thrown, never no-quorum', () => {
  it('from the grant or the put (the put\'s lease revoked), even with retries left', async () => {
    const grantBug = new EtcdLock({ node: etcdNode({ grant: bug }), clock: systemClock });
    expect(await rejection(grantBug.acquire('r', { ttlMs: 10_000, retries: 3 }))).toBeInstanceOf(TypeError);
    const node = etcdNode({ putIfAbsent: () => Promise.reject(new RangeError('out of range')) });
    expect(await rejection(new EtcdLock({ node, clock: systemClock }).acquire('r', { ttlMs: 10_000, retries: 3 }))).toBeInstanceOf(RangeError);
    expect(node.revoked).toBe(1);
  });

  it('from extend (keep-alive or the ownership check), and from release after the lease is dropped', async () => {
    for (const over of [{ keepAlive: bug }, { owns: bug }]) {
      const lock = new EtcdLock({ node: etcdNode(over), clock: systemClock });
      const lease = granted(await lock.acquire('r', { ttlMs: 10_000 }));
      expect(await rejection(lock.extend(lease, 10_000))).toBeInstanceOf(TypeError);
      expect(lease.signal.aborted).toBe(false);
    }
    for (const over of [{ deleteIfOwned: bug }, { revoke: bug }]) {
      const lock = new EtcdLock({ node: etcdNode(over), clock: systemClock });
      const lease = granted(await lock.acquire('r', { ttlMs: 10_000 }));
      expect(await rejection(lock.release(lease))).toBeInstanceOf(TypeError);
      expect(lease.signal.aborted).toBe(true);
      expect(lock.trackedLeases).toBe(0);
    }
  });

  it('using() rejects with it (it threw LockNotAcquiredError no-quorum)', async () => {
    const lock = new EtcdLock({ node: etcdNode({ grant: bug }), clock: systemClock });
    expect(await rejection(using(lock, 'r', { ttlMs: 10_000 }, () => Promise.resolve(1)))).toBeInstanceOf(TypeError);
  });
});

describe('ZookeeperLock: a programming error from its node is thrown, never no-quorum', () => {
  it('from the connect, the line or the create (the session closed), even with retries left', async () => {
    expect(await rejection(new ZookeeperLock({ node: zookeeperNodeInMemory({ openSession: bug }), clock: systemClock }).acquire('r', { ttlMs: 10_000, retries: 3 }))).toBeInstanceOf(TypeError);
    for (const over of [{ contenders: bug }, { enqueue: bug }]) {
      const node = zookeeperNodeInMemory(over);
      expect(await rejection(new ZookeeperLock({ node, clock: systemClock }).acquire('r', { ttlMs: 10_000, retries: 3 }))).toBeInstanceOf(TypeError);
      expect(node.closed).toBe(1);
    }
  });

  it('from extend, and from release after the lease is dropped and its session closed', async () => {
    const lock = new ZookeeperLock({ node: zookeeperNodeInMemory({ touch: bug }), clock: systemClock });
    const lease = granted(await lock.acquire('r', { ttlMs: 10_000 }));
    expect(await rejection(lock.extend(lease, 10_000))).toBeInstanceOf(TypeError);
    const node = zookeeperNodeInMemory({ deleteOwned: bug });
    const releasing = new ZookeeperLock({ node, clock: systemClock });
    const held = granted(await releasing.acquire('r', { ttlMs: 10_000 }));
    expect(await rejection(releasing.release(held))).toBeInstanceOf(TypeError);
    expect(held.signal.aborted).toBe(true);
    expect(node.closed).toBe(1);
    expect(releasing.trackedLeases).toBe(0);
  });

  it('an etcd release is known (true) when the delete or the revoke landed, unknown (false) when neither did: no error either way', async () => {
    const lost = (): Promise<never> => Promise.reject(new Error('14 UNAVAILABLE'));
    const cases: Array<[Partial<EtcdNode>, boolean]> = [[{}, true], [{ deleteIfOwned: lost }, true], [{ revoke: lost }, true], [{ deleteIfOwned: lost, revoke: lost }, false]];
    for (const [over, known] of cases) {
      const lock = new EtcdLock({ node: etcdNode(over), clock: systemClock });
      await expect(lock.release(granted(await lock.acquire('r', { ttlMs: 10_000 })))).resolves.toBe(known);
    }
  });

  it('a ZooKeeper failure of the release is still no error, but an unknown release (false)', async () => {
    const lock = new ZookeeperLock({ node: zookeeperNodeInMemory({ deleteOwned: () => Promise.reject(new Error('CONNECTION_LOSS')) }), clock: systemClock });
    await expect(lock.release(granted(await lock.acquire('r', { ttlMs: 10_000 })))).resolves.toBe(false);
    const answering = new ZookeeperLock({ node: zookeeperNodeInMemory(), clock: systemClock });
    await expect(answering.release(granted(await answering.acquire('r', { ttlMs: 10_000 })))).resolves.toBe(true);
  });

  it('a ZooKeeper release whose contender was gone or another\'s is known (true): the delete was answered, and nothing of the lease is left in line (as a Redis compare-and-delete finding another owner)', async () => {
    const node = zookeeperNodeInMemory({ deleteOwned: () => Promise.resolve(false) });
    const lock = new ZookeeperLock({ node, clock: systemClock });
    const lease = granted(await lock.acquire('r', { ttlMs: 10_000 }));
    await expect(lock.release(lease)).resolves.toBe(true);
    expect(node.closed).toBe(1);
    expect(lease.signal.aborted).toBe(true);
  });
});

describe('etcd3Node passes a programming error on as it is (it was an UnavailableError, read as an outage)', () => {
  const client = (error: Error): Etcd3 =>
    ({
      options: { faultHandling: { global: noop } },
      kv: { txn: () => Promise.reject(error), range: () => Promise.reject(error) },
      leaseClient: { leaseGrant: () => Promise.reject(error), leaseKeepAlive: () => Promise.reject(error), leaseRevoke: () => Promise.reject(error) },
    }) as unknown as Etcd3;

  it('from each call, and through the lock and the fenced store', async () => {
    const error = new TypeError("Cannot read properties of undefined (reading 'revision')");
    const node = etcd3Node(client(error), { clock: systemClock });
    const key = Buffer.from('k');
    for (const call of [node.grant(1), node.putIfAbsent(key, 'v', '1'), node.keepAlive('1'), node.owns(key, '1', 1n), node.deleteIfOwned(key, '1', 1n), node.revoke('1'), node.get(key), node.fencedWrite(key, key, 1n, 'v', 'strict')]) {
      expect(await rejection(call)).toBe(error);
    }
    expect(await rejection(new EtcdLock({ node, clock: systemClock }).acquire('r', { ttlMs: 10_000 }))).toBe(error);
    const store = etcdFencedStore(node, 'strict');
    expect(await rejection(store.write('r', 1n, 'v'))).toBe(error);
    expect(await rejection(store.read('r'))).toBe(error);
  });
});

describe('zookeeperFencedStore reads a cell as the etcd store does', () => {
  it("a node answering what no cell holds is ServerRefusedError('schema', 'UnexpectedValue') naming the znode, never a SyntaxError (ZookeeperNode is public)", async () => {
    for (const [text, why] of [
      ['not json', 'not JSON'],
      ['{"value":"v","token":"x"}', 'token is not a token'],
      ['{"value":"v","token":"9223372036854775808"}', 'token is not a token'],
      // JSON but no object (mutation testing, session h34: null read as an object was a TypeError).
      ['null', 'not a JSON object'],
      ['[]', 'not a JSON object'],
      ['5', 'not a JSON object'],
      ['{"value":5,"token":"1"}', 'value is not a string'],
    ] as const) {
      const store = zookeeperFencedStore(zookeeperNodeInMemory({ get: () => Promise.resolve(text) }), 'strict', { root: '/r' });
      const e = await rejection(store.read('c'));
      expect(e, text).toBeInstanceOf(ServerRefusedError);
      expect(e).toMatchObject({ code: 'schema', serverCode: 'UnexpectedValue', message: `schema (UnexpectedValue): zookeeper znode '/r/cell/c' does not hold a lockcheck cell (${why})` });
    }
    const store = zookeeperFencedStore(zookeeperNodeInMemory({ get: () => Promise.resolve('{"value":"v","token":"9223372036854775807"}') }), 'strict');
    expect(await store.read('c')).toEqual({ value: 'v', token: 2n ** 63n - 1n });
  });
});

describe('using() takes the etcd and ZooKeeper locks', () => {
  it("with each lock's own acquire options (ZooKeeper's waitMs), extending and releasing as for the Redis lock", async () => {
    const zk = zookeeperNodeInMemory();
    const token = await using(new ZookeeperLock({ node: zk, clock: systemClock }), 'r', { ttlMs: 10_000, waitMs: 0, extendAtFraction: 0 }, async (signal, lease) => {
      expect(signal.aborted).toBe(false);
      return lease.token;
    });
    expect(token).toBe(9n);
    expect(zk.closed).toBe(1);
    const etcd = etcdNode();
    const lock = new EtcdLock({ node: etcd, clock: systemClock });
    expect(await using(lock, 'r', { ttlMs: 10_000 }, async (_signal, lease) => lease.token)).toBe(5n);
    expect(etcd.revoked).toBe(1);
    // @ts-expect-error waitMs is ZooKeeper's: the etcd lock's acquire options do not take it (refused at run time too).
    expect(await rejection(using(lock, 'r', { ttlMs: 10_000, waitMs: 0 }, async () => 1))).toMatchObject({ code: 'invalid-config' });
  });
});

describe('etcd tokens are exact past 2^53 (etcd revisions are int64; etcd3 decodes them as decimal strings)', () => {
  it('a create revision of 2^53+1 is the token as it is, and the ownership checks send it back digit for digit', async () => {
    const revision = 2n ** 53n + 1n;
    const sent: unknown[] = [];
    const client = {
      options: { faultHandling: { global: noop } },
      kv: {
        txn: (request: { compare: Array<{ create_revision?: unknown }> }) => {
          sent.push(...request.compare.map((c) => c.create_revision).filter((r) => r !== undefined && r !== 0));
          return Promise.resolve({ succeeded: true, header: { revision: revision.toString() }, responses: [] });
        },
        range: () => Promise.resolve({ kvs: [] }),
      },
      leaseClient: { leaseGrant: () => Promise.resolve({ ID: '7', TTL: '10' }), leaseKeepAlive: () => Promise.reject(new Error('unused')), leaseRevoke: () => Promise.resolve({}) },
    } as unknown as Etcd3;
    const node = etcd3Node(client, { clock: systemClock });
    expect(await node.putIfAbsent(Buffer.from('k'), 'v', '7')).toEqual({ kind: 'created', createRevision: revision });
    const lock = new EtcdLock({ node: { ...node, keepAlive: () => Promise.resolve(10) }, clock: systemClock });
    const lease = granted(await lock.acquire('r', { ttlMs: 10_000 }));
    expect(lease.token).toBe(revision);
    expect((await lock.extend(lease, 10_000)).kind).toBe('extended');
    await lock.release(lease);
    // The owns and delete-if-owned compares: the revision as decimal text, never a double (2^53+1 would be sent as 2^53).
    expect(sent).toEqual([revision.toString(), revision.toString()]);
  });
});

describe('credentials are refused at construction when they have no UTF-8 form (a lone surrogate)', () => {
  // It went out as U+FFFD: two passwords differing only there were one identity on the server (a ZooKeeper digest
  // identity wrote a cell only the other's ACL allowed, on a real ensemble). The secret is never shown.
  const refusedWith = (make: () => unknown): string => {
    try {
      make();
    } catch (error) {
      expect(error).toBeInstanceOf(InvalidInputError);
      expect(error).toMatchObject({ code: 'invalid-config' });
      return (error as Error).message;
    }
    throw new Error('expected a refusal');
  };
  const WANTED = 'must be well-formed Unicode (a lone surrogate has no UTF-8 form: it would go out as U+FFFD), got';

  it('etcdClient auth.username and auth.password; zookeeperNode auth[i].scheme and credentials', () => {
    for (const lone of ['\uD800', '\uDBFF', '\uDC00', 'a\uDFFFb']) {
      expect(refusedWith(() => etcdClient({ hosts: ['h:1'], auth: { username: 'u', password: `s3cret${lone}` } }))).toBe(`invalid-config: auth.password ${WANTED} a string of ${6 + lone.length} characters (not shown: it may hold a secret)`);
      expect(refusedWith(() => etcdClient({ hosts: ['h:1'], auth: { username: `u${lone}`, password: 'p' } }))).toMatch(new RegExp(`^invalid-config: auth\\.username ${WANTED.replace(/[()+]/g, '\\$&')} "u`));
      expect(refusedWith(() => zookeeperNode({ connectString: 'h', clock: systemClock, auth: [{ scheme: 'digest', credentials: 'u:p' }, { scheme: 'digest', credentials: `u:s3cret${lone}` }] }))).toBe(`invalid-config: auth[1].credentials ${WANTED} a string of ${8 + lone.length} characters (not shown: it may hold a secret)`);
      expect(refusedWith(() => zookeeperNode({ connectString: 'h', clock: systemClock, auth: [{ scheme: `digest${lone}`, credentials: 'u:p' }] }))).toMatch(/^invalid-config: auth\[0\]\.scheme must be well-formed Unicode/);
    }
    // A surrogate pair is one character with its UTF-8 form: taken.
    etcdClient({ hosts: ['h:1'], auth: { username: 'u\u{1F600}', password: 'p\u{1F600}' } }).close();
    zookeeperNode({ connectString: 'h', clock: systemClock, auth: [{ scheme: 'digest', credentials: 'u:p\u{1F600}' }] }).close();
  });
});

describe('etcd and ZooKeeper locks: a clock reading that is no finite number', () => {
  // As the Redis lock and store (test/clockReadings.test.ts): a numeric string made deadlines string sums, NaN denied every acquire.
  const readings: ReadonlyArray<readonly [string, unknown]> = [['a numeric string', '3271'], ['NaN', Number.NaN], ['undefined', undefined], ['a bigint', 5n]];
  const turning = (reading: unknown, bad: () => boolean) => ({ now: () => (bad() ? reading : performance.now()) as number, schedule: (atMs: number, fn: () => void) => systemClock.schedule(atMs, fn) });

  it.each(readings)('%s: InvalidInputError before anything is sent; clockOf() is the clock given', async (_what, reading) => {
    let bad = true;
    const etcdCalls: string[] = [];
    const etcd = etcdNode({ grant: () => (etcdCalls.push('grant'), Promise.resolve({ id: '7', ttlSeconds: 10 })) });
    const clock = turning(reading, () => bad);
    const etcdLock = new EtcdLock({ node: etcd, clock });
    expect(etcdLock.clockOf()).toBe(clock);
    expect(await rejection(etcdLock.acquire('r', { ttlMs: 10_000 }))).toMatchObject({ name: 'InvalidInputError', code: 'invalid-config', message: expect.stringContaining('clock.now() must return a finite number of ms') as string });
    expect(etcdCalls).toEqual([]);
    const zkCalls: string[] = [];
    const zk = zookeeperNodeInMemory({ openSession: () => (zkCalls.push('openSession'), Promise.resolve({ timeoutMs: 10_000, expired: new Promise(() => undefined) })) });
    const zkLock = new ZookeeperLock({ node: zk, clock });
    expect(zkLock.clockOf()).toBe(clock);
    expect(await rejection(zkLock.acquire('r', { ttlMs: 10_000 }))).toBeInstanceOf(InvalidInputError);
    expect(zkCalls).toEqual([]);
    // With a good clock both grant; gone bad, extend is refused before it sends, and the lease reads lost (the safe side).
    bad = false;
    const lease = granted(await etcdLock.acquire('r', { ttlMs: 10_000 }));
    bad = true;
    expect(await rejection(etcdLock.extend(lease, 10_000))).toBeInstanceOf(InvalidInputError);
    expect(lease.signal.aborted).toBe(true);
  });
});
