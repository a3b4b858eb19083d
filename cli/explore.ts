import type { CellResult, Counterexample, FaultClass, MatrixRow, PropertyId, StorePolicy } from '../model/index.ts';
import {
  brokenProperties,
  describeCommand,
  describeOutcome,
  explorationKey,
  FAULT_CLASSES,
  MATRIX_ROWS,
  PROPERTY_TITLES,
  runScenario,
  SCENARIOS,
} from '../model/index.ts';
import type { LevelsRun } from './exploreCells.ts';
import { exploreCells, exploreCellsByLevels } from './exploreCells.ts';
import { UsageError } from './usage.ts';
import { counted } from '../conformance/counted.ts';
import { redactSecrets } from '../conformance/env/redact.ts';
import { escapedText } from '../model/shownText.ts';
import { didYouMean } from './rows.ts';

export interface ExploreCommandOptions {
  readonly depth: number;
  readonly maxStates: number;
  readonly design: string | undefined;
  readonly fault: string | undefined;
  /** Stop a cell after this many seconds on it (the cell then says the last depth it completed). */
  readonly seconds?: number;
  /** Worker threads exploring cells side by side (1: none). */
  readonly jobs?: number;
  /** A whole-run budget, s: every cell explored level by level until it is up (exploreCellsByLevels). */
  readonly budget?: number;
  /** Under a budget: the heap all threads together may hold before no level starts, MiB. */
  readonly memoryMib?: number;
}

/**
 * The cells the exploration must find a counterexample in: the published ones, with the length of the shortest
 * schedule that breaks the property (issue 12's regression: the same lengths as the first checker found).
 */
export const KNOWN_COUNTEREXAMPLES: ReadonlyArray<{ row: string; store: StorePolicy; fault: FaultClass; property: PropertyId; steps: number; what: string }> = [
  { row: 'redlock(5 nodes, none)', store: 'unfenced', fault: 'clock-step', property: 'MUTEX-1', steps: 5, what: "Redlock double grant under a clock jump on one node" },
  { row: 'redlock(5 nodes, none)', store: 'unfenced', fault: 'crash-restart', property: 'MUTEX-1', steps: 6, what: 'Redlock double grant under a crash-restart without persistence' },
  { row: 'redis-single(none)', store: 'unfenced', fault: 'client-pause', property: 'STORE-1', steps: 6, what: 'stale write of a paused holder of an unfenced lease' },
  { row: 'redis-replicated(async)', store: 'unfenced', fault: 'crash-restart', property: 'MUTEX-1', steps: 4, what: "double grant after a failover to a replica the grant had not reached (the Redis lock page's first race)" },
];

/**
 * What the exploration says of a known counterexample. One the depth explored cannot reach is no disagreement:
 * `--depth 4` (or a cell cut short) simply does not look that far; one that was reachable and missed, or found
 * with another length, is.
 */
export function knownVerdict(cell: CellResult, k: (typeof KNOWN_COUNTEREXAMPLES)[number]): { readonly agrees: boolean; readonly text: string } {
  const ce = cell.counterexamples.find((c) => c.property === k.property);
  if (ce !== undefined) {
    return ce.steps.length === k.steps
      ? { agrees: true, text: `found, ${counted(k.steps, 'step')} (${k.property})` }
      : { agrees: false, text: `found with ${counted(ce.steps.length, 'step')}, MISMATCH: its shortest schedule has ${k.steps} (${k.property})` };
  }
  return cell.depthCompleted < k.steps
    ? { agrees: true, text: `not reached: its shortest schedule has ${counted(k.steps, 'step')}, this run completed depth ${cell.depthCompleted}${cell.truncated ? ' before its cell was cut short' : ''} (${k.property})` }
    : { agrees: false, text: `NOT FOUND to depth ${cell.depthCompleted}, MISMATCH: a schedule of ${counted(k.steps, 'step')} breaks it (${k.property})` };
}

/** A name the user gave, as a message shows it: secrets redacted, unsafe characters escaped, cut short (it may be a file pasted by mistake). */
function shownName(raw: string): string {
  const text = redactSecrets(raw);
  return `'${escapedText(text.length > 40 ? `${text.slice(0, 37)}...` : text)}'`;
}

export async function exploreCommand(options: ExploreCommandOptions): Promise<number> {
  const kinds = [...new Set(MATRIX_ROWS.map((r) => r.design.kind))];
  const rows = MATRIX_ROWS.filter((r) => options.design === undefined || r.design.kind === options.design);
  if (rows.length === 0) throw new UsageError(`no design ${shownName(options.design ?? '')}${didYouMean(options.design ?? '', kinds)} (have ${kinds.join(', ')})`);
  const faults = FAULT_CLASSES.filter((f) => options.fault === undefined || f === options.fault);
  if (faults.length === 0) throw new UsageError(`no fault class ${shownName(options.fault ?? '')}${didYouMean(options.fault ?? '', FAULT_CLASSES)} (have ${FAULT_CLASSES.join(', ')})`);
  let failures = 0;

  console.log('# lockcheck: the model\n');
  console.log('## Scenario catalogue\n');
  for (const scenario of SCENARIOS) {
    if (options.design !== undefined && scenario.design.kind !== options.design) continue;
    console.log(`### ${scenario.id}: ${scenario.title}`);
    console.log(`source: ${scenario.source}`);
    const stores = Object.keys(scenario.breaks) as StorePolicy[];
    const trace = runScenario(scenario, stores[stores.length - 1]!);
    trace.steps.forEach((s, i) => console.log(`  ${String(i + 1).padStart(2)}. ${describeCommand(s.command)} -> ${describeOutcome(s.outcome)}`));
    for (const store of stores) {
      const got = brokenProperties(runScenario(scenario, store));
      const want = [...(scenario.breaks[store] ?? [])].sort();
      const agrees = got.join() === want.join();
      if (!agrees) failures++;
      console.log(`  ${store.padEnd(13)} breaks: ${got.length ? got.join(', ') : 'nothing'}${agrees ? '' : `   MISMATCH: spec predicts ${want.join(', ') || 'nothing'}`}`);
    }
    console.log('');
  }

  const tasks = rows.flatMap((row) => row.stores.flatMap((store) => faults.map((fault) => ({ row, store, fault }))));
  const total = tasks.length;
  const started = performance.now();
  let done = 0;
  let levels: LevelsRun | null = null;
  let cells: CellResult[];
  if (options.budget === undefined) {
    console.log(`## Bounded exhaustive exploration (depth ${options.depth}, at most ${options.maxStates} states a cell)\n`);
    cells = await exploreCells(
      tasks,
      { maxDepth: options.depth, maxStates: options.maxStates, budgetMs: options.seconds === undefined ? undefined : options.seconds * 1000 },
      options.jobs ?? 1,
      (cell) => {
        const found = cell.counterexamples.map((c) => `${c.property}(${c.steps.length})`).join(' ') || 'none';
        process.stderr.write(
          `[${String(++done).padStart(3)}/${total}] ${cell.row} / ${cell.store} / ${cell.faultClass}: ${cell.states} states, depth ${cell.depthCompleted}${cell.truncated ? ' (cut)' : ''}, found ${found}\n`,
        );
      },
    );
  } else {
    console.log(`## Bounded exhaustive exploration within ${options.budget} s, level by level (every cell completes depth d before any starts d+1)\n`);
    levels = await exploreByBudget(tasks, options, started);
    cells = levels.results;
  }
  const elapsedMs = performance.now() - started;

  // A cell --max-states, --seconds or the heap stopped says so in the table itself: "holds to 4" alone read as a search to --depth that found nothing.
  const cutMark = (c: CellResult): string => (levels === null && c.truncated ? ' (cut)' : '');
  const cellText = (c: CellResult): string =>
    (c.counterexamples.length === 0
      ? `holds to ${c.depthCompleted}`
      : [...c.counterexamples].sort((a, b) => (a.property < b.property ? -1 : 1)).map((x) => `${x.property}(${x.steps.length})`).join(' ')) + cutMark(c);
  console.log(
    `Each cell: the properties broken, with the length of the shortest counterexample; "holds to k" means no violation in any schedule of up to k commands${levels === null && cells.some((c) => c.truncated) ? '; "(cut)": --max-states, --seconds or the heap (half its limit) stopped the cell before depth ' + options.depth + ', so deeper schedules were not all explored' : ''}.\n`,
  );
  console.log(`| design | store | ${faults.join(' | ')} |`);
  console.log(`|---|---|${faults.map(() => '---').join('|')}|`);
  for (const row of rows) {
    for (const store of row.stores) {
      const line = faults.map((f) => cellText(cells.find((c) => c.row === row.label && c.store === store && c.faultClass === f)!));
      console.log(`| ${row.label} | ${store} | ${line.join(' | ')} |`);
    }
  }
  const states = cells.reduce((n, c) => n + c.states, 0);
  const transitions = cells.reduce((n, c) => n + c.transitions, 0);
  const stored = cells.reduce((n, c) => n + c.bytesPerState * c.states, 0);
  const collision = cells.reduce((p, c) => p + c.collisionProbability, 0);
  // The rates count each exploration once: a shared one's states are reported under every cell it stands for, but stepped once.
  const explored = new Map<string, { readonly states: number; readonly transitions: number }>();
  for (const t of tasks) {
    const cell = cells.find((c) => c.row === t.row.label && c.store === t.store && c.faultClass === t.fault);
    if (cell !== undefined) explored.set(explorationKey(t.row, t.store, t.fault), cell);
  }
  const exploredStates = [...explored.values()].reduce((n, c) => n + c.states, 0);
  const exploredTransitions = [...explored.values()].reduce((n, c) => n + c.transitions, 0);
  const seconds = elapsedMs / 1000;
  console.log(
    `\n${states} distinct states (up to symmetry), ${transitions} transitions over the ${counted(cells.length, 'cell')}, which took ${counted(explored.size, 'exploration')} (cells that differ only in what their faults never read are explored once, spec 8.4): ${exploredStates} states and ${exploredTransitions} transitions explored in ${seconds.toFixed(1)} s, ${Math.round(exploredStates / seconds)} distinct states/s, ${Math.round(exploredTransitions / seconds)} transitions/s; ${(stored / states).toFixed(1)} bytes stored per state`,
  );
  console.log(`fingerprint collision probability (states x (transitions - states) / 2^64, summed over the cells): ${collision.toExponential(1)}`);
  if (levels !== null) printLevels(levels, cells, explored.size, exploredStates, seconds);
  const cut = cells.filter((c) => c.truncated);
  if (cut.length > 0 && levels === null) console.log(`${counted(cut.length, 'cell')} stopped (--max-states, --seconds or the heap) before depth ${options.depth}: ${cut.map((c) => `${c.row}/${c.store}/${c.faultClass} at depth ${c.depthCompleted}`).join(', ')}`);

  console.log('\n## Shortest counterexamples\n');
  for (const c of cells) {
    for (const ce of c.counterexamples) printCounterexample(c, ce);
  }

  console.log('## Known counterexamples\n');
  let unreached = 0;
  let inScope = 0;
  for (const k of KNOWN_COUNTEREXAMPLES) {
    const cell = cells.find((c) => c.row === k.row && c.store === k.store && c.faultClass === k.fault);
    if (cell === undefined) continue;
    inScope++;
    const verdict = knownVerdict(cell, k);
    if (!verdict.agrees) failures++;
    if (verdict.agrees && !cell.counterexamples.some((c) => c.property === k.property)) unreached++;
    console.log(`- ${k.what}: ${verdict.text}`);
    const fenced = cells.find((c) => c.row === k.row && c.store === 'strict' && c.faultClass === k.fault);
    if (fenced !== undefined) {
      const storeBroken = fenced.counterexamples.some((c) => c.property === 'STORE-1' || c.property === 'FENCE-2');
      const tokenRepeats = fenced.counterexamples.some((c) => c.property === 'FENCE-1');
      console.log(
        `  with a strict fenced store: ${
          storeBroken
            ? 'STORE-1 breaks'
            : tokenRepeats
              ? `the token repeats (FENCE-1), so the store cannot tell the two holders apart (STORE-1 derived, spec 8.1 notes; none explored to depth ${fenced.depthCompleted})`
              : `the store stays safe (no STORE-1 or FENCE-2 violation to depth ${fenced.depthCompleted})`
        }`,
      );
    }
  }
  // None in the cells explored (--design, --fault): "all found" would claim a search that was never made.
  if (inScope === 0) console.log(`none of the ${counted(KNOWN_COUNTEREXAMPLES.length, 'known counterexample')} is in the cells explored`);
  const known =
    inScope === 0
      ? 'no known counterexample was in scope (--design, --fault), so none was looked for'
      : unreached === 0
        ? `all ${counted(inScope, 'known counterexample')} in scope found`
        : `${unreached} of ${counted(inScope, 'known counterexample')} in scope beyond the depth explored`;
  console.log(failures === 0 ? `\nall scenarios agree with the spec; ${known}` : `\n${failures} disagreement(s) with the spec`);
  return failures === 0 ? 0 : 1;
}

/** Runs the cells under the budget, with a line on stderr each time every cell has completed one more depth. */
async function exploreByBudget(tasks: ReadonlyArray<{ readonly row: MatrixRow; readonly store: StorePolicy; readonly fault: FaultClass }>, options: ExploreCommandOptions, started: number): Promise<LevelsRun> {
  const depths = new Map<number, { depth: number; over: boolean }>();
  let reported = 0;
  return exploreCellsByLevels(
    tasks,
    { maxDepth: options.depth, maxStates: options.maxStates, budgetMs: options.budget! * 1000, memoryLimitBytes: (options.memoryMib ?? 3072) * 2 ** 20 },
    options.jobs ?? 1,
    (exploration, depth, over) => {
      depths.set(exploration, { depth, over });
      // Every exploration has reported once it completed level 1 or was over; the depth all reached is the least of the open ones.
      const open = [...depths.values()].filter((d) => !d.over).map((d) => d.depth);
      const all = open.length === 0 ? Math.max(...[...depths.values()].map((d) => d.depth)) : Math.min(...open);
      if (all > reported) {
        reported = all;
        process.stderr.write(`[${((performance.now() - started) / 1000).toFixed(1)} s] depth ${all} complete in every cell still open\n`);
      }
    },
  );
}

/** The budgeted run's figures: per cell the deepest depth completed, then the depth every cell reached, rate and memory. */
function printLevels(run: LevelsRun, cells: readonly CellResult[], explorations: number, states: number, seconds: number): void {
  console.log('\nDeepest depth completed per cell within the budget ("exhausted": no new state at the next level, the whole reachable space explored):\n');
  console.log('| design | store | fault | depth | states |');
  console.log('|---|---|---|---|---|');
  for (const c of cells) console.log(`| ${c.row} | ${c.store} | ${c.faultClass} | ${c.depthCompleted}${c.exhausted ? ' (exhausted)' : ''} | ${c.states} |`);
  const open = cells.filter((c) => !c.exhausted);
  const every = Math.min(...cells.map((c) => c.depthCompleted));
  const exhausted = cells.length - open.length;
  const ends = [...new Set(run.ends.map((e) => (e.kind === 'memory' ? `the memory bound (${(e.usedBytes / 2 ** 30).toFixed(2)} GiB heap)` : e.kind === 'deadline' ? 'the budget' : 'every cell over')))].join(', ');
  console.log(
    `\nEvery cell complete to depth ${every}${open.length > 0 ? ` (the ${counted(open.length, 'cell')} not exhausted: ${Math.min(...open.map((c) => c.depthCompleted))} to ${Math.max(...open.map((c) => c.depthCompleted))})` : ''}; ${exhausted} cells exhausted; ${explorations} explorations, ${states} states in ${seconds.toFixed(1)} s, ${Math.round(states / seconds)} distinct states/s; ended by ${ends}; peak heap of a thread ${(run.peakHeapBytes / 2 ** 30).toFixed(2)} GiB, process resident ${(run.residentBytes / 2 ** 30).toFixed(2)} GiB as the explorations ended`,
  );
}

function printCounterexample(cell: CellResult, ce: Counterexample): void {
  console.log(`### ${cell.row} / ${cell.store} / ${cell.faultClass}: ${ce.property} (${PROPERTY_TITLES[ce.property]})`);
  ce.steps.forEach((s, i) => console.log(`  ${i + 1}. ${describeCommand(s.command)} -> ${describeOutcome(s.outcome)}`));
  console.log(`  violated: ${ce.violation.message}\n`);
}
