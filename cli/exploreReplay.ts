import type { CellResult, Counterexample, FaultClass, MatrixRow, PropertyId, StorePolicy, TraceStep } from '../model/index.ts';
import { cellPath, describeCommand, describeOutcome, FAULT_CLASSES, InvalidInputError, MATRIX_ROWS, PROPERTY_IDS, PROPERTY_TITLES, replayCell } from '../model/index.ts';
import type { CellStep } from '../model/index.ts';
import { escapedText } from '../model/shownText.ts';
import { redactSecrets } from '../conformance/env/redact.ts';
import { BUILT_INS, didYouMean } from './rows.ts';
import { faultsNeededBy } from '../conformance/seeds.ts';
import { SEED_CELLS } from '../conformance/seedSchedules.ts';
import { describeDesign } from '../model/design.ts';
import { UsageError } from './usage.ts';

/**
 * A counterexample of `lockcheck explore` as one command-line word: its cell,
 * the property and its path (each step's command index in the cell's alphabet
 * and its branch, `c.b`), e.g. `redis-single(none)/unfenced/clock-step/MUTEX-1/0.0,4.0,1.0`.
 * The branch is what makes it exact: a step of the model may go more than one
 * way (a key at its expiry instant alive or gone), and the commands alone
 * replay the first way.
 */
export interface ExploredReplay {
  readonly row: MatrixRow;
  readonly store: StorePolicy;
  readonly fault: FaultClass;
  readonly property: PropertyId;
  readonly path: readonly CellStep[];
}

export function replayWord(cell: Pick<CellResult, 'row' | 'store' | 'faultClass'>, ce: Counterexample): string {
  const row = MATRIX_ROWS.find((r) => r.label === cell.row)!;
  const path = cellPath(row, cell.faultClass, ce.steps.map((s) => s.command), ce.branches);
  return `${cell.row}/${cell.store}/${cell.faultClass}/${ce.property}/${path.map(([c, b]) => `${c}.${b}`).join(',')}`;
}

/**
 * Where a built-in backend runs the cell's design and store, the real-server
 * run that tries this counterexample among its first runs: `lockcheck run`
 * runs the model's seed schedules (conformance/seedSchedules.ts, the same
 * breadth-first search to depth 8) before generated ones, under the fault
 * kinds given; here only those the schedule needs. Null where no built-in
 * backend has the cell, where the schedule is not a seed (a cell explored
 * past the seeds' state cap), or where it needs what no real environment
 * injects (the model's replication). A real server decides each step's
 * branch itself, so the run shows the finding when the servers go the
 * counterexample's way (each seed is followed by its variant 1 ms past the
 * expiry edge, the way a real server decides a key at its expiry instant).
 * etcd and ZooKeeper take whole-second ttls, which the seeds' milliseconds
 * do not fit (conformance/check.ts runs none there).
 */
export function realServerRun(cell: Pick<CellResult, 'row' | 'store' | 'faultClass'>, ce: Counterexample): { readonly backend: string; readonly faults: readonly string[]; readonly command: string } | null {
  const commands = ce.steps.map((s) => s.command);
  const seeded = SEED_CELLS.some((c) => c.design === cell.row && c.store === cell.store && c.found.some((f) => JSON.stringify(f.commands) === JSON.stringify(commands)));
  const backend = BUILT_INS.find((b) => b.library === undefined && b.design.kind !== 'etcd-lease' && describeDesign(b.design) === cell.row && b.store === cell.store);
  const needs = commands.map(faultsNeededBy);
  if (!seeded || backend === undefined || needs.some((n) => n === null)) return null;
  const faults = [...new Set(needs.flatMap((n) => n!))].sort();
  return { backend: backend.name, faults, command: `lockcheck run --backend ${backend.name}${faults.length > 0 ? ` --faults ${faults.join(',')}` : ''}` };
}

/** The command that replays a counterexample on the model, ready to copy (the word in single quotes: row labels hold spaces and parentheses). */
export function replayCommandLine(word: string): string {
  return `lockcheck explore --replay '${word.replaceAll("'", "'\\''")}'`;
}

function shown(raw: string): string {
  const text = redactSecrets(raw);
  return `'${escapedText(text.length > 60 ? `${text.slice(0, 57)}...` : text)}'`;
}

/** Parses --replay's word (replayWord); a UsageError naming the part that is wrong. */
export function parseReplayWord(raw: string): ExploredReplay {
  const form = "ROW/STORE/FAULT/PROPERTY/C.B,C.B,... as explore prints it after a counterexample";
  const parts = raw.split('/');
  if (parts.length < 5) throw new UsageError(`--replay must be ${form}, got ${shown(raw)}`);
  const [store, fault, property, steps] = parts.slice(-4) as [string, string, string, string];
  const label = parts.slice(0, -4).join('/');
  const labels = MATRIX_ROWS.map((r) => r.label);
  const row = MATRIX_ROWS.find((r) => r.label === label);
  if (row === undefined) throw new UsageError(`--replay: no matrix row ${shown(label)}${didYouMean(label, labels)} (have ${labels.join(', ')})`);
  if (!row.stores.includes(store as StorePolicy)) throw new UsageError(`--replay: ${row.label} is explored with the store ${row.stores.join(' or ')}, not ${shown(store)}`);
  if (!FAULT_CLASSES.includes(fault as FaultClass)) throw new UsageError(`--replay: no fault class ${shown(fault)}${didYouMean(fault, FAULT_CLASSES)} (have ${FAULT_CLASSES.join(', ')})`);
  if (!PROPERTY_IDS.includes(property as PropertyId)) throw new UsageError(`--replay: no property ${shown(property)}${didYouMean(property, PROPERTY_IDS)} (have ${PROPERTY_IDS.join(', ')})`);
  if (!/^\d{1,6}\.\d{1,9}(,\d{1,6}\.\d{1,9})*$/.test(steps)) throw new UsageError(`--replay: the steps must be C.B pairs (the command's index in the cell's alphabet, its branch) separated by commas, got ${shown(steps)}`);
  const path = steps.split(',').map((s) => s.split('.').map(Number) as unknown as CellStep);
  return { row, store: store as StorePolicy, fault: fault as FaultClass, property: property as PropertyId, path };
}

/** What a replay showed: the steps as the model ran them, and whether the last one breaks the property (the violation then). */
export interface ReplayedCounterexample {
  readonly steps: readonly TraceStep[];
  readonly violation: { readonly property: PropertyId; readonly message: string } | null;
}

/** Replays the word's path on the model; a path this model cannot take (another version's, a hand-edited one) is a UsageError naming its step. */
export function replayExplored(r: ExploredReplay): ReplayedCounterexample {
  let steps: TraceStep[];
  try {
    steps = replayCell(r.row, r.store, r.fault, r.path);
  } catch (e) {
    if (e instanceof InvalidInputError) throw new UsageError(`--replay does not replay on this model (a counterexample of another lockcheck version, or edited): ${e.message.replace(/^invalid-config: replayCell /, '')}`);
    throw e;
  }
  const v = steps.at(-1)?.violations.find((x) => x.property === r.property);
  return { steps, violation: v === undefined ? null : { property: v.property, message: v.message } };
}

/** `lockcheck explore --replay WORD`: the steps and the violation; exit 1 when the counterexample still breaks its property (as `lockcheck replay`), 0 when it no longer does. */
export function exploreReplayCommand(raw: string, json: boolean): number {
  const r = parseReplayWord(raw);
  const got = replayExplored(r);
  const cell = `${r.row.label} / ${r.store} / ${r.fault}`;
  if (json) {
    console.log(
      JSON.stringify({
        row: r.row.label,
        store: r.store,
        fault: r.fault,
        property: r.property,
        steps: got.steps.map((s) => ({ command: s.command, outcome: describeOutcome(s.outcome), violations: s.violations.map((v) => v.property) })),
        violated: got.violation !== null,
        violation: got.violation?.message ?? null,
      }),
    );
  } else {
    console.log(`### ${cell}: ${r.property} (${PROPERTY_TITLES[r.property]})`);
    got.steps.forEach((s, i) => console.log(`  ${i + 1}. ${describeCommand(s.command)} -> ${describeOutcome(s.outcome)}`));
    console.log(got.violation !== null ? `  violated: ${got.violation.message}` : `  ${r.property} no longer breaks after these steps: this model does not reproduce the counterexample`);
  }
  return got.violation !== null ? 1 : 0;
}
