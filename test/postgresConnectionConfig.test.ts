import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../impl/errors.ts';
import { openPostgresFencedStore, PostgresSessionLock, PostgresTransactionLock } from '../impl/postgres/index.ts';

/**
 * The connection fields the PostgreSQL locks and the store can check are
 * checked at construction: a port out of range or not a number reached
 * node-postgres, whose socket refused it with the acquire (or the store's
 * write) left pending and then an unhandled 'error' event ('timeout
 * expired') that ended the process. No server is needed: nothing connects.
 */
const MAKERS = {
  PostgresSessionLock: (connection: object) => new PostgresSessionLock({ connection }),
  PostgresTransactionLock: (connection: object) => new PostgresTransactionLock({ connection }),
  openPostgresFencedStore: (connection: object) => openPostgresFencedStore({ connection }, 'strict'),
};

const BAD: readonly [string, object][] = [
  ['port 65536', { host: '127.0.0.1', port: 65536 }],
  ['port "abc"', { host: '127.0.0.1', port: 'abc' }],
  ['port -1', { host: '127.0.0.1', port: -1 }],
  ['port 0', { host: '127.0.0.1', port: 0 }],
  ['port 5432.5', { host: '127.0.0.1', port: 5432.5 }],
  ['port NaN', { host: '127.0.0.1', port: Number.NaN }],
  ['port "99999"', { host: '127.0.0.1', port: '99999' }],
  ['a connection string with port 65536', { connectionString: 'postgres://u:secret-pw@127.0.0.1:65536/db' }],
  ['a connection string with port abc', { connectionString: 'postgresql://127.0.0.1:abc/db' }],
  ['host 42', { host: 42 }],
  ['host with a NUL', { host: 'local\0host' }],
  ['user null', { user: null }],
  ['database []', { database: [] }],
  ['a password that is a number', { password: 1234 }],
  // A lone surrogate goes out as U+FFFD: two passwords (users, databases) differing only there would be one.
  ['a password with a lone surrogate', { password: 'secret-pw\uD800' }],
  ['a user with a lone surrogate', { user: 'u\uDC00' }],
  ['a database with a lone surrogate', { database: '\uD83Ddb' }],
  ['connectionTimeoutMillis -5', { connectionTimeoutMillis: -5 }],
  ['query_timeout "10"', { query_timeout: '10' }],
  ['statement_timeout 1.5', { statement_timeout: 1.5 }],
  ['keepAlive "yes"', { keepAlive: 'yes' }],
  ['ssl "yes"', { ssl: 'yes' }],
  ['ssl null', { ssl: null }],
  ['ssl 1', { ssl: 1 }],
];

describe.each(Object.entries(MAKERS))('%s: connection fields checked at construction', (_name, make) => {
  it.each(BAD)('%s: InvalidInputError invalid-config naming the field, thrown before anything connects', (what, connection) => {
    let thrown: unknown;
    try {
      make(connection);
    } catch (e) {
      thrown = e;
    }
    expect(thrown, what).toBeInstanceOf(InvalidInputError);
    expect(thrown).toMatchObject({ code: 'invalid-config' });
    expect((thrown as Error).message).toMatch(/connection\.\w+/);
    // The password never shows.
    expect((thrown as Error).message).not.toContain('secret-pw');
  });

  it('accepts what node-postgres takes: a port as a number or its digits, a connection string with or without one, a password function, false timeouts', () => {
    for (const connection of [
      { host: '127.0.0.1', port: 5432 },
      { host: '127.0.0.1', port: '5432' },
      { connectionString: 'postgres://u:pw@127.0.0.1:5433/db' },
      { connectionString: 'postgres://u:pw@[::1]:5433/db' },
      { connectionString: 'postgres:///db?host=/tmp' },
      { host: '/tmp', password: () => 'pw', statement_timeout: false, query_timeout: 0, keepAlive: false },
      { host: '127.0.0.1', ssl: true },
      { host: '127.0.0.1', ssl: { rejectUnauthorized: false } },
    ]) {
      expect(() => make(connection), JSON.stringify(connection)).not.toThrow();
    }
  });

  it('PGPORT out of range, read when the configuration names no port: refused at construction; a port in the configuration wins over it', () => {
    const before = process.env.PGPORT;
    process.env.PGPORT = '70000';
    try {
      expect(() => make({ host: '127.0.0.1' })).toThrow(/PGPORT/);
      expect(() => make({ host: '127.0.0.1', port: 5432 })).not.toThrow();
    } finally {
      if (before === undefined) delete process.env.PGPORT;
      else process.env.PGPORT = before;
    }
  });
});

describe.each(Object.entries(MAKERS))('%s: a refused connection string never shows a part of its password', (_name, make) => {
  // Generated passwords hold '#', '?' and '/', which end a URL's authority where they stand unencoded: the text read as
  // the host's "port" was the password's start, and the message echoed it. Only a port of digits may be shown.
  it.each([
    ['#', 'postgres://app:Xq7zz#tail@127.0.0.1:5432/db'],
    ['?', 'postgres://app:Xq7zz?tail@127.0.0.1/db'],
    ['/', 'postgresql://app:Xq7zz/tail@127.0.0.1:5432/db'],
    ['a NUL after a /', 'postgres://app:Xq7zz/x\0@127.0.0.1/db'],
  ])('a password with %s in it', (_what, connectionString) => {
    let thrown: unknown;
    try {
      make({ connectionString });
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(InvalidInputError);
    expect((thrown as Error).message).not.toMatch(/Xq7|zz|tail/);
  });
});
