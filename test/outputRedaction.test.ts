import { describe, expect, it } from 'vitest';
import { checkHistory } from '../conformance/history/check.ts';
import { parseHistory } from '../conformance/history/parse.ts';
import { historyReportHtml } from '../conformance/history/report.ts';
import { htmlTimeline, textTimeline } from '../conformance/timeline.ts';
import type { RunReport } from '../conformance/verdict.ts';
import { junitXml } from '../cli/junit.ts';
import { checkMisconfigurations } from '../conformance/configuration.ts';
import { simLeaseBackend } from '../conformance/sim/backend.ts';
import { designs } from '../model/design.ts';
import { InvalidInputError } from '../impl/errors.ts';

/**
 * Every function that hands a report's text back (not only the writers that
 * put it in a file) redacts it as writeRedacted does: a caller of the public
 * API prints or stores what it gets, and a client's error message may quote
 * a URL with its password.
 */
const PASSWORD = 'Hunter2-s3cret';
const URL_WITH_PASSWORD = `postgres://app:${PASSWORD}@db.example:5432/app`;

const HISTORY = [
  '{"type":"invoke","process":0,"time":0,"op":"acquire","resource":"r","ttlMs":100}',
  `{"type":"info","process":0,"time":1,"op":"acquire","resource":"r","reason":"connect failed: ${URL_WITH_PASSWORD}"}`,
].join('\n');

const REPORT = {
  backend: `pg at ${URL_WITH_PASSWORD}`,
  verdict: { kind: 'pass' },
  clients: 1,
  nodes: 1,
  findings: [],
  steps: [],
} as unknown as RunReport;

describe('report outputs returned to the caller: secrets redacted', () => {
  it('historyReportHtml', () => {
    const history = parseHistory(HISTORY);
    if (history instanceof Error) throw history;
    const html = historyReportHtml(history, checkHistory(history));
    expect(html).toContain('db.example');
    expect(html).not.toContain(PASSWORD);
  });

  it('htmlTimeline and textTimeline', () => {
    expect(htmlTimeline(REPORT)).toContain('postgres://db.example:5432/app');
    expect(htmlTimeline(REPORT)).not.toContain(PASSWORD);
    expect(textTimeline(REPORT)).toContain('postgres://db.example:5432/app');
    expect(textTimeline(REPORT)).not.toContain(PASSWORD);
  });

  it('junitXml', () => {
    const xml = junitXml(`suite ${URL_WITH_PASSWORD}`, [{ name: 'c', failure: `failed: password=${PASSWORD}`, timeMs: 1 }]);
    expect(xml).not.toContain(PASSWORD);
    expect(xml).toContain('password=&lt;redacted&gt;');
  });

  it('checkMisconfigurations: the lines it returns quote the refusal, redacted', async () => {
    const backend = {
      ...simLeaseBackend(designs.redisSingle(), 'strict'),
      misconfigurations: [{ what: 'a bad url', names: 'nodes', attempt: async () => Promise.reject(new InvalidInputError('invalid-config', `cannot use ${URL_WITH_PASSWORD}`)) }],
    };
    const problems = await checkMisconfigurations(backend);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain('postgres://db.example:5432/app');
    expect(problems[0]).not.toContain(PASSWORD);
  });
});
