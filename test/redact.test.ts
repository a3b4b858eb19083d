import { spawnSync } from 'node:child_process';
import { lchownSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkHistory } from '../conformance/history/check.ts';
import { parseHistory } from '../conformance/history/parse.ts';
import { writeHistoryReport } from '../conformance/history/report.ts';
import { describe, expect, it } from 'vitest';
import { hideCommandLineSecrets, redactSecrets, redactUrl, registerSecret, terminalSafe } from '../conformance/env/redact.ts';
import { writeRedacted } from '../conformance/env/outputFile.ts';
import { redactMarkup } from '../conformance/env/redactMarkup.ts';

describe('redactUrl and redactSecrets: URLs are shown only as scheme://host:port/db', () => {
  it('drops user, password and query, keeps host, port and database', () => {
    expect(redactUrl('redis://user:s3cret@db.example:6380/2')).toBe('redis://db.example:6380/2');
    expect(redactUrl('redis://db.example/0?password=s3cret')).toBe('redis://db.example:6379/0');
    expect(redactUrl('rediss://:s3cret@[::1]:7000')).toBe('rediss://[::1]:7000');
    expect(redactUrl('postgres://app:s3cret@pg.example/ledger?sslmode=require&password=s3cret')).toBe('postgres://pg.example:5432/ledger');
    expect(redactUrl(new URL('postgresql://u:p@h:6000/d/extra'))).toBe('postgresql://h:6000/d');
  });

  it('never echoes text that is not a URL', () => {
    expect(redactUrl('redis://:s3cret@host:notaport')).toBe('redis://<unparseable>');
    expect(redactUrl('s3cret-in-plain-text')).toBe('<not a URL>');
  });

  it('redacts every database URL and every URL with credentials inside text, lists and punctuation included', () => {
    const text =
      "cannot reach redis://:s3cret@h:1/0?password=s3cret: ECONNREFUSED; --redis redis://a:1?password=s3cret,rediss://u:s3cret@b:2. See https://example.com/docs/page and https://u:s3cret@example.com/x. pg 'postgres://u:s3cret@h:5/db'";
    const shown = redactSecrets(text);
    expect(shown).not.toContain('s3cret');
    expect(shown).toBe(
      "cannot reach redis://h:1/0: ECONNREFUSED; --redis redis://a:1,rediss://b:2. See https://example.com/docs/page and https://example.com. pg 'postgres://h:5/db'",
    );
  });
});

it('leaves prose about schemes alone', () => {
  for (const prose of ['the scheme must be redis:// or rediss://, not ftp://', 'redis://[user:password@]host:port[/db] or postgres://[user[:password]@]host[:port]/database']) {
    expect(redactSecrets(prose)).toBe(prose);
  }
});

describe('redactSecrets: the value of anything named like a secret is hidden, whatever the form', () => {
  it('key=value, JSON and util.inspect keys, redis.conf lines and bearer tokens; quotes kept so JSON stays JSON', () => {
    const settings = JSON.stringify({ options: { password: 's3cret', clientSecret: 'a"s3cret', apiKey: 's3cret', db_password: 's3cret', token: '5', driftFactor: 0.01 } }, null, 2);
    const shown = redactSecrets(settings);
    expect(shown).not.toContain('s3cret');
    expect(JSON.parse(shown)).toEqual({ options: { password: '<redacted>', clientSecret: '<redacted>', apiKey: '<redacted>', db_password: '<redacted>', token: '5', driftFactor: 0.01 } });
    const cases: [string, string][] = [
      ['host=h password=s3cret dbname=x', 'host=h password=<redacted> dbname=x'],
      ['PGPASSWORD=s3cret npm start', 'PGPASSWORD=<redacted> npm start'],
      ["{ auth: [ { scheme: 'digest', credentials: 'u:s3cret' } ] }", "{ auth: [ { scheme: 'digest', credentials: '<redacted>' } ] }"],
      ['Bad directive or wrong number of arguments: requirepass s3cret', 'Bad directive or wrong number of arguments: requirepass <redacted>'],
      ['masterauth s3cret / sentinel auth-pass mymaster s3cret', 'masterauth <redacted> / sentinel auth-pass mymaster <redacted>'],
      ['Authorization: Bearer ey.s3cret-x', 'Authorization: Bearer <redacted>'],
      ['https://api.example/v1?api_key=s3cret&x=1', 'https://api.example/v1?api_key=<redacted>&x=1'],
      // JSON inside an HTML report.
      ['<td>{&quot;password&quot;:&quot;s3cret&quot;,&quot;driftFactor&quot;:0.01}</td>', '<td>{&quot;password&quot;:&quot;<redacted>&quot;,&quot;driftFactor&quot;:0.01}</td>'],
    ];
    for (const [text, redacted] of cases) expect(redactSecrets(text)).toBe(redacted);
  });

  it('leaves prose and fencing tokens alone', () => {
    for (const prose of ['the server refused the credentials: WRONGPASS invalid username-password pair', 'token 5 granted; "token": "7"', 'no password given: set one with requirepass']) {
      expect(redactSecrets(prose)).toBe(prose);
    }
  });
});

describe('redactSecrets: the forms a password takes in messages and driver objects', () => {
  it("REDISCLI_AUTH and other *_auth / *_pass names, inspect's backtick quotes, a ' in a URL's password", () => {
    const cases: [string, string][] = [
      ['REDISCLI_AUTH=Xq7zz redis-cli', 'REDISCLI_AUTH=<redacted> redis-cli'],
      ["env: { REDISCLI_AUTH: 'Xq7zz' }", "env: { REDISCLI_AUTH: '<redacted>' }"],
      ["{ auth_pass: 'Xq7zz' }", "{ auth_pass: '<redacted>' }"],
      ['{"pass":"Xq7zz","auth":"u:Xq7zz"} pwd=Xq7zz', '{"pass":"<redacted>","auth":"<redacted>"} pwd=<redacted>'],
      // util.inspect quotes a string holding both ' and " with backticks.
      ['{ password: `a\'b"Xq7zz` }', '{ password: `<redacted>` }'],
      // A ' is allowed unencoded in a URL's user info.
      ["connect redis://:ab'Xq7zz@127.0.0.1:6379 failed", 'connect redis://127.0.0.1:6379 failed'],
      ["'redis://u:ab'Xq7zz@127.0.0.1:6379'", "'redis://127.0.0.1:6379'"],
      ["https://u:ab'Xq7zz@example.com/x", 'https://example.com'],
    ];
    for (const [text, redacted] of cases) expect(redactSecrets(text)).toBe(redacted);
    // Prose that names these stays.
    for (const prose of ['the bypass was taken', 'bypass=1 compass: "north"', "set REDISCLI_AUTH (--redis) or PGPASSWORD (--pg)", 'redis://host:6379 and redis://u@h:1']) {
      expect(redactSecrets(prose)).toBe(prose.replace('redis://u@h:1', 'redis://h:1'));
    }
  });

  it('a password inside a JSON string (a reason in history.jsonl, a message in a counterexample file) is hidden and the JSON stays JSON', () => {
    for (const reason of ['password=ab"Xq7zz', 'PGPASSWORD="ab Xq7zz" psql', "host=h password='ab Xq7zz'", 'password=ab\\Xq7zz', '{"password":"abXq7zz"}']) {
      const shown = redactSecrets(JSON.stringify({ reason, n: 1 }));
      expect(shown, reason).not.toMatch(/Xq7/);
      expect(JSON.parse(shown), reason).toMatchObject({ n: 1 });
    }
  });

  it("the environment's PGPASSWORD and REDISCLI_AUTH and registered passwords are hidden wherever they appear, raw, URL- or JSON-encoded", () => {
    const saved = { pg: process.env['PGPASSWORD'], redis: process.env['REDISCLI_AUTH'] };
    process.env['PGPASSWORD'] = 'pg-Xq7/zz';
    process.env['REDISCLI_AUTH'] = 'rd"Xq7zz';
    registerSecret('reg#Xq7zz');
    try {
      const text = [
        "{ command: { name: 'auth', args: [ 'default', 'rd\"Xq7zz' ] } }",
        'AUTH default pg-Xq7/zz',
        'postgres://app:pg-Xq7%2Fzz@h/db?x=1 was refused',
        '"args":["rd\\"Xq7zz"]',
        'pass reg#Xq7zz on',
      ].join('\n');
      expect(redactSecrets(text)).not.toMatch(/Xq7/);
      // The passwords of --redis and --pg URLs on the command line are registered, decoded too.
      const title = process.title;
      hideCommandLineSecrets(['node', 'lockcheck', 'run', '--redis', 'redis://:cl%27Xq7zz@127.0.0.1:6379', '--pg', 'postgres://h/db?password=pq%20Xq7zz']);
      process.title = title;
      expect(redactSecrets("ERR AUTH cl'Xq7zz failed; password pq Xq7zz")).not.toMatch(/Xq7/);
      // A word or a number is not redacted everywhere it appears: prose would be unreadable (PGPASSWORD=postgres is common), JSON broken.
      process.env['PGPASSWORD'] = 'postgres';
      process.env['REDISCLI_AUTH'] = '123456';
      expect(redactSecrets('postgres is the server; {"seed": 123456}')).toBe('postgres is the server; {"seed": 123456}');
      // Nor inside a longer run of letters and digits, which is other text.
      registerSecret('Zq7-x2');
      expect(redactSecrets('AUTH Zq7-x2; "seed": 9Zq7-x29')).toBe('AUTH <redacted>; "seed": 9Zq7-x29');
    } finally {
      for (const [name, v] of [['PGPASSWORD', saved.pg], ['REDISCLI_AUTH', saved.redis]] as const) {
        if (v === undefined) delete process.env[name];
        else process.env[name] = v;
      }
    }
  });
});

describe('terminalSafe and redactTerminalOutput: nothing reaches the terminal unredacted or as a control sequence', () => {
  it('shows control characters other than newline, carriage return and tab as \\xNN', () => {
    expect(terminalSafe('a\u001b]0;title\u0007b\u009bc\r\n\td\u007f')).toBe('a\\x1b]0;title\\x07b\\u009bc\r\n\td\\u007f');
  });

  it('keeps --json output JSON: DEL and C1, which JSON.stringify leaves raw, are shown as \\u escapes, the same characters to a JSON reader', () => {
    const json = JSON.stringify({ resource: 'a\u009bb\u007f\u001b', n: 1 });
    expect(JSON.parse(terminalSafe(json))).toEqual({ resource: 'a\u009bb\u007f\u001b', n: 1 });
  });

  it('shows bidirectional controls and line and paragraph separators as \\u escapes, and --json output stays JSON with the same characters', () => {
    const spoof = 'a\u202eb\u202ac\u2066d\u2069e\u200ef\u200fg\u061ch\u2028i\u2029j';
    expect(terminalSafe(spoof)).toBe('a\\u202eb\\u202ac\\u2066d\\u2069e\\u200ef\\u200fg\\u061ch\\u2028i\\u2029j');
    expect(terminalSafe(spoof)).not.toMatch(/[\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/);
    const json = JSON.stringify({ resource: spoof, owner: 'x\\\u202e' }, null, 2);
    expect(JSON.parse(terminalSafe(json))).toEqual({ resource: spoof, owner: 'x\\\u202e' });
  });

  // Node prints an uncaught exception or unhandled rejection straight to fd 2, past process.stderr.write; bytes written to stdout are not strings.
  it.each(['rejection', 'throw'])('covers bytes and an uncaught %s, which Node would print past the streams; exit code 1', (how) => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'test/fixtures/terminalLeak.ts', how], { encoding: 'utf8', timeout: 60_000 });
    const all = r.stdout + r.stderr;
    expect(r.status, all).toBe(1);
    expect(all).not.toContain('s3cret');
    expect(all).not.toContain('\u001b');
    expect(all).not.toContain('\u0007');
    expect(r.stdout).toBe('bytes redis://h:1 \\x1b]52;c;AAAA\\x07\ntext password=<redacted> \\x1b[2J\n');
    expect(r.stderr).toMatch(how === 'rejection' ? /^lockcheck: unhandled rejection: Error: lost redis:\/\/h:1\/0\n[^]*\[cause\]: \{ password: '<redacted>' \}/ : /^lockcheck: uncaught exception: Error: thrown postgres:\/\/h:5432\/db \\x1b\[31m/);
  });
});

it("the history report holds no secret a client's error message quoted", () => {
  const lines = [
    { type: 'invoke', process: 0, time: 0, op: 'acquire', resource: 'r', ttlMs: 100 },
    { type: 'info', process: 0, time: 5, op: 'acquire', resource: 'r', reason: 'connect to redis://:s3cret@127.0.0.1:1 failed; password=s3cret' },
  ];
  const history = parseHistory(lines.map((l) => JSON.stringify(l)).join('\n'));
  if (history instanceof Error) throw history;
  const dir = mkdtempSync(join(tmpdir(), 'lockcheck-redact-'));
  try {
    const html = readFileSync(writeHistoryReport(dir, history, checkHistory(history), 'redact'), 'utf8');
    expect(html).toContain('redis://127.0.0.1:1');
    expect(html).not.toContain('s3cret');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

it('writeRedacted writes the redacted text, follows the user\'s own link at the path, and leaves nothing else behind', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lockcheck-redact-'));
  try {
    const out = join(dir, 'lockcheck-counterexample.json');
    writeFileSync(out, 'a longer text that was there before\n');
    writeRedacted(out, '{"password":"s3cret"}\n');
    expect(readFileSync(out, 'utf8')).toBe('{"password":"<redacted>"}\n');
    // The user's own link (as /dev/stdout is the system's) is where the user asked lockcheck to write.
    const target = join(dir, 'target.json');
    const own = join(dir, 'own.json');
    symlinkSync(target, own);
    writeRedacted(own, '{"apiKey":"k3y"}\n');
    expect(lstatSync(own).isSymbolicLink()).toBe(true);
    expect(readFileSync(target, 'utf8')).toBe('{"apiKey":"<redacted>"}\n');
    expect(readdirSync(dir).sort()).toEqual(['lockcheck-counterexample.json', 'own.json', 'target.json']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// Making a link another user owns needs root (lchown); elsewhere this case cannot be set up.
it.skipIf(process.getuid?.() !== 0)('writeRedacted refuses a link another user planted at the path, and leaves the file it names alone', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lockcheck-redact-'));
  try {
    const victim = join(dir, 'victim.txt');
    writeFileSync(victim, 'the user\'s own file\n');
    const out = join(dir, 'lockcheck-counterexample.json');
    symlinkSync(victim, out);
    lchownSync(out, 65534, 65534);
    expect(() => writeRedacted(out, '{"password":"s3cret"}\n')).toThrow(/refusing to write the file .*lockcheck-counterexample\.json: .*lockcheck-counterexample\.json is a symbolic link made by another user \(uid 65534\)/);
    expect(readFileSync(victim, 'utf8')).toBe('the user\'s own file\n');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// Making a link another user owns needs root (lchown); elsewhere this case cannot be set up.
it.skipIf(process.getuid?.() !== 0)('writeRedacted refuses to write through a directory link another user made, and follows the user\'s own', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lockcheck-redact-'));
  try {
    const elsewhere = join(dir, 'elsewhere');
    mkdirSync(elsewhere);
    const planted = join(dir, 'lockcheck-stress');
    symlinkSync(elsewhere, planted);
    lchownSync(planted, 65534, 65534);
    expect(() => writeRedacted(join(planted, 'history.jsonl'), '{}\n')).toThrow(/refusing to write the file .*history\.jsonl: .*lockcheck-stress is a symbolic link made by another user \(uid 65534\)/);
    expect(readdirSync(elsewhere)).toEqual([]);
    const own = join(dir, 'own');
    symlinkSync(elsewhere, own);
    writeRedacted(join(own, 'history.jsonl'), '{}\n');
    expect(readdirSync(elsewhere)).toEqual(['history.jsonl']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// A name, value or message reaches the secret search from a history, an adapter or a server: a run of words joined by
// dashes or dots was scanned to its end from each of its word boundaries (a secret name's prefix, a URL's scheme), and
// sentence punctuation after a URL from each of its characters. 40,000 characters of "a-a-…" took 13 s; 200,000, minutes.
it('redactSecrets and redactMarkup take time linear in the text: long runs of dashed and dotted words, punctuation after a URL', () => {
  const n = 200_000;
  const shapes = ['a-', '-a', 'a.', 'a+', 'a-pass', 'auth-', 'password-', 'Bearer '].map((unit) => unit.repeat(n / unit.length));
  shapes.push(`redis://x${'.'.repeat(n)}a`, `see redis://u:pw@h:1/0${'.'.repeat(n)}`);
  // This process's CPU time, in ms: what the work took, loaded machine or not (wall time at load 38 was 25 times the CPU
  // time of such work); vitest runs each file in a process of its own.
  const cpuMs = (): number => {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1000;
  };
  for (const text of shapes) {
    const started = cpuMs();
    redactSecrets(text);
    redactMarkup(`<p>${text}</p>`);
    // Linear: tens of ms each (quadratic: minutes).
    expect(cpuMs() - started, text.slice(0, 24)).toBeLessThan(3_000);
  }
  // The same names as before: anywhere in a dashed or dotted name, auth, pass and pwd only at its start or after a separator.
  expect(redactSecrets('x.db-password=hunter2 my_api_key=abc REDISCLI_AUTH=zzz bypass=ok passport=ok pwd: "p1" --auth=1')).toBe('x.db-password=<redacted> my_api_key=<redacted> REDISCLI_AUTH=<redacted> bypass=ok passport=ok pwd: "<redacted>" --auth=<redacted>');
  expect(redactSecrets('at redis://u:secretpw@h:1/0... then')).toBe('at redis://h:1/0... then');
});
