import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { COMMAND_OPTIONS, OPTIONS } from '../cli/options.ts';
import { BUILT_INS, MEASURED_FAULT_CLASSES } from '../cli/rows.ts';
import { FAULT_KINDS, type FaultInjectors, faultKindsOf } from '../conformance/faults.ts';
import { STRESS_BACKENDS } from '../conformance/stress/backendNames.ts';
import { NEMESIS_FAULTS } from '../conformance/stress/nemesis.ts';
import { DESIGN_KINDS, STORE_POLICIES } from '../model/design.ts';
import { FAULT_CLASSES } from '../model/faultClass.ts';
import { PROPERTY_IDS } from '../model/properties.ts';
import { anchors, relativeLinks, slug } from './markdownLinks.ts';
import { entryModules, exportResolver } from './publicApi.ts';
import { sourceEntries } from './sourceEntries.ts';

/**
 * What the docs state as fact about the command line, the npm scripts, the properties and the errors is what the
 * code has: an option, script, property ID or error class a reader copies from a page exists (no network, no servers).
 */
const PAGES = ['README.md', 'spec/SPEC.md', 'conformance/adapters/README.md', ...readdirSync('docs').filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
const text = (page: string): string => readFileSync(page, 'utf8');
const ALL = PAGES.map((p) => [p, text(p)] as const);

/** `lockcheck <command> …` as the docs write it (in a code block or inline code): the command and the options given. */
function commandLines(page: string, body: string): { where: string; command: string; options: string[]; values: Array<readonly [string, string]> }[] {
  // A command line runs to the end of its inline code span or, in a block, of its line (a trailing \ continues it).
  const spans = [...body.matchAll(/```[a-z]*\n([\s\S]*?)```/g)].flatMap((m) => m[1]!.replace(/\\\n/g, ' ').split('\n'));
  const inline = [...body.replace(/```[\s\S]*?```/g, '').matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!);
  // `npm start -- …` is `lockcheck matrix …`, `npm run explore -- …` is `lockcheck explore …` (package.json's scripts).
  const npm: Record<string, string> = { start: 'matrix', 'run explore': 'explore' };
  return [...spans, ...inline].flatMap((line) =>
    [...line.matchAll(/\b(?:lockcheck(?:\.mjs)? (matrix|run|replay|check|failover|stress|explore)\b|npm (start|run explore) --(?=\s))([^#|;]*)/g)].map((m) => ({
      where: `${page}: ${m[0].trim()}`,
      command: m[1] ?? npm[m[2]!]!,
      options: [...m[3]!.matchAll(/(?:^|\s)--([a-z][a-z-]*)/g)].map((o) => o[1]!),
      values: [...m[3]!.matchAll(/(?:^|\s)--([a-z][a-z-]*)[ =]([^\s-][^\s]*)/g)].map((o) => [o[1]!, o[2]!.replace(/[),.]+$/, '')] as const),
    })),
  );
}

describe('the docs state the command line as it is', () => {
  const help = spawnSync(process.execPath, ['cli/lockcheck.mjs', '--help'], { encoding: 'utf8', timeout: 60_000 });
  const helpOptions = new Set([...help.stdout.matchAll(/(?:^|[\s([])--([a-z][a-z-]*)/gm)].map((m) => m[1]!));

  it('--help lists every option the command line reads (but --help)', () => {
    expect(help.status, help.stderr).toBe(0);
    expect(Object.keys(OPTIONS).filter((o) => o !== 'help' && !helpOptions.has(o))).toEqual([]);
    expect([...helpOptions].filter((o) => !(o in OPTIONS))).toEqual([]);
  });

  it('every option the command line reads is documented in README.md or docs/', () => {
    const docs = ALL.map(([, b]) => b).join('\n');
    expect(Object.keys(OPTIONS).filter((o) => !new RegExp(`--${o}\\b`).test(docs))).toEqual([]);
  });

  it('every lockcheck command line in the docs gives only options that command takes', () => {
    const lines = ALL.flatMap(([p, b]) => commandLines(p, b));
    expect(lines.length).toBeGreaterThan(20);
    // --redis and --pg are the server commands' (cli/main.ts refuses them for check, failover, stress and explore).
    const takesServers = (command: string, o: string): boolean => ['redis', 'pg'].includes(o) && ['matrix', 'run', 'replay'].includes(command);
    const wrong = lines.flatMap((l) => l.options.filter((o) => o !== 'help' && !takesServers(l.command, o) && !COMMAND_OPTIONS[l.command]!.includes(o)).map((o) => `${l.where}: --${o}`));
    expect(wrong).toEqual([]);
  });

  it('every name a docs command line gives a listing option (--backend, --faults, --nemesis, --store, --design, ...) is one that command takes', () => {
    const builtIns = BUILT_INS.map((b) => b.name);
    const path = (v: string): boolean => /^\.{0,2}\/|\.(m?[jt]s)$/.test(v);
    const lib = (v: string): boolean => v.startsWith('lib:');
    const allowed: Record<string, (v: string) => boolean> = {
      'run --backend': (v) => builtIns.includes(v) || path(v) || lib(v),
      'matrix --backend': (v) => builtIns.includes(v) || lib(v),
      'stress --backend': (v) => (STRESS_BACKENDS as readonly string[]).includes(v) || path(v) || lib(v),
      'replay --backend': path,
      'matrix --faults': (v) => MEASURED_FAULT_CLASSES.some((f) => f.id === v),
      'run --faults': (v) => (FAULT_KINDS as readonly string[]).includes(v),
      'stress --nemesis': (v) => (NEMESIS_FAULTS as readonly string[]).includes(v),
      'stress --store': (v) => ['unfenced', 'monotonic', 'strict'].includes(v),
      'check --store-policy': (v) => (STORE_POLICIES as readonly string[]).includes(v),
      'explore --design': (v) => (DESIGN_KINDS as readonly string[]).includes(v),
      'explore --fault': (v) => (FAULT_CLASSES as readonly string[]).includes(v),
    };
    const given = ALL.flatMap(([p, b]) => commandLines(p, b)).flatMap((l) =>
      l.values.flatMap(([o, v]) => (allowed[`${l.command} --${o}`] === undefined ? [] : v.split(',').map((item) => ({ where: l.where, key: `${l.command} --${o}`, item })))),
    );
    // A placeholder (`<kind>`, `N`, `lib:…`, `...`) names nothing.
    const named = given.filter((g) => g.item !== '' && !/[<…]|\.\.\.|^[A-Z]+$/.test(g.item));
    expect(named.length).toBeGreaterThan(30);
    expect(named.filter((g) => !allowed[g.key]!(g.item)).map((g) => `${g.where}: ${g.key} ${g.item}`)).toEqual([]);
  });

  it('every npm script the docs name exists in package.json', () => {
    const scripts = Object.keys((JSON.parse(text('package.json')) as { scripts: Record<string, string> }).scripts);
    const named = ALL.flatMap(([p, b]) => [...b.matchAll(/\bnpm (?:run(?: -s)? ([a-z][\w:-]*)|(start|test)\b)/g)].map((m) => ({ p, name: m[1] ?? m[2]! })));
    expect(named.length).toBeGreaterThan(5);
    expect(named.filter((n) => !scripts.includes(n.name)).map((n) => `${n.p}: npm run ${n.name}`)).toEqual([]);
  });
});

describe('the docs name properties and errors that exist', () => {
  it('every property ID in the docs is one the spec states', () => {
    // LIN-1 is the history checker's (conformance/history/findings.ts); SHA-256 and UTF-8/16 are not IDs.
    const known = new Set<string>([...PROPERTY_IDS, 'LIN-1', 'SHA-256', 'UTF-8', 'UTF-16']);
    const spec = text('spec/SPEC.md');
    for (const id of PROPERTY_IDS) expect(spec, id).toContain(`**${id}**`);
    // The code's comments, messages and names too (its tests aside, which feed junk IDs on purpose).
    const code = spawnSync('git', ['ls-files', '*.ts', '*.mjs'], { encoding: 'utf8' }).stdout.split('\n').filter((f) => f !== '' && !f.startsWith('test/')).map((f) => [f, text(f)] as const);
    expect(code.length).toBeGreaterThan(100);
    const unknown = [...ALL, ...code].flatMap(([p, b]) => [...b.matchAll(/\b[A-Z][A-Z0-9]*-\d+\b/g)].map((m) => m[0]).filter((id) => !known.has(id)).map((id) => `${p}: ${id}`));
    expect(unknown).toEqual([]);
    // And every ID the spec defines (section 5, LIN-1 in 10.4.5) is one the code judges.
    const defined = [...spec.matchAll(/\*\*([A-Z]+-\d+)\*\* — \*/g)].map((m) => m[1]!);
    const codeText = code.map(([, b]) => b).join('\n');
    expect(defined.length).toBeGreaterThan(PROPERTY_IDS.length);
    expect(defined.filter((id) => !codeText.includes(`'${id}'`))).toEqual([]);
  });

  it('every error class in a docs table of errors is exported by the package (or is JavaScript\'s own)', async () => {
    const listed = new Set(ALL.flatMap(([, b]) => [...b.matchAll(/^\| `([A-Z]\w*Error)` \|/gm)].map((m) => m[1]!)));
    expect(listed.size).toBeGreaterThan(10);
    const exported = new Set<string>();
    for (const entry of entryModules(text('package.json'))) for (const name of Object.keys((await import(/* @vite-ignore */ `../${entry}`)) as object)) exported.add(name);
    expect([...listed].filter((e) => !exported.has(e) && !(e in globalThis))).toEqual([]);
  });
});

describe('the docs say which entry exports a name as the package does', () => {
  it('a name given with its entry (`X` of/from/in `lockcheck/…`, `X` (`lockcheck/…`)) is exported by that entry', () => {
    // errors.md called EtcdCluster and ZookeeperEnsemble "the kit's servers"; lockcheck/kit exports neither (found by an audit).
    const entries = sourceEntries('.');
    const exports = exportResolver('.');
    const named = ALL.flatMap(([p, b]) =>
      [...b.replace(/\s+/g, ' ').matchAll(/((?:`[A-Za-z_]\w*(?:\(\))?`(?:,? (?:and|or) )?)+) (?:\(|(?:of|from|in|exported by) )`(lockcheck(?:\/[a-z]+)?)`/g)].flatMap((m) =>
        [...m[1]!.matchAll(/`(\w+)/g)].map((n) => ({ where: `${p}: ${m[0]}`, name: n[1]!, entry: m[2]! })),
      ).concat(
        // "the kit's servers (`A`, `B`)": lockcheck/kit's.
        [...b.replace(/\s+/g, ' ').matchAll(/\bthe kit's [\w ]*?\(((?:`\w+`(?:,? (?:and|or) |, )?)+)\)/g)].flatMap((m) => [...m[1]!.matchAll(/`(\w+)`/g)].map((n) => ({ where: `${p}: ${m[0]}`, name: n[1]!, entry: 'lockcheck/kit' }))),
      ),
    );
    expect(named.length).toBeGreaterThan(5);
    const missing = named.filter((n) => {
      const file = entries.get(n.entry);
      return file === undefined || !exports(relative(resolve('.'), file)).names.has(n.name);
    });
    expect(missing.map((n) => `${n.where}: ${n.entry} does not export ${n.name}`)).toEqual([]);
  });
});

describe('the docs give exported constants their values', () => {
  it('a constant named with its value (`NAME` (180 s, `NAME`, 4) has that value', async () => {
    const constants = new Map<string, number>();
    for (const entry of entryModules(text('package.json'))) {
      for (const [name, value] of Object.entries((await import(/* @vite-ignore */ `../${entry}`)) as object)) if (/^[A-Z][A-Z0-9_]+$/.test(name) && typeof value === 'number') constants.set(name, value);
    }
    const stated = ALL.flatMap(([p, b]) =>
      [...b.matchAll(/`([A-Z][A-Z0-9_]+)`(?:,| \() ?(\d[\d,]*(?:\.\d+)?)(?: (ms|s)\b)?/g)]
        .filter((m) => constants.has(m[1]!))
        .map((m) => ({ where: `${p}: ${m[0]}`, name: m[1]!, value: Number(m[2]!.replaceAll(',', '')) * (m[3] === 's' ? 1000 : 1) })),
    );
    expect(stated.length).toBeGreaterThan(5);
    expect(stated.filter((s) => constants.get(s.name) !== s.value).map((s) => `${s.where} (is ${constants.get(s.name)})`)).toEqual([]);
  });
});

describe('the spec reads in order, and what cites its sections finds them', () => {
  const spec = text('spec/SPEC.md');
  const headings = [...spec.matchAll(/^(#{2,4}) (.*)$/gm)].map((m) => ({ level: m[1]!.length, title: m[2]! }));

  it('every section is numbered, each number the next one of its level (1, 1.1, 1.2, 2, ...)', () => {
    // "Linearizability checking" trailed section 10 unnumbered (found by an audit).
    const wrong: string[] = [];
    const at: number[] = [];
    for (const h of headings) {
      const n = /^(\d+(?:\.\d+)*)\.? /.exec(h.title)?.[1]?.split('.').map(Number);
      if (n === undefined || n.length !== h.level - 1) {
        wrong.push(`${'#'.repeat(h.level)} ${h.title}: not numbered as a level-${h.level - 1} section`);
        continue;
      }
      const expected = [...at.slice(0, n.length - 1), (at[n.length - 1] ?? 0) + 1];
      if (n.join('.') !== expected.join('.')) wrong.push(`${h.title}: expected ${expected.join('.')}`);
      at.splice(0, at.length, ...n);
    }
    expect(headings.length).toBeGreaterThan(40);
    expect(wrong).toEqual([]);
  });

  it('the system model, fault model, operations and properties come first, in that order; section 1 names every section in order', () => {
    const top = headings.filter((h) => h.level === 2).map((h) => h.title.replace(/^\d+\. /, ''));
    expect(top.slice(0, 5)).toEqual(['Purpose and how to read', 'System model', 'Fault model', 'Operations', 'Properties']);
    const order = /^Order\. ([\s\S]*?)\n\n/m.exec(spec)?.[1]?.replace(/\s+/g, ' ');
    expect(order, 'section 1\'s "Order." paragraph').toBeDefined();
    const named = [...order!.matchAll(/(?:^|[,:] )(\d+) ([a-z ]+?)(?= \(|,|\.$)/g)].map((m) => `${m[1]} ${m[2]}`);
    expect(named).toEqual(top.slice(1).map((t, i) => `${i + 2} ${t.toLowerCase()}`));
  });

  it('the fault model\'s and the operations\' tables (sections 3, 4.1) give every command of model/command.ts, each with its fields', () => {
    const code = text('model/command.ts').replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/[^\n]*/g, '');
    /** Each union member's kind and its own fields (not those of a nested object such as pendingWrite's). */
    const declared = new Map<string, string[]>();
    for (const member of code.split(/\n\s*\|\s*(?=\{)/).slice(1)) {
      let depth = 0;
      let top = '';
      for (const c of member) {
        if (c === '{') depth++;
        if (depth === 1 && c !== '{') top += c;
        if (c === '}' && --depth === 0) break;
      }
      const kind = /readonly kind: '([a-z-]+)'/.exec(top)?.[1];
      if (kind !== undefined) declared.set(kind, [...top.matchAll(/readonly (\w+)\??:/g)].map((m) => m[1]!).filter((f) => f !== 'kind'));
    }
    const tables = spec.slice(spec.indexOf('## 3. Fault model'), spec.indexOf('### 4.2'));
    const stated = new Map<string, string[]>();
    for (const row of tables.matchAll(/^\| ((?:`[a-z-]+`(?: \/ )?)+) \|([^|]*)\|/gm)) {
      // Fields outside the notes in parentheses ('`delayed` (optional `true`; not with `latencyMs`)').
      const fields = [...row[2]!.replace(/\([^()]*\)/g, '').matchAll(/`(\w+)/g)].map((m) => m[1]!);
      for (const kind of row[1]!.matchAll(/`([a-z-]+)`/g)) stated.set(kind[1]!, fields);
    }
    expect(declared.size).toBeGreaterThan(15);
    expect([...stated.keys()].sort()).toEqual([...declared.keys()].sort());
    for (const [kind, fields] of declared) expect([...stated.get(kind)!].sort(), kind).toEqual([...fields].sort());
    // The outcomes column of 4.1 names every outcome kind of model/outcome.ts, and no other.
    const outcomeKinds = [...text('model/outcome.ts').matchAll(/readonly kind: '([a-z-]+)'/g)].map((m) => m[1]!);
    const operations = tables.slice(tables.indexOf('### 4.1'));
    const named = new Set([...declared.keys(), ...[...declared.values()].flat()]);
    // The prose in the column names commands and their fields too (a `resume`'s, a `deliver`'s, with `delayed`).
    const outcomes = new Set([...operations.matchAll(/^\|[^|\n]*\|[^|\n]*\|([^|\n]*)\|$/gm)].flatMap((m) => [...m[1]!.replace(/\([^()]*\)/g, '').matchAll(/`([a-z-]+)(?=[` ])/g)].map((o) => o[1]!)).filter((o) => !named.has(o) || outcomeKinds.includes(o)));
    expect(outcomeKinds.length).toBeGreaterThan(8);
    expect([...outcomes].sort()).toEqual([...outcomeKinds].sort());
  });

  it('every "section N.N" or "spec N.N" in the docs, the spec and the code names a section the spec has', () => {
    const numbers = new Set(headings.map((h) => /^(\d+(?:\.\d+)*)/.exec(h.title)?.[1]).filter((n) => n !== undefined));
    const files = spawnSync('git', ['ls-files', '*.md', '*.ts', '*.mjs'], { encoding: 'utf8' }).stdout.split('\n').filter((f) => f !== '' && !f.startsWith('docs/matrix/'));
    const cited = files.flatMap((f) =>
      [...text(f).matchAll(/\b(?:[Ss]pec(?:\/SPEC\.md)?,? (?:section )?|SPEC\.md,? (?:section )?|[Ss]ections? |§ ?)(\d+(?:\.\d+)*)(?:(?:,| and| or) (\d+(?:\.\d+)*))?\b/g)].flatMap((m) => [m[1]!, m[2]].filter((n) => n !== undefined).map((n) => ({ where: `${f}: ${m[0]}`, n }))),
    );
    expect(cited.length).toBeGreaterThan(100);
    expect(cited.filter((c) => !numbers.has(c.n)).map((c) => c.where)).toEqual([]);
  });

  it('a part cited by its title (\'7.4, "Late statements"\', \'docs/redis.md, "Errors"\') starts a heading or paragraph there, in the section cited', () => {
    // model/round.ts cited 'spec 7.1, "Rounds and the request timeout"' (a part of section 3) across two comment lines, and
    // conformance/consequence.ts 'spec §7, "findings by consequence"' (docs/adapter.md's): neither was read (found by an audit).
    // The reader's texts: the docs, the spec and the code (the tests' comments aside).
    const files = spawnSync('git', ['ls-files', '*.md', '*.ts', '*.mjs'], { encoding: 'utf8' }).stdout.split('\n').filter((f) => f !== '' && !f.startsWith('docs/matrix/') && !f.startsWith('test/'));
    /** Whether `title` begins a heading, a paragraph or a list item of `lines` (bold or not). */
    const starts = (lines: readonly string[], title: string): boolean => lines.some((l) => l.replace(/^(?:#+ (?:[\d.]+ )?|- |\d+\. )?(?:<a id="[^"]*"><\/a>)?(?:\*\*)?`?/, '').toLowerCase().startsWith(title.toLowerCase()));
    const specLines = spec.split('\n');
    /** The lines of spec section `n`, its subsections included; null when the spec has no such section. */
    const section = (n: string): string[] | null => {
      const at = specLines.findIndex((l) => new RegExp(`^#{2,4} ${n.replaceAll('.', '\\.')}\\.? `).test(l));
      if (at < 0) return null;
      const level = /^#+/.exec(specLines[at]!)![0].length;
      const end = specLines.findIndex((l, i) => i > at && /^#+ /.test(l) && /^#+/.exec(l)![0].length <= level);
      return specLines.slice(at, end < 0 ? undefined : end);
    };
    // A citation may run across lines of a comment: its continuation marks (' * ', '// ') are not part of the title.
    const joined = (body: string): string => body.replace(/\n[ \t]*(?:\*(?!\/)|\/\/)?[ \t]*/g, ' ');
    const cited = files.flatMap((f) =>
      [...joined(text(f)).matchAll(/(?:\b((?:docs\/)?[a-z][\w-]*\.md)|(?:\b([Ss]pec(?:\/SPEC\.md)?|SPEC\.md|[Ss]ections?)|(§))? ?(?:§ ?)?\b(\d+(?:\.\d+)*)),? \(?"([A-Za-z][^"\n]{2,70})"/g)]
        // A title in lower case is a citation only after a page or the word spec, section or §: '1, "holds nothing"' is a quote.
        .filter((m) => /^[A-Z]/.test(m[5]!) || m[1] !== undefined || m[2] !== undefined || m[3] !== undefined || m[0].includes('§'))
        .map((m) => ({ where: `${f}: ${m[0]}`, page: m[1] === undefined ? 'spec/SPEC.md' : m[1].startsWith('docs/') ? m[1] : `docs/${m[1]}`, n: m[1] === undefined ? m[4]! : null, title: m[5]! })),
    );
    expect(cited.length).toBeGreaterThan(20);
    const wrong = cited.filter((c) => {
      if (!existsSync(c.page)) return true;
      const lines = c.n === null ? text(c.page).split('\n') : section(c.n);
      return lines === null || !starts(lines, c.title);
    });
    expect(wrong.map((c) => c.where)).toEqual([]);
  });

  it('a link whose text names a spec section ("spec 7.9", "§7.8") goes to that section\'s heading', () => {
    // getting-started's "[spec §7.8](../spec/SPEC.md)" opened the spec at its top (found by an audit).
    const sections = new Map(headings.flatMap((h) => {
      const n = /^(\d+(?:\.\d+)*)\.? /.exec(h.title)?.[1];
      return n === undefined ? [] : [[n, slug(h.title)] as const];
    }));
    const links = ALL.flatMap(([p, b]) =>
      [...b.matchAll(/\[([^\]]*?)\]\(([^)\s]*)\)/g)].flatMap((m) => {
        const named = /\b(?:[Ss]pec|[Ss]ection)\s*§?\s*(\d+(?:\.\d+)*)|§\s*(\d+(?:\.\d+)*)/.exec(m[1]!);
        const target = relativeLinks(p, `[x](${m[2]!})`)[0];
        if (named === null || target === undefined || (target.path === '' ? p : target.path) !== 'spec/SPEC.md') return [];
        return [{ where: `${p}: ${m[0]}`, n: (named[1] ?? named[2])!, anchor: target.anchor }];
      }),
    );
    expect(links.length).toBeGreaterThan(10);
    expect(links.filter((l) => sections.get(l.n) === undefined || l.anchor !== sections.get(l.n)).map((l) => `${l.where} (section ${l.n}: #${sections.get(l.n)})`)).toEqual([]);
  });

  it('a command whose options a page lists ("its options are …") takes exactly those', () => {
    const lists = ALL.flatMap(([p, b]) =>
      [...b.replace(/\s+/g, ' ').matchAll(/`lockcheck (\w+)`(?:(?!\. ).){0,250}?its options are ((?:`--[\w-]+`(?:, | and )?)+)/g)].map((m) => ({ where: `${p}: lockcheck ${m[1]}`, command: m[1]!, options: [...m[2]!.matchAll(/--([\w-]+)/g)].map((o) => o[1]!) })),
    );
    expect(lists.length).toBeGreaterThan(0);
    for (const l of lists) expect([...l.options].sort(), l.where).toEqual([...COMMAND_OPTIONS[l.command]!].sort());
  });
});

describe('the docs name files that exist', () => {
  it('every markdown file the docs or the code name by itself (`NAME.md`) is one of the repository\'s', () => {
    // The code's comments and a benchmark's output cited ARCHITECTURE.md, which the repository never had (found by an audit).
    const listed = spawnSync('git', ['ls-files'], { encoding: 'utf8' }).stdout.split('\n').filter((f) => f !== '');
    const names = new Set(listed.map((f) => f.split('/').at(-1)!));
    const sources = listed.filter((f) => /\.(ts|mjs|sh|md)$/.test(f) && !f.startsWith('docs/matrix/') && f !== 'test/docsFacts.test.ts');
    expect(sources.length).toBeGreaterThan(100);
    const named = sources.flatMap((f) => [...text(f).matchAll(/(?<![\w./-])([A-Za-z][\w-]*\.md)\b/g)].map((m) => ({ f, name: m[1]! })));
    expect(named.length).toBeGreaterThan(100);
    // A file a test writes itself is no reference.
    expect(named.filter((n) => !names.has(n.name) && !/^test\//.test(n.f)).map((n) => `${n.f}: ${n.name}`)).toEqual([]);
  });

  it('every path into the repository\'s folders the docs give exists (but a user\'s own files and one named as it was then)', () => {
    const folders = 'impl|conformance|model|cli|test|scripts|bench|soak|spec|docs|lint|mutation';
    // A user's file in a walkthrough; the rest are the repository's.
    const usersOwn = new Set(['test/my-lock.conformance.test.ts']);
    const named = ALL.flatMap(([p, b]) =>
      [...b.matchAll(new RegExp(`(?<![\\w./-])((?:${folders})/[\\w./-]*\\w)( then\\))?`, 'g'))].filter((m) => m[2] === undefined && !usersOwn.has(m[1]!)).map((m) => ({ p, path: m[1]! })),
    );
    expect(named.length).toBeGreaterThan(100);
    expect(named.filter((n) => !existsSync(n.path)).map((n) => `${n.p}: ${n.path}`)).toEqual([]);
  });
});

describe('the shipped docs link only to what ships', () => {
  it('every relative link and image of a markdown file in the package resolves to a shipped file or folder (and its #anchor to a heading there)', () => {
    // The files npm would pack (package.json's files, README and LICENSE); no build: the docs link to no compiled file.
    // npm's own variables of an `npm test` around this run are left out: they are npm settings to the child.
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));
    const pack = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { encoding: 'utf8', env, timeout: 60_000 });
    expect(pack.status, pack.stderr).toBe(0);
    const shipped = new Set((JSON.parse(pack.stdout) as [{ files: { path: string }[] }])[0].files.map((f) => f.path));
    const pages = [...shipped].filter((p) => p.endsWith('.md'));
    expect(pages).toEqual(expect.arrayContaining(['README.md', 'spec/SPEC.md', 'docs/adapter.md']));
    const ships = (path: string): boolean => shipped.has(path) || [...shipped].some((f) => f.startsWith(`${path}/`));
    const links = pages.flatMap((page) => relativeLinks(page, text(page)));
    expect(links.length).toBeGreaterThan(100);
    const dead = links.flatMap((l) => {
      const target = l.path === '' ? l.page : l.path;
      if (!ships(target)) return [`${l.page}: ${l.written} (${target} is not in the package)`];
      if (l.anchor === null || !target.endsWith('.md')) return [];
      return anchors(text(target)).has(l.anchor) ? [] : [`${l.page}: ${l.written} (no heading #${l.anchor} in ${target})`];
    });
    expect(dead, `${dead.length} dead links`).toEqual([]);
  });
});

describe('README.md counts the shipped report as it is', () => {
  it('its cells and replayable counterexample files are those of docs/matrix.md and docs/matrix/', () => {
    const readme = text('README.md').replace(/\s+/g, ' ');
    const files = Number(/with (\d+) replayable counterexample files in docs\/matrix\//.exec(readme)?.[1]);
    const cells = Number(/; (\d+) cells: /.exec(readme)?.[1]);
    expect(files).toBe(readdirSync('docs/matrix').filter((f) => f.endsWith('.json')).length);
    const rows = text('docs/matrix.md').split('\n').filter((l) => /^\| [a-z][\w:@./-]* \|/.test(l) && !l.startsWith('| backend |'));
    expect(cells).toBe(rows.reduce((n, l) => n + l.split(' | ').length - 1, 0));
  });
});

describe('the docs install what scripts/setup.sh installs', () => {
  it('the CI workflow of docs/ci.md installs every Debian package scripts/setup.sh looks for', () => {
    // The workflow's list had lost redis-sentinel, etcd-server, openssl and zookeeper while its step said it was setup.sh's (found by an audit).
    const setup = [...text('scripts/setup.sh').matchAll(/missing="\$missing ([a-z0-9.-]+)"/g)].map((m) => m[1]!);
    expect(setup.length).toBeGreaterThan(8);
    const installs = [...text('docs/ci.md').matchAll(/apt-get install -y --no-install-recommends ([^\n]+)/g)].map((m) => m[1]!.split(' '));
    expect(installs.length).toBeGreaterThan(0);
    for (const list of installs) expect(setup.filter((p) => !list.includes(p))).toEqual([]);
  });
});

describe('the docs name environment variables the code reads', () => {
  it('every LOCKCHECK_* variable in the docs is in the code (sources, configs, scripts)', () => {
    const listed = spawnSync('git', ['ls-files', '*.ts', '*.mjs', '*.sh', '.ci/run'], { encoding: 'utf8' }).stdout.split('\n').filter((f) => f !== '' && f !== 'test/docsFacts.test.ts');
    expect(listed.length).toBeGreaterThan(100);
    const code = listed.map(text).join('\n');
    const named = new Set(ALL.flatMap(([, b]) => [...b.matchAll(/\bLOCKCHECK_[A-Z_]*[A-Z]\b/g)].map((m) => m[0])));
    expect(named.size).toBeGreaterThan(10);
    expect([...named].filter((v) => !new RegExp(`\\b${v}\\b`).test(code))).toEqual([]);
  });
});

describe('README.md\'s import table is the exports map', () => {
  it('names every entry point package.json exports, and no other', () => {
    const exported = Object.keys((JSON.parse(text('package.json')) as { exports: Record<string, unknown> }).exports)
      .filter((e) => e !== './package.json')
      .map((e) => (e === '.' ? 'lockcheck' : `lockcheck/${e.slice(2)}`));
    const table = /\| import \| what it holds \|\n\|---\|---\|\n((?:\|.*\n)+)/.exec(text('README.md'));
    expect(table).not.toBeNull();
    const named = [...table![1]!.matchAll(/`(lockcheck(?:\/[a-z]+)?)`/g)].map((m) => m[1]!);
    expect([...named].sort()).toEqual([...exported].sort());
  });
});

describe('the docs name the library versions package.json installs', () => {
  it('every name@x.y.z of an installed package in the docs is a version package.json pins (directly or by an npm: alias)', () => {
    const pkg = JSON.parse(text('package.json')) as { dependencies: Record<string, string>; devDependencies: Record<string, string> };
    const pinned = new Map<string, Set<string>>();
    for (const [name, spec] of Object.entries({ ...pkg.dependencies, ...pkg.devDependencies })) {
      const alias = /^npm:(.+)@([^@]+)$/.exec(spec);
      const [real, version] = alias === null ? [name, spec] : [alias[1]!, alias[2]!];
      pinned.set(real, (pinned.get(real) ?? new Set()).add(version));
    }
    const named = ALL.flatMap(([p, b]) =>
      [...b.matchAll(/(?<![\w/@.-])((?:@[a-z0-9-]+\/)?[a-z][a-z0-9.-]*)@(\d+\.\d+\.\d+(?:[\w.-]*\w)?)/g)].filter((m) => pinned.has(m[1]!)).map((m) => ({ where: `${p}: ${m[0]}`, name: m[1]!, version: m[2]! })),
    );
    expect(named.length).toBeGreaterThan(20);
    expect(named.filter((n) => !pinned.get(n.name)!.has(n.version)).map((n) => `${n.where} (package.json: ${[...pinned.get(n.name)!].join(', ')})`)).toEqual([]);
  });
});

/** `interface name … { … }` in `source` (comments dropped): its extends list and top-level member names; null when absent. */
function interfaceIn(source: string, name: string): { extends: string[]; members: string[] } | null {
  const code = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/[^\n]*/g, '');
  const head = new RegExp(`interface ${name}\\b(?:<[^>]*>)?(?:\\s+extends\\s+([\\w\\s,<>]+?))?\\s*\\{`).exec(code);
  if (head === null) return null;
  const parts: string[] = [];
  let depth = 0;
  let part = '';
  for (const c of code.slice(head.index + head[0].length)) {
    if (depth === 0 && c === '}') break;
    if ('{(['.includes(c)) depth++;
    if ('})]'.includes(c)) depth--;
    if (depth === 0 && (c === ';' || c === '\n')) {
      parts.push(part);
      part = '';
    } else part += c;
  }
  parts.push(part);
  const members = parts.flatMap((p) => /^\s*(?:readonly\s+)?(\w+)\??\s*[:(<]/.exec(p)?.[1] ?? []);
  return { extends: head[1]?.split(',').map((e) => e.trim()) ?? [], members };
}

describe('the docs write the adapter API\'s interfaces as the code declares them', () => {
  it('every interface a ts block of docs/adapter.md writes out has the members of the interface it names', () => {
    const sources = ['conformance/adapter.ts', 'conformance/faults.ts'].map(text);
    const declared = (name: string): string[] => {
      const found = sources.map((s) => interfaceIn(s, name)).find((i) => i !== null);
      if (found === undefined) throw new Error(`no interface ${name} in the adapter API's sources`);
      return [...found.members, ...found.extends.flatMap(declared)];
    };
    const blocks = [...text('docs/adapter.md').matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);
    const written = blocks.flatMap((b) => [...b.matchAll(/^interface (\w+)/gm)].map((m) => ({ name: m[1]!, members: interfaceIn(b, m[1]!)!.members })));
    expect(written.length).toBeGreaterThan(5);
    const wrong = written.flatMap((w) => {
      const real = declared(w.name);
      return [...real.filter((m) => !w.members.includes(m)).map((m) => `${w.name}: ${m} missing`), ...w.members.filter((m) => !real.includes(m)).map((m) => `${w.name}: ${m} not in the type`)];
    });
    expect(wrong).toEqual([]);
  });
});

describe('docs/adapter.md\'s fault table is the code\'s', () => {
  it('lists every fault kind with the injector that provides it', () => {
    const table = /^\| fault kind \| injector \|\n\|---\|---\|\n((?:\|.*\n)+)/m.exec(text('docs/adapter.md'));
    expect(table).not.toBeNull();
    const rows = [...table![1]!.matchAll(/^\| `([a-z-]+)` \| (?:`(\w+)`|none[^|]*) \|$/gm)].map((m) => ({ kind: m[1]!, injector: m[2] }));
    expect(rows.map((r) => r.kind)).toEqual([...FAULT_KINDS]);
    for (const r of rows.filter((x) => x.injector !== undefined)) expect(faultKindsOf({ [r.injector!]: () => Promise.resolve() } as FaultInjectors), r.kind).toContain(r.kind);
  });
});

describe('docs/errors.md states the errors as the code has them', () => {
  const errors = text('docs/errors.md');
  /** A table row's first cell: `Name` (a trailing note such as "(an `EnvironmentError`)" allowed), and its next cell. */
  const rows = new Map([...errors.matchAll(/^\| `([A-Z]\w*)`[^|]*\|([^|]*)\|/gm)].map((m) => [m[1]!, m[2]!]));

  it('every error class an entry point exports has a row in docs/errors.md', async () => {
    const classes = new Set<string>();
    for (const entry of entryModules(text('package.json'))) {
      for (const [name, value] of Object.entries((await import(/* @vite-ignore */ `../${entry}`)) as object)) if (typeof value === 'function' && (value as { prototype?: unknown }).prototype instanceof Error) classes.add(name);
    }
    expect(classes.size).toBeGreaterThan(15);
    expect([...classes].filter((c) => !rows.has(c))).toEqual([]);
  });

  it('the codes a row gives are codes its class takes (all of them where the row does not end in ...)', () => {
    /** The string literals of the union after `readonly code:` in `klass`'s declaration, or of the named type. */
    const union = (source: string): string[] => [...source.matchAll(/'([a-z-]+)'/g)].map((m) => m[1]!);
    const declared: Record<string, string[]> = {
      InvalidInputError: union(/export type ModelErrorCode =([^;]*);/.exec(text('model/errors.ts'))![1]!),
    };
    for (const klass of ['ConnectionConfigError', 'ServerRefusedError']) declared[klass] = union(new RegExp(`class ${klass} [\\s\\S]*?readonly code: ([^,]*),`).exec(text('impl/errors.ts'))![1]!);
    for (const [klass, codes] of Object.entries(declared)) {
      expect(codes.length, klass).toBeGreaterThan(2);
      const cell = rows.get(klass)!;
      // The code column lists codes up to its first ';' (what follows is serverCode's).
      const listed = [...cell.split(';')[0]!.matchAll(/`([a-z-]+)`/g)].map((m) => m[1]!);
      expect(listed.filter((c) => !codes.includes(c)), klass).toEqual([]);
      if (!/\.\.\.\s*$/.test(cell.split(';')[0]!)) expect(codes.filter((c) => !listed.includes(c)), klass).toEqual([]);
    }
  });

  it('a row names every field its class declares (but code, cause), and for a field of a literal union only its values, all of them', () => {
    // A reader catches an error by its fields: LockNotAcquiredError's and TokenOverflowError's `resource` and ReplicationError's
    // counts were declared but not in the table (found by an audit).
    const sources = spawnSync('git', ['ls-files', 'impl/*.ts', 'conformance/*.ts', 'model/*.ts'], { encoding: 'utf8' }).stdout.split('\n').filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts')).map((f) => text(f));
    const literals = (type: string): string[] => [...type.matchAll(/'([^']+)'/g)].map((m) => m[1]!);
    /** The class's own readonly fields (constructor parameters and members), each with the string literals its type takes. */
    const fieldsOf = (klass: string): Map<string, string[]> => {
      const source = sources.find((s) => new RegExp(`^export class ${klass}\\b`, 'm').test(s));
      if (source === undefined) throw new Error(`no declaration of ${klass}`);
      const start = source.search(new RegExp(`^export class ${klass}\\b`, 'm'));
      const body = source.slice(start, source.indexOf('\n}\n', start));
      const fields = new Map<string, string[]>();
      for (const m of body.matchAll(/(?:^|[(,])\s*(?:public |override )*readonly (\w+)\??\s*:\s*([^,;=\n]+)/gm)) {
        if (m[1] === 'name') continue;
        const type = m[2]!.trim().replace(/\)$/, '');
        const named = /^\w+$/.test(type) ? new RegExp(`type ${type} =([^;]*);`).exec(source)?.[1] : undefined;
        fields.set(m[1]!, literals(named ?? type));
      }
      return fields;
    };
    const wrong: string[] = [];
    let checked = 0;
    for (const [klass, cell] of rows) {
      if (!sources.some((s) => new RegExp(`^export class ${klass}\\b`, 'm').test(s))) continue;
      checked++;
      const fields = fieldsOf(klass);
      const named = new Set<string>();
      // Values follow the field they belong to; before any field named, the code column's values are `code`'s.
      let field: string | null = fields.has('code') ? 'code' : null;
      const listed = new Map<string, string[]>();
      // What follows a ';' in the code column is about another field (serverCode's values are prose).
      for (const m of cell.split(';')[0]!.matchAll(/`([\w-]+)`/g)) {
        const token = m[1]!;
        if (fields.has(token)) {
          field = token;
          named.add(token);
        } else if (field === null) wrong.push(`${klass}: \`${token}\` names no field of the class`);
        else listed.set(field, [...(listed.get(field) ?? []), token]);
      }
      for (const m of cell.matchAll(/`([\w-]+)`/g)) if (fields.has(m[1]!)) named.add(m[1]!);
      for (const f of fields.keys()) if (f !== 'code' && f !== 'cause' && !named.has(f)) wrong.push(`${klass}: field \`${f}\` not in its row`);
      for (const [f, values] of listed) {
        const union = fields.get(f)!;
        if (union.length === 0) continue;
        for (const v of values) if (!union.includes(v)) wrong.push(`${klass}: \`${v}\` is no value of ${f} (${union.join(', ')})`);
        if (!/\.\.\./.test(cell.split(';')[0]!)) for (const v of union) if (!values.includes(v)) wrong.push(`${klass}: ${f}'s \`${v}\` not in its row`);
      }
    }
    expect(checked).toBeGreaterThan(15);
    expect(wrong).toEqual([]);
  });
});

describe('the docs state the Node versions package.json\'s engines takes', () => {
  it('README.md and docs/getting-started.md name the lowest 20.x and the lowest release past 20', () => {
    const engines = (JSON.parse(text('package.json')) as { engines: { node: string } }).engines.node;
    const m = /^\^(\d+)\.(\d+)\.0 \|\| >=(\d+)\.(\d+)\.0$/.exec(engines);
    expect(m, engines).not.toBeNull();
    const [, major, minor, nextMajor, nextMinor] = m!;
    const stated = `Node ${major}.${minor} or newer (${nextMajor}.${nextMinor} or newer past ${major}`;
    expect(['README.md', 'docs/getting-started.md'].filter((page) => !text(page).replace(/\s+/g, ' ').includes(stated)), stated).toEqual([]);
  });
});

describe('package-lock.json states the package as package.json does', () => {
  it('the lock\'s root entry has package.json\'s name, version, engines and dependencies', () => {
    // npm ci checks the dependencies against the lock but not the rest: an engines range changed in one file only slipped through.
    const pkg = JSON.parse(text('package.json')) as Record<string, unknown>;
    const root = (JSON.parse(text('package-lock.json')) as { packages: Record<string, Record<string, unknown>> }).packages['']!;
    for (const field of ['name', 'version', 'engines', 'dependencies', 'devDependencies', 'peerDependencies', 'bin', 'license']) expect(root[field], field).toEqual(pkg[field]);
  });
});
