import { existsSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { aTypeOf } from '../../errorText.ts';

/**
 * Where and as whom the wire client connects, read from the node-postgres
 * configuration the locks take, with node-postgres's defaults (PGHOST,
 * PGPORT, PGUSER, PGPASSWORD, PGDATABASE). A configuration that needs what
 * only node-postgres offers (TLS, a custom stream, a password function, a
 * ~/.pgpass file, connection-string options, custom type parsers, ...) gets
 * the reason instead: the lock then runs on node-postgres, so no capability
 * of the public API is lost.
 */
export interface WireEndpoint {
  readonly host?: string;
  readonly port?: number;
  /** A Unix socket (the host was a directory). */
  readonly path?: string;
  readonly user: string;
  readonly password?: string;
  readonly database: string;
  /** Start-up parameters from the configuration (application_name, statement_timeout, options, ...). */
  readonly parameters: Readonly<Record<string, string>>;
  readonly keepAlive: boolean;
  /** The configuration's own bounds, when it sets them (the lock's statement timeout otherwise). */
  readonly connectTimeoutMs?: number;
  readonly queryTimeoutMs?: number;
}

/** Keys the wire client honours; any other key present (and not undefined) sends the lock to node-postgres. */
const KNOWN = new Set(['host', 'port', 'user', 'password', 'database', 'connectionString', 'application_name', 'statement_timeout', 'lock_timeout', 'idle_in_transaction_session_timeout', 'options', 'keepAlive', 'connectionTimeoutMillis', 'query_timeout']);

/** Start-up parameters node-postgres sends from these keys (the same names on the wire); two of them it also reads from the environment. */
const STARTUP_KEYS = ['application_name', 'statement_timeout', 'lock_timeout', 'idle_in_transaction_session_timeout', 'options'] as const;
const STARTUP_ENV: Readonly<Record<string, string>> = { application_name: 'PGAPPNAME', options: 'PGOPTIONS' };

/**
 * Environment variables node-postgres (8.x, connection-parameters.js) honours
 * and the wire client does not: any of them set sends the lock to
 * node-postgres rather than be ignored. (PGSSLMODE=disable is the one value
 * the wire client matches.)
 */
export const NODE_POSTGRES_ONLY_ENV = ['PGSSLMODE', 'PGSSLNEGOTIATION', 'PGCLIENT_ENCODING', 'PGBINARY', 'PGREPLICATION'] as const;

/**
 * node-postgres's process-wide defaults (`pg.defaults`) that change what it
 * sends, with their stock values. A program that changed one (`pg.defaults.ssl
 * = true`) gets node-postgres; the wire client would silently not follow it.
 * host, port, user, database, password and the start-up keys are read from
 * `pg.defaults` as node-postgres reads them.
 */
export const NODE_POSTGRES_ONLY_DEFAULTS: Readonly<Record<string, unknown>> = {
  ssl: false,
  sslnegotiation: undefined,
  binary: false,
  client_encoding: '',
  fallback_application_name: undefined,
  connectionString: undefined,
  query_timeout: false,
  connect_timeout: 0,
  keepalives: 1,
  keepalives_idle: 0,
  rows: 0,
};

export function wireEndpoint(config: pg.ClientConfig, env: NodeJS.ProcessEnv = process.env): WireEndpoint | { readonly unsupported: string } {
  for (const [k, v] of Object.entries(config)) if (v !== undefined && !KNOWN.has(k)) return { unsupported: `option '${k}'` };
  for (const name of NODE_POSTGRES_ONLY_ENV) if (env[name] !== undefined && env[name] !== '' && !(name === 'PGSSLMODE' && env[name] === 'disable')) return { unsupported: `${name}=${env[name]}` };
  const defaults = pg.defaults as unknown as Record<string, unknown>;
  for (const [k, stock] of Object.entries(NODE_POSTGRES_ONLY_DEFAULTS)) if (defaults[k] !== stock) return { unsupported: `pg.defaults.${k} changed` };
  const merged: Record<string, unknown> = { ...config };
  if (typeof config.connectionString === 'string') {
    const fromUrl = parseUrl(config.connectionString);
    if ('unsupported' in fromUrl) return fromUrl;
    Object.assign(merged, fromUrl.fields);
  }
  if (merged.password !== undefined && typeof merged.password !== 'string') return { unsupported: 'a password function' };
  if (defaults.password !== null && defaults.password !== undefined && typeof defaults.password !== 'string') return { unsupported: 'a password function in pg.defaults' };
  // As node-postgres: the configuration, then PG*, then pg.defaults.
  const user = str(merged.user) ?? str(env.PGUSER) ?? str(defaults.user) ?? os.userInfo().username;
  const password = str(merged.password) ?? str(env.PGPASSWORD) ?? str(defaults.password);
  // node-postgres reads ~/.pgpass (or PGPASSFILE) when no password is given: leave that to it.
  if (password === undefined && existsSync(env.PGPASSFILE ?? join(os.homedir(), '.pgpass'))) return { unsupported: 'a password file (.pgpass)' };
  const host = str(merged.host) ?? str(env.PGHOST) ?? str(defaults.host) ?? 'localhost';
  const port = Number(merged.port ?? (str(env.PGPORT) || undefined) ?? defaults.port ?? 5432);
  if (!Number.isInteger(port) || port < 1 || port > 65535) return { unsupported: `port ${String(merged.port)}` };
  const parameters: Record<string, string> = {};
  for (const k of STARTUP_KEYS) {
    const fromEnv = STARTUP_ENV[k] === undefined ? undefined : str(env[STARTUP_ENV[k]]);
    // node-postgres sends none of these when false (its 'unset'). statement_timeout: the lock's node-postgres path sets its own over pg.defaults, so the default is not read here either.
    const fromDefaults = k === 'statement_timeout' ? undefined : defaults[k];
    const v = [merged[k], fromEnv, fromDefaults].find((x) => x !== undefined && x !== null && x !== false && x !== '');
    if (typeof v === 'string' || typeof v === 'number') parameters[k] = String(v);
    else if (v !== undefined && v !== null) return { unsupported: `${aTypeOf(v)} ${k}` };
  }
  const connectTimeoutMs = typeof merged.connectionTimeoutMillis === 'number' && merged.connectionTimeoutMillis > 0 ? merged.connectionTimeoutMillis : undefined;
  const queryTimeoutMs = typeof merged.query_timeout === 'number' && merged.query_timeout > 0 ? merged.query_timeout : undefined;
  return {
    ...(host.startsWith('/') ? { path: join(host, `.s.PGSQL.${port}`) } : { host, port }),
    user,
    ...(password === undefined ? {} : { password }),
    database: str(merged.database) ?? str(env.PGDATABASE) ?? str(defaults.database) ?? user,
    parameters,
    keepAlive: merged.keepAlive !== false,
    ...(connectTimeoutMs === undefined ? {} : { connectTimeoutMs }),
    ...(queryTimeoutMs === undefined ? {} : { queryTimeoutMs }),
  };
}

/** postgres://user:password@host:port/database, without query options (sslmode, ... go to node-postgres). */
function parseUrl(text: string): { readonly fields: Record<string, unknown> } | { readonly unsupported: string } {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { unsupported: 'a connection string that is not a URL' };
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') return { unsupported: `a ${url.protocol} connection string` };
  if (url.search !== '') return { unsupported: 'connection-string options' };
  const fields: Record<string, unknown> = {};
  // An IPv6 address comes in brackets ([::1]); the socket wants it without.
  if (url.hostname !== '') fields.host = decodeURIComponent(url.hostname.replace(/^\[(.*)\]$/, '$1'));
  if (url.port !== '') fields.port = Number(url.port);
  if (url.username !== '') fields.user = decodeURIComponent(url.username);
  if (url.password !== '') fields.password = decodeURIComponent(url.password);
  const db = url.pathname.slice(1);
  if (db !== '') fields.database = decodeURIComponent(db);
  return { fields };
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
