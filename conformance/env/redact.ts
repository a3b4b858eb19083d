import { inspect } from 'node:util';
/**
 * The one place lockcheck decides what of a server URL it may show: the
 * scheme, host, port and database, never a user name, password or query
 * (ioredis and pg take `?password=` too). Every message, report, JSON, JUnit
 * and counterexample file shows URLs through redactUrl, or passes its whole
 * text through redactSecrets, which also hides the value of anything named
 * like a secret (`password=…`, `"apiKey": "…"`, `requirepass …`): an
 * adapter's options, a driver's message or a server's log line.
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
 * space or quotes, but its user info may hold a ' (allowed there unencoded:
 * cut at it, the rest of the password was shown). A "[" right after "//"
 * starts a usage template (redis://[user:password@]host...), not a URL with a
 * secret.
 */
// The scheme is bounded (64 characters): unbounded, it was scanned to the end of a run of letters, dots and dashes from
// every word boundary in it, quadratic in the run ("a-a-a-…" of 40,000 characters took seconds).
const SECRET_URL = /\b(?:rediss?|postgres(?:ql)?):\/\/(?:[^\s/"<>`@[]*@)?[^\s'"<>`,[][^\s'"<>`]*|\b[a-z][a-z0-9+.-]{0,63}:\/\/(?!\[)[^\s/"<>`@]*@[^\s'"<>`]*/gi;
/** A comma-separated list of URLs is redacted one by one. */
const NEXT_URL = /,(?=[a-z][a-z0-9+.-]*:\/\/)/i;
/** Sentence punctuation after a URL is not part of it: how many characters of it end `match` (a loop: an anchored pattern was tried from every dot of a long run, quadratic). */
function trailingLength(match: string): number {
  let n = 0;
  while (n < match.length && '.,:;)]'.includes(match[match.length - 1 - n]!)) n++;
  return n;
}

/**
 * A name that holds a secret, prefixes included (PGPASSWORD, db_password,
 * clientSecret, x-api-key), and auth, pass and pwd as whole words or after a
 * separator (REDISCLI_AUTH, auth_pass; not bypass). Not `token` alone: a fencing token is no secret
 * and lockcheck prints them everywhere.
 */
const SECRET_WORD = String.raw`(?:password|passwd|passphrase|secret|credentials?|api[_-]?key|access[_-]?key|private[_-]?key|auth[_-]?token|access[_-]?token|refresh[_-]?token|session[_-]?token|requirepass|masterauth)`;
const SECRET_NAME = String.raw`(?:[\w-]*?${SECRET_WORD}|(?:[\w-]*[_-])?(?:auth|pass|pwd))`;
/**
 * The end of a secret name, where no quote marks its start: SECRET_NAME from
 * its last part (\b…=, found from every word boundary of a long run of letters
 * and dashes, scanned that run to its end each time: "a-a-a-…" of 40,000
 * characters took seconds). The same names: a long word anywhere in the name,
 * auth, pass or pwd at its start or after a separator; what comes before the
 * match is kept as it is, so the text redacted is the same.
 */
const SECRET_NAME_END = String.raw`(?:${SECRET_WORD}|(?:\b|(?<=[_-]))(?:auth|pass|pwd))`;
/**
 * A quoted value: JSON's or inspect's quotes (backticks for a string holding
 * both ' and "), quotes escaped inside a JSON string (\"…\", a message in a
 * history line), or JSON in an HTML report (&quot;).
 */
const QUOTED = String.raw`\\"(?:[^"\\]|\\[^"])*?\\"|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\`(?:[^\`\\]|\\.)*\`|&quot;(?:(?!&quot;).)*?&quot;`;
/**
 * A secret-named key and its value: `key=value` (query strings, libpq
 * keywords, environment), `"key": "value"` and `key: 'value'` (JSON,
 * util.inspect; an unquoted `key: text` is prose, "the credentials: WRONGPASS"),
 * `requirepass value` / `masterauth value` / `auth-pass master value` (redis.conf
 * lines a server log may quote) and `Bearer value`.
 */
const SECRET_VALUE = new RegExp(
  [
    String.raw`(${SECRET_NAME_END}=)(${QUOTED}|(?:[^\s&;,'"<>\`\\]|\\.)+)`,
    String.raw`((\\?["']|&quot;)${SECRET_NAME}\4\s*:\s*)(${QUOTED})`,
    String.raw`(${SECRET_NAME_END}:\s*)(${QUOTED})`,
    String.raw`(\b(?:requirepass|masterauth|auth-pass\s+\S+)\s+)(${QUOTED}|[^\s'"]+)`,
    String.raw`(\bBearer\s+)([\w.~+/-]+=*)`,
  ].join('|'),
  'gi',
);

/** A redacted value keeps its quotes, so JSON stays JSON. */
function hidden(value: string): string {
  const quote = value.startsWith('&quot;') ? '&quot;' : value.startsWith('\\"') ? '\\"' : value[0] === '"' || value[0] === "'" || value[0] === '`' ? value[0] : '';
  return `${quote}<redacted>${quote}`;
}

/** Passwords this process knows (registerSecret): hidden wherever they appear, whatever the form around them. */
const registered = new Set<string>();

/**
 * A password lockcheck was given or made (--redis and --pg URLs, a server's
 * random password): redactSecrets hides it wherever it appears, also where no
 * pattern would find it (a driver's `args: [ 'default', '…' ]`, `AUTH user …`).
 */
export function registerSecret(value: string): void {
  if (!literalSecret(value)) return;
  registered.delete(value);
  registered.add(value);
  // The latest ones (a matrix starts servers row after row; those stopped long ago print nothing more): each costs a search of every text redacted.
  if (registered.size > MAX_REGISTERED) registered.delete(registered.values().next().value!);
}

/** How many registered passwords are searched for; the patterns still hide older ones in their usual forms. */
const MAX_REGISTERED = 64;

/**
 * Long enough, and neither a plain word nor a number, to be hidden wherever
 * it appears: a short value, a word (PGPASSWORD=postgres is common) or a
 * number would be hidden inside prose and JSON too (a seed, a count), and the
 * patterns still hide it in its usual forms.
 */
function literalSecret(value: string | undefined): value is string {
  return value !== undefined && value.length >= 6 && !/^(?:[a-z]+|[0-9]+)$/i.test(value);
}

/** The passwords known now: the registered ones, and those the environment gives the drivers (read at each call: it may change). */
function knownSecrets(): string[] {
  const fromEnv = [process.env['PGPASSWORD'], process.env['REDISCLI_AUTH']].filter(literalSecret);
  return [...registered, ...fromEnv];
}

/** Each known password, raw and as a URL, JSON or HTML report would write it, replaced by <redacted>. */
function hideKnown(text: string, forms: ReadonlySet<string> = knownForms()): string {
  // A plain search first (fast on a large history); a pattern only for the forms present, which is rare.
  const present = [...forms].filter((form) => text.includes(form));
  if (present.length === 0) return text;
  // Longest first, so that a form containing another is replaced whole.
  const alternatives = present.sort((a, b) => b.length - a.length).map((f) => f.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&'));
  // Not inside a longer run of letters and digits: that is other text, which a number or a name may share a part with.
  return text.replace(new RegExp(`(?<![A-Za-z0-9])(?:${alternatives.join('|')})(?![A-Za-z0-9])`, 'g'), '<redacted>');
}

/** The forms of the known passwords hideKnown searches for. */
function knownForms(): ReadonlySet<string> {
  return new Set(knownSecrets().flatMap((secret) => [secret, encodeURIComponent(secret), JSON.stringify(secret).slice(1, -1), escapeHtml(secret)]));
}

function escapeHtml(s: string): string {
  return s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');
}

/**
 * `text` with every database URL, and every URL with credentials, reduced to
 * scheme://host:port/db, every secret-named value hidden, and every known
 * password (registerSecret, PGPASSWORD, REDISCLI_AUTH) hidden wherever it is.
 */
export function redactSecrets(text: string): string {
  return hideKnown(redactPatterns(text));
}

/**
 * redactSecrets for many small parts of one text `whole` (the runs of a
 * page, redactMarkup): the known passwords read once, only the forms
 * `whole` holds (raw or HTML-escaped) searched for, and the patterns tried only on a part that
 * holds what every one of them needs (a scheme's `://`, a secret's name).
 */
export function secretRedactor(whole: string): (part: string) => string {
  // As `whole` holds them, or escaped as HTML (a page's parts are redacted decoded).
  const forms = new Set([...knownForms()].filter((form) => whole.includes(form) || whole.includes(escapeHtml(form))));
  return (part) => {
    const patterned = MAY_MATCH.test(part) ? redactPatterns(part) : part;
    return forms.size === 0 ? patterned : hideKnown(patterned, forms);
  };
}

/** What SECRET_URL and SECRET_VALUE cannot match without: `://`, or a word every secret name, redis.conf key and `Bearer` holds. Keep it in step with them. */
const MAY_MATCH = /:\/\/|pass|pwd|secret|credential|api[_-]?key|access[_-]?key|private[_-]?key|token|auth|bearer/i;

function redactPatterns(text: string): string {
  return text
    .replace(SECRET_URL, (match) => {
      const body = match.slice(0, match.length - trailingLength(match));
      const trailing = match.slice(body.length);
      return body.split(NEXT_URL).map((u) => redactUrl(u)).join(',') + trailing;
    })
    .replace(SECRET_VALUE, (...m: (string | undefined)[]) => {
      const groups = m.slice(1, 12);
      const pairs: [number, number][] = [[0, 1], [2, 4], [5, 6], [7, 8], [9, 10]];
      for (const [k, v] of pairs) if (groups[k] !== undefined) return groups[k] + hidden(groups[v]!);
      return m[0]!;
    });
}

/**
 * Terminal control characters other than newline, carriage return and tab
 * (ESC, BEL, C1 CSI...), shown as \xNN, DEL, C1 and the bidirectional
 * controls and separators as \uNNNN: text from a
 * history or counterexample file, a server's message or an adapter's name
 * can otherwise rewrite the user's terminal (title, clipboard, hidden lines).
 * JSON.stringify escapes C0 itself but leaves DEL and C1 raw: as \u00NN they
 * stay the same characters in --json output, where \xNN was invalid JSON.
 */
// oxlint-disable-next-line no-control-regex -- the control characters are what it looks for
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/**
 * Text fit for the user's terminal: secrets redacted, control characters made
 * visible. The bidirectional controls (a right-to-left override reverses
 * what follows: a shown name or verdict could read as another) and the line
 * and paragraph separators are shown as \uNNNN too, as model/shownText.ts
 * shows them; JSON.stringify leaves them raw, and in a JSON string \uNNNN is
 * the same character, so --json output stays JSON.
 */
export function terminalSafe(text: string): string {
  return visibleControls(redactSecrets(text));
}

/**
 * The control characters of `text` shown as terminalSafe shows them (C0 but
 * tab, newline and carriage return as \xNN; DEL, C1, the separators and the
 * bidirectional controls as \uNNNN), and nothing else changed: every text
 * output (JUnit XML, HTML, markdown, JSON and text files) shows them so. In
 * JSON they only ever stand inside strings, where \uNNNN is the same
 * character (JSON.stringify escapes C0 itself), so JSON stays the same data.
 */
export function visibleControls(text: string): string {
  return text.replace(CONTROL, (c) => {
    const code = c.charCodeAt(0);
    return code < 0x7f ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

/**
 * Every local user can read a process's command line (ps, /proc/<pid>/cmdline),
 * so a password given in --redis or --pg is overwritten with the redacted
 * command line (process.title) as soon as the CLI starts. Returns whether
 * there was anything to hide: the caller warns that it was visible until then.
 */
export function hideCommandLineSecrets(argv: readonly string[] = process.argv): boolean {
  for (const arg of argv) registerPasswordsIn(arg);
  const shown = argv.map((arg) => redactSecrets(arg));
  if (shown.every((arg, i) => arg === argv[i])) return false;
  process.title = ['lockcheck', ...shown.slice(2)].join(' ');
  // Redaction also drops user names and rewrites URLs it cannot parse; only a password makes the warning true.
  return argv.some(holdsPassword);
}

/** Registers the passwords of the URLs in `text` (user info and secret-named query keys, raw and decoded): a driver may quote one outside its URL. */
function registerPasswordsIn(text: string): void {
  const secretKey = new RegExp(`^${SECRET_NAME}$`, 'i');
  for (const match of text.match(SECRET_URL) ?? []) {
    for (const u of match.split(NEXT_URL)) {
      let url: URL;
      try {
        url = new URL(u);
      } catch {
        continue;
      }
      const values = [url.password, ...[...url.searchParams].filter(([k]) => secretKey.test(k)).map(([, v]) => v)];
      for (const v of values) {
        registerSecret(v);
        try {
          registerSecret(decodeURIComponent(v));
        } catch {
          // not percent-encoded text: registered as it is
        }
      }
    }
  }
}

/** A secret-named value, or a URL with a password (in its user part or its query); a URL that does not parse counts when a ':' comes before its last '@'. */
function holdsPassword(text: string): boolean {
  if (new RegExp(SECRET_VALUE.source, 'i').test(text)) return true;
  const secretKey = new RegExp(`^${SECRET_NAME}$`, 'i');
  for (const match of text.match(SECRET_URL) ?? []) {
    for (const u of match.split(NEXT_URL)) {
      let url: URL;
      try {
        url = new URL(u);
      } catch {
        if (/:\/\/.*:.*@/.test(u)) return true;
        continue;
      }
      if (url.password !== '' || [...url.searchParams.keys()].some((k) => secretKey.test(k))) return true;
    }
  }
  return false;
}

/**
 * From now on everything this process prints on stdout and stderr has its
 * secrets redacted and its control characters made visible (the CLI calls
 * this first): strings and bytes (a worker's piped output) alike, and an
 * uncaught exception or unhandled rejection, which Node would otherwise
 * print straight to the file descriptor, past these streams; the process
 * then exits with `fatalExitCode` (Node's own is 1; the CLI's is 4, since
 * its 1 is a verdict).
 */
export function redactTerminalOutput(fatalExitCode = 1): void {
  for (const stream of [process.stdout, process.stderr]) {
    const write = stream.write.bind(stream) as (chunk: unknown, ...rest: unknown[]) => boolean;
    stream.write = ((chunk: unknown, ...rest: unknown[]) => {
      if (typeof chunk === 'string') {
        // An encoding other than UTF-8 (hex, base64) is binary: decoded, it would be written as text.
        const encoding = typeof rest[0] === 'string' ? rest[0] : 'utf8';
        const text = encoding === 'utf8' || encoding === 'utf-8' ? chunk : Buffer.from(chunk, encoding as BufferEncoding).toString('utf8');
        return write(terminalSafe(text), ...(typeof rest[0] === 'string' ? ['utf8', ...rest.slice(1)] : rest));
      }
      if (chunk instanceof Uint8Array) return write(terminalSafe(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('utf8')), ...rest);
      return write(chunk, ...rest);
    }) as typeof stream.write;
  }
  const fatal = (e: unknown, what: string): void => {
    process.stderr.write(`lockcheck: ${what}: ${inspect(e)}\n`);
    // 'exit' handlers still run (servers stopped, claims dropped).
    process.exit(fatalExitCode);
  };
  process.on('uncaughtException', (e) => fatal(e, 'uncaught exception'));
  process.on('unhandledRejection', (e) => fatal(e, 'unhandled rejection'));
}
