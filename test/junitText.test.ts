import { expect, it } from 'vitest';
import { junitXml } from '../cli/junit.ts';

// XML 1.0 has no form for most control characters, not even as a reference: one in an adapter's name or a server's
// message (a terminal colour, a NUL) made the whole report unreadable to a CI system. They are shown as \xNN.
it('junitXml: control characters and lone surrogates in names and messages are shown, never written raw', () => {
  const xml = junitXml('suite\u0007', [{ name: 'adapter\u001b[31m', failure: 'refused\u0000 by \ud800 "x" <y> & z', timeMs: 1 }]);
  // oxlint-disable-next-line no-control-regex -- the control characters are what it looks for
  expect(xml).not.toMatch(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/);
  expect(xml).not.toMatch(/[\ud800-\udfff]/);
  expect(xml).toContain('adapter\\x1b[31m');
  expect(xml).toContain('refused\\x00 by \\ud800 &quot;x&quot; &lt;y&gt; &amp; z');
});
