import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import zookeeper from 'node-zookeeper-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkConformance } from '../conformance/index.ts';
import { realZookeeperBackend, type ZookeeperCell } from '../conformance/env/zookeeperBackend.ts';
import { ZookeeperEnsemble } from '../conformance/env/zookeeperEnsemble.ts';
import { TcpProxy } from '../conformance/env/proxy.ts';
import { EnvironmentError } from '../conformance/env/faketime.ts';
import { lockDown } from '../conformance/env/zookeeperLockdown.ts';
import type { MonotonicClock } from '../impl/clock.ts';
import { systemClock } from '../impl/clock.ts';
import { ConnectionConfigError, InvalidInputError, ServerRefusedError } from '../impl/errors.ts';
import { ZookeeperLock, zookeeperFencedStore, zookeeperNode } from '../impl/zookeeper/index.ts';
import type { ZookeeperNode } from '../impl/zookeeper/index.ts';
import { alive, grantedWithin, skipUnjudged, until } from './probes.ts';
import { expectGrantedAfterRelease, expectHighestWins, expectStorePolicies } from './realBackendChecks.ts';
import { expectLostAfter, HandClock } from './handClock.ts';
import { type BackendOn, blackHoleAndLateReplies, crashRestartTwice, delayedWrite, expectReadLast, pausedHolder, splitAcquireDenied, staleLandsUnfenced } from './lockstepScenarios.ts';

/**
 * The ZooKeeper backend (spec 7.10) on one real 3-member ensemble for the
 * whole file (a JVM start is seconds): the ensemble's faults, the lock and
 * the store directly, then in lockstep against `etcd-lease`, paced to real
 * time. LOCKCHECK_ZK_RUNS sets the generated schedules per store policy
 * (default 1: CI keeps these small; `lockcheck matrix` runs more).
 */
const RUNS = Number(process.env.LOCKCHECK_ZK_RUNS ?? 1);
const SEED = Number(process.env.LOCKCHECK_SEED ?? 20161010);

let ensemble: ZookeeperEnsemble;
const nodes: ZookeeperNode[] = [];

/**
 * A node on one member by default: ZooKeeper serves reads from the member a session is connected to,
 * which may not have applied a write another member acknowledged, so a test that writes on one session
 * and reads on another keeps both on one member (a member applies its own clients' writes before it
 * acknowledges them). Seen: a release's delete acknowledged, the contender still listed by a lagging follower.
 */
function node(connectString = ensemble.endpoints[0]!, timeoutMs = 2000): ZookeeperNode {
  const n = zookeeperNode({ ...ensemble.clientOptions(connectString), clock: systemClock, requestTimeoutMs: timeoutMs });
  nodes.push(n);
  return n;
}

function lockOn(n: ZookeeperNode, clock: MonotonicClock = systemClock, root = '/t'): ZookeeperLock {
  return new ZookeeperLock({ node: n, clock, root });
}

beforeAll(async () => {
  ensemble = await ZookeeperEnsemble.start({ parentDir: '/dev/shm' });
}, 90_000);

afterAll(async () => {
  for (const n of nodes) n.close();
  await ensemble?.stop();
});

describe('ZookeeperLock (spec 7.10, real ensemble)', () => {
  it('grants once (MUTEX-1), denies while held leaving no contender behind, tokens are create zxids strictly increasing (FENCE-1)', async () => {
    const n = node();
    const a = lockOn(node());
    const b = lockOn(n);
    const first = await a.acquire('mutex', { ttlMs: 5000 });
    if (first.kind !== 'granted') throw new Error('expected a grant');
    expect(await b.acquire('mutex', { ttlMs: 5000 })).toEqual({ kind: 'denied', reason: 'held' });
    expect(await n.children('/t/lock/mutex')).toHaveLength(1);
    const other = await b.acquire('mutex-other', { ttlMs: 5000 });
    if (other.kind !== 'granted') throw new Error('expected a grant');
    expect(other.lease.token).toBeGreaterThan(first.lease.token);
    await expectGrantedAfterRelease(a, b, first.lease, other.lease);
  });

  it('waits in line with waitMs (watching its predecessor) and is granted at the release; without it, is denied', async () => {
    const a = lockOn(node());
    const b = lockOn(node());
    const first = await a.acquire('line', { ttlMs: 5000 });
    if (first.kind !== 'granted') throw new Error('expected a grant');
    const waiting = b.acquire('line', { ttlMs: 5000, waitMs: 20_000 });
    // The waiter is in line (two contenders) before the holder lets go.
    expect(await until(async () => (await node().children('/t/lock/line')).length === 2, 10_000)).toBe(true);
    await a.release(first.lease);
    const second = await waiting;
    if (second.kind !== 'granted') throw new Error(`expected the waiter's grant, got ${second.kind}`);
    expect(second.lease.token).toBeGreaterThan(first.lease.token);
    await b.release(second.lease);
  });

  it('refuses bad input with InvalidInputError before any call', async () => {
    const lock = lockOn(node());
    await expect(lock.acquire('', { ttlMs: 1000 })).rejects.toBeInstanceOf(InvalidInputError);
    await expect(lock.acquire('x', { ttlMs: 0 })).rejects.toBeInstanceOf(InvalidInputError);
    await expect(lock.acquire('x', { ttlMs: 1000, waitMs: -1 })).rejects.toBeInstanceOf(InvalidInputError);
    expect(() => new ZookeeperLock({ node: node(), clock: systemClock, root: 'relative' })).toThrow(InvalidInputError);
    expect(() => new ZookeeperLock({ node: node(), clock: systemClock, root: '/trailing/' })).toThrow(InvalidInputError);
  });

  it('the signal fires at validity minus the margin on the injected clock; extend moves it; a session nobody renews ends on the ensemble, its contender deleted', async () => {
    const clock = new HandClock();
    const lock = lockOn(node(), clock);
    const r = await lock.acquire('signal', { ttlMs: 3000 });
    if (r.kind !== 'granted') throw new Error('expected a grant');
    // validity = ttl - ceil(0.01 * ttl) - 2 = 2968 ms from the start (the hand clock did not move during the calls)
    expect(r.lease.validUntilMs).toBe(2968);
    const signal = r.lease.signal;
    clock.advance(2000);
    expect(await lock.extend(r.lease, 3000)).toEqual({ kind: 'extended', validUntilMs: 2000 + 2968 });
    expectLostAfter(clock, signal, 2968);
    await lock.release(r.lease);

    // A session nobody renews ends on the ensemble's own clock: its contender is deleted, and the lease, past its validity, is lost.
    const n = node();
    // Four round trips must fit in 300 ms for a grant: a loaded machine may need a few attempts (bounded).
    const s = await grantedWithin(20_000, 'expiring', (resource) => lockOn(n).acquire(resource, { ttlMs: 300 }));
    expect(await until(async () => (await n.children(`/t/lock/${s.resource}`)).length === 0, 10_000)).toBe(true);
    expect(s.lease.signal.aborted).toBe(true);
  });

  it('release deletes the contender only while its create zxid is ours', async () => {
    const n = node();
    const lock = lockOn(n);
    // A single attempt was denied once on a loaded machine (a full run, the ensemble slow): attempts until granted, bounded.
    const { lease, resource } = await grantedWithin(20_000, 'owned', (name) => lock.acquire(name, { ttlMs: 5000 }));
    const other = await n.openSession(5000);
    expect(await n.deleteOwned(other, lease.owner, lease.token + 1n)).toBe(false);
    expect(await n.children(`/t/lock/${resource}`)).toHaveLength(1);
    await n.closeSession(other);
    await lock.release(lease);
    expect(await n.children(`/t/lock/${resource}`)).toEqual([]);
  });

  it('a session ended while it reconnects closes on its new connection: the contender goes at once, and the handshake reply is not read as the close\'s', async () => {
    const [host, port] = ensemble.endpoints[0]!.split(':');
    const proxy = await TcpProxy.start({ host: host!, port: Number(port) });
    const uncaught: unknown[] = [];
    const record = (error: unknown): void => void uncaught.push(error);
    process.on('uncaughtException', record);
    try {
      const n = node(`127.0.0.1:${proxy.port}`);
      // A session far longer than the wait below: a contender gone in time was deleted by the close, not by expiry.
      const s = await n.openSession(30_000);
      const mine = await n.enqueue(s, '/t/lock/reconnect');
      expect(await n.children('/t/lock/reconnect')).toEqual([mine.name]);
      proxy.setMode({ kind: 'reset' });
      // The cut is seen: a call on the session fails (connection loss, or no reply within its bound).
      await expect(n.touch(s, `/t/lock/reconnect/${mine.name}`)).rejects.toThrow();
      const closed = n.closeSession(s);
      proxy.setMode({ kind: 'pass' });
      await closed.catch(() => undefined);
      expect(await until(async () => (await node().children('/t/lock/reconnect')).length === 0, 15_000)).toBe(true);
      expect(uncaught).toEqual([]);
    } finally {
      process.off('uncaughtException', record);
      await proxy.close();
    }
  });

  it('a lease outlives the kill of the leader: the lock stays held, tokens keep increasing', async () => {
    const leader = await ensemble.leader();
    const follower = [0, 1, 2].find((m) => m !== leader)!;
    const lock = lockOn(node(ensemble.endpoints[follower]!));
    // A session the failover below cannot outlast on a loaded machine (a JVM killed, an election, the other client's
    // tries): the ensemble's longest. A lease the kill lost is granted to the other client whatever its ttl.
    const r = await lock.acquire('failover', { ttlMs: 60_000 });
    if (r.kind !== 'granted') throw new Error('expected a grant');
    await ensemble.kill(leader);
    expect(ensemble.running(leader)).toBe(false);
    await ensemble.leader();
    const other = lockOn(node(ensemble.endpoints.filter((_e, i) => i !== leader).join(',')));
    let denied = false;
    await until(async () => {
      const x = await other.acquire('failover', { ttlMs: 5000 });
      denied = x.kind === 'denied' && x.reason === 'held';
      if (x.kind === 'granted') await other.release(x.lease);
      return x.kind !== 'denied' || x.reason !== 'no-quorum';
    }, 15_000);
    expect(denied).toBe(true);
    const y = await other.acquire('failover-2', { ttlMs: 5000 });
    if (y.kind !== 'granted') throw new Error('expected a grant');
    expect(y.lease.token).toBeGreaterThan(r.lease.token);
    await ensemble.restart(leader);
    expect(ensemble.running(leader)).toBe(true);
    await ensemble.leader();
    // The tests after this one talk to member 0 (node()): the restarted member serves again before they start.
    const back = node(ensemble.endpoints[leader]!);
    expect(await until(() => back.children('/t').then(() => true, () => false), 30_000)).toBe(true);
  });
});

describe('zookeeperFencedStore (real ensemble)', () => {
  it('strict rejects token <= highest, monotonic rejects token < highest, unfenced accepts; reads return value and token', async () => {
    const n = node();
    await expectStorePolicies((policy) => zookeeperFencedStore(n, policy, { root: '/t' }));
    expect(() => zookeeperFencedStore(n, 'transactional')).toThrow(InvalidInputError);
  });

  it('concurrent monotonic writes with distinct tokens (versioned writes that lose a race are judged again): the highest ends up stored', async () => {
    await expectHighestWins(zookeeperFencedStore(node(), 'monotonic', { root: '/t' }));
  });
});

/**
 * The ensemble is closed to clients without the run's credentials: what a
 * client of another local user could do to a run's results.
 */
describe('ZookeeperEnsemble is private (real ensemble)', () => {
  const call = <T,>(start: (cb: (error: Error | zookeeper.Exception | null, value: T) => void) => void): Promise<T> =>
    new Promise<T>((resolve, reject) => start((error, value) => (error ? reject(error) : resolve(value))));
  /** What `work` ends with: 'ok', or the name of ZooKeeper's error. */
  const outcome = (work: Promise<unknown>): Promise<string> => work.then(() => 'ok', (e: unknown) => (e instanceof zookeeper.Exception ? e.getName() : String(e)));

  it('a client without the run\'s credentials (none, or another digest) creates, reads, changes and deletes nothing and changes no ACL; lockcheck\'s clients work; its lock and store are refused, typed', async () => {
    // A cell and a held lock of the run's own clients.
    const own = node();
    const store = zookeeperFencedStore(own, 'strict', { root: '/t' });
    expect(await store.write('private', 3n, 'mine')).toEqual({ kind: 'accepted' });
    const held = await lockOn(own).acquire('private', { ttlMs: 10_000 });
    if (held.kind !== 'granted') throw new Error(`expected a grant, got ${held.kind}`);
    const [holder] = await own.children('/t/lock/private');
    expect(holder).toBeDefined();
    for (const credentials of [null, 'lockcheck:guessed']) {
      const intruder = zookeeper.createClient(ensemble.endpoints[0]!, { sessionTimeout: 10_000, retries: 0 });
      if (credentials !== null) intruder.addAuthInfo('digest', Buffer.from(credentials));
      const connected = new Promise<void>((resolve) => intruder.once('connected', () => resolve()));
      intruder.connect();
      await connected;
      try {
        const open = [new zookeeper.ACL(zookeeper.Permission.ALL, new zookeeper.Id('world', 'anyone'))];
        const tries = {
          createTop: await outcome(call<string>((cb) => intruder.create('/intruder', Buffer.alloc(0), cb))),
          createInTree: await outcome(call<string>((cb) => intruder.create('/t/intruder', Buffer.alloc(0), cb))),
          createInLockDir: await outcome(call<string>((cb) => intruder.create('/t/lock/private/c-', Buffer.alloc(0), zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL, cb))),
          createQuota: await outcome(call<string>((cb) => intruder.create('/zookeeper/quota/t', Buffer.alloc(0), cb))),
          listRoot: await outcome(call<string[]>((cb) => intruder.getChildren('/', cb))),
          listLock: await outcome(call<string[]>((cb) => intruder.getChildren('/t/lock/private', cb))),
          setRootAcl: await outcome(call<unknown>((cb) => intruder.setACL('/', open, -1, cb))),
          setTreeAcl: await outcome(call<unknown>((cb) => intruder.setACL('/t', open, -1, cb))),
          readCell: await outcome(call<Buffer>((cb) => intruder.getData('/t/cell/private', cb))),
          writeCell: await outcome(call<unknown>((cb) => intruder.setData('/t/cell/private', Buffer.from('x'), -1, cb))),
          deleteHolder: await outcome(call<void>((cb) => intruder.remove(`/t/lock/private/${holder!}`, -1, cb))),
        };
        expect(tries, String(credentials)).toEqual(Object.fromEntries(Object.keys(tries).map((k) => [k, 'NO_AUTH'])));
      } finally {
        intruder.close();
      }
      // lockcheck's own lock and store without the run's credentials are refused, typed, and change nothing.
      const outsider = zookeeperNode({ connectString: ensemble.endpoints[0]!, clock: systemClock, requestTimeoutMs: 20_000, ...(credentials !== null ? { auth: [{ scheme: 'digest', credentials }] } : {}) });
      nodes.push(outsider);
      // Each refusal caught as it is made: three calls run at once, and one awaited after another rejects would be unhandled.
      const attempts = [zookeeperFencedStore(outsider, 'strict', { root: '/t' }).write('private', 9n, 'x'), lockOn(outsider).acquire('private', { ttlMs: 5000 }), lockOn(outsider).acquire('elsewhere', { ttlMs: 5000 })].map((a) => a.catch((e: unknown) => e));
      for (const refused of await Promise.all(attempts)) {
        expect(refused).toBeInstanceOf(ServerRefusedError);
        expect(refused).toMatchObject({ code: 'permission', serverCode: 'NO_AUTH' });
      }
    }
    expect(await store.read('private')).toEqual({ value: 'mine', token: 3n });
    expect((await lockOn(node()).acquire('private', { ttlMs: 5000 })).kind).toBe('denied');
    await lockOn(own).release(held.lease);
  });

  it('the lock-down catches a tree someone changed before it: run again on this (used) ensemble it fails, naming what it found', async () => {
    const credentials = ensemble.auth[0]!.credentials;
    const e = await lockDown(ensemble.connectString, credentials, 10_000).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(EnvironmentError);
    expect((e as Error).message).toMatch(/another client changed the fresh ensemble before it was closed to others: \/ holds "t"/);
    expect((e as Error).message).not.toContain(credentials);
  });
});

/**
 * Typed refusals (issue 17): a tree whose ACL the lock's identity does not
 * satisfy, or credentials the ensemble refuses, are errors no retry fixes,
 * thrown as such, never `denied: no-quorum`. The tree is made by the
 * library directly, as an operator would: '/acl' writable only by the
 * digest identity admin:secret, readable by anyone.
 */
describe('ZooKeeper refusals are typed (real ensemble, digest ACLs)', () => {
  const ROOT = '/acl';
  const CREDENTIALS = 'admin:secret';
  let admin: zookeeper.Client;
  const call = <T,>(start: (cb: (error: Error | zookeeper.Exception | null, value: T) => void) => void): Promise<T> =>
    new Promise<T>((resolve, reject) => start((error, value) => (error ? reject(error) : resolve(value))));
  const withAuth = (): ZookeeperNode => {
    const n = zookeeperNode({ connectString: ensemble.endpoints[0]!, clock: systemClock, auth: [{ scheme: 'digest', credentials: CREDENTIALS }] });
    nodes.push(n);
    return n;
  };

  beforeAll(async () => {
    admin = zookeeper.createClient(ensemble.endpoints[0]!, { sessionTimeout: 10_000, retries: 0 });
    admin.addAuthInfo('digest', Buffer.from(CREDENTIALS));
    // The ensemble's tree is open only to its run's identity: the operator creates '/acl' as that one too.
    for (const a of ensemble.auth) admin.addAuthInfo(a.scheme, Buffer.from(a.credentials));
    const connected = new Promise<void>((resolve) => admin.once('connected', () => resolve()));
    admin.connect();
    await connected;
    const digest = `admin:${createHash('sha1').update(CREDENTIALS).digest('base64')}`;
    const acl = [new zookeeper.ACL(zookeeper.Permission.ALL, new zookeeper.Id('digest', digest)), new zookeeper.ACL(zookeeper.Permission.READ, new zookeeper.Id('world', 'anyone'))];
    await call<string>((cb) => admin.create(ROOT, Buffer.alloc(0), acl, zookeeper.CreateMode.PERSISTENT, cb));
  }, 30_000);

  afterAll(() => admin?.close());

  it('an identity the ACL does not let create: acquire throws ServerRefusedError(permission, NO_AUTH) with the cause, leaves nothing behind, and is not retried', async () => {
    const lock = lockOn(node(), systemClock, ROOT);
    const refused = await lock.acquire('r', { ttlMs: 5000, retries: 3, retryDelayMs: 60_000 }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ServerRefusedError);
    expect(refused).toMatchObject({ code: 'permission', serverCode: 'NO_AUTH' });
    expect((refused as Error).cause).toBeInstanceOf(zookeeper.Exception);
    expect(lock.trackedLeases).toBe(0);
    expect(await call<string[]>((cb) => admin.getChildren(ROOT, cb))).toEqual([]);
  });

  it('the same identity presenting its credentials (auth): granted, released, and its fenced store writes', async () => {
    const n = withAuth();
    const lock = lockOn(n, systemClock, ROOT);
    const granted = await lock.acquire('r', { ttlMs: 5000 });
    if (granted.kind !== 'granted') throw new Error(`expected a grant, got ${JSON.stringify(granted)}`);
    expect(typeof granted.lease.token).toBe('bigint');
    const store = zookeeperFencedStore(n, 'strict', { root: ROOT });
    expect(await store.write('r', granted.lease.token, 'v')).toEqual({ kind: 'accepted' });
    await lock.release(granted.lease);
    expect(granted.lease.signal.aborted).toBe(true);
  });

  it('what the credentials created is closed to clients without them (CREATOR_ALL_ACL): their lock and store are refused, typed; the cell is unchanged', async () => {
    const owner = withAuth();
    const mine = zookeeperFencedStore(owner, 'strict', { root: ROOT });
    expect(await mine.write('s', 5n, 'kept')).toEqual({ kind: 'accepted' });
    const granted = await lockOn(owner, systemClock, ROOT).acquire('s', { ttlMs: 5000 });
    expect(granted.kind).toBe('granted');
    const outsider = node();
    // Each refusal caught as it is made: both calls run at once, and one awaited after the other rejects would be unhandled.
    const attempts = [zookeeperFencedStore(outsider, 'strict', { root: ROOT }).write('s', 9n, 'x'), lockOn(outsider, systemClock, ROOT).acquire('s', { ttlMs: 5000 })].map((a) => a.catch((e: unknown) => e));
    for (const refused of await Promise.all(attempts)) {
      expect(refused).toBeInstanceOf(ServerRefusedError);
      expect(refused).toMatchObject({ code: 'permission', serverCode: 'NO_AUTH' });
    }
    expect(await mine.read('s')).toEqual({ value: 'kept', token: 5n });
  });

  it('a scheme the ensemble does not know: acquire throws ConnectionConfigError(authentication)', async () => {
    const n = zookeeperNode({ connectString: ensemble.endpoints[0]!, clock: systemClock, auth: [{ scheme: 'no-such-scheme', credentials: 'x' }] });
    nodes.push(n);
    const refused = await lockOn(n).acquire('auth', { ttlMs: 5000 }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ConnectionConfigError);
    expect(refused).toMatchObject({ code: 'authentication' });
  });

  it('a malformed auth option is InvalidInputError before any client is made', () => {
    for (const auth of [[{ scheme: '', credentials: 'x' }], [{ scheme: 'digest' }], 'digest:x', [null]]) {
      expect(() => zookeeperNode({ connectString: ensemble.endpoints[0]!, clock: systemClock, auth: auth as never })).toThrow(InvalidInputError);
    }
  });
});

describe('ZooKeeper agrees with etcd-lease in lockstep (paced to real time)', () => {
  const cell = (): ZookeeperCell => ({ ensemble, stop: () => ensemble.stop() });

  for (const store of ['unfenced', 'strict'] as const) {
    it(`zookeeper / ${store}: no conformance failure in ${RUNS} schedule(s) with pauses, partitions and delays`, async ({ skip }) => {
      const result = await checkConformance(realZookeeperBackend(cell(), store), { runs: RUNS, seed: SEED, resources: 2, maxCommands: 12, faults: ['advance', 'pause', 'partition', 'delay'] });
      expect(result.failure?.message ?? null).toBeNull();
      skipUnjudged(skip, result);
    }, 300_000);
  }

  const backend: BackendOn = (store) => realZookeeperBackend(cell(), store);

  // The Jepsen pause in lockstep: a holder paused past its session timeout between its check and its write loses
  // the next holder's update unless the store checks the create zxid.
  it('a holder paused past its session: the stale write lands unfenced (STORE-1), the zxid fence rejects it', async ({ skip }) => {
    const fenced = await staleLandsUnfenced(skip, backend, pausedHolder());
    expect(fenced.findings).toEqual([]);
    expectReadLast(fenced, 'fresh');
  }, 60_000);

  // Kleppmann's delayed packet (spec 3, "Delayed requests"): a write checked under a valid lease and held in the network
  // lands after the session ran out and the next holder wrote, as the stress runs' proxy made it land.
  it('a delayed write lands after the next holder\'s: lost unfenced (STORE-1), rejected by the zxid fence', async ({ skip }) => {
    const fenced = await staleLandsUnfenced(skip, backend, delayedWrite);
    expect(fenced.steps.find((s) => s.command.kind === 'deliver')?.actual.kind).toBe('rejected');
    expectReadLast(fenced, 'fresh');
  }, 60_000);

  // An acquire split by its client's pause (spec 7.7): the session is opened, the client stops before it puts its
  // contender; another client is granted meanwhile, and the first, resumed, finds the line taken.
  it('an acquire paused after its session opened: another client is granted, the resumed one is denied', async ({ skip }) => {
    await splitAcquireDenied(skip, backend);
  }, 60_000);

  // Timing faults (spec 7.6.1, 7.10): the service a black hole, so an extend (a touch) gets no reply and gives up at its
  // bound (the ttl); back to normal, the session runs out; a late first round of the next acquire shortens its validity.
  it('a black-holed service and late replies: the extend gives up at its bound, the late grant is shorter', async ({ skip }) => {
    await blackHoleAndLateReplies(skip, backend);
  }, 60_000);

  // Crash-restart (spec 7.10): the leader and a follower killed, the quorum lost; back on their transaction logs, the
  // new leader starts every session's timeout afresh, so the lock outlives its holder's validity; zxids go on. Twice,
  // so that both followers are the one killed once.
  it('a crash of the leader and a follower and their restart: the session survives, its timeout started afresh; tokens go on increasing', async ({ skip }) => {
    await crashRestartTwice(skip, backend, 2000);
  }, 180_000);
});

describe('ZookeeperEnsemble', () => {
  it('a paused follower does not stop the ensemble; stop() leaves no member running and no directory', async () => {
    const leader = await ensemble.leader();
    const follower = [0, 1, 2].find((m) => m !== leader)!;
    ensemble.pause(follower);
    try {
      expect(ensemble.paused(follower)).toBe(true);
      const store = zookeeperFencedStore(node(ensemble.endpoints[leader]!), 'strict', { root: '/t' });
      expect(await store.write('paused', 1n, 'a')).toEqual({ kind: 'accepted' });
    } finally {
      ensemble.resume(follower);
    }
    const pids = [0, 1, 2].map((m) => ensemble.pid(m));
    const dir = ensemble.dir;
    expect(pids.every(alive)).toBe(true);
    await ensemble.stop();
    expect(pids.filter(alive)).toEqual([]);
    expect(existsSync(dir)).toBe(false);
  });
});
