import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { TimeoutError } from '../../impl/errors.ts';
import { zookeeperNode } from '../../impl/zookeeper/index.ts';
import { PASS_OVER_MS, PassOver } from '../../impl/zookeeper/passOver.ts';
import { ManualClock } from './servers.ts';

/**
 * The choice of member for a new ZooKeeper client (no server): the members
 * in the library's order, those that failed within the window last. The
 * ensemble test is test/impl/zookeeperMemberPaused.test.ts.
 */
const a = { host: '127.0.0.1', port: '2181' };
const b = { host: '127.0.0.1', port: '2182' };
const c = { host: '127.0.0.1', port: 2183 };
const names = (ms: ReadonlyArray<{ readonly port: string | number }>): string[] => ms.map((m) => String(m.port));

describe('PassOver (no server)', () => {
  it('keeps the library\'s order while no member failed', () => {
    const passOver = new PassOver(new ManualClock(), 1000);
    expect(names(passOver.order([b, c, a]))).toEqual(['2182', '2183', '2181']);
  });

  it('puts a member that failed last for the window, then back in its place', () => {
    const clock = new ManualClock();
    const passOver = new PassOver(clock, 1000);
    passOver.failed(b);
    expect(names(passOver.order([b, c, a]))).toEqual(['2183', '2181', '2182']);
    clock.advance(999);
    expect(names(passOver.order([b, a, c]))).toEqual(['2181', '2183', '2182']);
    clock.advance(1);
    expect(names(passOver.order([b, a, c]))).toEqual(['2182', '2181', '2183']);
  });

  it('knows a member by host and port, whether the port came as a string or a number', () => {
    const passOver = new PassOver(new ManualClock(), 1000);
    passOver.failed({ host: '127.0.0.1', port: 2181 });
    expect(passOver.recent(a)).toBe(true);
    expect(passOver.recent({ host: 'localhost', port: '2181' })).toBe(false);
  });

  it('a member that served is no longer passed over', () => {
    const passOver = new PassOver(new ManualClock(), 1000);
    passOver.failed(a);
    passOver.served(a);
    expect(names(passOver.order([a, b]))).toEqual(['2181', '2182']);
  });

  it('with every member failed lately, keeps the order as given (a client cut off from the whole ensemble finds it again)', () => {
    const clock = new ManualClock();
    const passOver = new PassOver(clock, 1000);
    passOver.failed(a);
    clock.advance(10);
    passOver.failed(b);
    passOver.failed(c);
    expect(names(passOver.order([c, a, b]))).toEqual(['2183', '2181', '2182']);
    // The first to come out of its window is the first member not passed over.
    clock.advance(990);
    expect(names(passOver.order([c, b, a]))).toEqual(['2181', '2183', '2182']);
  });

  it('never drops or repeats a member', () => {
    const clock = new ManualClock();
    const passOver = new PassOver(clock, 1000);
    const members = [a, b, c];
    for (let step = 0; step < 20; step++) {
      if (step % 3 === 0) passOver.failed(members[step % members.length]!);
      clock.advance(250);
      expect(names(passOver.order(members)).sort()).toEqual(['2181', '2182', '2183']);
    }
  });
});

/** A listener that takes connections and answers nothing (a paused member, as far as a client can tell), recording each. */
async function silentMember(arrivals: number[], index: number): Promise<{ readonly server: Server; readonly port: number; readonly sockets: Socket[] }> {
  const sockets: Socket[] = [];
  const server = createServer((socket) => {
    sockets.push(socket);
    arrivals.push(index);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port, sockets };
}

describe('zookeeperNode starts a new session on a member that has not failed lately (no ZooKeeper: two silent listeners)', () => {
  it('the next connect goes to the other member; with both failed, to either; past the window, again to the one not failed', async () => {
    const arrivals: number[] = [];
    const members = [await silentMember(arrivals, 0), await silentMember(arrivals, 1)];
    const clock = new ManualClock();
    const node = zookeeperNode({ connectString: members.map((m) => `127.0.0.1:${m.port}`).join(','), clock, requestTimeoutMs: 150 });
    const connectTimesOut = async (): Promise<number> => {
      const before = arrivals.length;
      await expect(node.openSession(5000)).rejects.toBeInstanceOf(TimeoutError);
      // One member reached per connect: the library moves on only when a socket closes, and these stay open.
      expect(arrivals).toHaveLength(before + 1);
      return arrivals[before]!;
    };
    try {
      // Each window: the first connect lands where the library's shuffle says; its handshake unanswered (the member
      // still holds the socket), the next starts on the other member. Without the pass-over, one in two did.
      for (let window = 0; window < 5; window++) {
        const first = await connectTimesOut();
        expect(await connectTimesOut()).toBe(1 - first);
        // Both failed within the window: no member is left out, the connect goes to one of them.
        await connectTimesOut();
        clock.advance(PASS_OVER_MS);
      }
    } finally {
      node.close();
      for (const m of members) {
        for (const socket of m.sockets) socket.destroy();
        await new Promise<void>((resolve) => m.server.close(() => resolve()));
      }
    }
  });
});
