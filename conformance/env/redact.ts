import { writeFileSync } from 'node:fs';
/**
 * The one place lockcheck decides what of a server URL it may show: the
 * scheme, host, port and database, never a user name, password or query
 * (ioredis and pg take `?password=` too). Every message, report, JSON, JUnit
 * and counterexample file shows URLs through redactUrl, or passes its whole
 * text through redactSecrets.
 */

const DEFAULT_PORTS: Readonly<Record<string, string>> = {
  'redis:': '6379',
  'rediss:': '6379',
  'postgres:': '5432',
  'postgresql:': '5432',
};

/** Schemes whose path names a database (the first path segment). */
const DATABASE_SCHEMES = new Set(Object.keys(DEFAULT_PORTS));

/** `scheme://host:port/db` of a URL; for text that does not parse as a URL, only its scheme (never the text itself). */
export function redactUrl(raw: string | URL): string {
  let url: URL;
  try {
    url = typeof raw === 'string' ? new URL(raw) : raw;
  } catch {
    const scheme = /^([a-z][a-z0-9+.-]{0,20}):\/\//i.exec(String(raw))?.[1];
    return scheme === undefined ? '<not a URL>' : `${scheme.toLowerCase()}://<unparseable>`;
  }
  const port = url.port || DEFAULT_PORTS[url.protocol] || '';
  const host = url.hostname === '' ? '<no host>' : url.hostname;
  const db = DATABASE_SCHEMES.has(url.protocol) ? (url.pathname.split('/')[1] ?? '') : '';
  return `${url.protocol}//${host}${port === '' ? '' : `:${port}`}${db === '' ? '' : `/${db}`}`;
}

/**
 * A database URL (any form), or any URL with credentials in it. Ends at white
 * space or quotes. A "[" right after "//" starts a usage template
 * (redis://[user:password@]host...), not a URL with a secret.
 */
const SECRET_URL = /\b(?:rediss?|postgres(?:ql)?):\/\/[^\s'"<>`,[][^\s'"<>`]*|\b[a-z][a-z0-9+.-]*:\/\/(?!\[)[^\s/'"<>`@]*@[^\s'"<>`]*/gi;
/** A comma-separated list of URLs is redacted one by one. */
const NEXT_URL = /,(?=[a-z][a-z0-9+.-]*:\/\/)/i;
/** Sentence punctuation after a URL is not part of it. */
const TRAILING = /[.,:;)\]]+$/;

/** `text` with every database URL, and every URL with credentials, reduced to scheme://host:port/db. */
export function redactSecrets(text: string): string {
  return text.replace(SECRET_URL, (match) => {
    const trailing = TRAILING.exec(match)?.[0] ?? '';
    const body = match.slice(0, match.length - trailing.length);
    return body.split(NEXT_URL).map((u) => redactUrl(u)).join(',') + trailing;
  });
}

/** Writes a report, counterexample or timeline file with its secrets redacted. */
export function writeRedacted(path: string, text: string): void {
  writeFileSync(path, redactSecrets(text));
}

/** From now on everything this process prints on stdout and stderr has its secrets redacted (the CLI calls this first). */
export function redactTerminalOutput(): void {
  for (const stream of [process.stdout, process.stderr]) {
    const write = stream.write.bind(stream) as (chunk: unknown, ...rest: unknown[]) => boolean;
    stream.write = ((chunk: unknown, ...rest: unknown[]) => write(typeof chunk === 'string' ? redactSecrets(chunk) : chunk, ...rest)) as typeof stream.write;
  }
}
