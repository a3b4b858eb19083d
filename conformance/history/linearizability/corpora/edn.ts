import { CorpusParseError } from './errors.ts';

/**
 * A reader for the subset of EDN that Jepsen histories use: nil, booleans,
 * integers, floats, strings, keywords, symbols, vectors, lists, maps, sets,
 * `;` comments and `#_` discards. Keywords are interned, so they can key a Map.
 */
export type Edn = null | boolean | number | bigint | string | Keyword | EdnSymbol | readonly Edn[] | ReadonlyMap<Edn, Edn> | ReadonlySet<Edn>;

export class Keyword {
  private static readonly table = new Map<string, Keyword>();
  private constructor(readonly name: string) {}
  static of(name: string): Keyword {
    let k = Keyword.table.get(name);
    if (k === undefined) Keyword.table.set(name, (k = new Keyword(name)));
    return k;
  }
  toString(): string {
    return `:${this.name}`;
  }
}

export class EdnSymbol {
  constructor(readonly name: string) {}
  toString(): string {
    return this.name;
  }
}

/** Whitespace (commas count as whitespace in EDN). */
const isSpace = (c: number): boolean => c === 32 || c === 44 || (c >= 9 && c <= 13);
/** Characters that end a token. */
const isDelimiter = (c: number): boolean =>
  isSpace(c) || c === 40 || c === 41 || c === 91 || c === 93 || c === 123 || c === 125 || c === 34 || c === 59; // ( ) [ ] { } " ;

/** Reads every top-level form of `text`. */
export function readEdnAll(text: string, source = 'edn'): Edn[] {
  const r = new Reader(text, source);
  const forms: Edn[] = [];
  for (;;) {
    r.skip();
    if (r.atEnd()) return forms;
    forms.push(r.form());
  }
}

/** Reads exactly one top-level form. */
export function readEdn(text: string, source = 'edn'): Edn {
  const forms = readEdnAll(text, source);
  if (forms.length !== 1) throw new CorpusParseError(source, 0, `expected one EDN form, found ${forms.length}`);
  return forms[0]!;
}

/** Histories nest three or four deep (a vector of maps of vectors); a deeper file is not one. */
const MAX_DEPTH = 256;

class Reader {
  private pos = 0;
  private depth = 0;
  constructor(
    private readonly text: string,
    private readonly source: string,
  ) {}

  atEnd(): boolean {
    return this.pos >= this.text.length;
  }

  fail(reason: string, at = this.pos): never {
    let line = 1;
    for (let i = 0; i < at && i < this.text.length; i++) if (this.text.charCodeAt(i) === 10) line++;
    throw new CorpusParseError(this.source, line, reason);
  }

  /** Skips whitespace, commas, comments and `#_` discarded forms. */
  skip(): void {
    const t = this.text;
    while (this.pos < t.length) {
      const c = t[this.pos]!;
      if (isSpace(t.charCodeAt(this.pos))) this.pos++;
      else if (c === ';') {
        while (this.pos < t.length && t[this.pos] !== '\n') this.pos++;
      } else if (c === '#' && t[this.pos + 1] === '_') {
        this.pos += 2;
        this.form(); // skips what comes before the discarded form itself, and counts its depth
      } else return;
    }
  }

  form(): Edn {
    // Forms nest by recursion: past this depth a typed error, not the stack's RangeError.
    if (++this.depth > MAX_DEPTH) this.fail(`forms nested deeper than ${MAX_DEPTH}`);
    try {
      return this.formAt();
    } finally {
      this.depth--;
    }
  }

  private formAt(): Edn {
    this.skip();
    if (this.atEnd()) this.fail('unexpected end of input');
    const t = this.text;
    const c = t[this.pos]!;
    switch (c) {
      case '[':
      case '(': {
        this.pos++;
        return this.sequence(c === '[' ? ']' : ')');
      }
      case '{': {
        const start = this.pos++;
        const items = this.sequence('}');
        if (items.length % 2 !== 0) this.fail('a map needs an even number of forms');
        const m = new Map<Edn, Edn>();
        for (let i = 0; i < items.length; i += 2) {
          // EDN forbids it, and a Map would keep the last silently (which :process did the recorder mean?).
          if (m.has(items[i]!)) this.fail(`map key ${showEdn(items[i])} given twice`, start);
          m.set(items[i]!, items[i + 1]!);
        }
        return m;
      }
      case '#': {
        if (t[this.pos + 1] === '{') {
          const start = this.pos;
          this.pos += 2;
          const items = this.sequence('}');
          const set = new Set(items);
          if (set.size !== items.length) this.fail('a set holds an element twice', start);
          return set;
        }
        return this.fail(`unsupported dispatch '#${t[this.pos + 1] ?? ''}'`);
      }
      case '"':
        return this.string();
      case ')':
      case ']':
      case '}':
        return this.fail(`unexpected '${c}'`);
      case '\\':
        return this.fail('character literals are not supported');
      default:
        return this.atom();
    }
  }

  private sequence(close: string): Edn[] {
    const start = this.pos - 1;
    const items: Edn[] = [];
    for (;;) {
      this.skip();
      if (this.atEnd()) this.fail(`unclosed '${this.text[start]}'`, start);
      if (this.text[this.pos] === close) {
        this.pos++;
        return items;
      }
      items.push(this.form());
    }
  }

  private string(): string {
    const t = this.text;
    const start = this.pos++;
    let out = '';
    for (;;) {
      if (this.pos >= t.length) this.fail('unterminated string', start);
      const c = t[this.pos++]!;
      if (c === '"') return out;
      if (c !== '\\') {
        out += c;
        continue;
      }
      const e = t[this.pos++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case '"':
        case '\\':
          out += e;
          break;
        case 'u': {
          const hex = t.slice(this.pos, this.pos + 4);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail(`bad unicode escape '\\u${hex}'`);
          out += String.fromCharCode(parseInt(hex, 16));
          this.pos += 4;
          break;
        }
        default:
          this.fail(`unknown string escape '\\${e ?? ''}'`);
      }
    }
  }

  private atom(): Edn {
    const t = this.text;
    const start = this.pos;
    while (this.pos < t.length && !isDelimiter(t.charCodeAt(this.pos))) this.pos++;
    const token = t.slice(start, this.pos);
    if (token === 'nil') return null;
    if (token === 'true') return true;
    if (token === 'false') return false;
    if (token.startsWith(':')) {
      if (token.length === 1) this.fail("a keyword needs a name after ':'", start);
      return Keyword.of(token.slice(1));
    }
    if (/^[+-]?\d+N?$/.test(token)) {
      const digits = token.endsWith('N') ? token.slice(0, -1) : token;
      const big = BigInt(digits);
      return big >= BigInt(Number.MIN_SAFE_INTEGER) && big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big;
    }
    if (/^[+-]?\d+(\.\d+)?([eE][+-]?\d+)?M?$/.test(token)) {
      const n = Number(token.replace(/M$/, ''));
      // Past the doubles' range it would be Infinity: a value no history holds, compared equal to any other too large.
      return Number.isFinite(n) ? n : this.fail(`number '${token}' out of range`, start);
    }
    if (/^[a-zA-Z*+!\-_?<>=./&%$][\w*+!\-?<>=./&%$:#']*$/.test(token)) return new EdnSymbol(token);
    return this.fail(`cannot read '${token}'`, start);
  }
}

/** The keyword's name, or undefined when `v` is not a keyword. */
export const keywordName = (v: Edn | undefined): string | undefined => (v instanceof Keyword ? v.name : undefined);

/** `m[:name]` when `m` is a map. */
export function field(m: Edn, name: string): Edn | undefined {
  return m instanceof Map ? m.get(Keyword.of(name)) : undefined;
}

/** EDN text of a value, for error messages. */
export function showEdn(v: Edn | undefined): string {
  if (v === undefined) return '(missing)';
  if (v === null) return 'nil';
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return v.toString();
  if (v instanceof Keyword || v instanceof EdnSymbol) return v.toString();
  if (Array.isArray(v)) return `[${(v as readonly Edn[]).map(showEdn).join(' ')}]`;
  if (v instanceof Map) return `{${[...(v as ReadonlyMap<Edn, Edn>)].map(([k, x]) => `${showEdn(k)} ${showEdn(x)}`).join(', ')}}`;
  return `#{${[...(v as ReadonlySet<Edn>)].map(showEdn).join(' ')}}`;
}
