import { describe, expect, it } from 'vitest';
import { clockAt } from '../model/clock.ts';
import { LeaseLock, type AcquireResult } from '../impl/leaseLock.ts';
import type { LeaseNode } from '../impl/leaseNode.ts';
import { SimNetwork } from '../conformance/sim/network.ts';
import { leaseNodeOver, SimRedisNode } from '../conformance/sim/redisNode.ts';
import { VirtualTime } from '../conformance/sim/time.ts';
import { ManualClock } from './impl/servers.ts';
import { Background, Deadlines, Round, Turn } from '../impl/round.ts';

/**
 * Redlock resolves at the quorum (spec 7.3): a paused node costs an acquire,
 * an extension or a release nothing, its late reply is awaited in the
 * background (bounded by the request timeout), and a write-back that does not
 * reach a quorum yields no lease.
 */

/** A node whose requests wait until `resume()`, as a paused server's do: they run when it resumes. */
function pausable(node: LeaseNode): LeaseNode & { resume(): void } {
  let paused = true;
  const waiting: Array<() => void> = [];
  const gate = <T>(request: () => Promise<T>): Promise<T> => (paused ? new Promise<void>((r) => waiting.push(r)).then(request) : request());
  return {
    acquire: (r, o, t) => gate(() => node.acquire(r, o, t)),
    release: (r, o) => gate(() => node.release(r, o)),
    extend: (r, o, t) => gate(() => node.extend(r, o, t)),
    raiseToken: (r, t) => gate(() => node.raiseToken(r, t)),
    resume() {
      paused = false;
      for (const go of waiting.splice(0)) go();
    },
  };
}

function fiveNodes(wrap: (node: LeaseNode, index: number) => LeaseNode = (n) => n) {
  const time = new VirtualTime();
  const servers = [0, 1, 2, 3, 4].map(() => new SimRedisNode(time, false, 0, 0n));
  const network = new SimNetwork(time, (e) => (e === 'store' ? { reachable: () => true } : servers[e as number]!));
  const clock = time.clockOf(() => clockAt());
  const nodes = servers.map((s, i) => wrap(leaseNodeOver(network, 0, i, s), i));
  const lock = new LeaseLock({ nodes, clock, requestTimeoutMs: 50 });
  const run = async <T>(work: Promise<T>): Promise<T> => {
    await time.runUntil(work, time.nowMs() + 10_000);
    return work;
  };
  return { time, servers, network, lock, nodes, run };
}

describe('Redlock at the quorum (spec 7.3)', () => {
  it('grants, extends and releases with one node paused, without waiting for it; its late reply is handled in the background', async () => {
    let paused!: ReturnType<typeof pausable>;
    const w = fiveNodes((n, i) => (i === 4 ? (paused = pausable(n)) : n));
    const acquired = await w.run(w.lock.acquire('job', { ttlMs: 1000 }));
    expect(acquired).toMatchObject({ kind: 'granted', lease: { token: 1n } });
    // No virtual time passed waiting for the paused node: the quorum answered at once.
    expect(w.time.nowMs()).toBe(0);
    expect(w.lock.backgroundRounds).toBe(1);
    if (acquired.kind !== 'granted') throw new Error('not granted');
    expect(await w.run(w.lock.extend(acquired.lease, 1000))).toMatchObject({ kind: 'extended' });
    await w.run(w.lock.release(acquired.lease));
    expect(w.time.nowMs()).toBe(0);
    expect(w.servers.slice(0, 4).map((s) => s.holder('job'))).toEqual([null, null, null, null]);
    // The node resumes: it runs the acquire, the extension and the release in order, and ends up free.
    paused.resume();
    await w.run(w.lock.settled());
    expect(w.lock.backgroundRounds).toBe(0);
    expect(w.servers[4]!.holder('job')).toBeNull();
  });

  it('stops waiting for a node that never answers at the request timeout', async () => {
    const w = fiveNodes((n, i) => (i === 4 ? pausable(n) : n));
    const acquired = await w.run(w.lock.acquire('job', { ttlMs: 1000 }));
    expect(acquired.kind).toBe('granted');
    expect(w.lock.backgroundRounds).toBe(1);
    await w.run(w.lock.settled());
    expect(w.lock.backgroundRounds).toBe(0);
    expect(w.time.nowMs()).toBe(50);
  });

  it('denies as soon as a quorum said held, without waiting for the paused node', async () => {
    const w = fiveNodes((n, i) => (i === 4 ? pausable(n) : n));
    for (const s of w.servers.slice(0, 3)) s.acquire('job', 'someone else', 10_000);
    expect(await w.run(w.lock.acquire('job', { ttlMs: 1000 }))).toEqual({ kind: 'denied', reason: 'held' });
    expect(w.time.nowMs()).toBe(0);
    // The node that said yes (node 3) is released again at once.
    expect(w.servers[3]!.holder('job')).toBeNull();
  });

  it('waits for the paused node when the quorum depends on it, and counts it failed at the timeout', async () => {
    const w = fiveNodes((n, i) => (i === 4 ? pausable(n) : n));
    w.network.cut(0, 0);
    w.network.cut(0, 1);
    expect(await w.run(w.lock.acquire('job', { ttlMs: 1000 }))).toEqual({ kind: 'denied', reason: 'no-quorum' });
    expect(w.time.nowMs()).toBe(50);
  });

  it('writes the token back to granting nodes that are behind; a write-back that misses the quorum yields no lease', async () => {
    const failing = new Set<number>();
    const w = fiveNodes((n, i) => ({ ...n, raiseToken: (r, t) => (failing.has(i) ? Promise.reject(new Error('connection reset')) : n.raiseToken(r, t)) }));
    for (const s of w.servers.slice(0, 3)) s.raiseToken('job', 5n);
    // Only nodes 2, 3 and 4 answer: 6, 1, 1. The token is 6; nodes 3 and 4 must be raised to it.
    w.network.cut(0, 0);
    w.network.cut(0, 1);
    failing.add(3);
    expect(await w.run(w.lock.acquire('job', { ttlMs: 1000 }))).toEqual({ kind: 'denied', reason: 'no-quorum' });
    expect(w.lock.trackedLeases).toBe(0);
    expect(w.servers.map((s) => s.holder('job'))).toEqual([null, null, null, null, null]);
    failing.clear();
    const again = await w.run(w.lock.acquire('job', { ttlMs: 1000 }));
    expect(again).toMatchObject({ kind: 'granted', lease: { token: 7n } });
    // Raised where it was behind: a quorum now holds at least 7, so the next grant anywhere is above it.
    if (again.kind !== 'granted') throw new Error('not granted');
    await w.run(w.lock.release(again.lease));
    w.network.heal(0, 0);
    w.network.heal(0, 1);
    w.network.cut(0, 2);
    expect(await w.run(w.lock.acquire('job', { ttlMs: 1000 }))).toMatchObject({ kind: 'granted', lease: { token: 8n } });
  });

  it('a write-back that reaches the quorum after the validity ended yields no lease (validity-exhausted), and the keys are released', async () => {
    let time!: VirtualTime;
    // Each raise takes 45 ms: inside the 50 ms request timeout, past a 40 ms lease's validity (40 - 2.4 ms margin).
    const w = fiveNodes((n) => ({ ...n, raiseToken: (r, t) => time.sleep(45).then(() => n.raiseToken(r, t)) }));
    time = w.time;
    for (const s of w.servers.slice(0, 2)) s.raiseToken('job', 5n);
    // All five grant: 6, 6, 1, 1, 1. The token is 6; three nodes must be raised to it, and all three are.
    expect(await w.run(w.lock.acquire('job', { ttlMs: 40 }))).toEqual({ kind: 'denied', reason: 'validity-exhausted' });
    expect(w.time.nowMs()).toBe(45);
    expect(w.lock.trackedLeases).toBe(0);
    await w.run(w.lock.settled());
    expect(w.servers.map((s) => s.holder('job'))).toEqual([null, null, null, null, null]);
    // Raised on every node: the next grant is above the token no lease carried.
    expect(await w.run(w.lock.acquire('job', { ttlMs: 1000 }))).toMatchObject({ kind: 'granted', lease: { token: 7n } });
  });

  it('rounds decided in the same turn resolve together, from one scheduled call, each with its own votes', async () => {
    const held = new Map<string, string>();
    const memory = (i: number): LeaseNode => ({
      acquire: (r, o) => (held.has(`${i}/${r}`) ? Promise.resolve(null) : (held.set(`${i}/${r}`, o), Promise.resolve(BigInt(i + 1)))),
      release: (r, o) => Promise.resolve(held.get(`${i}/${r}`) === o && held.delete(`${i}/${r}`)),
      extend: () => Promise.resolve(true),
      raiseToken: () => Promise.resolve(),
    });
    // Node 4 never answers, so every round is decided at the quorum and waits one turn for simultaneous replies.
    const silent: LeaseNode = { acquire: () => new Promise(() => {}), release: () => new Promise(() => {}), extend: () => new Promise(() => {}), raiseToken: () => new Promise(() => {}) };
    const clock = new ManualClock();
    const lock = new LeaseLock({ nodes: [0, 1, 2, 3].map(memory).concat(silent), clock, requestTimeoutMs: 50 });
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => lock.acquire(`r${i}`, { ttlMs: 1000 })));
    // Every round counted the four replies of its turn: token 4, the highest, written back to nodes 0-2 (a second round each).
    expect(results.map((r) => (r.kind === 'granted' ? r.lease.token : r.kind))).toEqual(Array.from({ length: 10 }, () => 4n));
    // One deadline timer (50 ms) for all twenty rounds, which share the limit; one turn for the ten acquires' decisions, one for the write-backs'.
    expect(clock.delays).toEqual([50, 0, 0]);
  });

  it('rounds that never answer end at their own deadlines, in order, from one deadline timer', async () => {
    const silent: LeaseNode = { acquire: () => new Promise(() => {}), release: () => new Promise(() => {}), extend: () => new Promise(() => {}), raiseToken: () => new Promise(() => {}) };
    const clock = new ManualClock(1000);
    const lock = new LeaseLock({ nodes: [silent, silent, silent], clock, requestTimeoutMs: 50 });
    const ended: Array<[string, number, string]> = [];
    const track = (name: string, p: Promise<AcquireResult>) => void p.then((r) => ended.push([name, clock.now(), r.kind === 'denied' ? r.reason : r.kind]));
    const flush = () => new Promise<void>((resolve) => setImmediate(resolve));
    track('a', lock.acquire('a', { ttlMs: 1000 }));
    clock.advance(20);
    track('b', lock.acquire('b', { ttlMs: 1000 }));
    clock.advance(29);
    await flush();
    expect(ended).toEqual([]);
    clock.advance(1); // a's deadline: its silent nodes count as failed
    await flush();
    expect(ended).toEqual([['a', 1050, 'no-quorum']]);
    clock.advance(19);
    await flush();
    expect(ended).toHaveLength(1);
    clock.advance(1); // b's
    await flush();
    expect(ended).toEqual([['a', 1050, 'no-quorum'], ['b', 1070, 'no-quorum']]);
    // The releases sent after each denial end at their deadlines too, and then no round is left.
    clock.advance(50);
    await flush();
    expect(lock.backgroundRounds).toBe(0);
    // One timer for the oldest open round at a time: a at +50, then b 20 ms after that, then the releases'.
    expect(clock.delays.slice(0, 2)).toEqual([50, 20]);
  });

  it('a queue of deadlines goes when its timer finds it empty: varying limits (the ttl as limit) keep no queue each', async () => {
    const clock = new ManualClock(0);
    const deadlines = new Deadlines(clock);
    const context = { clock, background: new Background(), turn: new Turn(clock), deadlines };
    const answering: LeaseNode = { acquire: () => Promise.resolve(1n), release: () => Promise.resolve(true), extend: () => Promise.resolve(true), raiseToken: () => Promise.resolve() };
    for (const limitMs of [100, 200, 300]) await new Round([answering], limitMs, context, (n) => n.release('r', 'o'), (v) => v, () => false).votes;
    expect(deadlines.limits).toBe(3);
    clock.advance(300);
    expect(deadlines.limits).toBe(0);
    // A round after that gets a fresh queue and is still bounded.
    const silent: LeaseNode = { ...answering, release: () => new Promise(() => {}) };
    const late = new Round([silent], 100, context, (n) => n.release('r', 'o'), (v) => v, () => false).votes;
    clock.advance(100);
    expect(await late).toEqual([{ ok: false }]);
    expect(context.background.count).toBe(0);
  });
});
