/**
 * The first key an event line names twice at its top level, or undefined. JSON.parse keeps the last of
 * duplicate keys silently, so `{"resource":"a",...,"resource":"b"}` would be judged as if the recorder had
 * written only "b": two fields of one event merged into one, as a name with bytes that are not UTF-8 would.
 * Run on a line JSON.parse accepted (valid JSON): one pass over its characters, keys compared by their
 * decoded text (`"\u0072esource"` is `resource`). Nested objects are a recorder's own fields, ignored.
 */
export function duplicateKey(line: string): string | undefined {
  const QUOTE = 0x22;
  const BACKSLASH = 0x5c;
  let depth = 0;
  let keys: Set<string> | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line.charCodeAt(i);
    if (c === QUOTE) {
      const start = i;
      for (i++; i < line.length; i++) {
        const d = line.charCodeAt(i);
        if (d === BACKSLASH) i++;
        else if (d === QUOTE) break;
      }
      if (depth !== 1) continue;
      // A string at the top level is a key when a colon follows it (after blanks); otherwise a value.
      let j = i + 1;
      while (j < line.length && (line[j] === ' ' || line[j] === '\t' || line[j] === '\r' || line[j] === '\n')) j++;
      if (line[j] !== ':') continue;
      const raw = line.slice(start, i + 1);
      const key = raw.includes('\\') ? (JSON.parse(raw) as string) : raw.slice(1, -1);
      keys ??= new Set();
      if (keys.has(key)) return key;
      keys.add(key);
    } else if (c === 0x7b || c === 0x5b) depth++;
    else if (c === 0x7d || c === 0x5d) depth--;
  }
  return undefined;
}
