import { existsSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';

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

/** Start-up parameters node-postgres sends from these keys (the same names on the wire). */
const STARTUP_KEYS = ['application_name', 'statement_timeout', 'lock_timeout', 'idle_in_transaction_session_timeout', 'options'] as const;

export function wireEndpoint(config: pg.ClientConfig, env: NodeJS.ProcessEnv = process.env): WireEndpoint | { readonly unsupported: string } {
  for (const [k, v] of Object.entries(config)) if (v !== undefined && !KNOWN.has(k)) return { unsupported: `option '${k}'` };
  const merged: Record<string, unknown> = { ...config };
  if (typeof config.connectionString === 'string') {
    const fromUrl = parseUrl(config.connectionString);
    if ('unsupported' in fromUrl) return fromUrl;
    Object.assign(merged, fromUrl.fields);
  }
  if (merged.password !== undefined && typeof merged.password !== 'string') return { unsupported: 'a password function' };
  const user = str(merged.user) ?? env.PGUSER ?? os.userInfo().username;
  const password = str(merged.password) ?? env.PGPASSWORD;
  // node-postgres reads ~/.pgpass (or PGPASSFILE) when no password is given: leave that to it.
  if (password === undefined && existsSync(env.PGPASSFILE ?? join(os.homedir(), '.pgpass'))) return { unsupported: 'a password file (.pgpass)' };
  if (env.PGSSLMODE !== undefined && env.PGSSLMODE !== 'disable') return { unsupported: `PGSSLMODE=${env.PGSSLMODE}` };
  const host = str(merged.host) ?? env.PGHOST ?? 'localhost';
  const port = Number(merged.port ?? env.PGPORT ?? 5432);
  if (!Number.isInteger(port) || port < 1 || port > 65535) return { unsupported: `port ${String(merged.port)}` };
  const parameters: Record<string, string> = {};
  for (const k of STARTUP_KEYS) {
    const v = merged[k];
    if (typeof v === 'string' || typeof v === 'number') parameters[k] = String(v);
    else if (v !== undefined && v !== null) return { unsupported: `a ${typeof v} ${k}` };
  }
  const connectTimeoutMs = typeof merged.connectionTimeoutMillis === 'number' && merged.connectionTimeoutMillis > 0 ? merged.connectionTimeoutMillis : undefined;
  const queryTimeoutMs = typeof merged.query_timeout === 'number' && merged.query_timeout > 0 ? merged.query_timeout : undefined;
  return {
    ...(host.startsWith('/') ? { path: join(host, `.s.PGSQL.${port}`) } : { host, port }),
    user,
    ...(password === undefined ? {} : { password }),
    database: str(merged.database) ?? env.PGDATABASE ?? user,
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
  if (url.hostname !== '') fields.host = decodeURIComponent(url.hostname);
  if (url.port !== '') fields.port = Number(url.port);
  if (url.username !== '') fields.user = decodeURIComponent(url.username);
  if (url.password !== '') fields.password = decodeURIComponent(url.password);
  const db = url.pathname.slice(1);
  if (db !== '') fields.database = decodeURIComponent(db);
  return { fields };
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
