import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdAuthenticationFailedError, EtcdPermissionDeniedError, Range, type Etcd3 } from 'etcd3';
import { EtcdCluster } from '../conformance/env/etcdCluster.ts';
import { systemClock } from '../impl/clock.ts';
import { ConnectionConfigError, ServerRefusedError } from '../impl/errors.ts';
import { EtcdLock, etcd3Node, etcdClient, etcdFencedStore, type EtcdNode } from '../impl/etcd/index.ts';
import { lockKey } from '../impl/etcd/keys.ts';
import { until } from './probes.ts';

/**
 * The etcd backend against a real etcd with auth enabled (RBAC): a single
 * member of its own, since enabling auth on a cluster other tests share
 * would refuse their clients. Refusals no retry can fix are typed errors,
 * never a denial: a role that may only read the lock's prefix
 * (ServerRefusedError permission), credentials etcd does not take
 * (ConnectionConfigError authentication); a role that may write it locks
 * and releases as without auth.
 */
const PREFIX = 'lockcheck/';
const password = (): string => randomBytes(12).toString('hex');
const passwords = { root: password(), reader: password(), writer: password(), nobody: password() };

let cluster: EtcdCluster | undefined;
let root: Etcd3;
const clients: Etcd3[] = [];

function client(auth?: { username: string; password: string }): Etcd3 {
  const c = etcdClient({ ...cluster!.clientOptions(), ...(auth !== undefined ? { auth } : {}) });
  clients.push(c);
  return c;
}
function as(user: keyof typeof passwords, pw = passwords[user]): Etcd3 {
  return client({ username: user, password: pw });
}
function nodeOf(c: Etcd3): EtcdNode {
  return etcd3Node(c, { clock: systemClock, requestTimeoutMs: 5000 });
}
async function thrown(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    (v) => {
      throw new Error(`expected a rejection, got ${JSON.stringify(v, (_, x: unknown) => (typeof x === 'bigint' ? x.toString() : x))}`);
    },
    (e: unknown) => e,
  );
}
async function leases(): Promise<number> {
  return (await root.leaseClient.leaseLeases({})).leases.length;
}
/** Bounded: a refused attempt's revoke is sent without waiting for it. */
async function noLeaseLeft(): Promise<void> {
  expect(await until(async () => (await leases()) === 0, 10_000)).toBe(true);
}

beforeAll(async () => {
  cluster = await EtcdCluster.start({ members: 1, parentDir: '/dev/shm' });
  const setup = client();
  try {
    // etcd enables auth only with a root user holding the root role.
    await setup.user('root').create(passwords.root);
    await setup.role('root').create();
    await setup.user('root').addRole('root');
    await setup.role('reader').create();
    await setup.role('reader').grant({ permission: 'Read', range: Range.prefix(PREFIX) });
    await setup.role('writer').create();
    await setup.role('writer').grant({ permission: 'Readwrite', range: Range.prefix(PREFIX) });
    for (const user of ['reader', 'writer'] as const) {
      await setup.user(user).create(passwords[user]);
      await setup.user(user).addRole(user);
    }
    await setup.user('nobody').create(passwords.nobody);
    await setup.auth.authEnable();
  } finally {
    setup.close();
  }
  root = as('root');
});

afterAll(async () => {
  for (const c of clients) c.close();
  const dir = cluster?.dir;
  await cluster?.stop();
  if (dir !== undefined) expect(existsSync(dir)).toBe(false);
});

describe('etcd with auth enabled (real etcd, 1 member)', () => {
  it('a role that may only read the prefix: acquire throws ServerRefusedError permission with its cause, after one attempt; nothing is left held', async () => {
    let grants = 0;
    const real = nodeOf(as('reader'));
    const node: EtcdNode = { ...real, grant: (ttl) => (grants++, real.grant(ttl)) };
    const lock = new EtcdLock({ node, clock: systemClock });
    // A retry could not help: the refusal ends the acquire at the first attempt.
    const e = await thrown(lock.acquire('ro', { ttlMs: 5000, retries: 3, retryDelayMs: 100 }));
    expect(e).toBeInstanceOf(ServerRefusedError);
    expect(e).toMatchObject({ code: 'permission', serverCode: 'PermissionDenied' });
    expect((e as Error).message).toMatch(/^permission \(PermissionDenied\): etcd put-if-absent: .*etcdserver: permission denied/);
    expect((e as Error).cause).toBeInstanceOf(EtcdPermissionDeniedError);
    expect(grants).toBe(1);
    expect(lock.trackedLeases).toBe(0);
    expect(await root.get(lockKey('ro')).string()).toBeNull();
    await noLeaseLeft();
    // Free for a holder that may write.
    const writer = new EtcdLock({ node: nodeOf(as('writer')), clock: systemClock });
    const r = await writer.acquire('ro', { ttlMs: 5000 });
    expect(r.kind).toBe('granted');
    if (r.kind === 'granted') await writer.release(r.lease);
    await noLeaseLeft();
  });

  it('credentials etcd does not take are ConnectionConfigError authentication with the cause: a wrong password, an unknown user, none at all', async () => {
    const wrong = await thrown(new EtcdLock({ node: nodeOf(as('writer', 'not-the-password')), clock: systemClock }).acquire('auth', { ttlMs: 5000, retries: 2, retryDelayMs: 100 }));
    expect(wrong).toBeInstanceOf(ConnectionConfigError);
    expect(wrong).toMatchObject({ code: 'authentication' });
    expect((wrong as Error).cause).toBeInstanceOf(EtcdAuthenticationFailedError);
    // Printed whole, causes and properties included, the error holds neither password.
    expect(inspect(wrong, { depth: 20, showHidden: true })).not.toMatch(new RegExp(`not-the-password|${passwords.writer}`));
    const unknown = await thrown(new EtcdLock({ node: nodeOf(client({ username: 'ghost', password: 'x' })), clock: systemClock }).acquire('auth', { ttlMs: 5000 }));
    expect(unknown).toBeInstanceOf(ConnectionConfigError);
    expect(unknown).toMatchObject({ code: 'authentication' });
    expect((unknown as Error).cause).toBeInstanceOf(EtcdAuthenticationFailedError);
    // No password on a cluster with auth: the members require a client certificate (EtcdCluster is private), and etcd
    // then takes the certificate's common name as the user, one no role is granted to: a permission refusal.
    const none = await thrown(new EtcdLock({ node: nodeOf(client()), clock: systemClock }).acquire('auth', { ttlMs: 5000 }));
    expect(none).toBeInstanceOf(ServerRefusedError);
    expect(none).toMatchObject({ code: 'permission' });
    expect(await root.get(lockKey('auth')).string()).toBeNull();
    await noLeaseLeft();
  });

  it('a role that may write the prefix: acquire grants, extend renews, release frees', async () => {
    const lock = new EtcdLock({ node: nodeOf(as('writer')), clock: systemClock });
    const r = await lock.acquire('rw', { ttlMs: 5000 });
    if (r.kind !== 'granted') throw new Error(`expected granted, got ${r.kind}`);
    expect(await root.get(lockKey('rw')).string()).not.toBeNull();
    expect((await lock.extend(r.lease, 5000)).kind).toBe('extended');
    const other = new EtcdLock({ node: nodeOf(as('writer')), clock: systemClock });
    expect(await other.acquire('rw', { ttlMs: 5000 })).toEqual({ kind: 'denied', reason: 'held' });
    await lock.release(r.lease);
    expect(await root.get(lockKey('rw')).string()).toBeNull();
    await noLeaseLeft();
    const again = await other.acquire('rw', { ttlMs: 5000 });
    expect(again.kind).toBe('granted');
    if (again.kind === 'granted') {
      expect(again.lease.token).toBeGreaterThan(r.lease.token);
      await other.release(again.lease);
    }
    await noLeaseLeft();
  });

  it('the fenced store: a read-only role cannot write (ServerRefusedError permission) but reads; a role without the prefix cannot read', async () => {
    const written = await etcdFencedStore(nodeOf(as('writer')), 'strict').write('cell', 5n, 'v');
    expect(written).toEqual({ kind: 'accepted' });
    const readOnly = etcdFencedStore(nodeOf(as('reader')), 'strict');
    const e = await thrown(readOnly.write('cell', 6n, 'w'));
    expect(e).toBeInstanceOf(ServerRefusedError);
    expect(e).toMatchObject({ code: 'permission', serverCode: 'PermissionDenied' });
    expect((e as Error).cause).toBeInstanceOf(EtcdPermissionDeniedError);
    expect(await readOnly.read('cell')).toEqual({ value: 'v', token: 5n });
    const nobody = etcdFencedStore(nodeOf(as('nobody')), 'strict');
    expect(await thrown(nobody.read('cell'))).toMatchObject({ name: 'ServerRefusedError', code: 'permission' });
    expect(await thrown(nobody.write('cell', 7n, 'x'))).toMatchObject({ name: 'ServerRefusedError', code: 'permission' });
  });
});
