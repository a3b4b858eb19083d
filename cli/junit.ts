import { redactMarkup } from '../conformance/env/redactMarkup.ts';
import { visibleControls } from '../conformance/env/redact.ts';
/**
 * A JUnit XML report, for CI systems that show test results: one test case per backend or matrix cell.
 * A case failed (its message), passed, or decided nothing (skipped, with why: every run stopped early, a
 * cell not measured), which a CI system must not show as a pass.
 */
export type JUnitCase = { readonly name: string; readonly timeMs: number } & ({ readonly failure: string } | { readonly failure: null; readonly skipped?: string });

/** Characters XML 1.0 cannot hold, not even as a reference (a terminal colour, a NUL, a lone surrogate): one made the whole report unreadable. */
// oxlint-disable-next-line no-control-regex -- the control characters are what it looks for
const NOT_XML = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

function esc(s: string): string {
  return s
    .replace(NOT_XML, (c) => (c.length === 1 && c.charCodeAt(0) < 0x100 ? `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}` : `\\u${c.charCodeAt(0).toString(16)}`))
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;');
}

/** The report, its secrets redacted as the reader sees them (redactMarkup) and its control characters shown (visibleControls), as every report lockcheck hands out. */
export function junitXml(suite: string, cases: readonly JUnitCase[]): string {
  return visibleControls(redactMarkup(junitMarkup(suite, cases)));
}

function junitMarkup(suite: string, cases: readonly JUnitCase[]): string {
  const failures = cases.filter((c) => c.failure !== null).length;
  const skipped = cases.filter((c) => c.failure === null && c.skipped !== undefined).length;
  const time = (cases.reduce((t, c) => t + c.timeMs, 0) / 1000).toFixed(3);
  const counts = `tests="${cases.length}" failures="${failures}" skipped="${skipped}" time="${time}"`;
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="${esc(suite)}" ${counts}>`,
    `  <testsuite name="${esc(suite)}" ${counts}>`,
    ...cases.map((c) => {
      const open = `    <testcase name="${esc(c.name)}" time="${(c.timeMs / 1000).toFixed(3)}"`;
      if (c.failure !== null) return `${open}><failure message="${esc(c.failure.split('\n')[0]!)}">${esc(c.failure)}</failure></testcase>`;
      return c.skipped === undefined ? `${open}/>` : `${open}><skipped message="${esc(c.skipped.split('\n')[0]!)}"/></testcase>`;
    }),
    '  </testsuite>',
    '</testsuites>',
    '',
  ].join('\n');
}
