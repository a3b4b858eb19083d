import { readFileSync } from 'node:fs';

import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { junitXml } from '../cli/junit.ts';
import { writeRedacted } from '../conformance/env/outputFile.ts';
import { terminalSafe } from '../conformance/env/redact.ts';
import { checkHistory } from '../conformance/history/check.ts';
import { parseHistory } from '../conformance/history/parse.ts';
import { historyReportHtml } from '../conformance/history/report.ts';
import { htmlTimeline, textTimeline } from '../conformance/timeline.ts';
import type { RunReport } from '../conformance/verdict.ts';
import { testTempDir } from './tempDirs.ts';

/**
 * Bidirectional controls (a right-to-left override reverses what follows: a
 * name or verdict could read as another) and the other invisible controls
 * (DEL, C1, U+061C, U+200E/F, U+2028/9) are shown as \uNNNN in every text
 * output, as the terminal filter (terminalSafe) shows them: JUnit XML, HTML
 * reports and timelines, markdown, JSON and plain-text files.
 */
const INVISIBLE = ['\u202a', '\u202b', '\u202c', '\u202d', '\u202e', '\u2066', '\u2067', '\u2068', '\u2069', '\u061c', '\u200e', '\u200f', '\u2028', '\u2029', '\u007f', '\u0085', '\u009b'];
const NAME = `evil${INVISIBLE.join('')}name`;
const RAW = /[\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
/** What the terminal shows for NAME: the same escapes in every output. */
const SHOWN = terminalSafe(NAME);

const dir = testTempDir('lockcheck-controls-');

describe('invisible and bidirectional controls are shown, never written raw', () => {
  it('the terminal shows each as \\uNNNN', () => {
    expect(SHOWN).toBe('evil\\u202a\\u202b\\u202c\\u202d\\u202e\\u2066\\u2067\\u2068\\u2069\\u061c\\u200e\\u200f\\u2028\\u2029\\u007f\\u0085\\u009bname');
  });

  it('junitXml', () => {
    const xml = junitXml(`suite ${NAME}`, [{ name: NAME, failure: `failed: ${NAME}`, timeMs: 1 }]);
    expect(xml).not.toMatch(RAW);
    expect(xml).toContain(SHOWN);
  });

  it('historyReportHtml', () => {
    const history = parseHistory(
      [
        `{"type":"invoke","process":0,"time":0,"op":"acquire","resource":${JSON.stringify(NAME)},"ttlMs":100}`,
        `{"type":"info","process":0,"time":1,"op":"acquire","resource":${JSON.stringify(NAME)},"reason":${JSON.stringify(NAME)}}`,
      ].join('\n'),
    );
    if (history instanceof Error) throw history;
    const html = historyReportHtml(history, checkHistory(history), NAME);
    expect(html).not.toMatch(RAW);
    expect(html).toContain(SHOWN);
  });

  it('htmlTimeline and textTimeline', () => {
    const report = { backend: NAME, verdict: { kind: 'pass' }, clients: 1, nodes: 1, findings: [], steps: [] } as unknown as RunReport;
    for (const text of [htmlTimeline(report), textTimeline(report)]) {
      expect(text).not.toMatch(RAW);
      expect(text).toContain(SHOWN);
    }
  });

  it.each(['report.xml', 'page.html', 'matrix.md', 'counterexample.json', 'history.jsonl', 'timeline.txt'])('a written %s', (name) => {
    const path = join(dir, name);
    const text = name.endsWith('json') || name.endsWith('jsonl') ? `${JSON.stringify({ name: NAME })}\n` : `<p>${NAME}</p>\n`;
    writeRedacted(path, text, 'the test file');
    const written = readFileSync(path, 'utf8');
    expect(written).not.toMatch(RAW);
    expect(written).toContain(SHOWN);
    // JSON stays JSON, and reads back as the same name.
    if (name.endsWith('json') || name.endsWith('jsonl')) expect(JSON.parse(written)).toEqual({ name: NAME });
  });
});
