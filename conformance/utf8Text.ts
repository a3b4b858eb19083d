/**
 * Bytes a user hands over (a history, a counterexample) as text: strict
 * UTF-8, a leading byte-order mark dropped (editors and Windows tools write
 * one). One decoder for every reader, so that none of them quietly turns
 * bytes that are not UTF-8 into U+FFFD: two names that differ only in such
 * bytes would become one name.
 */
export type Utf8Text =
  | { readonly kind: 'text'; readonly text: string }
  /** Starts with a UTF-16 byte-order mark (what PowerShell's `>` writes). */
  | { readonly kind: 'utf-16' }
  /** Not UTF-8; `line` is the 1-based line of the first byte that is not. */
  | { readonly kind: 'not-utf-8'; readonly line: number };

const NEWLINE = 0x0a;

export function decodeUtf8Text(bytes: Uint8Array): Utf8Text {
  if ((bytes[0] === 0xff && bytes[1] === 0xfe) || (bytes[0] === 0xfe && bytes[1] === 0xff)) return { kind: 'utf-16' };
  const start = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
  const body = bytes.subarray(start);
  try {
    return { kind: 'text', text: new TextDecoder('utf-8', { fatal: true }).decode(body) };
  } catch {
    return { kind: 'not-utf-8', line: firstBadLine(body) };
  }
}

/** The line of the first invalid sequence: a newline byte is never inside a UTF-8 sequence, so lines decode on their own. */
function firstBadLine(bytes: Uint8Array): number {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let line = 1;
  let from = 0;
  while (from <= bytes.length) {
    const end = bytes.indexOf(NEWLINE, from);
    const to = end === -1 ? bytes.length : end;
    try {
      decoder.decode(bytes.subarray(from, to));
    } catch {
      return line;
    }
    if (end === -1) break;
    from = end + 1;
    line++;
  }
  return line;
}
