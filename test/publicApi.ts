import { readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';

/**
 * The public API as the package's exports map reaches it, read from the
 * source as text (TypeScript 7 has no compiler API for JavaScript): each
 * entry module's exported names, followed through `export ... from`,
 * `export *` and local `export { x }` of an import to the file and line that
 * declare them. Enough for this codebase's plain ES module syntax; an
 * `export` line of a form it does not know (`export default`, a destructuring
 * `export const { a } = ...`) is reported as a problem, never silently passed.
 * (A second declarator, `export const a = 1, b = 2`, is not seen.)
 */

/** Where an exported name is declared (`line` is 1-based). */
export interface Declaration {
  readonly name: string;
  readonly file: string;
  readonly line: number;
}

/** A module's exports, and what could not be followed (a file missing, a name not found). */
export interface ModuleExports {
  readonly names: ReadonlyMap<string, Declaration>;
  readonly problems: readonly string[];
}

/** The entry modules of package.json's `exports` map, as source paths (./dist/x/index.js -> x/index.ts). */
export function entryModules(packageJson: string): string[] {
  const manifest = JSON.parse(packageJson) as { exports: Record<string, string | { default?: string }> };
  return Object.values(manifest.exports)
    .map((target) => (typeof target === 'string' ? target : target.default))
    .filter((target): target is string => target !== undefined && target.endsWith('.js'))
    .map((target) => target.replace(/^\.\/dist\//, '').replace(/\.js$/, '.ts'));
}

const DECLARES = String.raw`(?:declare\s+)?(?:default\s+)?(?:abstract\s+)?(?:async\s+)?(?:function\s*\*?|class|interface|type|const\s+enum|const|let|var|enum|namespace)\s+([A-Za-z_$][\w$]*)`;
const EXPORTED_DECLARATION = new RegExp(String.raw`^export\s+${DECLARES}`);
const LOCAL_DECLARATION = new RegExp(String.raw`^(?:export\s+)?${DECLARES}`);
const EXPORT_LIST = /^export\s+(?:type\s+)?\{([^}]*)\}\s*(?:from\s+['"]([^'"]+)['"])?/gm;
const EXPORT_STAR = /^export\s+(?:type\s+)?\*\s+(?:as\s+\S+\s+)?from\s+['"]([^'"]+)['"]/gm;
/** Every export line must be one of the forms above. */
const KNOWN_EXPORT = new RegExp(String.raw`^export\s+(?:${DECLARES}|(?:type\s+)?\{|(?:type\s+)?\*\s)`);
const IMPORT_LIST = /^import\s+(?:type\s+)?\{([^}]*)\}\s*from\s+['"]([^'"]+)['"]/gm;

/** `a`, `type b`, `c as d` -> [local, exported] pairs. */
function specifiers(list: string): Array<readonly [string, string]> {
  return list
    .split(',')
    .map((s) => s.replace(/\/\/.*$/gm, '').trim().replace(/^type\s+/, ''))
    .filter((s) => s !== '')
    .map((s) => {
      const [local, alias] = s.split(/\s+as\s+/);
      return [local!, alias ?? local!] as const;
    });
}

function lineOf(text: string, index: number): number {
  return text.slice(0, index).split('\n').length;
}

/** Reads modules relative to `root` and resolves their exports (memoised per file). */
export function exportResolver(root: string, read: (path: string) => string = (path) => readFileSync(join(root, path), 'utf8')): (file: string) => ModuleExports {
  const memo = new Map<string, ModuleExports>();
  const target = (from: string, spec: string): string | null => (spec.startsWith('.') ? normalize(join(dirname(from), spec)).replace(/\.js$/, '.ts') : null);

  const resolve = (file: string): ModuleExports => {
    const known = memo.get(file);
    if (known !== undefined) return known;
    // A cycle reads as no further names rather than looping.
    memo.set(file, { names: new Map(), problems: [] });
    let text: string;
    try {
      text = read(file);
    } catch {
      const missing = { names: new Map(), problems: [`${file}: cannot be read`] };
      memo.set(file, missing);
      return missing;
    }
    const lines = text.split('\n');
    const names = new Map<string, Declaration>();
    const problems: string[] = [];
    const imports = new Map<string, { readonly from: string; readonly name: string }>();
    for (const m of text.matchAll(IMPORT_LIST)) for (const [imported, local] of specifiers(m[1]!)) imports.set(local, { from: m[2]!, name: imported });

    const declarationIn = (name: string): Declaration | null => {
      const i = lines.findIndex((l) => LOCAL_DECLARATION.exec(l)?.[1] === name);
      return i === -1 ? null : { name, file, line: i + 1 };
    };
    const fromModule = (spec: string, name: string, exported: string, where: number): void => {
      const path = target(file, spec);
      if (path === null) return problems.push(`${file}:${where}: '${exported}' is re-exported from package '${spec}' (not lockcheck's to document)`), undefined;
      const found = resolve(path);
      problems.push(...found.problems);
      const d = found.names.get(name);
      if (d === undefined) problems.push(`${file}:${where}: '${name}' is not exported by ${path}`);
      else names.set(exported, d);
    };

    // Declarations exported where they stand.
    lines.forEach((l, i) => {
      if (/^export\b/.test(l) && !KNOWN_EXPORT.test(l)) problems.push(`${file}:${i + 1}: an export the scan does not read: ${l.trim().slice(0, 60)}`);
      const name = EXPORTED_DECLARATION.exec(l)?.[1];
      if (name !== undefined && !names.has(name)) names.set(name, { name, file, line: i + 1 });
    });
    // export { a, b as c } [from '...']
    for (const m of text.matchAll(EXPORT_LIST)) {
      const where = lineOf(text, m.index);
      for (const [local, exported] of specifiers(m[1]!)) {
        if (m[2] !== undefined) fromModule(m[2], local, exported, where);
        else if (imports.has(local)) fromModule(imports.get(local)!.from, imports.get(local)!.name, exported, where);
        else {
          const d = declarationIn(local);
          if (d === null) problems.push(`${file}:${where}: no declaration of '${local}' found`);
          else names.set(exported, d);
        }
      }
    }
    // export * from '...': names not exported explicitly (explicit exports shadow star exports, as in TypeScript).
    for (const m of text.matchAll(EXPORT_STAR)) {
      const path = target(file, m[1]!);
      if (path === null) {
        problems.push(`${file}:${lineOf(text, m.index)}: export * from package '${m[1]}'`);
        continue;
      }
      const found = resolve(path);
      problems.push(...found.problems);
      for (const [name, d] of found.names) if (name !== 'default' && !names.has(name)) names.set(name, d);
    }
    const done = { names, problems };
    memo.set(file, done);
    return done;
  };
  return resolve;
}

/**
 * Whether a doc comment (`/** ... *\/`) directly precedes line `line` (1-based)
 * of `text`: nothing but line comments between them, no blank line.
 */
export function hasDocComment(text: string, line: number): boolean {
  const lines = text.split('\n');
  let j = line - 2;
  while (j >= 0 && lines[j]!.trim().startsWith('//')) j -= 1;
  if (j < 0 || !lines[j]!.trimEnd().endsWith('*/')) return false;
  while (j >= 0 && !lines[j]!.includes('/*')) j -= 1;
  if (j < 0) return false;
  const opening = lines[j]!.trim();
  if (!opening.startsWith('/**') || opening.startsWith('/**/')) return false;
  // Something beyond the markers: an empty /** */ says nothing.
  const body = lines.slice(j, line - 1).join('\n').replace(/\/\*\*|\*\/|^\s*\*/gm, '').trim();
  return body !== '';
}

/** Every exported name of the entry modules without a doc comment, as `entry: name (file:line)`, and what could not be followed. */
export function undocumented(root: string, entries: readonly string[], read: (path: string) => string = (path) => readFileSync(join(root, path), 'utf8')): { readonly missing: string[]; readonly problems: string[] } {
  const resolve = exportResolver(root, read);
  const missing: string[] = [];
  const problems = new Set<string>();
  for (const entry of entries) {
    const found = resolve(entry);
    for (const p of found.problems) problems.add(p);
    for (const [name, d] of [...found.names].sort(([a], [b]) => a.localeCompare(b))) {
      if (!hasDocComment(read(d.file), d.line)) missing.push(`${entry}: ${name} (${d.file}:${d.line})`);
    }
  }
  return { missing, problems: [...problems] };
}
