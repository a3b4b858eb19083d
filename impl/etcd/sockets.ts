import type { Socket } from 'node:net';
import type { Etcd3 } from 'etcd3';

/** The part of grpc-js's channel credentials (1.x) that makes each connection's TLS (or plaintext) layer over its TCP socket. */
interface Connector {
  connect(socket: Socket): Promise<unknown>;
}
interface Credentials {
  _createSecureConnector(...args: unknown[]): Connector;
}
/** Where etcd3 (1.1) keeps the credentials every host's gRPC clients are made with (one object for all). */
interface Pool {
  readonly hosts: ReadonlyArray<{ readonly channelCredentials: Credentials }>;
}

/**
 * Bounds each connection's handshake by `handshakeMs` and makes the client's
 * close() end every socket it opened. grpc-js has no bound on a TLS (or
 * HTTP/2) handshake and does not cut one in progress when its channel
 * closes: with a member that accepted the TCP connection and went silent
 * (paused, black-holed), the socket stayed open after close(), for ever,
 * and kept the process alive. Reached through the credentials etcd3 made,
 * before any connection is opened (its clients are made at the first call).
 */
export function boundSockets(client: Etcd3, handshakeMs: number): Etcd3 {
  const pool = (client as unknown as { pool?: Partial<Pool> }).pool;
  // Private parts of etcd3 and grpc-js (the versions package-lock.json pins): another shape leaves the client as it is.
  if (!Array.isArray(pool?.hosts)) return client;
  const sockets = new Set<Socket>();
  let closed = false;
  for (const credentials of new Set(pool.hosts.map((h) => h.channelCredentials))) {
    if (typeof credentials?._createSecureConnector !== 'function') continue;
    const make = credentials._createSecureConnector.bind(credentials);
    credentials._createSecureConnector = (...args: unknown[]): Connector => {
      const connector = make(...args);
      const bounded: Connector = Object.create(connector) as Connector;
      bounded.connect = (socket) => {
        // A connection grpc-js opens after the close (a call still in flight at it keeps its channel): none is kept.
        if (closed) socket.destroy();
        sockets.add(socket);
        socket.once('close', () => sockets.delete(socket));
        // No handshake in time: the socket goes, and grpc-js tries again (a call meanwhile fails at its deadline).
        const timer = setTimeout(() => socket.destroy(), handshakeMs);
        timer.unref();
        return connector.connect(socket).finally(() => clearTimeout(timer));
      };
      return bounded;
    };
  }
  const close = client.close.bind(client);
  client.close = (): void => {
    closed = true;
    close();
    // A connection still in its handshake is not cut by the close (grpc-js): end it, and every other socket with it.
    for (const socket of sockets) socket.destroy();
    sockets.clear();
  };
  return client;
}
