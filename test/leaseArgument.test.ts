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
        for (const wrong of [null, undefined, 'r', 7n, {}, { resource: 'r' }]) {
          const e = await refusal(() => call(wrong as never));
          expect(e, `${name}(${String(wrong)})`).toBeInstanceOf(InvalidInputError);
          expect(e).toMatchObject({ code: 'precondition', message: expect.stringContaining(`${name} needs a lease that acquire returned, got`) as string });
        }
      }
    });
  }
});
