import net from 'node:net';

/** A fake PostgreSQL server for the wire client's tests: it answers with whatever bytes a test scripts, including what no PostgreSQL sends. */
export interface FakeServer {
  readonly port: number;
  /** Every chunk the clients sent, in order. */
  readonly received: readonly Buffer[];
  /** Connections accepted so far, and those still open on the server's side. */
  readonly connections: number;
  readonly open: number;
  /** Resolves once no client connection is open on the server's side. */
  allClosed(): Promise<void>;
  /** Closes every client connection, the server staying up. */
  closeClients(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A fake server on a loopback socket: `reply` gets each chunk the client sends (`n`: its index on that connection) and answers with bytes.
 * `halfOpen`: a client's FIN leaves the server's side open (a peer that never closes, as behind a cut link).
 */
export async function fakeServer(reply: (chunk: Buffer, socket: net.Socket, n: number) => void, options: { readonly halfOpen?: boolean } = {}): Promise<FakeServer> {
  const sockets = new Set<net.Socket>();
  const received: Buffer[] = [];
  let connections = 0;
  const waiters: (() => void)[] = [];
  const fake = net.createServer({ allowHalfOpen: options.halfOpen === true }, (socket) => {
    connections++;
    sockets.add(socket);
    socket.on('data', (chunk) => received.push(chunk));
    let n = 0;
    socket.on('data', (chunk) => reply(chunk, socket, n++));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      sockets.delete(socket);
      if (sockets.size > 0) return;
      for (const w of waiters.splice(0)) w();
    });
  });
  await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve));
  return {
    port: (fake.address() as net.AddressInfo).port,
    received,
    get connections() {
      return connections;
    },
    get open() {
      return sockets.size;
    },
    allClosed: () => (sockets.size === 0 ? Promise.resolve() : new Promise<void>((resolve) => waiters.push(resolve))),
    closeClients: () => Promise.all([...sockets].map((s) => new Promise<void>((resolve) => s.end(resolve)))).then(() => undefined),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        fake.close(() => resolve());
      }),
  };
}

export const message = (type: string, body: Buffer = Buffer.alloc(0)): Buffer => {
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeInt32BE(4 + body.length, 1);
  return Buffer.concat([head, body]);
};
export const AUTH_OK = message('R', Buffer.from([0, 0, 0, 0]));
export const READY = message('Z', Buffer.from('I'));
