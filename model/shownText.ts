/**
 * User-given text (resource names, written values) as the model's messages
 * and timelines print it: a control character, a line or paragraph
 * separator, a bidirectional override or a lone surrogate in a name would
 * otherwise reach a terminal or a report raw (an escape sequence that
 * clears the screen, a newline that forges a timeline line, a right-to-left
 * override that reverses what follows). Each is shown as an escape; text
 * without them reads as before.
 */

/** C0 and C1 controls, DEL, U+2028/U+2029, the bidirectional controls, and lone surrogates. */
// oxlint-disable-next-line no-control-regex -- the control characters are what it looks for
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const SHORT: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

const escapeOne = (ch: string): string => SHORT[ch] ?? `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`;

/** Text as it is, with only the unsafe characters (controls, separators, bidirectional controls, lone surrogates) shown as escapes. */
export function escapedText(text: string): string {
  return text.replace(UNSAFE, escapeOne);
}

/** A name in single quotes, as timelines print resources: `'order-42'`; a quote or backslash in it escaped, so it cannot end the name early. */
export function quotedName(name: string): string {
  return `'${name.replace(/[\\']/g, (ch) => `\\${ch}`).replace(UNSAFE, escapeOne)}'`;
}

/** A value in double quotes, as JSON.stringify writes it, with the characters JSON leaves raw escaped too (C1 controls, U+2028/U+2029, bidirectional controls). */
export function quotedValue(value: string): string {
  return JSON.stringify(value).replace(UNSAFE, escapeOne);
}

/** A field a message interpolates: a number (or bigint, boolean, null) as it is; a string quoted with its controls escaped; anything else by its kind. */
export function shownField(v: unknown): string {
  if (typeof v === 'string') return quotedName(v);
  if (typeof v === 'number' || typeof v === 'bigint' || typeof v === 'boolean' || v === null || v === undefined) return String(v);
  return Array.isArray(v) ? `an array of ${v.length}` : `a ${typeof v}`;
}
