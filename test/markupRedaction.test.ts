import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { writeRedacted } from '../conformance/env/outputFile.ts';
import { redactSecrets, registerSecret, secretRedactor } from '../conformance/env/redact.ts';
import { checkHistory } from '../conformance/history/check.ts';
import { parseHistory } from '../conformance/history/parse.ts';
import { writeHistoryReport } from '../conformance/history/report.ts';
import { testTempDir } from './tempDirs.ts';

/**
 * What redaction puts in an HTML or XML file is text, never markup: a raw
 * <redacted> is an unknown tag a browser hides, and a value cut out of a tag
 * or an attribute breaks the page.
 */
const dir = testTempDir('lockcheck-markup-');

function written(name: string, text: string, format?: 'text' | 'markup'): string {
  const path = join(dir, name);
  writeRedacted(path, text, 'the test file', format);
  return readFileSync(path, 'utf8');
}

/** Every tag in `html`: none but those the page had. */
const tags = (html: string): string[] => html.match(/<[^>]*>/g) ?? [];

describe('writeRedacted into HTML and XML: every redaction is visible text', () => {
  it.each([
    ['a secret-named value', '<td>connect failed; password=s3cret</td>', '<td>connect failed; password=&lt;redacted&gt;</td>'],
    ['JSON in an element (escaped quotes)', '<td>{&quot;password&quot;:&quot;s3cret&quot;,&quot;n&quot;:1}</td>', '<td>{&quot;password&quot;:&quot;&lt;redacted&gt;&quot;,&quot;n&quot;:1}</td>'],
    ['a URL that does not parse', '<td>redis://:s3cret@host:notaport</td>', '<td>redis://&lt;unparseable&gt;</td>'],
    ['a URL with credentials in an attribute', '<a title="see redis://u:s3cret@h:1/0 now">x</a>', '<a title="see redis://h:1/0 now">x</a>'],
    ['an unquoted value that ends at a tag', '<td>requirepass s3cret</td><td>next</td>', '<td>requirepass &lt;redacted&gt;</td><td>next</td>'],
  ])('%s', (_what, html, expected) => {
    expect(written('page.html', html)).toBe(expected);
  });

  it('a host the URL parser decodes to a quote does not end the attribute', () => {
    const html = written('host.html', '<a title="http://u:s3cret@a%22b/x">x</a>');
    expect(html).not.toContain('s3cret');
    expect(tags(html)).toEqual([expect.stringMatching(/^<a title="[^"]*">$/), '</a>']);
  });

  it('a registered password with markup characters is hidden as the page holds it', () => {
    registerSecret('p<ss"w0rd-x');
    const html = written('known.html', '<td>auth p&lt;ss&quot;w0rd-x</td>');
    expect(html).toBe('<td>auth &lt;redacted&gt;</td>');
  });

  it('a JUnit report (XML, whatever its name) is written as markup', () => {
    const xml = written('junit.out', '<testcase name="a"><failure message="password=s3cret">password=s3cret</failure></testcase>', 'markup');
    expect(xml).toBe('<testcase name="a"><failure message="password=&lt;redacted&gt;">password=&lt;redacted&gt;</failure></testcase>');
  });

  it('text files keep <redacted> as it is', () => {
    expect(written('c.json', '{"password":"s3cret"}')).toBe('{"password":"<redacted>"}');
  });

  it("the history report shows a client's redacted password as text", () => {
    const lines = [
      { type: 'invoke', process: 0, time: 0, op: 'acquire', resource: 'r', ttlMs: 100 },
      { type: 'info', process: 0, time: 5, op: 'acquire', resource: 'r', reason: 'auth failed: password=s3cret' },
    ];
    const history = parseHistory(lines.map((l) => JSON.stringify(l)).join('\n'));
    if (history instanceof Error) throw history;
    const html = readFileSync(writeHistoryReport(join(dir, 'report'), history, checkHistory(history), 'markup'), 'utf8');
    expect(html).not.toContain('s3cret');
    expect(html).not.toContain('<redacted>');
    expect(html).toContain('&lt;redacted&gt;');
  });
});

it('secretRedactor (the runs of a page) redacts as redactSecrets does: its quick test skips nothing a pattern finds', () => {
  const texts = [
    'host=h password=s3cret dbname=x',
    'PGPASSWORD=s3cret npm start',
    "{ auth: [ { scheme: 'digest', credentials: 'u:s3cret' } ] }",
    'requirepass s3cret / masterauth s3cret / sentinel auth-pass mymaster s3cret',
    'Authorization: Bearer ey.s3cret-x',
    'https://api.example/v1?api_key=s3cret&x=1',
    '{"clientSecret":"s3cret","apiKey":"s3cret","db_password":"s3cret","x-api-key":"s3cret","accessKey":"s3cret","privateKey":"s3cret"}',
    'REDISCLI_AUTH=s3cret auth_pass=s3cret pwd=s3cret refresh_token=s3cret session-token=s3cret',
    'cannot reach redis://:s3cret@h:1/0 or postgres://u:s3cret@h:5/db or https://u:s3cret@example.com/x',
  ];
  for (const text of texts) {
    expect(redactSecrets(text), text).not.toContain('s3cret');
    expect(secretRedactor(text)(text), text).toBe(redactSecrets(text));
  }
});
