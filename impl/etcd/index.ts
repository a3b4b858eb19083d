/**
 * The etcd lock (spec 7.6 `etcd-lease`): a lease plus a key created only if
 * absent, the key's create revision as the fencing token; and a fenced store
 * in etcd guarded by it.
 */
export { EtcdLock } from './lock.ts';
export type { EtcdLockOptions } from './lock.ts';
export { etcdClient } from './client.ts';
export type { EtcdClientOptions } from './client.ts';
export { etcd3Node } from './node.ts';
export type { EtcdNode, Etcd3NodeOptions, PutIfAbsent } from './node.ts';
export { etcdFencedStore } from './store.ts';
export type { EtcdStoreOptions } from './store.ts';
