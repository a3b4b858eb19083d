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
import { StopFlag, stopOnSignals } from './stopSignals.ts';
import { realServerRun, replayCommandLine, replayWord } from './exploreReplay.ts';
import { UsageError } from './usage.ts';
import { counted } from '../conformance/counted.ts';
import { redactSecrets } from '../conformance/env/redact.ts';
import { escapedText } from '../model/shownText.ts';
import { didYouMean } from './rows.ts';
import { availableParallelism } from 'node:os';

/**
 * Worker threads by default: one per core, at most 4. Two workers beat one even on a loaded 2-core machine
 * (bench/explore.md); past a few, each worker's copy of the model and, under --budget, its shrinking share of
 * --memory-mib cost more than the cores add on the 123 explorations.
 */
export const DEFAULT_JOBS = Math.max(1, Math.min(4, availableParallelism()));

export interface ExploreCommandOptions {
  readonly depth: number;
  readonly maxStates: number;
  readonly design: string | undefined;
  readonly fault: string | undefined;
  /** Stop a cell after this many seconds on it (the cell then says the last depth it completed). */
  readonly seconds?: number;
  /** Worker threads exploring cells side by side; default DEFAULT_JOBS. */
  readonly jobs?: number;
  /** A whole-run budget, s: every cell explored level by level until it is up (exploreCellsByLevels). */
  readonly budget?: number;
  /** Under a budget: the heap all threads together may hold before no level starts, MiB. */
  readonly memoryMib?: number;
  /** The report as one JSON object on stdout (progress stays on stderr). */
  readonly json?: boolean;
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
  const json = options.json === true;
  // Under --json stdout carries the JSON object alone: the text report is not printed.
  const say = json ? (): void => undefined : (text: string): void => console.log(text);
  let failures = 0;

  say('# lockcheck: the model\n');
  say('## Scenario catalogue\n');
  const scenarios: Array<{ id: string; title: string; breaks: Record<string, { got: string[]; predicted: string[]; agrees: boolean }> }> = [];
  for (const scenario of SCENARIOS) {
    if (options.design !== undefined && scenario.design.kind !== options.design) continue;
    say(`### ${scenario.id}: ${scenario.title}`);
    say(`source: ${scenario.source}`);
    const stores = Object.keys(scenario.breaks) as StorePolicy[];
    const trace = runScenario(scenario, stores[stores.length - 1]!);
    trace.steps.forEach((s, i) => say(`  ${String(i + 1).padStart(2)}. ${describeCommand(s.command)} -> ${describeOutcome(s.outcome)}`));
    const breaks: (typeof scenarios)[number]['breaks'] = {};
    for (const store of stores) {
      const got = brokenProperties(runScenario(scenario, store));
      const want = [...(scenario.breaks[store] ?? [])].sort();
      const agrees = got.join() === want.join();
      if (!agrees) failures++;
      breaks[store] = { got, predicted: want, agrees };
      say(`  ${store.padEnd(13)} breaks: ${got.length ? got.join(', ') : 'nothing'}${agrees ? '' : `   MISMATCH: spec predicts ${want.join(', ') || 'nothing'}`}`);
    }
    scenarios.push({ id: scenario.id, title: scenario.title, breaks });
    say('');
  }

  const tasks = rows.flatMap((row) => row.stores.flatMap((store) => faults.map((fault) => ({ row, store, fault }))));
  const total = tasks.length;
  const started = performance.now();
  let done = 0;
  let levels: LevelsRun | null = null;
  let cells: CellResult[];
  const stop = new StopFlag();
  // The explorations end at their last complete level, and the report of what was completed is printed as usual.
  const signals = stopOnSignals(stop, (signal) =>
    process.stderr.write(`\nlockcheck: ${signal}: stopping the explorations at their last complete level; the report of what was completed follows (again to end at once)\n`),
  );
  // The cells as they arrive: on a stop, the report is of these.
  const arrived: CellResult[] = [];
  // The cells cut by the stop (a cell --max-states or --seconds cut before it is cut by those).
  const stopped = new Set<CellResult>();
  try {
    if (options.budget === undefined) {
      say(`## Bounded exhaustive exploration (depth ${options.depth}, at most ${options.maxStates} states a cell)\n`);
      await exploreCells(
        tasks,
        { maxDepth: options.depth, maxStates: options.maxStates, budgetMs: options.seconds === undefined ? undefined : options.seconds * 1000 },
        options.jobs ?? DEFAULT_JOBS,
        (cell) => {
          arrived.push(cell);
          if (cell.truncated && stop.isSet) stopped.add(cell);
          const found = cell.counterexamples.map((c) => `${c.property}(${c.steps.length})`).join(' ') || 'none';
          process.stderr.write(
            `[${String(++done).padStart(3)}/${total}] ${cell.row} / ${cell.store} / ${cell.faultClass}: ${cell.states} states, depth ${cell.depthCompleted}${cell.truncated ? (stop.isSet ? ' (interrupted)' : ' (cut)') : ''}, found ${found}\n`,
          );
        },
        stop,
      );
      // In the cells' order, as the results came before (arrival order differs with --jobs).
      cells = tasks.flatMap((t) => arrived.filter((c) => c.row === t.row.label && c.store === t.store && c.faultClass === t.fault));
    } else {
      say(`## Bounded exhaustive exploration within ${options.budget} s, level by level (every cell completes depth d before any starts d+1)\n`);
      levels = await exploreByBudget(tasks, options, started, stop);
      cells = levels.results.filter((c) => c !== undefined);
    }
  } finally {
    signals.remove();
  }
  const interrupted = signals.by();
  const elapsedMs = performance.now() - started;
  const cellOf = (row: string, store: StorePolicy, fault: FaultClass): CellResult | undefined => cells.find((c) => c.row === row && c.store === store && c.faultClass === fault);

  // A cell --max-states, --seconds or the heap stopped says so in the table itself: "holds to 4" alone read as a search to --depth that found nothing.
  const cutMark = (c: CellResult): string => (levels === null && c.truncated ? (stopped.has(c) ? ' (interrupted)' : ' (cut)') : '');
  const cellText = (c: CellResult | undefined): string =>
    c === undefined
      ? 'not explored (interrupted)'
      : (c.counterexamples.length === 0
          ? `holds to ${c.depthCompleted}`
          : [...c.counterexamples].sort((a, b) => (a.property < b.property ? -1 : 1)).map((x) => `${x.property}(${x.steps.length})`).join(' ')) + cutMark(c);
  if (interrupted !== null) say(`Interrupted by ${interrupted[0]} after ${(elapsedMs / 1000).toFixed(1)} s: ${counted(cells.length, 'cell')} of ${total} reported; every depth shown was completed.\n`);
  say(
    `Each cell: the properties broken, with the length of the shortest counterexample; "holds to k" means no violation in any schedule of up to k commands${levels === null && cells.some((c) => c.truncated) ? '; "(cut)": --max-states, --seconds or the heap (half its limit) stopped the cell before depth ' + options.depth + ', so deeper schedules were not all explored' : ''}.\n`,
  );
  say(`| design | store | ${faults.join(' | ')} |`);
  say(`|---|---|${faults.map(() => '---').join('|')}|`);
  for (const row of rows) {
    for (const store of row.stores) {
      const line = faults.map((f) => cellText(cellOf(row.label, store, f)));
      say(`| ${row.label} | ${store} | ${line.join(' | ')} |`);
    }
  }
  const states = cells.reduce((n, c) => n + c.states, 0);
  const transitions = cells.reduce((n, c) => n + c.transitions, 0);
  const stored = cells.reduce((n, c) => n + c.bytesPerState * c.states, 0);
  const collision = cells.reduce((p, c) => p + c.collisionProbability, 0);
  // The rates count each exploration once: a shared one's states are reported under every cell it stands for, but stepped once.
  const explored = new Map<string, { readonly states: number; readonly transitions: number }>();
  for (const t of tasks) {
    const cell = cellOf(t.row.label, t.store, t.fault);
    if (cell !== undefined) explored.set(explorationKey(t.row, t.store, t.fault), cell);
  }
  const exploredStates = [...explored.values()].reduce((n, c) => n + c.states, 0);
  const exploredTransitions = [...explored.values()].reduce((n, c) => n + c.transitions, 0);
  const seconds = elapsedMs / 1000;
  say(
    `\n${states} distinct states (up to symmetry), ${transitions} transitions over the ${counted(cells.length, 'cell')}, which took ${counted(explored.size, 'exploration')} (cells that differ only in what their faults never read are explored once, spec 8.4): ${exploredStates} states and ${exploredTransitions} transitions explored in ${seconds.toFixed(1)} s, ${Math.round(exploredStates / seconds)} distinct states/s, ${Math.round(exploredTransitions / seconds)} transitions/s; ${states === 0 ? 0 : (stored / states).toFixed(1)} bytes stored per state`,
  );
  say(`fingerprint collision probability (states x (transitions - states) / 2^64, summed over the cells): ${collision.toExponential(1)}`);
  if (levels !== null && cells.length > 0) printLevels(say, levels, cells, explored.size, exploredStates, seconds, interrupted?.[0] ?? null);
  const cut = cells.filter((c) => c.truncated);
  if (cut.length > 0 && levels === null) say(`${counted(cut.length, 'cell')} stopped (${interrupted !== null ? interrupted[0] : '--max-states, --seconds or the heap'}) before depth ${options.depth}: ${cut.map((c) => `${c.row}/${c.store}/${c.faultClass} at depth ${c.depthCompleted}`).join(', ')}`);

  say('\n## Shortest counterexamples\n');
  say('Each replays on the model, step for step and branch for branch, with the command under it (exit 1 while it still breaks its property).\n');
  for (const c of cells) {
    for (const ce of c.counterexamples) printCounterexample(say, c, ce);
  }

  say('## Known counterexamples\n');
  let unreached = 0;
  let inScope = 0;
  const knownJson: Array<{ what: string; row: string; store: StorePolicy; fault: FaultClass; property: PropertyId; steps: number; agrees: boolean; text: string }> = [];
  for (const k of KNOWN_COUNTEREXAMPLES) {
    const cell = cellOf(k.row, k.store, k.fault);
    if (cell === undefined) continue;
    inScope++;
    const verdict = knownVerdict(cell, k);
    if (!verdict.agrees) failures++;
    if (verdict.agrees && !cell.counterexamples.some((c) => c.property === k.property)) unreached++;
    knownJson.push({ what: k.what, row: k.row, store: k.store, fault: k.fault, property: k.property, steps: k.steps, agrees: verdict.agrees, text: verdict.text });
    say(`- ${k.what}: ${verdict.text}`);
    const fenced = cellOf(k.row, 'strict', k.fault);
    if (fenced !== undefined) {
      const storeBroken = fenced.counterexamples.some((c) => c.property === 'STORE-1' || c.property === 'FENCE-2');
      const tokenRepeats = fenced.counterexamples.some((c) => c.property === 'FENCE-1');
      say(
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
  if (inScope === 0) say(`none of the ${counted(KNOWN_COUNTEREXAMPLES.length, 'known counterexample')} is in the cells ${interrupted !== null ? 'reported' : 'explored'}`);
  const known =
    inScope === 0
      ? `no known counterexample was in scope (--design, --fault${interrupted !== null ? ', or the cells the interrupt left unexplored' : ''}), so none was looked for`
      : unreached === 0
        ? `all ${counted(inScope, 'known counterexample')} in scope found`
        : `${unreached} of ${counted(inScope, 'known counterexample')} in scope beyond the depth explored`;
  say(failures === 0 ? `\nall scenarios agree with the spec; ${known}` : `\n${failures} disagreement(s) with the spec`);
  if (interrupted !== null) say(`interrupted by ${interrupted[0]}: ${total - cells.length} of ${counted(total, 'cell')} not reported`);
  const exitCode = interrupted !== null ? interrupted[1] : failures === 0 ? 0 : 1;
  if (json) {
    console.log(
      JSON.stringify({
        lockcheck: 'explore',
        options: { depth: options.depth, maxStates: options.maxStates, design: options.design ?? null, fault: options.fault ?? null, seconds: options.seconds ?? null, budget: options.budget ?? null, jobs: options.jobs ?? DEFAULT_JOBS },
        scenarios,
        cells: tasks.map((t) => cellJson(t.row.label, t.store, t.fault, cellOf(t.row.label, t.store, t.fault), stopped)),
        totals: {
          cells: total,
          reported: cells.length,
          states,
          transitions,
          explorations: explored.size,
          exploredStates,
          exploredTransitions,
          seconds: Number(seconds.toFixed(3)),
          statesPerSecond: Math.round(exploredStates / seconds),
          bytesPerState: states === 0 ? 0 : Number((stored / states).toFixed(1)),
          collisionProbability: collision,
        },
        ...(levels !== null ? { budget: { everyCellDepth: cells.length === 0 ? 0 : Math.min(...cells.map((c) => c.depthCompleted)), ends: levels.ends, peakHeapBytes: levels.peakHeapBytes, residentBytes: levels.residentBytes } } : {}),
        known: knownJson,
        failures,
        interrupted: interrupted?.[0] ?? null,
        exitCode,
      }),
    );
  }
  return exitCode;
}

/** A cell as --json gives it; one the interrupt left unexplored is `explored: false` with its row, store and fault only. */
function cellJson(row: string, store: StorePolicy, fault: FaultClass, c: CellResult | undefined, stopped: ReadonlySet<CellResult>) {
  if (c === undefined) return { row, store, fault, explored: false };
  return {
    row,
    store,
    fault,
    explored: true,
    depthCompleted: c.depthCompleted,
    truncated: c.truncated,
    ...(c.truncated ? { truncatedBy: stopped.has(c) ? 'interrupt' : 'limit' } : {}),
    exhausted: c.exhausted,
    states: c.states,
    transitions: c.transitions,
    counterexamples: c.counterexamples.map((ce) => {
      const word = replayWord(c, ce);
      return {
        property: ce.property,
        length: ce.steps.length,
        steps: ce.steps.map((s) => ({ command: s.command, outcome: describeOutcome(s.outcome), text: describeCommand(s.command) })),
        branches: ce.branches,
        violation: ce.violation.message,
        replay: replayCommandLine(word),
        replayWord: word,
        realServers: realServerRun(c, ce),
      };
    }),
  };
}

/** Runs the cells under the budget, with a line on stderr each time every cell has completed one more depth. */
async function exploreByBudget(tasks: ReadonlyArray<{ readonly row: MatrixRow; readonly store: StorePolicy; readonly fault: FaultClass }>, options: ExploreCommandOptions, started: number, stop: StopFlag): Promise<LevelsRun> {
  const depths = new Map<number, { depth: number; over: boolean }>();
  let reported = 0;
  return exploreCellsByLevels(
    tasks,
    { maxDepth: options.depth, maxStates: options.maxStates, budgetMs: options.budget! * 1000, memoryLimitBytes: (options.memoryMib ?? 3072) * 2 ** 20 },
    options.jobs ?? DEFAULT_JOBS,
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
    stop,
  );
}

/** The budgeted run's figures: per cell the deepest depth completed, then the depth every cell reached, rate and memory. */
function printLevels(say: (text: string) => void, run: LevelsRun, cells: readonly CellResult[], explorations: number, states: number, seconds: number, interruptedBy: string | null): void {
  say('\nDeepest depth completed per cell within the budget ("exhausted": no new state at the next level, the whole reachable space explored):\n');
  say('| design | store | fault | depth | states |');
  say('|---|---|---|---|---|');
  for (const c of cells) say(`| ${c.row} | ${c.store} | ${c.faultClass} | ${c.depthCompleted}${c.exhausted ? ' (exhausted)' : ''} | ${c.states} |`);
  const open = cells.filter((c) => !c.exhausted);
  const every = Math.min(...cells.map((c) => c.depthCompleted));
  const exhausted = cells.length - open.length;
  const ends = [...new Set(run.ends.map((e) => (e.kind === 'memory' ? `the memory bound (${(e.usedBytes / 2 ** 30).toFixed(2)} GiB heap)` : e.kind === 'deadline' ? (interruptedBy ?? 'the budget') : 'every cell over')))].join(', ');
  say(
    `\nEvery cell complete to depth ${every}${open.length > 0 ? ` (the ${counted(open.length, 'cell')} not exhausted: ${Math.min(...open.map((c) => c.depthCompleted))} to ${Math.max(...open.map((c) => c.depthCompleted))})` : ''}; ${exhausted} cells exhausted; ${explorations} explorations, ${states} states in ${seconds.toFixed(1)} s, ${Math.round(states / seconds)} distinct states/s; ended by ${ends}; peak heap of a thread ${(run.peakHeapBytes / 2 ** 30).toFixed(2)} GiB, process resident ${(run.residentBytes / 2 ** 30).toFixed(2)} GiB as the explorations ended`,
  );
}

function printCounterexample(say: (text: string) => void, cell: CellResult, ce: Counterexample): void {
  say(`### ${cell.row} / ${cell.store} / ${cell.faultClass}: ${ce.property} (${PROPERTY_TITLES[ce.property]})`);
  ce.steps.forEach((s, i) => say(`  ${i + 1}. ${describeCommand(s.command)} -> ${describeOutcome(s.outcome)}`));
  say(`  violated: ${ce.violation.message}`);
  say(`  replay: ${replayCommandLine(replayWord(cell, ce))}`);
  const real = realServerRun(cell, ce);
  if (real !== null) say(`  on real servers: ${real.command} (tries it among its first runs, as a seed schedule)`);
  say('');
}
