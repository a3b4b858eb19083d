import type { Design, StorePolicy } from './design.ts';
import { match } from 'ts-pattern';
import { describeDesign, designs, rulesOf, STORE_POLICIES, validateDesign } from './design.ts';
import { checkCommands, checkObject, checkOneOf, refuse } from './checks.ts';
import { FAULT_CLASSES } from './faultClass.ts';
import type { Exploration, ExploreOptions, ExploreResult } from './explore.ts';
import { explore, startExploration } from './explore.ts';
import type { Command } from './command.ts';
import type { FaultClass } from './faultClass.ts';
import { alphabetFor, DEFAULT_ALPHABET } from './faultClass.ts';
import type { PropertyId } from './properties.ts';
import { PROPERTY_IDS } from './properties.ts';
import { initialWorld } from './state.ts';
import { frozen } from './frozen.ts';
import { checkExploreOptions, readExploreOptions } from './exploreInput.ts';

/**
 * The rows of the comparison matrix: each design variant with the stores it
 * is paired with (unfenced, and fenced by its own token).
 */
export interface MatrixRow {
  /** The row's name in tables (describeDesign). */
  readonly label: string;
  readonly design: Design;
  /** The store policies it is explored with. */
  readonly stores: readonly StorePolicy[];
}

const TTL = DEFAULT_ALPHABET.ttlMs;

/** The predicted matrix's rows, in table order: each design variant with its stores (unfenced and strict; transactional for pg-xact). */
export const MATRIX_ROWS: readonly MatrixRow[] = frozen([
  designs.redisSingle(),
  designs.redisSingle({ persistence: 'aof-always' }),
  designs.redlock({ nodes: 5 }),
  designs.redlock({ nodes: 5, persistence: 'aof-always' }),
  designs.redlock({ nodes: 5, restartDelayMs: TTL + 2 }),
  designs.redisReplicated(),
  designs.redisReplicated({ wait: true }),
  designs.pgSession(),
  designs.pgXact(),
  designs.etcdLease(),
].map((design) => ({
  label: describeDesign(design),
  design,
  stores: rulesOf(design).writes === 'at-commit' ? (['transactional'] as const) : (['unfenced', 'strict'] as const),
})));

/** One cell's exploration, with the cell it is. */
export interface CellResult extends ExploreResult {
  /** The row's label (MatrixRow.label). */
  readonly row: string;
  readonly store: StorePolicy;
  readonly faultClass: FaultClass;
}

/** A cell's exploration options: maxStates is required (a cell is bounded). */
export type CellOptions = ExploreOptions & { readonly maxStates: number };

/** A cell's row, store and fault class, checked before anything is built. */
function checkCell(row: MatrixRow, store: StorePolicy, faultClass: FaultClass, call: string): void {
  const r = checkObject(row, `${call} row`, 'a matrix row { label, design, stores }');
  // The label names the cell in its result (CellResult.row) and in every table: a number or an object there was passed on as the row's name.
  if (typeof r.label !== 'string') refuse(`${call} row.label`, 'a string', r.label);
  validateDesign(r.design as Design);
  checkOneOf(store, `${call} store`, STORE_POLICIES);
  checkOneOf(faultClass, `${call} faultClass`, FAULT_CLASSES);
}

/** A cell's options, read once (readExploreOptions): ExploreOptions' keys only, and maxStates given (CellOptions: a cell is bounded). */
function cellOptions(options: CellOptions, call: string): CellOptions {
  const read = readExploreOptions(options, `${call} options`);
  checkExploreOptions(read, `${call} options`, 'required');
  return read as CellOptions;
}

/**
 * Explores one matrix cell: a design with a store under one fault class,
 * from DEFAULT_ALPHABET's world (two clients). Throws InvalidInputError
 * naming a bad row, store, fault class or option.
 */
export function exploreCell(row: MatrixRow, store: StorePolicy, faultClass: FaultClass, options: CellOptions): CellResult {
  checkCell(row, store, faultClass, 'exploreCell');
  const o = cellOptions(options, 'exploreCell');
  const world = initialWorld({ design: row.design, store, clients: DEFAULT_ALPHABET.clients });
  const result = explore(world, alphabetFor(row.design, faultClass), o);
  return { ...result, row: row.label, store, faultClass };
}

/** One matrix cell's exploration, to be expanded a level at a time (exploreLevels.ts). */
export function startCell(row: MatrixRow, store: StorePolicy, faultClass: FaultClass, options: CellOptions): Exploration {
  checkCell(row, store, faultClass, 'startCell');
  const o = cellOptions(options, 'startCell');
  const world = initialWorld({ design: row.design, store, clients: DEFAULT_ALPHABET.clients });
  return startExploration(world, alphabetFor(row.design, faultClass), o);
}

/**
 * The design as an exploration of `alphabet` can tell it: persistence and the
 * restart delay are read only where a node restarts (model/world.ts,
 * 'restart'), so under an alphabet without `restart` they are set to one
 * value. Two rows equal under it, with the same store and alphabet, start
 * from states that differ only in those unread fields and step alike: one
 * transition system, with the same states, transitions and counterexamples.
 */
export function designAsExplored(design: Design, alphabet: readonly Command[]): Design {
  validateDesign(design);
  checkCommands(alphabet, 'designAsExplored alphabet');
  if (alphabet.some((c) => c.kind === 'restart')) return design;
  return match(design)
    .with({ kind: 'redis-single' }, { kind: 'redlock' }, (d): Design => ({ ...d, persistence: 'none', restartDelayMs: 0 }))
    .with({ kind: 'redis-replicated' }, { kind: 'pg-session' }, { kind: 'pg-xact' }, { kind: 'etcd-lease' }, (d): Design => d)
    .exhaustive();
}

/**
 * A key equal for two cells exactly when designAsExplored makes them one
 * exploration (spec 8.4, "Cells explored once"): the matrix explores each key
 * once and gives every cell of it that result under its own label.
 */
export function explorationKey(row: MatrixRow, store: StorePolicy, faultClass: FaultClass): string {
  checkCell(row, store, faultClass, 'explorationKey');
  return JSON.stringify([designAsExplored(row.design, alphabetFor(row.design, faultClass)), store, faultClass]);
}

/**
 * What a cell predicts beyond its exploration: two consequences a bounded
 * depth may not reach (derived, not explored). A double grant lets the older
 * holder's write land after the newer one's on an unfenced store. A double
 * grant whose newer token repeats or goes back (MUTEX-1 with FENCE-1) lets
 * the older holder's write through a fenced store too. FENCE-1 alone does not
 * (spec 8.1 notes: with the old holder done writing, a repeated token harms
 * no store), so it derives nothing by itself.
 */
export function derivedProperties(found: ReadonlySet<PropertyId>, store: StorePolicy): PropertyId[] {
  if (!(found instanceof Set)) refuse('derivedProperties found', 'a Set of property IDs', found);
  // An ID that is none (a typo, 'mutex-1') derived nothing, silently.
  for (const p of found) checkOneOf(p, 'derivedProperties found', PROPERTY_IDS);
  checkOneOf(store, 'derivedProperties store', STORE_POLICIES);
  const derived = new Set<PropertyId>();
  if (found.has('MUTEX-1') && store === 'unfenced') derived.add('STORE-1');
  if (found.has('MUTEX-1') && found.has('FENCE-1') && store !== 'transactional') derived.add('STORE-1');
  return PROPERTY_IDS.filter((p) => derived.has(p) && !found.has(p));
}
