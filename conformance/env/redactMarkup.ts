import { secretRedactor } from './redact.ts';

/**
 * redactSecrets for HTML and XML (reports, timelines, JUnit): each run of
 * text, and each double-quoted attribute value, is redacted as the reader
 * sees it (its entities decoded) and written back escaped. What redaction
 * inserts (<redacted>, <unparseable>, a host the URL parser decoded to a
 * quote) is then visible text, never an unknown tag a browser hides or a
 * quote that ends an attribute; and no pattern can reach across a tag (an
 * unquoted `requirepass …` value took the rest of the line, closing tags
 * with it). The writers escape with &amp; &lt; &gt; &quot; and quote
 * attributes with ", which is all this reads.
 */
export function redactMarkup(markup: string): string {
  // No pass over the page as it is written first: a secret only its reader sees (decoded) would pass that test. A run with nothing to hide is kept byte for byte.
  const redact = secretRedactor(markup);
  // Tags, text runs (a line at most), and a lone '<' or newline: joined, they are the page.
  return markup.replace(/<[^<>]*>|[^<\n]+/g, (token) => redactToken(token, redact));
}

/** A tag (its double-quoted attribute values redacted) or a run of text. */
function redactToken(token: string, redact: (text: string) => string): string {
  if (!token.startsWith('<')) return redactRun(token, redact);
  return token.replace(/"([^"]*)"/g, (_q, value: string) => `"${redactRun(value, redact)}"`);
}

/** One run of escaped text: unchanged when nothing in it is redacted. */
function redactRun(escaped: string, redact: (text: string) => string): string {
  const text = unescapeMarkup(escaped);
  const redacted = redact(text);
  return redacted === text ? escaped : escapeMarkup(redacted);
}

const ENTITIES: Readonly<Record<string, string>> = { '&amp;': '&', '&lt;': '<', '&gt;': '>', '&quot;': '"' };

function unescapeMarkup(s: string): string {
  return s.replace(/&(?:amp|lt|gt|quot);/g, (e) => ENTITIES[e]!);
}

function escapeMarkup(s: string): string {
  return s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');
}
