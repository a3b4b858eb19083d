import { describe, expect, it } from 'vitest';
import { SimNetwork } from '../conformance/sim/network.ts';
import { leaseNodeOver, SimRedisNode } from '../conformance/sim/redisNode.ts';
import { VirtualTime } from '../conformance/sim/time.ts';
import { EtcdLock } from '../impl/etcd/lock.ts';
import { LeaseLock } from '../impl/leaseLock.ts';
import { PostgresSessionLock } from '../impl/postgres/sessionLock.ts';
import { PostgresTransactionLock } from '../impl/postgres/xactLock.ts';
import { ZookeeperLock } from '../impl/zookeeper/lock.ts';
import { clockAt } from '../model/clock.ts';
import { InvalidInputError } from '../model/errors.ts';

/** What a lock's call did with a wrong lease argument: it must be refused, typed, naming the call. */
async function refusal(call: () => unknown): Promise<unknown> {
  try {
    await call();
  } catch (e) {
    return e;
  }
  return 'accepted';
}

// Nothing here is ever sent: a node call would be a failure of the check itself.
const never = (): Promise<never> => Promise.reject(new Error('a wrong lease argument reached the node'));
const time = new VirtualTime();
const clock = time.clockOf(() => clockAt());
const node = new SimRedisNode(time, false, 0, 0n);
const network = new SimNetwork(time, () => node);
const nowhere = { connection: { host: '127.0.0.1', port: 1 } };

const calls: Record<string, ReadonlyArray<[string, (lease: never) => unknown]>> = {};
{
  const lease = new LeaseLock({ nodes: [leaseNodeOver(network, 0, 0, node)], clock });
  const etcd = new EtcdLock({ node: { grant: never, putIfAbsent: never, keepAlive: never, owns: never, deleteIfOwned: never, revoke: never } as never, clock });
  const zookeeper = new ZookeeperLock({ node: Object.fromEntries(['openSession', 'contenders', 'enqueue', 'touch', 'watchGone', 'deleteOwned', 'closeSession'].map((m) => [m, never])) as never, clock });
  const session = new PostgresSessionLock(nowhere);
  const xact = new PostgresTransactionLock(nowhere);
  calls['LeaseLock (Redis, Redlock)'] = [['release', (l) => lease.release(l)], ['extend', (l) => lease.extend(l, 100)]];
  calls.EtcdLock = [['release', (l) => etcd.release(l)], ['extend', (l) => etcd.extend(l, 1000)]];
  calls.ZookeeperLock = [['release', (l) => zookeeper.release(l)], ['extend', (l) => zookeeper.extend(l, 1000)]];
  calls.PostgresSessionLock = [['release', (l) => session.release(l)]];
  calls.PostgresTransactionLock = [['release', (l) => xact.release(l)], ['rollback', (l) => xact.rollback(l)], ['queryable', (l) => xact.queryable(l)]];
}

describe('a lease argument that is no lease is InvalidInputError naming the call, never a TypeError, and sends nothing', () => {
  for (const [lock, list] of Object.entries(calls)) {
    it(lock, async () => {
      for (const [name, call] of list) {
        // Also a lease no acquire grants: an empty owner; a resource acquire refuses (below).
        for (const wrong of [null, undefined, 'r', 7n, {}, { resource: 'r' }, { resource: 'a', owner: '', token: 1n }]) {
          const e = await refusal(() => call(wrong as never));
          expect(e, `${name}(${typeof wrong === 'object' && wrong !== null ? JSON.stringify(wrong, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v)).slice(0, 80) : String(wrong)})`).toBeInstanceOf(InvalidInputError);
          expect(e).toMatchObject({ code: 'precondition', message: expect.stringContaining(`${name} needs a lease that acquire returned, got`) as string });
        }
        // A resource acquire refuses (empty, a lone surrogate, a NUL, too long) is refused as acquire refuses it.
        for (const resource of ['', 'a\uD800', 'a\0b', 'x'.repeat(100_000)]) {
          const e = await refusal(() => call({ resource, owner: 'o', token: 1n, validUntilMs: null, signal: new AbortController().signal } as never));
          expect(e, `${name}(${JSON.stringify(resource.slice(0, 20))})`).toBeInstanceOf(InvalidInputError);
          expect(e).toMatchObject({ code: 'invalid-resource' });
        }
      }
    });
  }
});

/**
 * A lease these locks do not track is released by what it names (its owner
 * and token), so its token is checked first: a bigint in [0, 2^63-1], both
 * ends included, as every grant carries. Mutation testing (session h34)
 * found both ends unchecked. An owner that names nothing of the lock's
 * (no etcd lease id, no contender in the line) is released at once, with
 * nothing sent.
 */
describe("an untracked lease's token is checked, both ends of [0, 2^63-1] included", () => {
  const untracked: ReadonlyArray<[string, (lease: never) => Promise<unknown>]> = [
    ['EtcdLock', (l) => new EtcdLock({ node: { grant: never, putIfAbsent: never, keepAlive: never, owns: never, deleteIfOwned: never, revoke: never } as never, clock }).release(l)],
    ['ZookeeperLock', (l) => new ZookeeperLock({ node: Object.fromEntries(['openSession', 'contenders', 'enqueue', 'touch', 'watchGone', 'deleteOwned', 'closeSession'].map((m) => [m, never])) as never, clock }).release(l)],
  ];
  const lease = (token: unknown): unknown => ({ resource: 'r', owner: 'names-nothing', token });

  it.each(untracked)('%s: tokens 0 and 2^63-1 are taken', async (_lock, release) => {
    for (const token of [0n, 2n ** 63n - 1n]) await expect(release(lease(token) as never)).resolves.toBe(true);
  });

  it.each(untracked)('%s: a token below 0, above 2^63-1 or not a bigint is refused, naming the range', async (_lock, release) => {
    for (const token of [-1n, 2n ** 63n, 5]) {
      const e = await refusal(() => release(lease(token) as never));
      expect(e, String(token)).toBeInstanceOf(InvalidInputError);
      expect((e as Error).message).toMatch(/^precondition: release needs a lease that acquire returned \(its token a bigint in \[0, 2\^63-1\]\), got /);
    }
  });
});
