/**
 * Prints the mutation results as docs/mutation.md lists them: the score of
 * the TypeScript mutants (Stryker's reports/mutation/mutation.json) and the
 * script mutants (reports/mutation/scripts.json), and every surviving mutant
 * on one line, for a reason to be written beside it.
 * Run: npx tsx mutation/summary.ts
 */
import { existsSync, readFileSync } from 'node:fs';

interface StrykerReport {
  readonly files: Record<string, { readonly mutants: ReadonlyArray<{ readonly mutatorName: string; readonly replacement?: string; readonly status: string; readonly location: { readonly start: { readonly line: number } } }> }>;
}

const KILLED = new Set(['Killed', 'Timeout']);

if (existsSync('reports/mutation/mutation.json')) {
  const report = JSON.parse(readFileSync('reports/mutation/mutation.json', 'utf8')) as StrykerReport;
  const all = Object.entries(report.files).flatMap(([file, f]) => f.mutants.map((m) => ({ file, ...m })));
  const counted = all.filter((m) => m.status !== 'CompileError' && m.status !== 'RuntimeError' && m.status !== 'Ignored');
  const killed = counted.filter((m) => KILLED.has(m.status)).length;
  console.log(`mutation score: ${((100 * killed) / Math.max(1, counted.length)).toFixed(1)} % (${killed} of ${counted.length} TypeScript mutants killed)`);
  for (const [file, f] of Object.entries(report.files)) {
    const ms = f.mutants.filter((m) => m.status !== 'CompileError' && m.status !== 'RuntimeError' && m.status !== 'Ignored');
    console.log(`  ${file}: ${ms.filter((m) => KILLED.has(m.status)).length} of ${ms.length}`);
  }
  for (const m of counted.filter((x) => !KILLED.has(x.status))) console.log(`- ${m.status} ${m.file}:${m.location.start.line} ${m.mutatorName} -> ${JSON.stringify(m.replacement ?? '')}`);
}
if (existsSync('reports/mutation/scripts.json')) {
  const results = JSON.parse(readFileSync('reports/mutation/scripts.json', 'utf8')) as Array<{ file: string; description: string; killed: boolean }>;
  console.log(`script mutants: ${results.filter((r) => r.killed).length} of ${results.length} killed`);
  for (const r of results.filter((x) => !x.killed)) console.log(`- survived ${r.file} ${r.description}`);
}
