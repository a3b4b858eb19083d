import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Etcd3 } from 'etcd3';
import { EtcdCluster } from '../conformance/env/etcdCluster.ts';
import { systemClock } from '../impl/clock.ts';
import { InvalidInputError } from '../impl/errors.ts';
import { EtcdLock, etcd3Node, etcdClient, etcdFencedStore } from '../impl/etcd/index.ts';
import type { EtcdNode } from '../impl/etcd/index.ts';
import type { MonotonicClock } from '../impl/clock.ts';
import { makeRunCa } from '../conformance/env/runCa.ts';
import { alive, grantedWithin, until } from './probes.ts';
import { expectGrantedAfterRelease, expectHighestWins, expectStorePolicies } from './realBackendChecks.ts';
import { expectLostAfter, HandClock } from './handClock.ts';

let cluster: EtcdCluster;
const clients: Etcd3[] = [];

function client(hosts = cluster.endpoints, of: EtcdCluster = cluster): Etcd3 {
  const c = etcdClient(of.clientOptions(hosts));
  clients.push(c);
  return c;
}

/** How long a test waits for a leader: an election on a loaded 2-core machine can take tens of seconds (at load 38 none came within the default 10 s). */
const ELECTION_WAIT_MS = 60_000;

/** A lock on `c`. Its calls' bound: by default one a loaded machine keeps for calls that should succeed (a fresh client's TLS handshake, an fsync, a new leader settling). */
function lockOn(c: Etcd3, clock: MonotonicClock = systemClock, timeoutMs = 10_000): { lock: EtcdLock; node: EtcdNode } {
  const node = etcd3Node(c, { clock: systemClock, requestTimeoutMs: timeoutMs });
  return { lock: new EtcdLock({ node, clock }), node };
}

beforeAll(async () => {
  cluster = await EtcdCluster.start();
});

afterAll(async () => {
  for (const c of clients) c.close();
  await cluster?.stop();
});

describe('EtcdCluster (real etcd, 3 members)', () => {
  it('elects a leader; a killed leader is replaced and comes back on its data as a follower; a paused follower does not stop the cluster', async () => {
    const leader = await cluster.leader(ELECTION_WAIT_MS);
    // Calls that should succeed, right after an election or a restart: a bound a loaded machine keeps.
    const deadline = (): { deadline: number } => ({ deadline: Date.now() + 30_000 });
    await client([cluster.endpoints[leader]!]).put('k').value('v').options(deadline());
    await cluster.kill(leader);
    expect(cluster.running(leader)).toBe(false);
    const next = await cluster.leader(ELECTION_WAIT_MS);
    expect(next).not.toBe(leader);
    const c = client([cluster.endpoints[next]!]);
    expect(await c.get('k').options(deadline()).string()).toBe('v');
    await cluster.restart(leader);
    expect(cluster.running(leader)).toBe(true);
    const follower = [0, 1, 2].find((m) => m !== next)!;
    cluster.pause(follower);
    try {
      expect(cluster.paused(follower)).toBe(true);
      await c.put('k').value('w').options(deadline());
    } finally {
      cluster.resume(follower);
    }
    // The resumed follower catches up with the leader's revision.
    const caughtUp = await until(async () => {
      const now = await cluster.status(2000);
      return now.every((s) => s !== null && s.revision === now[next]!.revision);
    }, 60_000);
    expect(caughtUp).toBe(true);
  }, 240_000);

  it('a link proxy cuts one client off (blackhole: the call times out) while another client goes on', async () => {
    const proxy = await cluster.link(0);
    const cut = client([`https://127.0.0.1:${proxy.port}`]);
    const other = client([cluster.endpoints[1]!]);
    // Calls that should succeed get a bound a loaded machine keeps (a fresh connection's first calls, fsyncs); only the
    // black-holed call has a short one: it never gets a reply, however idle or busy the machine.
    const { lock: cutLock } = lockOn(cut, systemClock, 10_000);
    expect((await cutLock.acquire('cut', { ttlMs: 5000 })).kind).toBe('granted');
    proxy.setMode({ kind: 'blackhole' });
    const r = await lockOn(cut, systemClock, 500).lock.acquire('cut-2', { ttlMs: 5000 });
    expect(r).toEqual({ kind: 'denied', reason: 'no-quorum' });
    const { lock } = lockOn(other, systemClock, 10_000);
    expect((await lock.acquire('cut-3', { ttlMs: 5000 })).kind).toBe('granted');
    proxy.setMode({ kind: 'pass' });
  });

  it('is private: a client without a certificate of the cluster\'s own CA is refused on every client and peer port, directly and through a link; lockcheck\'s clients get in', async () => {
    const proxy = await cluster.link(0);
    const through = `https://127.0.0.1:${proxy.port}`;
    // Another run's CA and certificates: valid TLS, the wrong issuer.
    const otherDir = mkdtempSync(join(tmpdir(), 'lockcheck-test-ca-'));
    try {
      const other = (await makeRunCa(otherDir)).client;
      // What an open member answers with 200: the JSON gateway's status on a client port, raft's member list on a peer port.
      const doors = [...[...cluster.endpoints, through].map((url) => `${url}/v3/maintenance/status`), ...cluster.peerEndpoints.map((url) => `${url}/members`)];
      for (const door of doors) {
        // Plaintext HTTP, TLS without a certificate, TLS with another CA's.
        expect(await knock(door.replace('https:', 'http:'), {}), door).toBe('refused');
        expect(await knock(door, {}), door).toBe('refused');
        expect(await knock(door, { cert: other.cert, key: other.key }), door).toBe('refused');
        // The cluster's own certificate is let in (the knock itself works).
        expect(await knock(door, { cert: cluster.clientTls.cert, key: cluster.clientTls.key }), door).toBe('answered');
      }
      // The gRPC API: a plaintext client, and one with the other run's certificate, get no call through.
      const plain = etcdClient({ hosts: cluster.endpoints.map((u) => u.replace('https:', 'http:')), dialTimeoutMs: 1000 });
      const foreign = etcdClient({ hosts: cluster.endpoints, tls: { ca: cluster.clientTls.ca, cert: other.cert, key: other.key }, dialTimeoutMs: 1000 });
      clients.push(plain, foreign);
      const deadline = (): { deadline: number } => ({ deadline: Date.now() + 5000 });
      for (const c of [plain, foreign]) await expect(c.put('private').value('x').options(deadline())).rejects.toThrow();
      // The cluster's own clients, directly and through the link, do.
      await client([through]).put('private').value('mine').options(deadline());
      expect(await client().get('private').string()).toBe('mine');
    } finally {
      rmSync(otherDir, { recursive: true, force: true });
    }
  });

  it('leaves nothing behind: after stop() no member runs and the directory is gone', async () => {
    const own = await EtcdCluster.start();
    const pids = [0, 1, 2].map((m) => own.pid(m));
    const dir = own.dir;
    expect(pids.every(alive)).toBe(true);
    expect(readFileSync(`/proc/${pids[0]}/cmdline`, 'utf8')).toContain('127.0.0.1');
    await own.stop();
    expect(pids.filter(alive)).toEqual([]);
    expect(existsSync(dir)).toBe(false);
  });

  it('member partitions (peer gates): an isolated leader commits nothing, the majority elects a leader and grants the lock; after the heal every member agrees', async () => {
    const gated = await EtcdCluster.start({ peerGates: true, electionMs: 600, parentDir: '/dev/shm' });
    try {
      const old = await gated.leader(ELECTION_WAIT_MS);
      const rest = [0, 1, 2].filter((m) => m !== old);
      const idOf = async (m: number): Promise<string> => (await gated.status(1000))[m]!.id;
      const oldId = await idOf(old);
      /** The members' status, for a message when a wait misses (revisions are bigints). */
      const statusText = async (): Promise<string> => JSON.stringify(await gated.status(2000), (_k, v: unknown) => (typeof v === 'bigint' ? `${v}` : v));
      gated.partitionMembers([old]);
      // The majority side elects a leader of its own, which the isolated member is not.
      const elected = await until(async () => {
        const s = await gated.status(2000);
        const leaders = new Set(rest.map((m) => s[m]?.leader ?? '0'));
        return leaders.size === 1 && !leaders.has('0') && !leaders.has(oldId);
      }, 60_000);
      // Real events, bounded generously: an election on a loaded 2-core machine can take tens of seconds.
      if (!elected) throw new Error(`no new leader on the majority side within 60 s: ${await statusText()}`);
      const isolated = lockOn(client([gated.endpoints[old]!], gated), systemClock, 1500).lock;
      // Calls that should succeed get a bound a loaded machine keeps, as above (at 3 s, ten attempts in a row timed out
      // at load 25 while the two members' 600 ms elections settled); only the isolated member's calls have a short one.
      const majority = lockOn(client(rest.map((m) => gated.endpoints[m]!), gated), systemClock, 10_000).lock;
      expect((await isolated.acquire('split-0', { ttlMs: 5000 })).kind).not.toBe('granted');
      // A loaded machine may time a first attempt out while the new leader settles: the majority grants within a bound.
      // The lease outlives the heal and the convergence below on a loaded machine (5 s did not, once: the healed member then granted it).
      const held = await grantedWithin(60_000, 'split', (resource) => majority.acquire(resource, { ttlMs: 120_000 }));
      gated.healMembers();
      const converged = await until(async () => {
        const s = await gated.status(2000);
        return s.every((x) => x !== null && x.leader === s[rest[0]!]!.leader && x.revision === s[rest[0]!]!.revision);
      }, 60_000);
      if (!converged) throw new Error(`the members did not agree within 60 s of the heal: ${await statusText()}`);
      // The healed member serves the majority's state: the lock is held.
      const after = lockOn(client([gated.endpoints[old]!], gated), systemClock, 10_000).lock;
      expect(await after.acquire(held.resource, { ttlMs: 5000 })).toEqual({ kind: 'denied', reason: 'held' });
      await majority.release(held.lease);
    } finally {
      await gated.stop();
    }
  }, 300_000);

  it('dies with its parent: after SIGKILL of the process that started it, the watchdog kills every member and removes the directory', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('./fixtures/startEtcd.ts', import.meta.url))], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const started = await new Promise<{ pids: number[]; dir: string }>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`the child started no cluster within 60 s\n${stderr}`)), 60_000);
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const line = out.split('\n').find((l) => l.startsWith('{'));
        if (line !== undefined && out.includes('\n')) {
          clearTimeout(timer);
          resolve(JSON.parse(line) as { pids: number[]; dir: string });
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`the child exited (${String(code)}) before starting its cluster\n${stderr}`));
      });
    });
    expect(started.pids.every(alive)).toBe(true);
    child.kill('SIGKILL');
    await until(() => !started.pids.some(alive) && !existsSync(started.dir), 15_000);
    expect({ alive: started.pids.filter(alive), dir: existsSync(started.dir) }).toEqual({ alive: [], dir: false });
  });
});

describe('EtcdLock (spec 7.6 etcd-lease, real etcd)', () => {
  it('grants once (MUTEX-1), denies while held, and tokens are create revisions strictly increasing across resources (FENCE-1)', async () => {
    const a = lockOn(client()).lock;
    const b = lockOn(client()).lock;
    const first = await a.acquire('mutex', { ttlMs: 5000 });
    expect(first.kind).toBe('granted');
    expect(await b.acquire('mutex', { ttlMs: 5000 })).toEqual({ kind: 'denied', reason: 'held' });
    const other = await b.acquire('mutex-other', { ttlMs: 5000 });
    if (first.kind !== 'granted' || other.kind !== 'granted') throw new Error('expected grants');
    expect(other.lease.token).toBeGreaterThan(first.lease.token);
    await expectGrantedAfterRelease(a, b, first.lease, other.lease);
  });

  it('refuses bad input with InvalidInputError before any call', async () => {
    const { lock } = lockOn(client());
    await expect(lock.acquire('', { ttlMs: 1000 })).rejects.toBeInstanceOf(InvalidInputError);
    await expect(lock.acquire('x', { ttlMs: 0 })).rejects.toBeInstanceOf(InvalidInputError);
    await expect(lock.acquire('x', { ttlMs: 1.5 })).rejects.toBeInstanceOf(InvalidInputError);
  });

  it('the signal fires at validity minus the margin on the injected clock; extend (a keep-alive) moves it; a lease etcd revoked is lost at the next keep-alive', async () => {
    const clock = new HandClock();
    const c = client();
    const { lock, node } = lockOn(c, clock);
    const r = await lock.acquire('signal', { ttlMs: 3000 });
    if (r.kind !== 'granted') throw new Error('expected a grant');
    // validity = ttl - ceil(0.01 * ttl) - 2 = 2968 ms from the start (the hand clock did not move during the calls)
    expect(r.lease.validUntilMs).toBe(2968);
    const signal = r.lease.signal;
    clock.advance(2000);
    expect(signal.aborted).toBe(false);
    expect(await lock.extend(r.lease, 3000)).toEqual({ kind: 'extended', validUntilMs: 2000 + 2968 });
    expectLostAfter(clock, signal, 2968);

    const s = await lock.acquire('signal-2', { ttlMs: 3000 });
    if (s.kind !== 'granted') throw new Error('expected a grant');
    await node.revoke(s.lease.owner);
    expect(await lock.extend(s.lease, 3000)).toEqual({ kind: 'not-extended', reason: 'expired' });
    expect(s.lease.signal.aborted).toBe(true);
  });

  it('release deletes the key only while lease and create revision are ours', async () => {
    const c = client();
    const { lock, node } = lockOn(c);
    const r = await lock.acquire('owned', { ttlMs: 5000 });
    if (r.kind !== 'granted') throw new Error('expected a grant');
    const key = Buffer.from('lockcheck/lock/owned');
    expect(await node.deleteIfOwned(key, r.lease.owner, r.lease.token + 1n)).toBe(false);
    expect(await node.deleteIfOwned(key, '1', r.lease.token)).toBe(false);
    expect(await c.get('lockcheck/lock/owned').string()).toBe(r.lease.owner);
    await lock.release(r.lease);
    expect(await c.get('lockcheck/lock/owned').string()).toBeNull();
  });

  it('a lease outlives the kill of the leader: the lock stays held (a new leader refreshes it), tokens keep increasing', async () => {
    const c = client();
    const { lock } = lockOn(c);
    // A ttl the failover below cannot outlast on a loaded machine (a kill, an election, a fresh client's calls): a lease
    // the kill lost is granted to the other client whatever the ttl.
    const r = await lock.acquire('failover', { ttlMs: 60_000 });
    if (r.kind !== 'granted') throw new Error('expected a grant');
    const leader = await cluster.leader(ELECTION_WAIT_MS);
    await cluster.kill(leader);
    await cluster.leader(ELECTION_WAIT_MS);
    const other = lockOn(client(cluster.endpoints.filter((_e, i) => i !== leader))).lock;
    let denied = false;
    await until(async () => {
      const x = await other.acquire('failover', { ttlMs: 5000 });
      denied = x.kind === 'denied' && x.reason === 'held';
      return x.kind !== 'denied' || x.reason !== 'no-quorum';
    }, 30_000);
    expect(denied).toBe(true);
    const y = await other.acquire('failover-2', { ttlMs: 5000 });
    if (y.kind !== 'granted') throw new Error('expected a grant');
    expect(y.lease.token).toBeGreaterThan(r.lease.token);
    await cluster.restart(leader);
  });
});

describe('etcdFencedStore (real etcd)', () => {
  it('strict rejects token <= highest, monotonic rejects token < highest, unfenced accepts; reads return value and token', async () => {
    const c = client();
    const node = etcd3Node(c, { clock: systemClock });
    await expectStorePolicies((policy) => etcdFencedStore(node, policy));
    expect(() => etcdFencedStore(node, 'transactional')).toThrow(InvalidInputError);
  });

  it('concurrent strict writes with distinct tokens: exactly the highest one ends up stored', async () => {
    const node = etcd3Node(client(), { clock: systemClock });
    await expectHighestWins(etcdFencedStore(node, 'monotonic'));
  });
});

/**
 * One request to `url` (http: plaintext; https: TLS trusting any server, with the client certificate given; a
 * `/members` door is a GET, any other a POST of `{}`): 'answered' when a reply below 400 comes back, else 'refused'
 * (the handshake or the connection failed, or the server said no). Bounded.
 */
function knock(url: string, tls: { readonly cert?: string; readonly key?: string }): Promise<'answered' | 'refused'> {
  return new Promise((resolve) => {
    const secure = url.startsWith('https:');
    // A bound a loaded machine keeps for the doors that answer (a TLS handshake, the gateway); the others refuse at once.
    const options = { method: url.endsWith('/members') ? 'GET' : 'POST', timeout: 20_000, agent: false as const, ...(secure ? { rejectUnauthorized: false, ...tls } : {}) };
    const req = (secure ? httpsRequest : httpRequest)(url, options, (res) => {
      res.resume();
      resolve(res.statusCode !== undefined && res.statusCode < 400 ? 'answered' : 'refused');
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve('refused'));
    req.end(options.method === 'POST' ? '{}' : undefined);
  });
}
