import { describe, expect, it } from 'vitest';
import { cellText } from '../cli/matrix.ts';
import { matrixCell } from './matrixCell.ts';

/**
 * matrix.md's cells quote messages lockcheck did not write (a server's or a
 * driver's error, an adapter's): as text, never markup a markdown viewer
 * renders as HTML, and never a '|' that splits the table's row.
 */
const MESSAGE = 'refused: <img src=x onerror=alert(1)> a|b & c';
const link = (f: string): string => `[🔎](matrix/${f}) `;

describe('matrix.md cells: quoted messages are text', () => {
  it.each([
    ['a cell not measured (an environment error)', matrixCell({ notMeasured: `environment error: ${MESSAGE}` })],
    ['a conformance failure', matrixCell({ conformanceFailure: `x: CONFORMANCE FAILURE at step 1 (${MESSAGE})` })],
  ])('%s', (_what, cell) => {
    const text = cellText(cell, link);
    expect(text).not.toMatch(/<img|\|/);
    expect(text).toContain('&lt;img src=x onerror=alert(1)&gt; a/b &amp; c');
  });
});
