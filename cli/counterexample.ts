import type { FaultKind } from '../conformance/faults.ts';
import { FAULT_KINDS, isFaultKind } from '../conformance/faults.ts';
import { PROPERTY_IDS, type PropertyId } from '../model/properties.ts';
import { UsageError } from './usage.ts';
import { jsonParseProblem, quotedInput } from '../conformance/quotedInput.ts';
import { counted } from '../conformance/counted.ts';
import type { Command } from '../model/command.ts';
import type { BackendUnderTest } from '../conformance/adapter.ts';
import type { CheckFailure } from '../conformance/check.ts';
import { judgedDesign } from '../conformance/consequence.ts';
import { checkDuration, checkResource, checkRetries, checkTtl, checkValue, InvalidInputError, shown as valueShown } from '../model/errors.ts';
import { MAX_DRIFT_PPM, MIN_DRIFT_PPM } from '../model/clock.ts';

/**
 * The counterexample file `lockcheck run` writes and `lockcheck replay` reads.
 * Replay trusts nothing in it: every field is checked here, and a backend
 * that is not built in is only a name for the message; the module itself is
 * loaded only when the user names it on the command line (--backend).
 */
export interface CounterexampleFile {
  readonly lockcheck: 'counterexample';
  /** A built-in backend name, or the adapter module path the run used (replay needs it again as --backend). */
  readonly backend: string;
  readonly faults: readonly FaultKind[] | null;
  readonly seed: number;
  /** fast-check's replay path: colon-separated run and shrink indexes. */
  readonly path: string;
  readonly runs: number;
  readonly verdict: CounterexampleVerdict;
  readonly properties: readonly PropertyId[];
  /** The shrunk schedule's commands, for reading. */
  readonly steps: readonly string[];
  /** What the deviation costs (unsafe, liveness, safe: ...), for a conformance failure. */
  readonly consequence?: string | null;
  /** The adapter's settings it was found with: the design it was judged by, its capabilities and its library's contract (data, compared on replay). */
  readonly settings?: { readonly name: string; readonly design: unknown; readonly capabilities: unknown; readonly contract: unknown; readonly options?: unknown; readonly faults: readonly string[] };
  /** The run tried the model's seed schedules first (conformance/seeds.ts), so the path counts them; absent in files from before. */
  readonly modelSeeds?: boolean;
  /**
   * The counterexample's schedule as it ran, after the minimising pass
   * (CheckFailure.schedule): what replay runs, exactly, when it is there (no
   * fast-check path names a minimised schedule); absent in files from before,
   * which replay by seed and path. The token base is a decimal string (JSON has no bigint).
   */
  readonly schedule?: { readonly commands: readonly Command[]; readonly tokenBase: string; readonly requestTimeoutMs?: number };
}

export type CounterexampleVerdict = 'conformance-failure' | 'property-violation';

/**
 * The file `lockcheck run` and `lockcheck matrix` save for a failure, which
 * `lockcheck replay` runs again: `backend` as the user named it (a built-in
 * name or an adapter module's path), the fault kinds the run was given
 * (null: all the backend offers), `offered` those it offers.
 */
export function counterexampleFile(
  backend: string,
  resolved: BackendUnderTest,
  offered: readonly FaultKind[],
  faults: readonly FaultKind[] | null,
  runs: number,
  failure: CheckFailure,
): CounterexampleFile {
  const verdict = failure.report.verdict;
  return {
    lockcheck: 'counterexample',
    backend,
    faults,
    seed: failure.seed,
    path: failure.path,
    runs,
    verdict: verdict.kind as CounterexampleVerdict,
    properties: failure.properties as CounterexampleFile['properties'],
    consequence: verdict.kind === 'conformance-failure' ? `${verdict.consequence.kind}: ${verdict.consequence.what}` : null,
    settings: { name: resolved.name, design: judgedDesign(resolved), capabilities: resolved.capabilities, contract: resolved.contract ?? null, options: resolved.options ?? null, faults: offered },
    steps: failure.report.steps.map((s) => JSON.stringify(s.command)),
    modelSeeds: true,
    schedule: { commands: failure.schedule.commands, tokenBase: failure.schedule.tokenBase.toString(), ...(failure.schedule.requestTimeoutMs !== undefined ? { requestTimeoutMs: failure.schedule.requestTimeoutMs } : {}) },
  };
}

/** A counterexample file that is not one lockcheck wrote: exit code 2, the field named. */
export class CounterexampleFileError extends UsageError {
  constructor(
    readonly file: string,
    readonly field: string,
    problem: string,
  ) {
    super(`'${file}' is not a valid lockcheck counterexample: ${field} ${problem}`);
  }
}

const VERDICTS: readonly CounterexampleVerdict[] = ['conformance-failure', 'property-violation'];
const MAX_RUNS = 1_000_000;
const MAX_TEXT = 4_096;
const MAX_STEPS = 100_000;

function hasControlCharacter(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) < 0x20) return true;
  return false;
}

/** The fields of a counterexample's settings (counterexampleFile writes them all; options is newer). */
const SETTINGS_FIELDS = ['name', 'design', 'capabilities', 'contract', 'options', 'faults'];
/** How deep the settings' objects and arrays may nest: lockcheck saves 3 levels or so; far deeper is no file it wrote. */
const MAX_SETTINGS_DEPTH = 32;

/** Whether an object or array lies `max` levels or more inside `value`: walked with a list, not recursion (a nest past the stack is what it looks for). */
function nestsDeeper(value: unknown, max: number): boolean {
  const pending: Array<readonly [unknown, number]> = [[value, 0]];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [v, depth] = next;
    if (typeof v !== 'object' || v === null) continue;
    if (depth >= max) return true;
    for (const inner of Object.values(v)) pending.push([inner, depth + 1]);
  }
  return false;
}

/** A value from the file, shown in a message: typed and cut short, never echoed whole. */
/** A value the file holds, for a message: a string redacted, cut short and escaped (quotedInput), anything else by kind. */
function shown(value: unknown): string {
  // An array by its length: a list refused for its size must say how long it was ("got an array" did not).
  return value === null ? 'null' : typeof value === 'string' ? quotedInput(value, 57, '"') : Array.isArray(value) ? `an array of ${value.length}` : typeof value;
}

/** The largest client or node index a saved command may name (the model's worlds have a handful). */
const MAX_INDEX = 1_000;

type FieldCheck = (value: unknown) => void;
const index: FieldCheck = (v) => {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > MAX_INDEX) throw new InvalidInputError('precondition', `must be an index in [0, ${MAX_INDEX}], got ${valueShown(v)}`);
};
const resource: FieldCheck = (v) => void checkResource(v);
const ttl: FieldCheck = (v) => void checkTtl(v);
const duration: FieldCheck = (v) => void checkDuration(v, 'the duration');
const value: FieldCheck = (v) => void checkValue(v);
const retries: FieldCheck = (v) => void checkRetries(v);
const isTrue: FieldCheck = (v) => {
  if (v !== true) throw new InvalidInputError('precondition', `must be true or absent, got ${valueShown(v)}`);
};
const integerMs: FieldCheck = (v) => {
  if (typeof v !== 'number' || !Number.isInteger(v) || Math.abs(v) > 2 ** 31 - 1) throw new InvalidInputError('invalid-duration', `must be an integer number of ms, got ${valueShown(v)}`);
};
const driftPpm: FieldCheck = (v) => {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < MIN_DRIFT_PPM || v > MAX_DRIFT_PPM) throw new InvalidInputError('invalid-duration', `must be an integer in [${MIN_DRIFT_PPM}, ${MAX_DRIFT_PPM}], got ${valueShown(v)}`);
};
const delayMs: FieldCheck = (v) => {
  if (v !== 'never') duration(v);
};
const clockTarget: FieldCheck = (v) => {
  const problem = fieldsProblem(v, {}, { node: index, client: index });
  if (problem !== null || Object.keys(v as object).length !== 1) throw new InvalidInputError('precondition', `must be { "node": n } or { "client": n }${problem === null ? '' : ` (${problem})`}`);
};
const pendingWrite: FieldCheck = (v) => {
  const problem = fieldsProblem(v, { resource, value });
  if (problem !== null) throw new InvalidInputError('precondition', problem);
};
const operation: FieldCheck = (v) => {
  const problem = commandProblem(v, OPERATION_KINDS);
  if (problem !== null) throw new InvalidInputError('precondition', problem);
};

/** Every command kind the model runs: its required fields, then its optional ones, each checked by the model's own validators where it has one. */
const COMMAND_FIELDS: ReadonlyMap<string, readonly [required: Readonly<Record<string, FieldCheck>>, optional: Readonly<Record<string, FieldCheck>>]> = new Map([
  ['acquire', [{ client: index, resource }, { ttlMs: ttl, latencyMs: duration, retries, retryDelayMs: duration }]],
  ['extend', [{ client: index, resource, ttlMs: ttl }, { latencyMs: duration }]],
  ['release', [{ client: index, resource }, { latencyMs: duration }]],
  ['write', [{ client: index, resource, value }, { latencyMs: duration, delayed: isTrue }]],
  ['read', [{ client: index, resource }, {}]],
  ['advance', [{ ms: duration }, {}]],
  ['clock-step', [{ node: index, deltaMs: integerMs }, {}]],
  ['clock-drift', [{ target: clockTarget, driftPpm }, {}]],
  ['pause', [{ client: index }, { pendingWrite, inFlight: operation }]],
  ['resume', [{ client: index }, {}]],
  ['deliver', [{ client: index }, {}]],
  ['replicate', [{ node: index }, {}]],
  ['crash', [{ node: index }, {}]],
  ['restart', [{ node: index }, {}]],
  ['partition', [{ client: index, node: index }, {}]],
  ['heal', [{ client: index, node: index }, {}]],
  ['node-delay', [{ node: index, ms: delayMs }, {}]],
  ['kill-connection', [{ client: index }, {}]],
] as const);
const OPERATION_KINDS: ReadonlySet<string> = new Set(['acquire', 'extend', 'release', 'write', 'read']);

/** What is wrong with an object's fields: one missing, one unknown, or one its check refuses (the model's message); null if none. */
function fieldsProblem(v: unknown, required: Readonly<Record<string, FieldCheck>>, optional: Readonly<Record<string, FieldCheck>> = {}): string | null {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return `must be an object, got ${shown(v)}`;
  const o = v as Record<string, unknown>;
  // Own keys only, and looked up in maps: "__proto__", "constructor" or "toString" name no field.
  const checks = new Map([...Object.entries(required), ...Object.entries(optional)]);
  for (const key of Object.keys(o)) if (key !== 'kind' && !checks.has(key)) return `has the field ${shown(key)}, which is not part of the command`;
  for (const [key, check] of checks) {
    const present = Object.prototype.hasOwnProperty.call(o, key) && o[key] !== undefined;
    if (!present) {
      if (Object.prototype.hasOwnProperty.call(required, key)) return `has no ${JSON.stringify(key)}`;
      continue;
    }
    try {
      check(o[key]);
    } catch (e) {
      if (!(e instanceof InvalidInputError)) throw e;
      return `has ${JSON.stringify(key)} ${e.message.replace(/^[a-z-]+: /, '')}`;
    }
  }
  return null;
}

/**
 * What is wrong with one saved command, or null: an object of a kind the
 * model runs, with that kind's fields and no other, each of its type. Whether
 * the model can run it where the schedule puts it (its client exists, is not
 * paused...) only the replay can tell (conformance/check.ts checkRanAsSaved).
 */
function commandProblem(c: unknown, kinds?: ReadonlySet<string>): string | null {
  if (typeof c !== 'object' || c === null || Array.isArray(c)) return `must be a command (an object with a kind), got ${shown(c)}`;
  const kind = Object.prototype.hasOwnProperty.call(c, 'kind') ? (c as { kind?: unknown }).kind : undefined;
  if (typeof kind !== 'string') return `must be a command (an object with a kind), got ${kind === undefined ? 'one without a kind' : `the kind ${shown(kind)}`}`;
  const fields = kinds === undefined || kinds.has(kind) ? COMMAND_FIELDS.get(kind) : undefined;
  if (fields === undefined) return `has the kind ${shown(kind)}, not ${kinds === undefined ? 'a command kind' : 'an operation'} (${[...(kinds ?? COMMAND_FIELDS.keys())].join(', ')})`;
  const problem = fieldsProblem(c, ...fields);
  return problem === null ? null : `(${kind}) ${problem}`;
}

/** Parses and checks a counterexample file's text; throws CounterexampleFileError naming the first bad field. */
export function parseCounterexample(file: string, text: string): CounterexampleFile {
  let json: unknown;
  // An empty file (a save that never happened, a closed stdin) said as such, not as JSON's "Unexpected end of JSON input".
  if (text.trim() === '') throw new CounterexampleFileError(file, 'the file', 'is empty');
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new CounterexampleFileError(file, 'the file', `is not JSON (${jsonParseProblem(e)})`);
  }
  const bad = (field: string, problem: string): never => {
    throw new CounterexampleFileError(file, field, problem);
  };
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return bad('the file', `must hold a JSON object, got ${shown(json)}`);
  const o = json as Record<string, unknown>;
  const known = new Set(['lockcheck', 'backend', 'faults', 'seed', 'path', 'runs', 'verdict', 'properties', 'steps', 'consequence', 'settings', 'modelSeeds', 'schedule']);
  for (const key of Object.keys(o)) if (!known.has(key)) bad(`field ${shown(key)}`, 'is not part of the format');
  if (o['lockcheck'] !== 'counterexample') bad('"lockcheck"', `must be "counterexample", got ${shown(o['lockcheck'])}`);
  const backend = o['backend'];
  if (typeof backend !== 'string' || backend.length === 0 || backend.length > MAX_TEXT || hasControlCharacter(backend)) bad('"backend"', `must be a backend name or module path, got ${shown(backend)}`);
  const faults = o['faults'];
  if (faults !== null) {
    if (!Array.isArray(faults) || faults.length === 0) bad('"faults"', `must be null or a non-empty list of fault kinds, got ${shown(faults)}`);
    for (const f of faults as unknown[]) if (!isFaultKind(f)) bad('"faults"', `holds ${shown(f)}, not a fault kind (${FAULT_KINDS.join(', ')})`);
    if (new Set(faults as unknown[]).size !== (faults as unknown[]).length) bad('"faults"', 'lists a fault kind twice');
  }
  const seed = o['seed'];
  if (typeof seed !== 'number' || !Number.isInteger(seed) || seed < -(2 ** 31) || seed > 2 ** 31 - 1) bad('"seed"', `must be a 32-bit integer, got ${shown(seed)}`);
  const path = o['path'];
  if (typeof path !== 'string' || path.length > MAX_TEXT || !/^\d+(:\d+)*$/.test(path)) bad('"path"', `must be a replay path like "12:0:3", got ${shown(path)}`);
  const runs = o['runs'];
  if (typeof runs !== 'number' || !Number.isInteger(runs) || runs < 1 || runs > MAX_RUNS) bad('"runs"', `must be an integer in [1, ${MAX_RUNS}], got ${shown(runs)}`);
  // fast-check found the failure at run index (the path's first number) below its run count: a path beyond it names a run
  // the saved run never made, and replaying fast-check's case there would say "no longer fails" of a case that never failed.
  const first = Number((path as string).split(':')[0]);
  if (first >= (runs as number)) bad('"path"', `names run ${first}, but "runs" is ${runs as number}: a run of ${counted(runs as number, 'run')} never reached it (give the path and runs as they were saved)`);
  const verdict = o['verdict'];
  if (!VERDICTS.includes(verdict as CounterexampleVerdict)) bad('"verdict"', `must be one of ${VERDICTS.join(', ')}, got ${shown(verdict)}`);
  const properties = o['properties'];
  if (!Array.isArray(properties)) return bad('"properties"', `must be a list of property IDs, got ${shown(properties)}`);
  for (const p of properties) if (!PROPERTY_IDS.includes(p as PropertyId)) bad('"properties"', `holds ${shown(p)}, not a property ID (${PROPERTY_IDS.join(', ')})`);
  const steps = o['steps'];
  if (!Array.isArray(steps) || steps.length > MAX_STEPS) return bad('"steps"', `must be a list of at most ${MAX_STEPS} strings, got ${shown(steps)}`);
  for (const s of steps) if (typeof s !== 'string') bad('"steps"', `holds ${shown(s)}, not a string`);
  const consequence = o['consequence'];
  if (consequence !== undefined && consequence !== null && (typeof consequence !== 'string' || consequence.length > MAX_TEXT || hasControlCharacter(consequence))) bad('"consequence"', `must be null or a short text, got ${shown(consequence)}`);
  const settings = o['settings'];
  if (settings !== undefined) {
    const x = settings as Record<string, unknown> | null;
    if (typeof x !== 'object' || x === null || Array.isArray(x) || typeof x['name'] !== 'string' || typeof x['design'] !== 'object' || !Array.isArray(x['faults'])) bad('"settings"', `must be an object with name, design, capabilities, contract and faults, got ${shown(settings)}`);
    // Data replay compares (JSON.stringify) and shows: a file nested past the stack stopped it as a bug (exit 4), a name's escape sequences reached the terminal.
    for (const key of Object.keys(x!)) if (!SETTINGS_FIELDS.includes(key)) bad(`"settings" field ${shown(key)}`, 'is not part of the format');
    const name = x!['name'] as string;
    if (name.length === 0 || name.length > MAX_TEXT || hasControlCharacter(name)) bad('"settings.name"', `must be a backend name, got ${shown(name)}`);
    for (const f of x!['faults'] as unknown[]) if (!isFaultKind(f)) bad('"settings.faults"', `holds ${shown(f)}, not a fault kind (${FAULT_KINDS.join(', ')})`);
    if (nestsDeeper(x, MAX_SETTINGS_DEPTH)) bad('"settings"', `nests deeper than ${MAX_SETTINGS_DEPTH} levels (lockcheck saves a few)`);
  }
  const modelSeeds = o['modelSeeds'];
  if (modelSeeds !== undefined && typeof modelSeeds !== 'boolean') bad('"modelSeeds"', `must be true or false, got ${shown(modelSeeds)}`);
  const schedule = o['schedule'];
  if (schedule !== undefined) {
    const x = schedule as Record<string, unknown> | null;
    if (typeof x !== 'object' || x === null || Array.isArray(x)) return bad('"schedule"', `must be an object with commands and tokenBase, got ${shown(schedule)}`);
    for (const key of Object.keys(x)) if (!['commands', 'tokenBase', 'requestTimeoutMs'].includes(key)) bad(`"schedule" field ${shown(key)}`, 'is not part of the format');
    const commands = x['commands'];
    if (!Array.isArray(commands) || commands.length === 0 || commands.length > MAX_STEPS) bad('"schedule.commands"', `must be a non-empty list of at most ${MAX_STEPS} commands, got ${shown(commands)}`);
    (commands as unknown[]).forEach((c, i) => {
      const problem = commandProblem(c);
      if (problem !== null) bad(`"schedule.commands[${i}]"`, problem);
    });
    const base = x['tokenBase'];
    if (typeof base !== 'string' || !/^\d{1,19}$/.test(base) || BigInt(base) >= 2n ** 63n) bad('"schedule.tokenBase"', `must be a decimal string of a token base in [0, 2^63), got ${shown(base)}`);
    const timeout = x['requestTimeoutMs'];
    if (timeout !== undefined && (typeof timeout !== 'number' || !Number.isInteger(timeout) || timeout < 1 || timeout > 2 ** 31 - 1)) bad('"schedule.requestTimeoutMs"', `must be an integer in [1, 2^31-1], got ${shown(timeout)}`);
  }
  return {
    lockcheck: 'counterexample',
    backend: backend as string,
    faults: faults as FaultKind[] | null,
    seed: seed as number,
    path: path as string,
    runs: runs as number,
    verdict: verdict as CounterexampleVerdict,
    properties: properties as PropertyId[],
    steps: steps as string[],
    ...(consequence !== undefined ? { consequence: consequence as string | null } : {}),
    ...(settings !== undefined ? { settings: settings as NonNullable<CounterexampleFile['settings']> } : {}),
    ...(modelSeeds !== undefined ? { modelSeeds: modelSeeds as boolean } : {}),
    ...(schedule !== undefined ? { schedule: schedule as NonNullable<CounterexampleFile['schedule']> } : {}),
  };
}

/**
 * What differs between the backend a counterexample was found on and the one
 * it is replayed on, beyond its settings (compared apart): another backend
 * altogether (its name), or other faults offered. Either changes what the
 * seed and path generate, so the replay may run another case or none.
 */
export function replayDifferences(saved: CounterexampleFile, now: { readonly name: string; readonly faults: readonly string[] }): string[] {
  if (saved.settings === undefined) return [];
  const differences: string[] = [];
  if (saved.settings.name !== now.name) differences.push(`it was found on '${saved.settings.name}' (${saved.backend}), and this backend is '${now.name}'`);
  const then = [...saved.settings.faults].sort().join(', ');
  const offered = [...now.faults].sort().join(', ');
  if (then !== offered) differences.push(`the backend takes other faults than when it was saved (then: ${then}; now: ${offered})`);
  return differences;
}
