/** A JUnit XML report, for CI systems that show test results: one test case per backend or matrix cell. */
export interface JUnitCase {
  readonly name: string;
  /** The failure message, or null for a pass. */
  readonly failure: string | null;
  readonly timeMs: number;
}

function esc(s: string): string {
  return s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');
}

export function junitXml(suite: string, cases: readonly JUnitCase[]): string {
  const failures = cases.filter((c) => c.failure !== null).length;
  const time = (cases.reduce((t, c) => t + c.timeMs, 0) / 1000).toFixed(3);
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="${esc(suite)}" tests="${cases.length}" failures="${failures}" time="${time}">`,
    `  <testsuite name="${esc(suite)}" tests="${cases.length}" failures="${failures}" time="${time}">`,
    ...cases.map((c) =>
      c.failure === null
        ? `    <testcase name="${esc(c.name)}" time="${(c.timeMs / 1000).toFixed(3)}"/>`
        : `    <testcase name="${esc(c.name)}" time="${(c.timeMs / 1000).toFixed(3)}"><failure message="${esc(c.failure.split('\n')[0]!)}">${esc(c.failure)}</failure></testcase>`,
    ),
    '  </testsuite>',
    '</testsuites>',
    '',
  ].join('\n');
}
