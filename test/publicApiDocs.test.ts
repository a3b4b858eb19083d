import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { entryModules, exportResolver, hasDocComment, undocumented } from './publicApi.ts';

/**
 * "Public API types are the documentation's first page": every name the
 * package's exports map reaches carries a doc comment where it is declared
 * (followed through re-exports to the declaring file), so an editor's hover
 * and the .d.ts files say what it is for.
 */
const ENTRIES = entryModules(readFileSync('package.json', 'utf8'));

describe('public API documentation', () => {
  it('reads every entry point of the exports map', () => {
    expect(ENTRIES).toContain('conformance/index.ts');
    expect(ENTRIES).toContain('impl/index.ts');
    expect(ENTRIES).toContain('model/index.ts');
  });

  it('every exported name of every entry point has a doc comment on its declaration', () => {
    const { missing, problems } = undocumented('.', ENTRIES);
    expect(problems, `re-exports the scan could not follow:\n${problems.join('\n')}`).toEqual([]);
    expect(missing, `${missing.length} exported names have no /** */ comment directly above their declaration:\n${missing.join('\n')}`).toEqual([]);
  });

  // The scan itself: each way a name reaches an entry point, on a small in-memory package.
  describe('the scan', () => {
    const files: Record<string, string> = {
      'index.ts': [
        "export * from './a.ts';",
        "export type * from './types.ts';",
        "export { b as renamed, type C } from './b.ts';",
        "import { viaImport } from './b.ts';",
        'export { viaImport };',
        '/** Documented here. */',
        'export function own(): void {}',
        'export const bare = 1;',
        "export { shadowed } from './b.ts';",
      ].join('\n'),
      'a.ts': ['/** A. */', 'export const a = 1;', 'export function undocumentedA(): void {}', 'export const shadowed = 2;'].join('\n'),
      'types.ts': ['/** Typed. */', 'export interface T {', '  readonly x: number;', '}', '/* not a doc comment */', 'export type U = string;'].join('\n'),
      'b.ts': [
        '/**',
        ' * B, over lines.',
        ' */',
        '// a line comment between is fine',
        'export function b(): void {}',
        '/** C. */',
        '',
        'export class C {}',
        'function viaImport(): void {}',
        'export { viaImport };',
        '/** */',
        'export const shadowed = 3;',
      ].join('\n'),
    };
    const read = (path: string): string => {
      const text = files[path];
      if (text === undefined) throw new Error(`no file ${path}`);
      return text;
    };

    it('follows export *, export type *, renamed and local re-exports to the declaring line', () => {
      const names = exportResolver('.', read)('index.ts').names;
      expect([...names.keys()].sort()).toEqual(['C', 'T', 'U', 'a', 'bare', 'own', 'renamed', 'shadowed', 'undocumentedA', 'viaImport']);
      expect(names.get('renamed')).toEqual({ name: 'b', file: 'b.ts', line: 5 });
      expect(names.get('viaImport')).toEqual({ name: 'viaImport', file: 'b.ts', line: 9 });
      // An explicit export shadows the star export's name, as in TypeScript.
      expect(names.get('shadowed')?.file).toBe('b.ts');
    });

    it('names each undocumented export with its file and line: no comment, a blank line, a plain or an empty comment', () => {
      expect(undocumented('.', ['index.ts'], read)).toEqual({
        missing: ['index.ts: bare (index.ts:8)', 'index.ts: C (b.ts:8)', 'index.ts: shadowed (b.ts:12)', 'index.ts: U (types.ts:6)', 'index.ts: undocumentedA (a.ts:3)', 'index.ts: viaImport (b.ts:9)'],
        problems: [],
      });
    });

    it('reports what it cannot follow instead of passing it', () => {
      const broken = { 'index.ts': "export { gone } from './a.ts';\nexport { Redis } from 'ioredis';\nexport default 1;\nexport const { x } = { x: 1 };", 'a.ts': '' };
      const { problems } = undocumented('.', ['index.ts'], (p) => broken[p as keyof typeof broken]);
      expect(problems).toEqual([
        'index.ts:3: an export the scan does not read: export default 1;',
        'index.ts:4: an export the scan does not read: export const { x } = { x: 1 };',
        "index.ts:1: 'gone' is not exported by a.ts",
        "index.ts:2: 'Redis' is re-exported from package 'ioredis' (not lockcheck's to document)",
      ]);
    });

    it('a doc comment counts only directly above the declaration', () => {
      expect(hasDocComment('/** Yes. */\nexport const x = 1;', 2)).toBe(true);
      expect(hasDocComment('/** No. */\n\nexport const x = 1;', 3)).toBe(false);
      expect(hasDocComment('const y = 2; /* no */\nexport const x = 1;', 2)).toBe(false);
    });
  });
});
