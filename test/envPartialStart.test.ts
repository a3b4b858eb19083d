/**
 * The test kit's starts are all or nothing: a TcpProxy or a PeerGate whose
 * start fails after its bind, and a consensus group whose gates fail to open
 * part way, leave no listener behind and reject with a typed error.
 */
import { mkdtemp } from 'node:fs/promises';
import { Server } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { GroupMember } from '../conformance/env/consensusGroup.ts';
import { TestGroup } from './testGroups.ts';
import { EnvironmentError } from '../conformance/env/faketime.ts';
import { PeerGate } from '../conformance/env/peerGate.ts';
import { freeLoopbackPort } from '../conformance/env/processes.ts';
import { TcpProxy } from '../conformance/env/proxy.ts';
import { connectRedisCluster } from '../conformance/env/userRedis.ts';
import { activeResources, backToBaseline } from './impl/resources.ts';
import { listening } from './probes.ts';

afterEach(() => {
  vi.restoreAllMocks();
});

/** The next listener's address() reads null, as Node gives for a server that is no longer bound. */
function noPortToRead(): void {
  vi.spyOn(Server.prototype, 'address').mockReturnValueOnce(null);
}

describe('a listener of the kit that cannot read its port closes it', () => {
  it('TcpProxy.start: rejects EnvironmentError, nothing left listening', async () => {
    const baseline = activeResources();
    noPortToRead();
    const error = await TcpProxy.start({ host: '127.0.0.1', port: 9 }).then(
      () => null,
      (e: unknown) => e,
    );
    await backToBaseline(baseline, 'TcpProxy.start that failed', 10_000);
    expect(error).toBeInstanceOf(EnvironmentError);
  });

  it('PeerGate.start: rejects EnvironmentError, nothing left listening', async () => {
    const baseline = activeResources();
    noPortToRead();
    const error = await PeerGate.start(9, () => []).then(
      async (gate) => {
        await gate.close();
        return null;
      },
      (e: unknown) => e,
    );
    await backToBaseline(baseline, 'PeerGate.start that failed', 10_000);
    expect(error).toBeInstanceOf(EnvironmentError);
  });
});

/** Two members of two peer ports each, behind gates; nothing is spawned (the start fails before, at the gates). */
class GatedGroup extends TestGroup {
  readonly #peers = new Map<number, number[]>();

  private constructor(dir: string) {
    super('GatedGroup', 'group', dir, [new GroupMember(0, 'a'), new GroupMember(1, 'b')], 10_000, true);
  }

  static async start(): Promise<GatedGroup> {
    const group = new GatedGroup(await mkdtemp(join('/dev/shm', 'lockcheck-gated-')));
    await group.boot();
    return group;
  }

  protected async prepareStart(): Promise<void> {
    for (const m of this.members) {
      m.clientPort = await this.claimedPort();
      this.#peers.set(m.index, [await this.claimedPort(), await this.claimedPort()]);
    }
  }
  protected override peerPorts(m: GroupMember): readonly number[] {
    return this.#peers.get(m.index) ?? [];
  }
}

describe('ConsensusGroup: gates that fail to open part way', () => {
  it('the gates already opened are closed, and start() rejects EnvironmentError with the failure as cause', async () => {
    const original = PeerGate.start.bind(PeerGate);
    const opening: Array<Promise<PeerGate>> = [];
    const injected = new Error('the third gate cannot listen');
    // The third of four gates fails (the second member's first): the others open.
    vi.spyOn(PeerGate, 'start').mockImplementation((targetPort, pids) => {
      const gate = opening.length === 2 ? Promise.reject(injected) : original(targetPort, pids);
      opening.push(gate);
      return gate;
    });
    const error: unknown = await GatedGroup.start().then(
      async (g) => {
        await g.stop();
        return null;
      },
      (e: unknown) => e,
    );
    const gates = (await Promise.allSettled(opening)).flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    expect(gates).toHaveLength(3);
    for (const gate of gates) expect(await listening(gate.port), `gate on ${gate.port}`).toBe(false);
    expect(error).toBeInstanceOf(EnvironmentError);
    expect((error as Error).cause).toBe(injected);
  });
});

describe('connectRedisCluster: one server refuses while another is still being checked', () => {
  it('rejects EnvironmentError once every check has ended: no connection of the step left open', async () => {
    // Accepts and never answers: its check runs to the 5 s bound.
    const hole = await TcpProxy.start({ host: '127.0.0.1', port: 9 });
    hole.setMode({ kind: 'blackhole' });
    try {
      const refused = await freeLoopbackPort();
      const baseline = activeResources();
      const error: unknown = await connectRedisCluster([`redis://127.0.0.1:${refused}`, `redis://127.0.0.1:${hole.port}`]).then(
        () => null,
        (e: unknown) => e,
      );
      // Without the fix the rejection comes at once and the black hole's check runs on to its 5 s bound, then its
      // socket closes (ioredis ends it gracefully; the black hole never answers the FIN: about 2 s more), so about
      // 7 s; with it, the rejection comes after every check ended and only that close is left. 4.5 s is between
      // the two with room for a loaded machine.
      await backToBaseline(baseline, 'connectRedisCluster that failed', 4500);
      expect(error).toBeInstanceOf(EnvironmentError);
      expect(String((error as Error).message)).toMatch(/cannot reach the Redis server/);
    } finally {
      await hole.close();
    }
  }, 30_000);
});
