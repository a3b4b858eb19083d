import { appendFile } from 'node:fs/promises';
import { join } from 'node:path';
import zookeeper from 'node-zookeeper-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZookeeperEnsemble } from '../conformance/env/zookeeperEnsemble.ts';
import { systemClock } from '../impl/clock.ts';
import { ConnectionConfigError, UnavailableError } from '../impl/errors.ts';
import { LATER_CODES } from '../impl/zookeeper/codes.ts';
import { ZookeeperLock, zookeeperFencedStore, zookeeperNode, type ZookeeperNode } from '../impl/zookeeper/index.ts';

/**
 * ZooKeeper's replies with a code node-zookeeper-client 1.1 does not know
 * (codes of ZooKeeper 3.5 and later): the library threw 'Unknown code' from
 * its socket's data handler, the request that got the reply was never
 * answered and waited out its whole bound. Seen on a member enforcing
 * authentication (ZooKeeper 3.7+, enforce.auth.enabled), which answers every
 * request of a session without the required credentials with
 * SESSION_CLOSED_REQUIRE_SASL_AUTH (-124): each acquire was `timed-out`
 * after the request timeout, each store call a TimeoutError, never the
 * refusal it is. One member of its own, restarted with enforcement on.
 */
let ensemble: ZookeeperEnsemble;
/** The library's factory of its errors by code (untyped in @types/node-zookeeper-client). */
const exception = (code: number): zookeeper.Exception & Error => (zookeeper.Exception as unknown as { create(code: number): zookeeper.Exception & Error }).create(code);
const nodes: ZookeeperNode[] = [];
const BOUND_MS = 10_000;

function node(withCredentials: boolean): ZookeeperNode {
  const { connectString, auth } = ensemble.clientOptions();
  const n = zookeeperNode({ connectString, ...(withCredentials ? { auth } : {}), clock: systemClock, requestTimeoutMs: BOUND_MS });
  nodes.push(n);
  return n;
}

async function thrown(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    (v) => new Error(`expected a rejection, got ${String(v)}`),
    (e: unknown) => e,
  );
}

beforeAll(async () => {
  ensemble = await ZookeeperEnsemble.start({ members: 1, parentDir: '/dev/shm' });
  // The run's digest identity is what lockcheck's clients present: a session with it passes, one without is refused.
  await appendFile(join(ensemble.dir, 'm1', 'zoo.cfg'), 'enforce.auth.enabled=true\nenforce.auth.schemes=digest\n');
  await ensemble.restart(0);
}, 90_000);

afterAll(async () => {
  for (const n of nodes) n.close();
  await ensemble?.stop();
});

describe('ZooKeeper replies with a code the client library does not know', () => {
  it('a member enforcing authentication: a client without credentials gets ConnectionConfigError(authentication) at once, from acquire (not retried) and the store; one with them is granted', async () => {
    const without = node(false);
    const lock = new ZookeeperLock({ node: without, clock: systemClock });
    const started = Date.now();
    const refused = await thrown(lock.acquire('r', { ttlMs: 5000, retries: 3 }));
    expect(refused).toBeInstanceOf(ConnectionConfigError);
    expect(refused).toMatchObject({ code: 'authentication' });
    expect((refused as Error).message).toContain('SESSION_CLOSED_REQUIRE_SASL_AUTH[-124]');
    expect(((refused as Error).cause as zookeeper.Exception).getCode()).toBe(LATER_CODES.SESSION_CLOSED_REQUIRE_SASL_AUTH);
    const store = await thrown(zookeeperFencedStore(without, 'strict').write('r', 1n, 'v'));
    expect(store).toBeInstanceOf(ConnectionConfigError);
    // Answered, not waited out: well within one request's bound (it took the whole bound per call).
    expect(Date.now() - started).toBeLessThan(BOUND_MS);

    const granted = await new ZookeeperLock({ node: node(true), clock: systemClock }).acquire('r', { ttlMs: 5000 });
    expect(granted.kind).toBe('granted');
  });

  it('every code the library does not know becomes an Exception with its code (an outage unless it is a refusal), never a throw', async () => {
    node(true);
    for (const [name, code] of Object.entries(LATER_CODES)) {
      const e = exception(code);
      expect(e).toBeInstanceOf(zookeeper.Exception);
      expect([e.getCode(), e.getName(), e.message]).toEqual([code, name, `Exception: ${name}[${code}]`]);
    }
    const unknown = exception(-999);
    expect([unknown.getCode(), unknown.getName()]).toEqual([-999, 'UNKNOWN_CODE_-999']);
    expect(exception(zookeeper.Exception.NO_NODE).getName()).toBe('NO_NODE');
    // Through a node: a passing state such as THROTTLED_OP is an UnavailableError, read as an outage.
    const n = node(true);
    const s = await n.openSession(5000);
    (s as unknown as { client: { getChildren: (path: string, cb: (error: Error) => void) => void } }).client.getChildren = (_path, cb) => cb(exception(LATER_CODES.THROTTLED_OP));
    const e = await thrown(n.contenders(s, '/lockcheck/lock/x'));
    expect(e).toBeInstanceOf(UnavailableError);
    expect((e as Error).message).toContain('THROTTLED_OP[-127]');
    await n.closeSession(s);
  });
});
