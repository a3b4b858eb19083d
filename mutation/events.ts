/**
 * Partial results of a Stryker run still going (or cut short): the mutants
 * the event recorder has written so far (reports/mutation/events), per file
 * and status, and each one not killed.
 * Run: npx tsx mutation/events.ts (LOCKCHECK_MUTATION_OUT: the run's report folder, as stryker.config.mjs takes it)
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

interface Tested {
  readonly fileName: string;
  readonly mutatorName: string;
  readonly replacement?: string;
  readonly status: string;
  readonly location: { readonly start: { readonly line: number } };
}

const dir = join(process.env.LOCKCHECK_MUTATION_OUT ?? 'reports/mutation', 'events');
const tested = readdirSync(dir)
  .filter((f) => f.endsWith('-onMutantTested.json'))
  .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as Tested);
const killed = (m: Tested): boolean => m.status === 'Killed' || m.status === 'Timeout';
const counted = tested.filter((m) => m.status !== 'CompileError' && m.status !== 'RuntimeError' && m.status !== 'Ignored');
console.log(`mutants tested so far: ${counted.length}; killed ${counted.filter(killed).length} (${((100 * counted.filter(killed).length) / Math.max(1, counted.length)).toFixed(1)} %)`);
for (const file of [...new Set(counted.map((m) => m.fileName))]) {
  const ms = counted.filter((m) => m.fileName === file);
  const by = (s: string) => ms.filter((m) => m.status === s).length;
  console.log(`  ${relative(process.cwd(), file)}: ${ms.filter(killed).length} of ${ms.length} killed (survived ${by('Survived')}, no coverage ${by('NoCoverage')})`);
}
for (const m of counted.filter((x) => !killed(x))) console.log(`- ${m.status} ${relative(process.cwd(), m.fileName)}:${m.location.start.line} ${m.mutatorName} -> ${JSON.stringify(m.replacement ?? '')}`);
