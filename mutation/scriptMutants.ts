/**
 * Mutation testing of the Lua scripts (impl/redis/scripts.ts) and SQL
 * statements (impl/postgres/*.ts), which Stryker sees only as strings. Each
 * mutant changes one thing in one script: flips a comparison, drops a
 * condition, shifts a constant by one, swaps two keys or arguments. The
 * tests of that script run against each mutant in a copy of the tree, the
 * quick ones first (test/impl/redis.test.ts or test/impl/postgres.test.ts,
 * seconds), then, only if those pass, the real-server conformance suite
 * (test/redis.conformance.test.ts or test/postgres.conformance.test.ts,
 * minutes); each starts its own servers. A failing file kills the mutant.
 *
 * Run: npx tsx mutation/scriptMutants.ts [--list] [--only <substring>] [--jobs N] [--budget-min M] [--no-control] [--resume]
 * (--resume keeps the results in reports/mutation/scripts.json and runs only the mutants not in it)
 * (the unmutated suites run first, as a control: they must pass)
 * Writes reports/mutation/scripts.json and prints a summary.
 */
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

export interface ScriptMutant {
  readonly id: string;
  readonly file: string;
  /** Which script, and what changed in it. */
  readonly description: string;
  /** The whole file with the one change. */
  readonly mutated: string;
  /** The test files that may kill it, quickest first. */
  readonly suite: readonly string[];
}

/** A script inside a source file: where its text lies. */
interface Script {
  readonly name: string;
  readonly start: number;
  readonly end: number;
  readonly language: 'lua' | 'sql';
}

const SUITES = {
  lua: ['test/impl/redis.test.ts', 'test/redis.conformance.test.ts'],
  sql: ['test/impl/postgres.test.ts', 'test/postgres.conformance.test.ts'],
} as const;

/** The template literals of a file that hold Lua (exported constants of scripts.ts) or SQL (statements with SQL keywords). */
export function scriptsIn(file: string, text: string): Script[] {
  const scripts: Script[] = [];
  const literal = /(?:(\w+)\s*[:=]\s*)?(`[^`]*`|'[^'\n]*')/g;
  for (const m of text.matchAll(literal)) {
    const body = m[2]!;
    const start = m.index! + m[0].length - body.length + 1;
    const end = start + body.length - 2;
    const lua = file.endsWith('scripts.ts') && /redis\.call/.test(body);
    const sql = file.includes('postgres') && /\b(SELECT|INSERT|UPDATE|WHERE)\b/.test(body);
    if (lua || sql) scripts.push({ name: m[1] ?? `line ${text.slice(0, m.index).split('\n').length}`, start, end, language: lua ? 'lua' : 'sql' });
  }
  return scripts;
}

interface Edit {
  readonly at: number;
  readonly length: number;
  readonly text: string;
  readonly what: string;
}

const LUA_FLIPS: Record<string, string> = { '==': '~=', '~=': '==', '>': '>=', '>=': '>', '<': '<=', '<=': '<' };
const SQL_FLIPS: Record<string, string> = { '=': '<>', '<>': '=', '>': '>=', '>=': '>', '<': '<=', '<=': '<' };

/** Every one-change edit of one script's text. */
export function editsOf(body: string, language: 'lua' | 'sql'): Edit[] {
  const edits: Edit[] = [];
  const flips = language === 'lua' ? LUA_FLIPS : SQL_FLIPS;
  const skipInterpolation = (i: number) => /\$\{[^}]*$/.test(body.slice(0, i));
  // Flip each comparison.
  for (const m of body.matchAll(language === 'lua' ? /==|~=|>=|<=|>|</g : /<>|>=|<=|(?<![:<>!])=(?!>)|>|</g)) {
    if (skipInterpolation(m.index!) || flips[m[0]] === undefined) continue;
    // An SQL assignment (SET a = b, c = d) is not a comparison.
    if (language === 'sql' && m[0] === '=' && /(SET|,)\s*\w+\s*$/.test(body.slice(0, m.index))) continue;
    edits.push({ at: m.index!, length: m[0].length, text: flips[m[0]]!, what: `'${m[0]}' -> '${flips[m[0]]}'` });
  }
  // Drop each condition: an if's whole test, and each side of and/or.
  const conditions = language === 'lua' ? /\bif (.+?) then\b/g : /\bWHERE (.+?)(?=\n|$|\)|ON CONFLICT|RETURNING)/g;
  for (const m of body.matchAll(conditions)) {
    const cond = m[1]!;
    const at = m.index! + m[0].indexOf(cond);
    edits.push({ at, length: cond.length, text: language === 'lua' ? 'true' : 'true', what: `condition '${cond.trim()}' dropped` });
    for (const part of cond.matchAll(language === 'lua' ? /\s+(and|or)\s+/g : /\s+(AND|OR)\s+/gi)) {
      const left = cond.slice(0, part.index);
      const right = cond.slice(part.index! + part[0].length);
      edits.push({ at, length: cond.length, text: right, what: `'${left.trim()}' dropped from '${cond.trim()}'` });
      edits.push({ at, length: cond.length, text: left, what: `'${right.trim()}' dropped from '${cond.trim()}'` });
    }
  }
  // Shift each constant by one (numbers; key and argument indices are swapped below instead).
  // A number inside a quoted string is text (an error message), unless the string is the number (a digit-string token).
  const insideText = (i: number, length: number) => {
    const line = body.slice(body.lastIndexOf('\n', i) + 1, i);
    const quotes = (line.match(/'/g) ?? []).length;
    return quotes % 2 === 1 && !(body[i - 1] === "'" && body[i + length] === "'");
  };
  for (const m of body.matchAll(/(?<![\w$.[])(\d+)(?![\w.\]])/g)) {
    if (skipInterpolation(m.index!) || insideText(m.index!, m[0].length)) continue;
    // BigInt: a token constant (2^63-1) is past a double's exact range.
    const n = BigInt(m[1]!);
    for (const to of [n + 1n, n - 1n]) if (to >= 0n) edits.push({ at: m.index!, length: m[0].length, text: String(to), what: `constant ${n} -> ${to}` });
  }
  // Swap each pair of keys (KEYS[i] with KEYS[j], ARGV[i] with ARGV[j], $i with $j).
  const keyPattern = language === 'lua' ? /(KEYS|ARGV)\[(\d)\]/g : /\$(\d)/g;
  const keys = [...new Set([...body.matchAll(keyPattern)].map((m) => m[0]))];
  for (const a of keys) {
    for (const b of keys) {
      if (a >= b || (language === 'lua' && a.slice(0, 4) !== b.slice(0, 4))) continue;
      const swapped = body.replace(new RegExp(keyPattern.source, 'g'), (k) => (k === a ? b : k === b ? a : k));
      edits.push({ at: 0, length: body.length, text: swapped, what: `${a} and ${b} swapped` });
    }
  }
  return edits;
}

export function mutantsOf(files: readonly string[]): ScriptMutant[] {
  const mutants: ScriptMutant[] = [];
  for (const file of files) {
    const text = readFileSync(join(ROOT, file), 'utf8');
    for (const s of scriptsIn(file, text)) {
      const seen = new Set<string>();
      const body = text.slice(s.start, s.end);
      for (const e of editsOf(body, s.language)) {
        const mutatedBody = body.slice(0, e.at) + e.text + body.slice(e.at + e.length);
        if (mutatedBody === body || seen.has(mutatedBody)) continue;
        seen.add(mutatedBody);
        mutants.push({
          id: `${file}#${s.name}#${mutants.length}`,
          file,
          description: `${s.name}: ${e.what}`,
          mutated: text.slice(0, s.start) + mutatedBody + text.slice(s.end),
          suite: SUITES[s.language],
        });
      }
    }
  }
  return mutants;
}

export const SCRIPT_FILES = ['impl/redis/scripts.ts', 'impl/postgres/schema.ts', 'impl/postgres/store.ts', 'impl/postgres/sessionLock.ts', 'impl/postgres/xactLock.ts'];

/** A copy of the tree to mutate in (node_modules linked, not copied). */
function copyTree(): string {
  const dir = mkdtempSync(join(tmpdir(), 'lockcheck-scriptmut-'));
  for (const entry of ['conformance', 'impl', 'model', 'test', 'spec', 'cli', 'bench', 'scripts', 'mutation', 'package.json', 'tsconfig.json', 'vitest.config.ts']) cpSync(join(ROOT, entry), join(dir, entry), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

/** Runs the files in `dir` one after another until one fails (the mutant is killed, by that file). */
async function suiteFails(dir: string, suite: readonly string[]): Promise<{ killed: boolean; seconds: number; by?: string }> {
  const started = Date.now();
  for (const file of suite) {
    if (await fileFails(dir, file)) return { killed: true, seconds: (Date.now() - started) / 1000, by: file };
  }
  return { killed: false, seconds: (Date.now() - started) / 1000 };
}

/** Runs one test file in `dir`; resolves with whether it failed. */
function fileFails(dir: string, file: string): Promise<boolean> {
  return new Promise((done) => {
    const child = spawn('npx', ['vitest', 'run', file, '--bail', '1', '--reporter', 'dot'], {
      cwd: dir,
      stdio: 'ignore',
      env: { ...process.env, LOCKCHECK_REDIS_RUNS: process.env.LOCKCHECK_REDIS_RUNS ?? '20', LOCKCHECK_PG_RUNS: process.env.LOCKCHECK_PG_RUNS ?? '15' },
    });
    const timer = setTimeout(() => child.kill('SIGTERM'), 15 * 60_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      done(code !== 0);
    });
  });
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const only = args.includes('--only') ? args[args.indexOf('--only') + 1] : undefined;
  const jobs = args.includes('--jobs') ? Number(args[args.indexOf('--jobs') + 1]) : 1;
  // Stop starting mutants after this many minutes (the rest are reported as not run).
  const budgetMs = args.includes('--budget-min') ? Number(args[args.indexOf('--budget-min') + 1]) * 60_000 : Number.POSITIVE_INFINITY;
  const startedAt = Date.now();
  const all = mutantsOf(SCRIPT_FILES).filter((m) => only === undefined || m.id.includes(only) || m.description.includes(only));
  // Lua and SQL mutants taken in turn, so that a run cut short by its budget has some of each.
  const lua = all.filter((m) => m.suite === SUITES.lua);
  const sql = all.filter((m) => m.suite === SUITES.sql);
  const mutants = Array.from({ length: Math.max(lua.length, sql.length) }, (_v, i) => [lua[i], sql[i]]).flat().filter((m): m is ScriptMutant => m !== undefined);
  if (args.includes('--list')) {
    for (const m of mutants) console.log(`${m.file}  ${m.description}`);
    console.log(`${mutants.length} mutants`);
    return;
  }
  const out = join(ROOT, 'reports/mutation/scripts.json');
  const results: Array<{ id: string; file: string; description: string; killed: boolean; seconds: number; by?: string }> = args.includes('--resume') && existsSync(out) ? JSON.parse(readFileSync(out, 'utf8')) : [];
  // Mutants with the same description (one constant at two places) are told apart by their turn.
  const turn = (list: ReadonlyArray<{ file: string; description: string }>) => list.map((m, i) => `${m.file} ${m.description} #${list.slice(0, i).filter((x) => x.file === m.file && x.description === m.description).length}`);
  const keys = turn(mutants);
  // Results of mutants the tool no longer makes are dropped.
  const kept = turn(results).map((k, i) => (keys.includes(k) ? results[i] : undefined));
  results.splice(0, results.length, ...kept.filter((r) => r !== undefined));
  const done = new Set(turn(results));
  const todo = mutants.filter((_m, i) => !done.has(keys[i]!));
  mkdirSync(dirname(out), { recursive: true });
  // A control run first: a suite that fails unmutated would "kill" every mutant.
  if (!args.includes('--no-control')) {
    const dir = copyTree();
    try {
      for (const file of new Set(mutants.flatMap((m) => m.suite))) {
        if (await fileFails(dir, file)) throw new Error(`${file} fails without any mutant: fix it before measuring (or pass --no-control)`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  let next = 0;
  const worker = async (): Promise<void> => {
    const dir = copyTree();
    try {
      for (let i = next++; i < todo.length && Date.now() - startedAt < budgetMs; i = next++) {
        const m = todo[i]!;
        const original = readFileSync(join(dir, m.file), 'utf8');
        writeFileSync(join(dir, m.file), m.mutated);
        try {
          const r = await suiteFails(dir, m.suite);
          results.push({ id: m.id, file: m.file, description: m.description, ...r });
          console.log(`${r.killed ? 'killed  ' : 'SURVIVED'} ${m.file}  ${m.description}  (${r.seconds.toFixed(0)} s${r.by !== undefined ? `, by ${r.by}` : ''})`);
          writeFileSync(out, JSON.stringify(results, null, 2));
        } finally {
          writeFileSync(join(dir, m.file), original);
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  await Promise.all(Array.from({ length: jobs }, worker));
  const killed = results.filter((r) => r.killed).length;
  console.log(`script mutants: ${killed} of ${results.length} killed (${((100 * killed) / Math.max(1, results.length)).toFixed(1)} %); ${mutants.length - results.length} of ${mutants.length} not run (budget)`);
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
