import { redactUrl } from './redact.ts';
import { checkUrlText } from '../kitInput.ts';
import { messageText } from '../../impl/errorText.ts';

/**
 * The forms of the server URLs the CLI takes (--redis, --pg), checked before
 * anything connects; apart from the connection checks (userRedis.ts,
 * userPostgres.ts) so that the CLI checks its arguments without loading the
 * drivers.
 */

/** A server URL that cannot be used, said before anything connects. */
export class ServerUrlError extends Error {
  override readonly name = 'ServerUrlError';
  constructor(message?: string, options?: ErrorOptions) {
    super(messageText(message), options);
  }
}

/**
 * A URL that does not parse, shown redacted (it may hold a password), with
 * the commonest reason said: a port out of range, which `new URL` refuses
 * without saying so. Only a port of digits is echoed: text after a host's
 * colon may be a password whose '@' was forgotten.
 */
export function unparseableUrl(raw: string, expected: string): ServerUrlError {
  const port = /^[a-z][a-z0-9+.-]*:\/\/(?:[^@/?#]*@)?(?:\[[^\]]*\]|[^:/?#@]*):([^/?#]*)(?:[/?#]|$)/i.exec(raw)?.[1];
  const why = port === undefined || port === '' ? '' : /^\d{1,10}$/.test(port) ? `: its port must be in [1, 65535], got ${port}` : ': its port must be a number in [1, 65535]';
  return new ServerUrlError(`'${redactUrl(raw)}' is not a URL${why} (expected ${expected})`);
}

/** Port 0 parses, and then names no server (the OS would pick any port): refused with the rest of the form. */
export function checkPort(url: URL): void {
  if (url.port === '0') throw new ServerUrlError(`'${redactUrl(url)}': its port must be in [1, 65535], got 0`);
}

/** Parses a `redis://` or `rediss://` URL with a host and at most a database number; throws ServerUrlError saying what is wrong, the password redacted. */
export function parseRedisUrl(raw: string): URL {
  checkUrlText(raw);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    // Not "redis://host:port[/db]": the terminal's redaction would take that for a URL and rewrite it.
    throw unparseableUrl(raw, 'redis://[user:password@]host[:port][/db], or rediss:// for TLS');
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') throw new ServerUrlError(`'${redactUrl(url)}': the scheme must be redis:// or rediss://, not ${url.protocol}//`);
  if (url.hostname === '') throw new ServerUrlError(`'${redactUrl(url)}' names no host`);
  checkPort(url);
  const db = url.pathname.replace(/^\//, '');
  if (db !== '' && !/^\d{1,5}$/.test(db)) throw new ServerUrlError(`'${redactUrl(url)}': the path must be a database number, got ${/^[\w.-]{1,20}$/.test(db) ? `'${db}'` : `${db.length} characters (not shown: a password typed after a '/' may be there)`}`);
  return url;
}

/** Parses a `postgres://` or `postgresql://` URL with a host; throws ServerUrlError saying what is wrong, the password redacted. */
export function parsePostgresUrl(raw: string): URL {
  checkUrlText(raw);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw unparseableUrl(raw, 'postgres://[user[:password]@]host[:port]/database');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') throw new ServerUrlError(`'${redactUrl(url)}': the scheme must be postgres:// or postgresql://, not ${url.protocol}//`);
  if (url.hostname === '') throw new ServerUrlError(`'${redactUrl(url)}' names no host`);
  checkPort(url);
  return url;
}
