import { describe, expect, it } from 'vitest';
import type { Etcd3 } from 'etcd3';
import { boundSockets } from '../../impl/etcd/sockets.ts';
import { etcdClient } from '../../impl/etcd/index.ts';

/**
 * boundSockets reaches into etcd3's and grpc-js's private parts (the pool's
 * hosts, the credentials' connector factory): where they are not as expected
 * (another version), the client is handed back as it is, never a TypeError
 * at etcdClient() that would break every etcd user.
 */
describe('boundSockets on shapes it does not know', () => {
  it('returns the client untouched when the pool or the connector factory is missing', () => {
    const close = (): void => undefined;
    for (const shape of [{ close }, { close, pool: {} }, { close, pool: { hosts: [{ channelCredentials: {} }] } }, { close, pool: { hosts: [{}] } }]) {
      const client = shape as unknown as Etcd3;
      expect(boundSockets(client, 100)).toBe(client);
    }
  });

  it('wraps the real client of the pinned versions (its close ends the sockets it opened)', () => {
    const client = etcdClient({ hosts: ['127.0.0.1:1'] });
    const own = Object.hasOwn(client, 'close');
    client.close();
    expect(own).toBe(true);
  });
});
