import { redactSecrets } from './env/redact.ts';

/**
 * Text read from a file the user gave (a history line, a counterexample) as
 * a parse error quotes it: redacted whole before it is cut to `max`
 * characters (a cut inside a password's quotes left it where no pattern
 * finds it), then with its unsafe characters escaped. A reason field is a
 * client's error message, which may quote a URL with its password.
 */
export function quotedInput(text: string, max: number, quote: "'" | '"' = "'"): string {
  const redacted = redactSecrets(text);
  const cut = redacted.length > max ? `${redacted.slice(0, max)}…` : redacted;
  const inner = quote === '"' ? cut.replace(/[\\"]/g, (c) => `\\${c}`) : cut.replace(/'/g, "\\'");
  return `${quote}${escapedInput(inner)}${quote}`;
}

/**
 * JSON.parse's error as a parse error says it: without the snippet of the
 * input V8 quotes (`"x{"passwor"... is not valid JSON`, cut anywhere, a
 * password's start included), the rest redacted and escaped.
 */
export function jsonParseProblem(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const withoutSnippet = message.replace(/,\s*".*\s+is not valid JSON\s*$/s, '');
  return escapedInput(redactSecrets(withoutSnippet));
}

/** C0, DEL, C1, line and paragraph separators, bidirectional controls and lone surrogates. */
// oxlint-disable-next-line no-control-regex -- the control characters are what it looks for
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const SHORT: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** Escaped as the terminal filter shows them (terminalSafe: C0 as \xNN, the rest as \uNNNN), so a message reads the same printed or not. */
function escapedInput(text: string): string {
  return text.replace(UNSAFE, (c) => {
    const code = c.charCodeAt(0);
    return SHORT[c] ?? (code < 0x20 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`);
  });
}
