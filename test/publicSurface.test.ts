import { describe, expect, it } from 'vitest';
import { clockAt } from '../model/clock.ts';
import { LeaseHandle } from '../impl/lease.ts';
import { LeaseLock } from '../impl/leaseLock.ts';
import { EtcdLock } from '../impl/etcd/lock.ts';
import { ZookeeperLock } from '../impl/zookeeper/lock.ts';
import { PostgresTransactionLock } from '../impl/postgres/xactLock.ts';
import { PostgresSessionLock } from '../impl/postgres/sessionLock.ts';
import { SimNetwork } from '../conformance/sim/network.ts';
import { leaseNodeOver, SimRedisNode } from '../conformance/sim/redisNode.ts';
import { VirtualTime } from '../conformance/sim/time.ts';

/**
 * TypeScript's `private` is a compile-time word only: a JavaScript caller
 * can call such a method (skipping the checks of the public one that calls
 * it) or overwrite such a field (a lease's clock or safety margin). What a
 * lock class or a lease shows at run time is therefore exactly its documented
 * API (and, for LeaseLock, its documented extension points for subclasses);
 * internals are ES-private (`#`).
 */
const PUBLIC = {
  LeaseLock: {
    methods: ['acquire', 'extend', 'release', 'settled', 'backgroundRounds', 'trackedLeases', 'clockOf', 'quorum'],
    // Overridable by a subclass (test/fixtures/broken.ts builds the broken designs the suite must catch from them).
    extensionPoints: ['driftMarginMs', 'newOwner', 'newLease', 'nodes', 'validityStartMs', 'holds', 'mintToken', 'fanOut', 'round'],
  },
  EtcdLock: { methods: ['acquire', 'extend', 'release', 'trackedLeases', 'clockOf'], extensionPoints: [] },
  ZookeeperLock: { methods: ['acquire', 'extend', 'release', 'trackedLeases', 'clockOf'], extensionPoints: [] },
  PostgresSessionLock: { methods: ['acquire', 'release', 'backendPid', 'close'], extensionPoints: [] },
  PostgresTransactionLock: { methods: ['acquire', 'release', 'rollback', 'withLock', 'leaseFor', 'queryable', 'backendPids', 'close'], extensionPoints: [] },
  LeaseHandle: { methods: ['validUntilMs', 'signal', 'lost', 'extendTo', 'limitTo', 'lose', 'releaseUnconfirmed'], extensionPoints: ['fireAtMs'] },
} as const;

function prototypeNames(c: { prototype: object }): string[] {
  return Object.getOwnPropertyNames(c.prototype)
    .filter((n) => n !== 'constructor')
    .sort();
}

describe('the lock classes show only their API at run time', () => {
  it.each([
    ['LeaseLock', LeaseLock],
    ['EtcdLock', EtcdLock],
    ['ZookeeperLock', ZookeeperLock],
    ['PostgresSessionLock', PostgresSessionLock],
    ['PostgresTransactionLock', PostgresTransactionLock],
    ['LeaseHandle', LeaseHandle],
  ] as const)('%s: its prototype holds its public methods and documented extension points, nothing else', (name, c) => {
    const api = PUBLIC[name];
    expect(prototypeNames(c)).toEqual([...api.methods, ...api.extensionPoints].sort());
  });

  it('a granted lease shows its resource, owner and token; its clock and margins, and the lock\'s, cannot be reached or changed', async () => {
    const time = new VirtualTime();
    const node = new SimRedisNode(time, false, 0, 0n);
    const network = new SimNetwork(time, (e) => (e === 'store' ? { reachable: () => true } : node));
    const clock = time.clockOf(() => clockAt());
    const lock = new LeaseLock({ nodes: [leaseNodeOver(network, 0, 0, node)], clock, safetyMarginMs: 5 });
    const acquiring = lock.acquire('r', { ttlMs: 100 });
    await time.runUntil(acquiring, 1_000);
    const result = await acquiring;
    if (result.kind !== 'granted') throw new Error(`not granted: ${JSON.stringify(result)}`);
    const lease = result.lease;
    // The margins a subclass reads are fixed at construction.
    for (const field of ['clock', 'driftFactor', 'clockMarginMs']) expect(() => Object.assign(lock, { [field]: 0 }), field).toThrow(TypeError);
    expect(Object.keys(lease).sort()).toEqual(['owner', 'resource', 'token']);
    expect('clock' in lease || 'safetyMarginMs' in lease).toBe(false);
    // The margin given to the lock still brings the signal forward (fires 5 ms before the deadline).
    const deadline = lease.validUntilMs!;
    await time.advanceTo(deadline - 6);
    expect(lease.signal.aborted).toBe(false);
    await time.advanceTo(deadline - 5);
    expect(lease.signal.aborted).toBe(true);
  });
});
