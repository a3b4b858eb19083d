/**
 * The PostgreSQL session and transaction locks after their error paths (a
 * server that is not there, close() while an acquire is out, a server killed
 * while a call is out, an acquire that times out on a paused server): once
 * close() resolved, nothing of the lock is left in this process (no timer, no
 * socket), counted by process.getActiveResourcesInfo() against the count
 * before the lock was made.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freeLoopbackPort } from '../../conformance/env/processes.ts';
import { PostgresServer } from '../../conformance/env/postgresServer.ts';
import { openPostgresFencedStore, PostgresSessionLock, PostgresTransactionLock } from '../../impl/postgres/index.ts';
import { activeResources, backToBaseline, outcome, rebased, within } from './resources.ts';

let server: PostgresServer;
beforeAll(async () => {
  server = await PostgresServer.start({ parentDir: '/dev/shm' });
}, 120_000);
afterAll(async () => {
  await server?.stop();
});

type Lock = PostgresSessionLock | PostgresTransactionLock;
const kinds: ReadonlyArray<readonly [string, (connection: object, statementTimeoutMs: number) => Lock]> = [
  ['PostgresSessionLock', (connection, statementTimeoutMs) => new PostgresSessionLock({ connection, statementTimeoutMs })],
  ['PostgresTransactionLock', (connection, statementTimeoutMs) => new PostgresTransactionLock({ connection, statementTimeoutMs })],
];

describe.each(kinds)('%s: nothing left after close(), whatever the acquire met', (_name, make) => {
  it('a server that is not there (connection refused)', async () => {
    const nowhere = await freeLoopbackPort();
    const baseline = activeResources();
    const lock = make({ ...server.connection, port: nowhere }, 10_000);
    expect(await outcome(lock.acquire('r-refused'))).not.toBe('granted');
    await within(lock.close(), 5000, 'close()');
    await backToBaseline(baseline, 'after a refused connection');
  }, 30_000);

  it('close() while an acquire is out on a paused server', async () => {
    const baseline = activeResources();
    // close() says goodbye on each open connection, bounded by statementTimeoutMs: a paused server never answers it.
    const lock = make(server.connection, 2000);
    // Connected first: the acquire below is a statement out, not a connect.
    const first = await lock.acquire('r-first');
    expect(first.kind).toBe('granted');
    server.pause();
    try {
      const acquiring = outcome(lock.acquire('r-closed'));
      await within(lock.close(), 5000, 'close() with an acquire out');
      expect(await within(acquiring, 5000, 'the acquire after close()')).not.toBe('granted');
    } finally {
      server.resume();
    }
    await backToBaseline(baseline, 'after close() with an acquire out');
  }, 30_000);

  it('close() while the connection opens on a paused server', async () => {
    const baseline = activeResources();
    const lock = make(server.connection, 10_000);
    server.pause();
    try {
      const acquiring = outcome(lock.acquire('r-opening'));
      // The connection holds nothing yet: close() abandons it at once, well within the lock's 10 s bounds.
      await within(lock.close(), 5000, 'close() with the connection opening');
      expect(await within(acquiring, 5000, 'the acquire after close()')).not.toBe('granted');
    } finally {
      server.resume();
    }
    await backToBaseline(baseline, 'after close() with the connection opening');
  }, 30_000);

  it('an acquire that times out on a paused server', async () => {
    const baseline = activeResources();
    // 5 s bounds: the warm acquire on the live server needs its answer whatever a loaded machine adds.
    const lock = make(server.connection, 5000);
    expect((await lock.acquire('r-warm')).kind).toBe('granted');
    server.pause();
    try {
      expect(await outcome(lock.acquire('r-timeout'))).not.toBe('granted');
    } finally {
      server.resume();
    }
    await within(lock.close(), 5000, 'close()');
    // Shorter than the lock's 5 s bounds: a timer of it left running is still there when the wait ends.
    await backToBaseline(baseline, 'after a timed-out acquire', 3000);
  }, 30_000);

  it('a server killed while an acquire is out', async () => {
    const baseline = activeResources();
    const lock = make(server.connection, 10_000);
    expect((await lock.acquire('r-before')).kind).toBe('granted');
    server.pause();
    const acquiring = outcome(lock.acquire('r-killed'));
    await server.crash();
    expect(await within(acquiring, 5000, 'the acquire after the kill')).not.toBe('granted');
    await within(lock.close(), 5000, 'close()');
    const before = activeResources();
    await server.restart();
    await backToBaseline(rebased(baseline, before), 'after a server killed mid-call');
  }, 60_000);
});

describe('openPostgresFencedStore: nothing left after close()', () => {
  it('close() while its connection opens on a paused server abandons it at once', async () => {
    const baseline = activeResources();
    const store = openPostgresFencedStore({ connection: server.connection, statementTimeoutMs: 10_000 }, 'strict');
    server.pause();
    try {
      const reading = outcome(store.read('r-opening').then(() => ({ kind: 'read' })));
      await within(store.close(), 1000, 'close() with the connection opening');
      expect(await within(reading, 5000, 'the read after close()')).not.toBe('read');
    } finally {
      server.resume();
    }
    await backToBaseline(baseline, 'after close() with the connection opening');
  }, 30_000);
});
