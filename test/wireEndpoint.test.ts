import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { NODE_POSTGRES_ONLY_DEFAULTS, NODE_POSTGRES_ONLY_ENV, wireEndpoint } from '../impl/postgres/wire/endpoint.ts';
import { testTempDir } from './tempDirs.ts';

/**
 * Where and as whom the wire client connects (impl/postgres/wire/endpoint.ts),
 * read as node-postgres reads a configuration: the configuration first, then
 * the PG* environment, then `pg.defaults`; and every configuration the wire
 * client would not follow sent to node-postgres with its reason. A pure
 * function of the configuration, the environment given and `pg.defaults`: no
 * server. (Mutation testing found most of these branches reached by no test,
 * session h33.)
 */
const dir = testTempDir('lockcheck-wire-endpoint-');

/** No ~/.pgpass of the machine's decides a case: each environment names a file that is not there, unless it says otherwise. */
const NO_PASSFILE = { PGPASSFILE: join(dir, 'absent.pgpass') };
const env = (vars: Record<string, string> = {}): NodeJS.ProcessEnv => ({ ...NO_PASSFILE, ...vars });

const defaults = pg.defaults as unknown as Record<string, unknown>;
const saved = { ...defaults };
afterEach(() => {
  for (const k of Object.keys(defaults)) if (!(k in saved)) delete defaults[k];
  for (const [k, v] of Object.entries(saved)) if (k !== 'parseInt8') defaults[k] = v;
});

const endpoint = (config: pg.ClientConfig, vars?: Record<string, string>) => {
  const e = wireEndpoint(config, env(vars));
  if ('unsupported' in e) throw new Error(`unsupported: ${e.unsupported}`);
  return e;
};

describe('wireEndpoint: what the wire client follows, read as node-postgres reads it', () => {
  it('a plain configuration: host, port, user, password, database as given; keepalive on; no parameters or bounds of its own', () => {
    expect(wireEndpoint({ host: 'db.example', port: 6543, user: 'u', password: 'p', database: 'd' }, env())).toEqual({
      host: 'db.example',
      port: 6543,
      user: 'u',
      password: 'p',
      database: 'd',
      parameters: {},
      keepAlive: true,
    });
  });

  it('the configuration wins over PG*, which wins over pg.defaults, which wins over the fallbacks', () => {
    const vars = { PGUSER: 'env-user', PGPASSWORD: 'env-pw', PGHOST: 'env-host', PGPORT: '7001', PGDATABASE: 'env-db' };
    Object.assign(defaults, { user: 'def-user', password: 'def-pw', host: 'def-host', port: 7002, database: 'def-db' });
    expect(endpoint({ user: 'u', password: 'p', host: 'h', port: 7000, database: 'd' }, vars)).toMatchObject({ user: 'u', password: 'p', host: 'h', port: 7000, database: 'd' });
    expect(endpoint({}, vars)).toMatchObject({ user: 'env-user', password: 'env-pw', host: 'env-host', port: 7001, database: 'env-db' });
    expect(endpoint({})).toMatchObject({ user: 'def-user', password: 'def-pw', host: 'def-host', port: 7002, database: 'def-db' });
    // Empty strings count as unset, as in node-postgres.
    expect(endpoint({ user: '', password: '', host: '', database: '' }, { PGUSER: '', PGPASSWORD: '', PGHOST: '', PGPORT: '', PGDATABASE: '' })).toMatchObject({ user: 'def-user', password: 'def-pw', host: 'def-host', port: 7002, database: 'def-db' });
  });

  it('with nothing given: the OS user, no password, localhost:5432, the database named as the user', () => {
    Object.assign(defaults, { user: undefined, password: null, host: undefined, port: undefined, database: undefined });
    const e = endpoint({});
    expect(e).toEqual({ host: 'localhost', port: 5432, user: os.userInfo().username, database: os.userInfo().username, parameters: {}, keepAlive: true });
    expect('password' in e).toBe(false);
    expect(endpoint({ user: 'alice' }).database).toBe('alice');
  });

  it('a host that is a directory is a Unix socket: its path names the port', () => {
    const e = endpoint({ host: '/var/run/postgresql', port: 5433 });
    expect(e.path).toBe('/var/run/postgresql/.s.PGSQL.5433');
    expect('host' in e || 'port' in e).toBe(false);
    expect(endpoint({}, { PGHOST: '/tmp' }).path).toBe('/tmp/.s.PGSQL.5432');
  });

  it('a port that is no TCP port goes to node-postgres (which refuses it in its own words)', () => {
    for (const port of [0, 65536, -1, 1.5]) expect(wireEndpoint({ port }, env())).toEqual({ unsupported: `port ${port}` });
    expect(wireEndpoint({ port: 'abc' as unknown as number }, env())).toEqual({ unsupported: 'port abc' });
    expect(wireEndpoint({}, env({ PGPORT: 'x' }))).toEqual({ unsupported: 'port undefined' });
    expect(endpoint({ port: '5499' as unknown as number }).port).toBe(5499);
    expect(endpoint({ port: 1 }).port).toBe(1);
    expect(endpoint({ port: 65535 }).port).toBe(65535);
  });

  it('a connection string: its parts decoded, an IPv6 host without brackets, its fields over the configuration’s', () => {
    expect(endpoint({ connectionString: 'postgres://al%40ce:p%2Fw%23@[::1]:6000/my%20db', user: 'other' })).toMatchObject({ host: '::1', port: 6000, user: 'al@ce', password: 'p/w#', database: 'my db' });
    expect(endpoint({ connectionString: 'postgresql://h2/d2' })).toMatchObject({ host: 'h2', port: 5432, database: 'd2' });
    // Parts the string leaves out come from the rest, as node-postgres takes them.
    expect(endpoint({ connectionString: 'postgres://h3', user: 'u3', database: 'd3', port: 6001 }, { PGPASSWORD: 'pw3' })).toMatchObject({ host: 'h3', port: 6001, user: 'u3', password: 'pw3', database: 'd3' });
    // A part the string leaves empty does not blank the configuration's.
    expect(endpoint({ connectionString: 'postgres:///d4', host: 'h4' })).toMatchObject({ host: 'h4', database: 'd4' });
    expect(endpoint({ connectionString: 'postgres://u5@h5/d5', password: 'pw5' })).toMatchObject({ host: 'h5', user: 'u5', password: 'pw5', database: 'd5' });
    expect(wireEndpoint({ connectionString: 'not a url' }, env())).toEqual({ unsupported: 'a connection string that is not a URL' });
    expect(wireEndpoint({ connectionString: 'mysql://h/d' }, env())).toEqual({ unsupported: 'a mysql: connection string' });
    expect(wireEndpoint({ connectionString: 'postgres://h/d?sslmode=disable' }, env())).toEqual({ unsupported: 'connection-string options' });
  });

  it('an option the wire client does not know goes to node-postgres; one left undefined does not count', () => {
    expect(wireEndpoint({ ssl: { rejectUnauthorized: false } }, env())).toEqual({ unsupported: "option 'ssl'" });
    expect(wireEndpoint({ stream: undefined, ssl: undefined }, env())).not.toHaveProperty('unsupported');
  });

  it('a PG* variable only node-postgres honours sends the lock there, unless empty (or PGSSLMODE=disable)', () => {
    for (const name of NODE_POSTGRES_ONLY_ENV) {
      expect(wireEndpoint({}, env({ [name]: 'on' }))).toEqual({ unsupported: `${name}=on` });
      expect(wireEndpoint({}, env({ [name]: '' }))).not.toHaveProperty('unsupported');
    }
    expect(wireEndpoint({}, env({ PGSSLMODE: 'disable' }))).not.toHaveProperty('unsupported');
    // 'disable' is PGSSLMODE's no-TLS only: the others mean something else by it.
    for (const name of NODE_POSTGRES_ONLY_ENV.filter((n) => n !== 'PGSSLMODE')) expect(wireEndpoint({}, env({ [name]: 'disable' }))).toEqual({ unsupported: `${name}=disable` });
    expect(wireEndpoint({}, env({ PGSSLMODE: 'require' }))).toEqual({ unsupported: 'PGSSLMODE=require' });
  });

  it('a pg.defaults setting the wire client would not follow sends the lock to node-postgres', () => {
    for (const [k, stock] of Object.entries(NODE_POSTGRES_ONLY_DEFAULTS)) {
      defaults[k] = stock === false ? true : stock === undefined ? 'x' : stock === '' ? 'LATIN1' : (stock as number) + 1;
      expect(wireEndpoint({}, env()), k).toEqual({ unsupported: `pg.defaults.${k} changed` });
      defaults[k] = stock;
      expect(wireEndpoint({}, env()), k).not.toHaveProperty('unsupported');
    }
  });

  it('a password function, given or in pg.defaults, goes to node-postgres; a string or null one does not', () => {
    expect(wireEndpoint({ password: () => 'pw' }, env())).toEqual({ unsupported: 'a password function' });
    defaults.password = () => 'pw';
    expect(wireEndpoint({}, env())).toEqual({ unsupported: 'a password function in pg.defaults' });
    // Checked before the password is chosen: a string in the configuration does not hide it.
    expect(wireEndpoint({ password: 'given' }, env())).toEqual({ unsupported: 'a password function in pg.defaults' });
    defaults.password = null;
    expect(wireEndpoint({}, env())).not.toHaveProperty('unsupported');
    defaults.password = undefined;
    expect(wireEndpoint({}, env())).not.toHaveProperty('unsupported');
  });

  it('a password file (PGPASSFILE, else ~/.pgpass) is left to node-postgres when no password is given', () => {
    const dirOfHome = mkdtempSync(join(dir, 'pgpass-'));
    const file = join(dirOfHome, 'pass');
    writeFileSync(file, '*:*:*:*:secret\n', { mode: 0o600 });
    expect(wireEndpoint({}, { PGPASSFILE: file })).toEqual({ unsupported: 'a password file (.pgpass)' });
    expect(wireEndpoint({ password: 'pw' }, { PGPASSFILE: file })).not.toHaveProperty('unsupported');
    expect(wireEndpoint({}, { PGPASSFILE: file, PGPASSWORD: 'pw' })).not.toHaveProperty('unsupported');
    expect(wireEndpoint({}, { PGPASSFILE: join(dirOfHome, 'none') })).not.toHaveProperty('unsupported');
  });

  it('start-up parameters: the configuration, then PGAPPNAME and PGOPTIONS, then pg.defaults (statement_timeout never from there); false and empty mean unset', () => {
    expect(endpoint({ application_name: 'a', options: '-c x=1', statement_timeout: 250, lock_timeout: 10, idle_in_transaction_session_timeout: 20 }, { PGAPPNAME: 'env-app', PGOPTIONS: '-c y=2' }).parameters).toEqual({
      application_name: 'a',
      options: '-c x=1',
      statement_timeout: '250',
      lock_timeout: '10',
      idle_in_transaction_session_timeout: '20',
    });
    Object.assign(defaults, { application_name: 'def-app', options: '-c z=3', statement_timeout: 99, lock_timeout: 7 });
    expect(endpoint({}, { PGAPPNAME: 'env-app', PGOPTIONS: '-c y=2' }).parameters).toEqual({ application_name: 'env-app', options: '-c y=2', lock_timeout: '7' });
    expect(endpoint({ application_name: '', statement_timeout: false as unknown as number }, { PGAPPNAME: '' }).parameters).toEqual({ application_name: 'def-app', options: '-c z=3', lock_timeout: '7' });
    // null in the configuration is unset too: the environment's value is sent.
    expect(endpoint({ application_name: null as unknown as string }, { PGAPPNAME: 'env-app' }).parameters.application_name).toBe('env-app');
    // Neither a string nor a number: node-postgres's to handle.
    expect(wireEndpoint({ statement_timeout: true as unknown as number }, env())).toEqual({ unsupported: 'a boolean statement_timeout' });
    expect(wireEndpoint({ application_name: {} as unknown as string }, env())).toEqual({ unsupported: 'an object application_name' });
  });

  it("the configuration's own bounds when positive; keepAlive off only when false", () => {
    expect(endpoint({ connectionTimeoutMillis: 1500, query_timeout: 2500 })).toMatchObject({ connectTimeoutMs: 1500, queryTimeoutMs: 2500 });
    for (const off of [0, -1, false, undefined, '1500']) {
      const e = endpoint({ connectionTimeoutMillis: off as number, query_timeout: off as number });
      expect('connectTimeoutMs' in e || 'queryTimeoutMs' in e, String(off)).toBe(false);
    }
    expect(endpoint({ keepAlive: false }).keepAlive).toBe(false);
    expect(endpoint({ keepAlive: true }).keepAlive).toBe(true);
  });
});
