import { EventEmitter } from 'node:events';
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

/**
 * What the wrapped connector does with each socket, on a stand-in of the
 * shapes it reaches (grpc-js's connector factory): close() ends every
 * socket still in its handshake, and one that a call still in flight opens
 * after the close (mutation testing, session h34: that path was never
 * run).
 */
describe('boundSockets on the pinned shapes, with stand-in sockets', () => {
  class StandInSocket extends EventEmitter {
    destroyed = false;
    destroy(): void {
      this.destroyed = true;
      this.emit('close');
    }
  }
  function wrapped(handshake: () => Promise<unknown>): { client: Etcd3; connect: (socket: StandInSocket) => Promise<unknown> } {
    const credentials = { _createSecureConnector: () => ({ connect: (_socket: unknown) => handshake() }) };
    const client = { pool: { hosts: [{ channelCredentials: credentials }, { channelCredentials: credentials }] }, close: (): void => undefined } as unknown as Etcd3;
    boundSockets(client, 50);
    return { client, connect: (socket) => credentials._createSecureConnector().connect(socket as never) };
  }

  it('a socket opened after the close is ended at once; close() ends one still in its handshake', () => {
    const { client, connect } = wrapped(() => new Promise(() => undefined));
    const before = new StandInSocket();
    void connect(before);
    client.close();
    expect(before.destroyed).toBe(true);
    const after = new StandInSocket();
    void connect(after);
    expect(after.destroyed).toBe(true);
  });
});

