import { BUILT_INS, MEASURED_FAULT_CLASSES } from '../cli/backends.ts';
import type { Design, StorePolicy } from '../model/design.ts';
import type { FaultClass } from '../model/faultClass.ts';
import { alphabetFor, FAULT_CLASS_ALLOWS, FAULT_CLASSES } from '../model/faultClass.ts';
import type { MatrixRow } from '../model/matrix.ts';
import { derivedProperties, exploreCell, MATRIX_ROWS } from '../model/matrix.ts';
import type { PropertyId } from '../model/properties.ts';
import { PROPERTY_IDS, PROPERTY_KINDS, PROPERTY_TITLES } from '../model/properties.ts';

/**
 * The tables of spec/SPEC.md and docs/choosing-a-lock.md that the model
 * decides, rendered from the model (and, for the predicted matrix, from the
 * exploration saved in spec/predicted.json) and written between markers by
 * `npm run spec:tables`. test/specConsistency.test.ts fails when the
 * markdown and the model disagree.
 */

/** Where the exploration's verdicts are recorded (test/exploreRegression.test.ts re-checks the cheap cells). */
export const VERDICTS_FILE = 'test/fixtures/explore-verdicts.json';

/** One cell's recorded verdict: the properties broken, each with its shortest schedule, complete to `depth`. */
export interface PredictedCell {
  readonly row: string;
  readonly store: StorePolicy;
  readonly fault: FaultClass;
  readonly depth: number;
  readonly found: Partial<Record<PropertyId, number>>;
}

export interface Predicted {
  readonly note: string;
  readonly cells: readonly PredictedCell[];
}

/** A cell explored again to its recorded depth (for `npm run spec:tables -- --explore` after a model change). */
export function reexplore(c: PredictedCell, maxStates = Number.MAX_SAFE_INTEGER): { readonly cell: PredictedCell; readonly states: number } {
  const row = MATRIX_ROWS.find((r) => r.label === c.row);
  if (row === undefined) throw new Error(`no matrix row '${c.row}'`);
  const r = exploreCell(row, c.store, c.fault, { maxDepth: c.depth, maxStates });
  // A counterexample found in the level that was cut short is still a shortest one (every shorter schedule was explored).
  return { cell: { ...c, depth: r.depthCompleted, found: Object.fromEntries(r.counterexamples.map((x) => [x.property, x.steps.length])) }, states: r.states };
}

function brokenIn(c: PredictedCell): PropertyId[] {
  return PROPERTY_IDS.filter((p) => c.found[p] !== undefined);
}

/** A cell of section 8.1 as the table prints it: `STORE-1 (6) [to 8]`, `— [to 8]`. */
export function cellText(c: PredictedCell): string {
  const found = brokenIn(c);
  const parts = [...found.map((p) => `${p} (${c.found[p]})`), ...derivedProperties(new Set(found), c.store).map((p) => `*${p}*`)];
  const text = parts.length === 0 ? '—' : parts.join(', ');
  return `${text} [to ${c.depth}]`;
}

/** Section 8.1: rows x fault classes, each cell the properties broken. */
export function renderPredictedMatrix(p: Predicted): string {
  const head = `| variant | store | ${FAULT_CLASSES.join(' | ')} |\n|---|---|${FAULT_CLASSES.map(() => '---|').join('')}`;
  const lines = MATRIX_ROWS.flatMap((row) =>
    row.stores.map((store, i) => {
      const cells = FAULT_CLASSES.map((fc) => {
        const c = p.cells.find((x) => x.row === row.label && x.store === store && x.fault === fc);
        return c === undefined ? '?' : cellText(c);
      });
      return `| ${i === 0 ? row.label : ''} | ${store} | ${cells.join(' | ')} |`;
    }),
  );
  return [
    head,
    ...lines,
    '',
    'Each cell: the properties broken, each with the length of its shortest breaking schedule in parentheses, then in brackets the depth k to ' +
      'which the prediction holds: every schedule of the class of up to k commands was explored (breadth first, so nothing shorter ' +
      `was missed; k is 8 where the exploration reached it within its state cap). The verdicts are recorded in \`${VERDICTS_FILE}\`. "—": every property holds to depth k. ` +
      '*Italic*: a consequence derived from the explored breaks, not reached at this depth ' +
      '(MUTEX-1 on an unfenced store implies STORE-1; MUTEX-1 together with FENCE-1 implies STORE-1 on any store but `transactional`). ' +
      `Definitions: ${PROPERTY_IDS.map(propertyLink).join(', ')}. A cell's shortest counterexamples, step by step, with the command that replays each: ` +
      '`lockcheck explore --design <design> --fault <class>` (the design without its options in parentheses).',
  ].join('\n');
}

/** A property ID linked to its definition in section 5 (the anchor before its statement). */
export const propertyLink = (id: PropertyId): string => `[${id}](#${id.toLowerCase()})`;

/** Section 8: each fault class with the faults its exploration schedules. */
export function renderFaultClasses(): string {
  return ['| class | faults allowed (besides the operations and `advance`) |', '|---|---|', ...FAULT_CLASSES.map((fc) => `| ${fc} | ${FAULT_CLASS_ALLOWS[fc]} |`)].join('\n');
}

/** Section 5: every property with its title and how it is judged. */
export function renderProperties(): string {
  return ['| ID | property | kind | judged on |', '|---|---|---|---|', ...PROPERTY_IDS.map((id) => `| ${propertyLink(id)} | ${PROPERTY_TITLES[id]} | ${PROPERTY_KINDS[id].kind} | ${PROPERTY_KINDS[id].on} |`)].join('\n');
}

/** The fault kinds a class's exploration schedules beyond the plain operations (for the consistency test). */
export function faultKindsOf(design: Parameters<typeof alphabetFor>[0], fc: FaultClass): string[] {
  const base = new Set(alphabetFor(design, 'none').map((c) => JSON.stringify(c)));
  return [...new Set(alphabetFor(design, fc).filter((c) => !base.has(JSON.stringify(c))).map((c) => c.kind))].sort();
}

export const MARK = {
  begin: (name: string) => `<!-- BEGIN GENERATED ${name} (npm run spec:tables) -->`,
  end: (name: string) => `<!-- END GENERATED ${name} -->`,
};

/** The model row a built-in backend's design is explored as (the delayed restart's length differs, not its effect). */
export function rowOf(design: Design): MatrixRow | undefined {
  const shape = (d: Design): string =>
    d.kind === 'redis-single' || d.kind === 'redlock' ? `${d.kind}/${d.persistence}/${d.restartDelayMs > 0}` : d.kind === 'redis-replicated' ? `${d.kind}/${d.wait}` : d.kind;
  return MATRIX_ROWS.find((r) => shape(r.design) === shape(design));
}

/** What a cell of docs/matrix.md measured: property IDs, 'holds', 'n/m' (not measured) or 'bug'. */
function measuredIn(cell: string): string {
  if (cell.includes('not measured')) return 'n/m';
  if (cell.includes('conformance failure')) return 'bug';
  const head = cell.replace(/\[[^\]]*\]\([^)]*\)/g, '').split('(')[0]!;
  const ids = PROPERTY_IDS.filter((id) => head.includes(id));
  return ids.length === 0 ? 'holds' : ids.join(', ');
}

/** docs/choosing-a-lock.md: each built-in backend's measured cells (from docs/matrix.md) beside the predicted ones. */
export function renderMeasuredVsPredicted(p: Predicted, matrixMd: string): string {
  const header = matrixMd.split('\n').find((l) => l.startsWith('| backend |'));
  const columns = header === undefined ? [] : header.split('|').slice(2, -1).map((c) => c.trim());
  const rows = new Map(
    matrixMd
      .split('\n')
      .filter((l) => l.startsWith('| ') && !l.startsWith('| backend') && !l.startsWith('|---'))
      .map((l) => {
        const cells = l.split(' | ');
        return [cells[0]!.slice(2).trim(), cells.slice(1).map((c) => c.replace(/ \|$/, ''))] as const;
      }),
  );
  const cols = MEASURED_FAULT_CLASSES.filter((c) => columns.includes(c.id));
  const lines = BUILT_INS.flatMap((b) => {
    const row = rowOf(b.design);
    const measured = rows.get(b.name);
    if (row === undefined || measured === undefined) return [];
    const cells = cols.map((col) => {
      const found = new Set(p.cells.filter((c) => c.row === row.label && c.store === b.store && col.model.includes(c.fault)).flatMap(brokenIn));
      const predicted = PROPERTY_IDS.filter((id) => found.has(id) || derivedProperties(found, b.store).includes(id));
      const m = measuredIn(measured[columns.indexOf(col.id)] ?? '');
      const pr = predicted.length === 0 ? 'holds' : predicted.join(', ');
      return m === pr ? m : `${m} / ${pr}${m === 'n/m' ? '' : ' !'}`;
    });
    return [`| ${b.name} | ${cells.join(' | ')} |`];
  });
  return [
    `| backend | ${cols.map((c) => c.id).join(' | ')} |`,
    `|---|${cols.map(() => '---|').join('')}`,
    ...lines,
    '',
    'One entry where measured and predicted agree; otherwise "measured / predicted".',
  ].join('\n');
}

/** The blocks a markdown file may carry, by name. `matrixMd`: docs/matrix.md, for the measured cells. */
export function blocks(p: Predicted, matrixMd = ''): Record<string, string> {
  return {
    'predicted-matrix': renderPredictedMatrix(p),
    'fault-classes': renderFaultClasses(),
    properties: renderProperties(),
    'measured-vs-predicted': renderMeasuredVsPredicted(p, matrixMd),
  };
}

/** The text between a block's markers, or null if the file has no such block. */
export function blockIn(text: string, name: string): string | null {
  const b = text.indexOf(MARK.begin(name));
  const e = text.indexOf(MARK.end(name));
  if (b < 0 || e < b) return null;
  return text.slice(b + MARK.begin(name).length, e).trim();
}

/** `text` with every block it carries replaced by its generated body. */
export function withBlocks(text: string, p: Predicted, matrixMd = ''): string {
  let out = text;
  for (const [name, body] of Object.entries(blocks(p, matrixMd))) {
    const b = out.indexOf(MARK.begin(name));
    const e = out.indexOf(MARK.end(name));
    if (b < 0 || e < b) continue;
    out = `${out.slice(0, b + MARK.begin(name).length)}\n${body}\n${out.slice(e)}`;
  }
  return out;
}
