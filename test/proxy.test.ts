import { type Server, type Socket, connect, createServer } from 'node:net';
import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it } from 'vitest';
import { TcpProxy } from '../conformance/env/proxy.ts';

/** A tiny echo server on 127.0.0.1, port 0; remembers its sockets so afterEach can close them. */
interface Echo {
  server: Server;
  port: number;
  sockets: Set<Socket>;
  /** Every connection the echo server accepted, in order. */
  accepted: Socket[];
}

const echoes: Echo[] = [];
const proxies: TcpProxy[] = [];
const clients: Socket[] = [];

async function startEcho(): Promise<Echo> {
  const echo: Echo = { server: createServer(), port: 0, sockets: new Set(), accepted: [] };
  echo.server.on('connection', (socket) => {
    echo.sockets.add(socket);
    echo.accepted.push(socket);
    socket.on('error', () => {});
    socket.on('close', () => echo.sockets.delete(socket));
    socket.pipe(socket);
  });
  echoes.push(echo);
  await new Promise<void>((resolve, reject) => {
    echo.server.once('error', reject);
    echo.server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = echo.server.address();
  if (typeof address !== 'object' || address === null) throw new Error('no echo port');
  echo.port = address.port;
  return echo;
}

async function startProxy(echo: Echo): Promise<TcpProxy> {
  const proxy = await TcpProxy.start({ host: '127.0.0.1', port: echo.port });
  proxies.push(proxy);
  return proxy;
}

function connectClient(port: number): Promise<Socket> {
  const socket = connect({ host: '127.0.0.1', port });
  clients.push(socket);
  return new Promise((resolve, reject) => {
    socket.once('connect', () => {
      socket.off('error', reject);
      socket.on('error', () => {});
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

/** Reads exactly n bytes, failing after timeoutMs (a bound on a positive wait, not a sleep). */
function readBytes(socket: Socket, n: number, timeoutMs = 10_000): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let got = 0;
    const cleanup = (): void => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('close', onClose);
    };
    const onData = (chunk: Buffer): void => {
      chunks.push(chunk);
      got += chunk.length;
      if (got >= n) {
        cleanup();
        resolve(Buffer.concat(chunks));
      }
    };
    const onClose = (): void => {
      cleanup();
      reject(new Error(`socket closed after ${got} of ${n} bytes`));
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`timed out after ${timeoutMs} ms with ${got} of ${n} bytes`));
    }, timeoutMs);
    socket.on('data', onData);
    socket.on('close', onClose);
  });
}

/** Bounded negative check: collects whatever arrives within windowMs (expected: nothing). */
function bytesWithin(socket: Socket, windowMs: number): Promise<Buffer> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const onData = (chunk: Buffer): void => {
      chunks.push(chunk);
    };
    socket.on('data', onData);
    setTimeout(() => {
      socket.off('data', onData);
      resolve(Buffer.concat(chunks));
    }, windowMs);
  });
}

/** Resolves when the socket closes; fails after timeoutMs. */
function closedWithin(socket: Socket, timeoutMs: number): Promise<void> {
  if (socket.closed) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`socket not closed within ${timeoutMs} ms`)), timeoutMs);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

async function roundTrip(socket: Socket, text: string, timeoutMs = 10_000): Promise<string> {
  const reply = readBytes(socket, Buffer.byteLength(text), timeoutMs);
  socket.write(text);
  return (await reply).toString('utf8');
}

afterEach(async () => {
  for (const socket of clients.splice(0)) socket.destroy();
  await Promise.all(proxies.splice(0).map((proxy) => proxy.close()));
  await Promise.all(
    echoes.splice(0).map(
      (echo) =>
        new Promise<void>((resolve) => {
          for (const socket of echo.sockets) socket.destroy();
          echo.server.close(() => resolve());
        }),
    ),
  );
});

describe('TcpProxy', () => {
  it('forwards both ways in pass mode', async () => {
    const echo = await startEcho();
    const proxy = await startProxy(echo);
    expect(proxy.host).toBe('127.0.0.1');
    expect(proxy.port).toBeGreaterThan(0);
    expect(proxy.mode).toEqual({ kind: 'pass' });
    const client = await connectClient(proxy.port);
    expect(await roundTrip(client, 'hello')).toBe('hello');
    expect(await roundTrip(client, 'again')).toBe('again');
    expect(proxy.connections).toBe(1);
  });

  it('adds one-way latency in each direction in delay mode, preserving order', async () => {
    const echo = await startEcho();
    const proxy = await startProxy(echo);
    const client = await connectClient(proxy.port);
    expect(await roundTrip(client, 'warm')).toBe('warm'); // upstream connected
    // A second each way: far above what a loaded machine adds to the pass-mode round trip below.
    proxy.setMode({ kind: 'delay', ms: 1000 });
    expect(proxy.mode).toEqual({ kind: 'delay', ms: 1000 });
    const reply = readBytes(client, 6, 10_000);
    const t0 = performance.now();
    client.write('ab');
    client.write('cd');
    client.write('ef');
    const echoed = (await reply).toString('utf8');
    const elapsed = performance.now() - t0;
    expect(echoed).toBe('abcdef');
    expect(elapsed).toBeGreaterThanOrEqual(1990);
    expect(elapsed).toBeLessThan(10_000);
    // Back to pass: new bytes are forwarded without the delay. A minute's delay set last: bytes still delayed by it or
    // by the second before would take 2 s or more; a round trip through the proxy takes a ms or two, and 1.5 s is what a
    // loaded machine may add.
    proxy.setMode({ kind: 'delay', ms: 60_000 });
    proxy.setMode({ kind: 'pass' });
    const t1 = performance.now();
    expect(await roundTrip(client, 'fast')).toBe('fast');
    expect(performance.now() - t1).toBeLessThan(1500);
  });

  it('drops bytes while black-holed and resumes forwarding new bytes after pass', async () => {
    const echo = await startEcho();
    const proxy = await startProxy(echo);
    const client = await connectClient(proxy.port);
    expect(await roundTrip(client, 'before')).toBe('before');
    expect(echo.accepted.length).toBe(1);

    proxy.setMode({ kind: 'blackhole' });
    client.write('lost');
    // A connection made during the partition is accepted but not forwarded.
    const late = await connectClient(proxy.port);
    late.write('also-lost');
    // Bounded negative check: nothing comes back within 150 ms.
    const [seen, lateSeen] = await Promise.all([bytesWithin(client, 150), bytesWithin(late, 150)]);
    expect(seen.length).toBe(0);
    expect(lateSeen.length).toBe(0);
    expect(echo.accepted.length).toBe(1); // the server never saw the late connection
    expect(proxy.connections).toBe(2);
    expect(client.destroyed).toBe(false);

    proxy.setMode({ kind: 'pass' });
    // Dropped bytes stay dropped: only the new bytes come back.
    expect(await roundTrip(client, 'after')).toBe('after');
    expect(await roundTrip(late, 'late')).toBe('late');
    expect(echo.accepted.length).toBe(2);
  });

  it('resets open connections and new ones in reset mode', async () => {
    const echo = await startEcho();
    const proxy = await startProxy(echo);
    const client = await connectClient(proxy.port);
    expect(await roundTrip(client, 'ping')).toBe('ping');
    const serverSide = echo.accepted[0];
    if (serverSide === undefined) throw new Error('echo server saw no connection');
    const errors: Error[] = [];
    client.on('error', (error) => errors.push(error));

    proxy.setMode({ kind: 'reset' });
    await Promise.all([closedWithin(client, 10_000), closedWithin(serverSide, 10_000)]);
    expect(errors.map((e) => (e as NodeJS.ErrnoException).code)).toEqual(['ECONNRESET']);

    // A new connection is reset at once (the connect itself may succeed or fail).
    const fresh = connect({ host: '127.0.0.1', port: proxy.port });
    clients.push(fresh);
    fresh.on('error', () => {});
    await closedWithin(fresh, 10_000);
    expect(echo.accepted.length).toBe(1);

    proxy.setMode({ kind: 'pass' });
    const again = await connectClient(proxy.port);
    expect(await roundTrip(again, 'back')).toBe('back');
  });

  it('holds server-to-client bytes until release()', async () => {
    const echo = await startEcho();
    const proxy = await startProxy(echo);
    const client = await connectClient(proxy.port);
    expect(await roundTrip(client, 'open')).toBe('open');

    proxy.hold();
    const reply = readBytes(client, 9);
    client.write('held');
    client.write('-more');
    // Bounded negative check: nothing is delivered within 150 ms while held.
    expect((await bytesWithin(client, 150)).length).toBe(0);
    proxy.release();
    expect((await reply).toString('utf8')).toBe('held-more');
    expect(await roundTrip(client, 'free')).toBe('free');
  });

  it('destroys a connection whose held bytes exceed 16 MiB', async () => {
    const echo = await startEcho();
    const proxy = await startProxy(echo);
    const client = await connectClient(proxy.port);
    expect(await roundTrip(client, 'open')).toBe('open');
    proxy.hold();
    const received: Buffer[] = [];
    client.on('data', (chunk: Buffer) => received.push(chunk));
    client.write(Buffer.alloc(17 * 1024 * 1024, 0x61));
    await closedWithin(client, 10_000);
    expect(received.length).toBe(0);
  });

  it('close() stops listening and closes every connection; idempotent', async () => {
    const echo = await startEcho();
    const proxy = await startProxy(echo);
    const client = await connectClient(proxy.port);
    expect(await roundTrip(client, 'x')).toBe('x');
    const port = proxy.port;
    const first = proxy.close();
    expect(proxy.close()).toBe(first);
    await first;
    expect(proxy.connections).toBe(0);
    await closedWithin(client, 10_000);
    await expect(connectClient(port)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });

  it('validates its inputs', async () => {
    await expect(TcpProxy.start({ host: '127.0.0.1', port: 0 })).rejects.toBeInstanceOf(RangeError);
    await expect(TcpProxy.start({ host: '127.0.0.1', port: 65536 })).rejects.toBeInstanceOf(RangeError);
    await expect(TcpProxy.start({ host: '127.0.0.1', port: 1.5 })).rejects.toBeInstanceOf(RangeError);
    await expect(TcpProxy.start({ host: '127.0.0.1', port: '80' as unknown as number })).rejects.toBeInstanceOf(
      TypeError,
    );
    await expect(TcpProxy.start({ host: '', port: 80 })).rejects.toBeInstanceOf(TypeError);

    const echo = await startEcho();
    const proxy = await startProxy(echo);
    expect(() => proxy.setMode({ kind: 'delay', ms: -1 })).toThrow(RangeError);
    expect(() => proxy.setMode({ kind: 'delay', ms: 1.5 })).toThrow(RangeError);
    expect(() => proxy.setMode({ kind: 'delay', ms: 60_001 })).toThrow(RangeError);
    expect(() => proxy.setMode({ kind: 'delay', ms: Number.NaN })).toThrow(RangeError);
    expect(() => proxy.setMode({ kind: 'delay' } as unknown as { kind: 'delay'; ms: number })).toThrow(TypeError);
    expect(() => proxy.setMode({ kind: 'drop' } as unknown as { kind: 'pass' })).toThrow(TypeError);
    expect(proxy.mode).toEqual({ kind: 'pass' });
    proxy.setMode({ kind: 'delay', ms: 60_000 });
    expect(proxy.mode).toEqual({ kind: 'delay', ms: 60_000 });
  });
});
