import { describe, expect, it } from 'vitest';
import { redactSecrets, redactUrl } from '../conformance/env/redact.ts';

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
