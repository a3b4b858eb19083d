import { EtcdLock, etcd3Node, etcdClient, etcdFencedStore } from '../../impl/etcd/index.ts';
import { ZookeeperLock, zookeeperFencedStore, zookeeperNode } from '../../impl/zookeeper/index.ts';
import type { ClientBackend } from './protocol.ts';
import type { StressClient } from './client.ts';
import { COMMAND_TIMEOUT_MS, leaseStressClient } from './client.ts';
import { sharedClock } from './sharedClock.ts';

/** The stress clients on etcd and ZooKeeper (client.ts loads this module only for them). */

export async function etcdStressClient(b: Extract<ClientBackend, { kind: 'etcd' }>): Promise<StressClient> {
  const client = etcdClient({ hosts: [...b.hosts], tls: b.tls, dialTimeoutMs: COMMAND_TIMEOUT_MS });
  const node = etcd3Node(client, { clock: sharedClock, requestTimeoutMs: COMMAND_TIMEOUT_MS });
  const lock = new EtcdLock({ node, clock: sharedClock });
  return leaseStressClient(lock, etcdFencedStore(node, b.storePolicy), async () => client.close());
}

export async function zookeeperStressClient(b: Extract<ClientBackend, { kind: 'zookeeper' }>): Promise<StressClient> {
  const node = zookeeperNode({ connectString: b.connectString, auth: b.auth, clock: sharedClock, requestTimeoutMs: COMMAND_TIMEOUT_MS });
  const lock = new ZookeeperLock({ node, clock: sharedClock });
  return leaseStressClient(lock, zookeeperFencedStore(node, b.storePolicy), async () => node.close());
}
