/**
 * Prints the mutation results as docs/mutation.md lists them: the score of
 * the TypeScript mutants of impl/, per folder, and every mutant not killed on
 * one line, for a reason to be written beside it; then the script mutants
 * (reports/mutation/scripts.json).
 *
 * Reads every reports/mutation*\/ directory, so that parts run side by side
 * (LOCKCHECK_MUTATION_OUT) add up: a part's mutation.json when its run
 * completed, else its event recorder's results so far (a run still going or
 * cut short; mutants not tested yet are counted as pending). Where two parts
 * tested the same mutant, the complete run's result, else that of the run
 * started later (with the newer tests), wins.
 * Run: npx tsx mutation/summary.ts [reports/mutation-<part> ...]
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

interface Mutant {
  readonly fileName: string;
  readonly id: string;
  readonly mutatorName: string;
  readonly replacement?: string;
  readonly status: string;
  readonly location: { readonly start: { readonly line: number; readonly column: number }; readonly end: { readonly line: number; readonly column: number } };
}

const KILLED = new Set(['Killed', 'Timeout']);
const UNCOUNTED = new Set(['CompileError', 'RuntimeError', 'Ignored']);

interface Part {
  readonly dir: string;
  readonly complete: boolean;
  readonly when: number;
  readonly mutants: Mutant[];
}

/** When the part's run started (its test plan was made): a later run tested newer tests. */
function started(dir: string, fallback: string): number {
  const events = join(dir, 'events');
  const plan = existsSync(events) ? readdirSync(events).find((f) => f.endsWith('-onMutationTestingPlanReady.json')) : undefined;
  return statSync(plan !== undefined ? join(events, plan) : fallback).mtimeMs;
}

function readPart(dir: string): Part | null {
  const report = join(dir, 'mutation.json');
  if (existsSync(report)) {
    const r = JSON.parse(readFileSync(report, 'utf8')) as { files: Record<string, { mutants: Omit<Mutant, 'fileName'>[] }> };
    const mutants = Object.entries(r.files).flatMap(([file, f]) => f.mutants.map((m) => ({ ...m, fileName: file })));
    return { dir, complete: true, when: started(dir, report), mutants };
  }
  const events = join(dir, 'events');
  if (!existsSync(events)) return null;
  const names = readdirSync(events);
  const plan = names.find((f) => f.endsWith('-onMutationTestingPlanReady.json'));
  const tested = new Map<string, Mutant>();
  if (plan !== undefined) {
    const p = JSON.parse(readFileSync(join(events, plan), 'utf8')) as { mutantPlans: Array<{ mutant: Mutant }> };
    // The plan's locations count lines and columns from 0, the results' from 1.
    const fromOne = (m: Mutant): Mutant => {
      const { start, end } = m.location;
      return { ...m, location: { start: { line: start.line + 1, column: start.column + 1 }, end: { line: end.line + 1, column: end.column + 1 } } };
    };
    for (const { mutant } of p.mutantPlans) tested.set(mutant.id, fromOne({ ...mutant, status: mutant.status ?? 'Pending' }));
  }
  for (const f of names.filter((n) => n.endsWith('-onMutantTested.json'))) {
    const m = JSON.parse(readFileSync(join(events, f), 'utf8')) as Mutant;
    tested.set(m.id, m);
  }
  return { dir, complete: false, when: started(dir, events), mutants: [...tested.values()] };
}

// Arguments name the parts to read (directories); none: every reports/mutation*.
const named = process.argv.slice(2);
const dirs = named.length > 0 ? named : existsSync('reports') ? readdirSync('reports').filter((d) => d.startsWith('mutation')).map((d) => join('reports', d)) : [];
const parts = dirs.length > 0
  ? dirs
      .map((d) => readPart(d))
      .filter((p): p is Part => p !== null)
      .sort((a, b) => Number(a.complete) - Number(b.complete) || a.when - b.when)
  : [];
// Later parts (complete ones last) override earlier ones, mutant by mutant (file, span and mutator).
const byKey = new Map<string, Mutant & { part: string }>();
for (const part of parts) {
  for (const m of part.mutants) {
    const file = relative(process.cwd(), m.fileName.startsWith('/') ? m.fileName : join(process.cwd(), m.fileName));
    // The end too: `a && b` inside `a && b && c` starts where the whole does, and both have a mutant `true`.
    const { start, end } = m.location;
    const key = `${file}:${start.line}:${start.column}-${end.line}:${end.column}:${m.mutatorName}:${m.replacement ?? ''}`;
    const known = byKey.get(key);
    // Not tested yet says nothing new; a mutant another part found static (evaluated at import) stays ignored.
    if (known !== undefined && ((m.status === 'Pending' && known.status !== 'Pending') || known.status === 'Ignored')) continue;
    byKey.set(key, { ...m, fileName: file, part: `${part.dir}${part.complete ? '' : ' (partial)'}` });
  }
}
const all = [...byKey.values()].filter((m) => !UNCOUNTED.has(m.status));
const folder = (file: string): string => file.replace(/\/[^/]*$/, '/');
const count = (ms: readonly Mutant[], status: string): number => ms.filter((m) => m.status === status).length;
const killed = (ms: readonly Mutant[]): number => ms.filter((m) => KILLED.has(m.status)).length;

if (all.length > 0) {
  const pending = count(all, 'Pending');
  const done = all.filter((m) => m.status !== 'Pending');
  console.log(`mutation score: ${((100 * killed(all)) / all.length).toFixed(1)} % (${killed(all)} of ${all.length} TypeScript mutants killed${pending > 0 ? `; ${pending} not tested yet count as not killed: ${((100 * killed(done)) / Math.max(1, done.length)).toFixed(1)} % of the ${done.length} tested` : ''})`);
  console.log(`parts: ${parts.map((p) => `${p.dir}${p.complete ? '' : ' (partial)'}`).join(', ')}`);
  console.log('\n| folder | mutants | killed | timed out | survived | no coverage | not tested yet | score |\n|---|---|---|---|---|---|---|---|');
  const rows = [...new Set(all.map((m) => folder(m.fileName)))].sort();
  for (const f of [...rows, 'all']) {
    const ms = f === 'all' ? all : all.filter((m) => folder(m.fileName) === f);
    console.log(`| ${f} | ${ms.length} | ${count(ms, 'Killed')} | ${count(ms, 'Timeout')} | ${count(ms, 'Survived')} | ${count(ms, 'NoCoverage')} | ${count(ms, 'Pending')} | ${((100 * killed(ms)) / ms.length).toFixed(1)} % |`);
  }
  console.log('\nper file:');
  for (const file of [...new Set(all.map((m) => m.fileName))].sort()) {
    const ms = all.filter((m) => m.fileName === file);
    console.log(`  ${file}: ${killed(ms)} of ${ms.length}`);
  }
  console.log('\nnot killed:');
  const open = all.filter((m) => !KILLED.has(m.status) && m.status !== 'Pending').sort((a, b) => a.fileName.localeCompare(b.fileName) || a.location.start.line - b.location.start.line);
  for (const m of open) console.log(`- ${m.status} ${m.fileName}:${m.location.start.line}:${m.location.start.column} ${m.mutatorName} -> ${JSON.stringify(m.replacement ?? '').slice(0, 100)}`);
}
if (existsSync('reports/mutation/scripts.json')) {
  const results = JSON.parse(readFileSync('reports/mutation/scripts.json', 'utf8')) as Array<{ file: string; description: string; killed: boolean }>;
  console.log(`\nscript mutants: ${results.filter((r) => r.killed).length} of ${results.length} killed`);
  for (const r of results.filter((x) => !x.killed)) console.log(`- survived ${r.file} ${r.description}`);
}
