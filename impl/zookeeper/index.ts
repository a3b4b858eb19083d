/**
 * The ZooKeeper lock (spec 7.10 `zookeeper`): ZooKeeper's lock recipe
 * (ephemeral sequential contenders, lowest owns) with a session per lease
 * and the contender's create zxid as fencing token; and a fenced store in
 * ZooKeeper guarded by it.
 */
export { ZookeeperLock } from './lock.ts';
export type { ZookeeperLockOptions, ZookeeperAcquireOptions } from './lock.ts';
export { zookeeperNode } from './node.ts';
export type { ZookeeperNode, ZookeeperNodeOptions, ZookeeperSession } from './node.ts';
export { zookeeperFencedStore } from './store.ts';
export type { ZookeeperStoreOptions } from './store.ts';
