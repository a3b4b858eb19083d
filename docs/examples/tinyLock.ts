/**
 * A worked example of the adapter API: a small lease lock written from
 * scratch (not with lockcheck's LeaseLock), plugged into the conformance
 * suite. It runs in memory on lockcheck's virtual time, so it needs no
 * server; an adapter for a real service has the same shape, with the
 * environment's faults acting on real processes.
 */
// The package's own entries, as in your project (in lockcheck's repository they resolve to its sources: tsconfig.json paths, vitest.config.ts, cli/lockcheck.mjs).
import { checkTtl, clockAt, designs, read } from 'lockcheck/model';
import type { Clock } from 'lockcheck/model';
import { checkAcquireInput, SimNetwork, SimStore, storeOver, VirtualTime } from 'lockcheck/kit';
import { LeaseHandle, sleep } from 'lockcheck/lock';
import type { AcquireResult } from 'lockcheck/lock';
import type { BackendUnderTest, Environment, LockClient } from 'lockcheck/adapter';

/** The lock server: one key per resource with an expiry, and a token counter per resource. */
class TinyServer {
  readonly keys = new Map<string, { owner: string; expiresAtMs: number }>();
  readonly counters = new Map<string, bigint>();
  clock: Clock = clockAt();

  constructor(
    private readonly time: VirtualTime,
    private readonly tokenBase: bigint,
  ) {}

  reachable(): boolean {
    return true;
  }

  now(): number {
    return read(this.clock, this.time.nowMs());
  }

  /** Set-if-absent and mint a token, atomically. */
  acquire(resource: string, owner: string, ttlMs: number): bigint | null {
    const key = this.keys.get(resource);
    if (key !== undefined && this.now() <= key.expiresAtMs) return null;
    this.keys.set(resource, { owner, expiresAtMs: this.now() + ttlMs });
    const token = (this.counters.get(resource) ?? this.tokenBase) + 1n;
    this.counters.set(resource, token);
    return token;
  }

  release(resource: string, owner: string): void {
    if (this.keys.get(resource)?.owner === owner) this.keys.delete(resource);
  }

  /** Compare-and-extend: only the owner's live key gets a fresh ttl. */
  extend(resource: string, owner: string, ttlMs: number): boolean {
    const key = this.keys.get(resource);
    if (key === undefined || key.owner !== owner || this.now() > key.expiresAtMs) return false;
    this.keys.set(resource, { owner, expiresAtMs: this.now() + ttlMs });
    return true;
  }
}

export const tinyLock: BackendUnderTest = {
  name: 'tiny lock (docs example)',
  // Checked against the single-node lease model, with a strict fenced store.
  design: designs.redisSingle(),
  capabilities: { store: 'strict', ttl: true, sessionBound: false, reentrant: false },
  async start({ clients, tokenBase }) {
    const time = new VirtualTime();
    const server = new TinyServer(time, tokenBase);
    const store = new SimStore('strict');
    const network = new SimNetwork(time, (endpoint) => (endpoint === 'store' ? store : server));
    const lockClients: LockClient[] = Array.from({ length: clients }, (_v, c): LockClient & { tryAcquire(resource: string, ttlMs: number): Promise<AcquireResult> } => {
      const clientClock = time.clockOf(() => clockAt());
      let attempt = 0;
      return {
        clock: clientClock,
        store: storeOver(network, c, store),
        async acquire(resource, { ttlMs, retries = 0, retryDelayMs = 0 }) {
          // Bad input is refused before anything is sent (the suite checks it).
          checkAcquireInput(resource, { ttlMs, retries, retryDelayMs }, true);
          for (let tries = 0; ; tries++) {
            const result = await this.tryAcquire(resource, ttlMs);
            if (result.kind !== 'denied' || tries >= retries) return result;
            await sleep(clientClock, retryDelayMs);
          }
        },
        async tryAcquire(resource: string, ttlMs: number): Promise<AcquireResult> {
          const owner = `client-${c}-${++attempt}`;
          const startedMs = clientClock.now();
          const token = await network.call(c, 0, () => server.acquire(resource, owner, ttlMs)).catch(() => null);
          const elapsedMs = clientClock.now() - startedMs;
          if (elapsedMs >= ttlMs) return { kind: 'timed-out' };
          // The same drift allowance as the model: ceil(0.01 * ttl) + 2 ms.
          const validUntilMs = startedMs + ttlMs - (Math.ceil(0.01 * ttlMs) + 2);
          if (token === null || clientClock.now() >= validUntilMs) {
            await network.call(c, 0, () => server.release(resource, owner)).catch(() => undefined);
            return { kind: 'denied', reason: token === null ? 'held' : 'validity-exhausted' };
          }
          return { kind: 'granted', lease: new LeaseHandle(resource, owner, token, validUntilMs, clientClock) };
        },
        async extend(lease, ttlMs) {
          checkTtl(ttlMs);
          const handle = lease as LeaseHandle;
          if (handle.signal.aborted) return { kind: 'not-extended', reason: 'expired' };
          const startedMs = clientClock.now();
          const validUntilMs = startedMs + ttlMs - (Math.ceil(0.01 * ttlMs) + 2);
          // A shorter ttl is in force on the server as soon as the request arrives: the deadline comes down now (spec 4.1).
          handle.limitTo(validUntilMs);
          const ok = await network.call(c, 0, () => server.extend(lease.resource, lease.owner, ttlMs)).catch(() => false);
          if (!ok) return { kind: 'not-extended', reason: 'no-quorum' };
          handle.extendTo(validUntilMs);
          return { kind: 'extended', validUntilMs };
        },
        async release(lease) {
          (lease as LeaseHandle).lose('released');
          await network.call(c, 0, () => server.release(lease.resource, lease.owner)).catch(() => undefined);
        },
      };
    });
    const env: Environment = {
      nowMs: () => time.nowMs(),
      advanceTo: (t) => time.advanceTo(t),
      runUntil: (work, limitMs) => time.runUntil(work, limitMs),
      // One server and no persistence story: it offers only these faults (what it leaves out, it does not take).
      faults: {
        clockStep: async (_node, deltaMs) => {
          server.clock = { anchorTrueMs: time.nowMs(), readingMs: server.now() + deltaMs, driftPpm: server.clock.driftPpm };
        },
        delay: async (c, ms) => network.setDelay(c, ms),
        pause: { pause: async (c) => network.hold(c), resume: async (c) => network.release(c) },
      },
      inspect: async (resource) => {
        const key = server.keys.get(resource);
        return [key !== undefined && server.now() <= key.expiresAtMs ? key.owner : null];
      },
    };
    return { clients: lockClients, env, close: async () => undefined };
  },
};
