import { readFileSync } from 'node:fs';
import { chmod, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { withPostgres } from './postgresFixture.ts';
import { testTempDir } from './tempDirs.ts';
import { PostgresServer } from '../conformance/env/postgresServer.ts';
import { systemClock } from '../impl/clock.ts';
import { ConnectionConfigError, TimeoutError } from '../impl/errors.ts';
import { PostgresSessionLock } from '../impl/postgres/sessionLock.ts';
import { openPostgresFencedStore } from '../impl/postgres/store.ts';
import type { WireConnectOptions } from '../impl/postgres/wire/connection.ts';
import { PreparedStatement, WireConnection } from '../impl/postgres/wire/connection.ts';
import { wireEndpoint } from '../impl/postgres/wire/endpoint.ts';
import { WireConnectionError, WireProtocolError, WireServerError } from '../impl/postgres/wire/errors.ts';
import { AUTH_OK, fakeServer, message, READY } from './impl/fakePostgres.ts';
import { ManualClock } from './impl/servers.ts';

/**
 * The session lock's own wire client (impl/postgres/wire) against a real
 * PostgreSQL 15 whose pg_hba.conf (a file of this test, given as hba_file)
 * asks one role each for trust, cleartext, md5 and scram-sha-256; its
 * errors typed by SQLSTATE; a server killed under a call in flight; and fake
 * servers on loopback sockets that send what no PostgreSQL sends.
 */
const HBA = `
host all lc_trust 127.0.0.1/32 trust
host all lc_clear 127.0.0.1/32 password
host all lc_md5 127.0.0.1/32 md5
local all all scram-sha-256
host all all 127.0.0.1/32 scram-sha-256
`;
const PASSWORD = 'pw-Ünïcode-ok';
const SELECT_ONE = new PreparedStatement('t_one', 'SELECT $1::bigint + 1, NULL::text');

// Made before the server starts (its hba_file), removed after it stops (after hooks run in reverse order), or by the
// watchdog should the run be killed before its afterAll (a killed mutation run left dozens in /dev/shm, which is memory).
const hbaDir = testTempDir('lockcheck-hba-', '/dev/shm');
beforeAll(async () => {
  await chmod(hbaDir, 0o755);
  await writeFile(join(hbaDir, 'pg_hba.conf'), HBA, { mode: 0o644 });
});
const db = withPostgres(
  () => ({ settings: { hba_file: join(hbaDir, 'pg_hba.conf'), log_connections: true } }),
  async (admin) => {
    await admin.query(`CREATE ROLE lc_trust LOGIN; CREATE ROLE lc_clear LOGIN PASSWORD '${PASSWORD}'; CREATE ROLE lc_scram LOGIN PASSWORD '${PASSWORD}'`);
    await admin.query(`SET password_encryption = 'md5'; CREATE ROLE lc_md5 LOGIN PASSWORD '${PASSWORD}'`);
  },
);

const options = (over: Partial<WireConnectOptions> = {}): WireConnectOptions => ({ ...db.server.connection, timeoutMs: 5_000, clock: systemClock, ...over });

async function roundTrip(c: WireConnection): Promise<void> {
  await c.prepare([SELECT_ONE]);
  expect(await c.call(SELECT_ONE, ['9223372036854775806'])).toEqual([['9223372036854775807', null]]);
}

describe('wire client against PostgreSQL 15', () => {
  it.each([
    ['trust', 'lc_trust', undefined],
    ['password', 'lc_clear', PASSWORD],
    ['md5', 'lc_md5', PASSWORD],
    ['scram-sha-256', 'lc_scram', PASSWORD],
  ] as const)('authenticates with %s', async (method, user, password) => {
    const c = await WireConnection.connect(options({ user, password }));
    try {
      expect(c.processId).toBeGreaterThan(0);
      await roundTrip(c);
      // The method the server used (log_connections; the backend writes the line before it says AuthenticationOk). Trust logs no identity.
      const log = readFileSync(db.server.logFile, 'utf8');
      if (method === 'trust') expect(log).not.toContain(`identity="${user}"`);
      else expect(log).toContain(`identity="${user}" method=${method}`);
    } finally {
      await c.end();
    }
  });

  it('a wrong password is 28P01 under every method; a missing one is ConnectionConfigError, before anything is sent', async () => {
    for (const user of ['lc_clear', 'lc_md5', 'lc_scram']) {
      const e = await WireConnection.connect(options({ user, password: 'wrong' })).catch((x: unknown) => x);
      expect(e, user).toBeInstanceOf(WireServerError);
      expect(e).toMatchObject({ code: '28P01', severity: 'FATAL' });
    }
    const none = await WireConnection.connect(options({ user: 'lc_scram', password: undefined })).catch((x: unknown) => x);
    expect(none).toBeInstanceOf(ConnectionConfigError);
    expect(none).toMatchObject({ code: 'authentication' });
  });

  it('connects over the Unix socket too (a host that is a directory)', async () => {
    const endpoint = wireEndpoint({ ...db.server.connection, host: db.server.socketDir });
    if ('unsupported' in endpoint) throw new Error(endpoint.unsupported);
    expect(endpoint.path).toBe(join(db.server.socketDir, `.s.PGSQL.${db.server.port}`));
    const c = await WireConnection.connect({ ...endpoint, timeoutMs: 5_000, clock: systemClock });
    await roundTrip(c);
    await c.end();
  });

  it('sends statement_timeout as a start-up parameter; errors keep their SQLSTATE and fields; pipelined callers get their own replies', async () => {
    const c = await WireConnection.connect(options({ parameters: { statement_timeout: '1234', application_name: 'wire-test' } }));
    try {
      const show = new PreparedStatement('t_show', "SELECT current_setting('statement_timeout'), current_setting('application_name')");
      const bad = new PreparedStatement('t_bad', 'SELECT 1 / $1::int');
      await c.prepare([show, bad, SELECT_ONE]);
      expect(await c.call(show, [])).toEqual([['1234ms', 'wire-test']]);
      const results = await Promise.allSettled([c.call(SELECT_ONE, ['1']), c.call(bad, ['0']), c.call(SELECT_ONE, ['2']), c.call(bad, ['x'])]);
      expect(results[0]).toEqual({ status: 'fulfilled', value: [['2', null]] });
      expect(results[1]).toMatchObject({ status: 'rejected', reason: { name: 'WireServerError', code: '22012', severity: 'ERROR' } });
      expect(results[2]).toEqual({ status: 'fulfilled', value: [['3', null]] });
      expect(results[3]).toMatchObject({ status: 'rejected', reason: { code: '22P02' } });
      expect((results[3] as PromiseRejectedResult).reason.fields.M).toMatch(/invalid input syntax/);
      // An error leaves the connection usable (the Sync ends it).
      expect(await c.call(SELECT_ONE, ['3'])).toEqual([['4', null]]);
      // Replies longer than the socket's read buffer arrive in several reads (the reader keeps a copy of the part read so far).
      // Not periodic, so that bytes of a later read landing in a kept part would show.
      const long = new PreparedStatement('t_long', "SELECT string_agg(i::text || $1::text, ',' ORDER BY i), 'é' || $1::text FROM generate_series(1, 20000) AS i");
      await c.prepare([long]);
      const expected = (p: string): string => Array.from({ length: 20_000 }, (_, i) => `${i + 1}${p}`).join(',');
      const [big, small] = await Promise.all([c.call(long, ['ab']), c.call(long, ['c'])]);
      expect(big).toEqual([[expected('ab'), 'éab']]);
      expect(small).toEqual([[expected('c'), 'éc']]);
      expect(c.lostWith).toBeNull();
    } finally {
      await c.end();
    }
  });

  it('a call with no reply within timeoutMs (on the clock) is TimeoutError, the connection dropped, the calls behind it failed', async () => {
    const clock = new ManualClock();
    const c = await WireConnection.connect(options({ clock, timeoutMs: 30_000 }));
    const sleep = new PreparedStatement('t_sleep', 'SELECT pg_sleep($1::float8)');
    await c.prepare([sleep, SELECT_ONE]);
    const lost: Error[] = [];
    c.onLost((e) => lost.push(e));
    const slow = c.call(sleep, ['60']);
    const behind = c.call(SELECT_ONE, ['1']);
    clock.advance(30_000);
    // Both at once: the one awaited second must not reject with no handler while the first is awaited.
    await Promise.all([expect(slow).rejects.toBeInstanceOf(TimeoutError), expect(behind).rejects.toBeInstanceOf(WireConnectionError)]);
    expect(lost).toHaveLength(1);
    await expect(c.call(SELECT_ONE, ['1'])).rejects.toBeInstanceOf(WireConnectionError);
  });

  it('an idle session the server ends (pg_terminate_backend): the connection reports the FATAL 57P01 as its loss', async () => {
    const c = await WireConnection.connect(options());
    const lost = new Promise<Error>((resolve) => c.onLost(resolve));
    await db.admin.query('SELECT pg_terminate_backend($1)', [c.processId]);
    expect(await lost).toMatchObject({ name: 'WireServerError', code: '57P01', severity: 'FATAL' });
    await expect(c.call(SELECT_ONE, ['1'])).rejects.toBeInstanceOf(WireConnectionError);
  });

  it('a server killed under a call in flight: the call fails with WireConnectionError and the connection reports its loss', async () => {
    const own = await PostgresServer.start({ parentDir: '/dev/shm' });
    try {
      const c = await WireConnection.connect({ ...own.connection, timeoutMs: 5_000, clock: systemClock });
      const sleep = new PreparedStatement('t_sleep', 'SELECT pg_sleep($1::float8)');
      await c.prepare([sleep]);
      const lost = new Promise<Error>((resolve) => c.onLost(resolve));
      const inFlight = c.call(sleep, ['30']).then(
        () => null,
        (e: unknown) => e,
      );
      // In flight once its backend sleeps (a bounded number of looks).
      const watcher = await WireConnection.connect({ ...own.connection, timeoutMs: 5_000, clock: systemClock });
      const sleeping = new PreparedStatement('t_sleeping', "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'");
      await watcher.prepare([sleeping]);
      let n = '0';
      for (let i = 0; i < 1000 && n === '0'; i++) n = (await watcher.call(sleeping, []))[0]![0]!;
      expect(n).toBe('1');
      await own.crash();
      expect(await inFlight).toBeInstanceOf(WireConnectionError);
      expect(await lost).toBeInstanceOf(WireConnectionError);
      watcher.destroy();
    } finally {
      await own.stop();
    }
  });

  it('the session lock runs on it (a plain configuration), and on node-postgres for what only node-postgres offers', async () => {
    expect('unsupported' in wireEndpoint(db.server.connection)).toBe(false);
    expect(wireEndpoint({ connectionString: db.server.url, application_name: 'x' })).toMatchObject({ host: '127.0.0.1', port: db.server.port, user: 'postgres', database: 'postgres', parameters: { application_name: 'x' } });
    expect(wireEndpoint({ ...db.server.connection, ssl: true })).toEqual({ unsupported: "option 'ssl'" });
    expect(wireEndpoint({ ...db.server.connection, password: () => 'x' })).toEqual({ unsupported: 'a password function' });
    expect(wireEndpoint({ connectionString: `${db.server.url}?sslmode=require` })).toEqual({ unsupported: 'connection-string options' });
    for (const connection of [db.server.connection, { ...db.server.connection, types: { getTypeParser: pg.types.getTypeParser } }]) {
      const lock = new PostgresSessionLock({ connection });
      const r = await lock.acquire('wire-or-not');
      expect(r.kind).toBe('granted');
      if (r.kind === 'granted') await lock.release(r.lease);
      await lock.close();
    }
  });

  it('the fenced store on its own connection: strict writes by token, exact to 2^63-1; a terminated backend is reconnected by the next call', async () => {
    const store = openPostgresFencedStore({ connection: db.server.connection }, 'strict');
    try {
      const max = 2n ** 63n - 1n;
      expect(await store.write('wire-store', 2n, 'a')).toEqual({ kind: 'accepted' });
      expect(await store.write('wire-store', 1n, 'b')).toEqual({ kind: 'rejected', highest: 2n });
      expect(await store.write('wire-store', max, 'c')).toEqual({ kind: 'accepted' });
      expect(await store.write('wire-store', max - 1n, 'd')).toEqual({ kind: 'rejected', highest: max });
      expect(await store.read('wire-store')).toEqual({ value: 'c', token: max });
      expect(await store.read('wire-store-absent')).toEqual({ value: null, token: null });
      const terminated = await db.admin.query("SELECT pg_terminate_backend(pid) AS t FROM pg_stat_activity WHERE query LIKE '%lockcheck_store%' AND pid <> pg_backend_pid()");
      expect(terminated.rows).toEqual([{ t: true }]);
      // The write in flight on the terminated session (if any) fails; the next opens a new connection.
      let next: unknown = await store.write('wire-store-2', 1n, 'x').catch((e: unknown) => e);
      if (next instanceof Error) next = await store.write('wire-store-2', 1n, 'x');
      expect(next).toEqual({ kind: 'accepted' });
    } finally {
      await store.close();
    }
    await expect(store.write('wire-store', 3n, 'e')).rejects.toMatchObject({ name: 'InvalidInputError' });
  });
});

describe('wire client against a server that breaks the protocol', () => {
  it.each([
    ['an unknown message type', message('!')],
    ['a length below 4', Buffer.from([0x52, 0, 0, 0, 1])],
    ['a length beyond any reply', Buffer.from([0x52, 0x7f, 0, 0, 0])],
    ['an unsupported authentication method', message('R', Buffer.from([0, 0, 0, 7]))],
    ['a DataRow during the start-up', Buffer.concat([AUTH_OK, message('D', Buffer.from([0, 1, 0, 0, 0, 1, 0x31]))])],
    ['a ReadyForQuery before authentication', READY],
  ])('%s fails the connect with a typed error, never a hang', async (_what, bytes) => {
    const fake = await fakeServer((_chunk, socket) => socket.write(bytes));
    try {
      const clock = new ManualClock();
      const e = await WireConnection.connect({ host: '127.0.0.1', port: fake.port, user: 'u', timeoutMs: 30_000, clock }).catch((x: unknown) => x);
      expect(e instanceof WireProtocolError || e instanceof ConnectionConfigError).toBe(true);
      expect(clock.now()).toBe(1000);
    } finally {
      await fake.close();
    }
  });

  it.each([
    ['AuthenticationOk without the server signature', AUTH_OK],
    ['a downgrade to a cleartext password', message('R', Buffer.from([0, 0, 0, 3]))],
  ])('a server that begins SCRAM and then sends %s: ConnectionConfigError, nothing trusted', async (_what, after) => {
    const sasl = message('R', Buffer.concat([Buffer.from([0, 0, 0, 10]), Buffer.from('SCRAM-SHA-256\0\0')]));
    const sent: number[] = [];
    // Chunk 0 is the start-up, chunk 1 the SASLInitialResponse.
    const fake = await fakeServer((chunk, socket, n) => {
      sent.push(chunk[0]!);
      socket.write(n === 0 ? sasl : Buffer.concat([after, READY]));
    });
    try {
      const e = await WireConnection.connect({ host: '127.0.0.1', port: fake.port, user: 'u', password: 'secret', timeoutMs: 30_000, clock: new ManualClock() }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(ConnectionConfigError);
      expect((e as Error).message).toMatch(/SCRAM-SHA-256 unfinished/);
      // The password never went out in clear: only the start-up and the SASL first message were sent.
      expect(sent.length).toBe(2);
    } finally {
      await fake.close();
    }
  });

  it('a malformed reply to a call fails that call (WireProtocolError) and drops the connection; the session lock throws it, typed', async () => {
    // Per connection: the start-up is answered (authentication ok, key data, ready); then the first message with ready, every later one with a DataRow whose column runs past its end.
    const fake = await fakeServer((_chunk, socket, n) => {
      if (n === 0) socket.write(Buffer.concat([AUTH_OK, message('K', Buffer.alloc(8, 1)), READY]));
      else if (n === 1) socket.write(READY);
      else socket.write(message('D', Buffer.from([0, 1, 0, 0, 0, 9, 0x31])));
    });
    try {
      const c = await WireConnection.connect({ host: '127.0.0.1', port: fake.port, user: 'u', timeoutMs: 30_000, clock: new ManualClock() });
      await expect(c.call(SELECT_ONE, ['1'])).resolves.toEqual([]);
      await expect(c.call(SELECT_ONE, ['1'])).rejects.toBeInstanceOf(WireProtocolError);
      expect(c.lostWith).toBeInstanceOf(WireProtocolError);
      // The lock's connect: the schema query answered, the Parse not.
      const lock = new PostgresSessionLock({ connection: { host: '127.0.0.1', port: fake.port, user: 'u', password: 'p' }, clock: new ManualClock() });
      await expect(lock.acquire('r')).rejects.toBeInstanceOf(WireProtocolError);
      await lock.close();
    } finally {
      await fake.close();
    }
  });

  it('a server that never answers: the connect is TimeoutError on the clock', async () => {
    const fake = await fakeServer(() => undefined);
    try {
      const clock = new ManualClock();
      const connecting = WireConnection.connect({ host: '127.0.0.1', port: fake.port, user: 'u', timeoutMs: 30_000, clock });
      clock.advance(30_000);
      await expect(connecting).rejects.toBeInstanceOf(TimeoutError);
    } finally {
      await fake.close();
    }
  });
});
