import { constants } from 'node:buffer';
import { duplicateKey } from './duplicateKeys.ts';
import { match } from 'ts-pattern';
import { decodeUtf8Text } from '../utf8Text.ts';
import { STORE_POLICIES } from '../../model/design.ts';
import type { History, HistoryEvent, Operation, ProcessId, StorePolicy } from './event.ts';
import { compositeKey } from './group.ts';
import { asText } from '../../impl/errorText.ts';
import { jsonParseProblem, quotedInput } from '../quotedInput.ts';

/**
 * Reading a history (spec/SPEC.md 10.2, 10.3): JSONL in, a typed `History`
 * out, or a `HistoryFormatError` naming the line and the field. Never throws:
 * whatever the bytes, the answer is one of the two.
 *
 * Completions inherit the fields of their invoke they do not repeat (a
 * write's `ok` need not repeat the value), so a parsed completion carries the
 * whole operation; a field both carry must be equal on both (`reason`
 * excepted). Tokens come out canonical (no leading zeros). Fields a history
 * adds beyond the format are dropped.
 */
export class HistoryFormatError extends Error {
  override readonly name = 'HistoryFormatError';
  constructor(
    /** 1-based line of the input; 0 when the input as a whole is not a history (not text, not an array). */
    readonly line: number,
    /** The offending field, when one is to blame. */
    readonly field: string | undefined,
    readonly problem: string,
  ) {
    super(`${line === 0 ? 'the history' : `line ${asText(line)}`}${field === undefined ? '' : `, field '${asText(field)}'`}: ${asText(problem)}`);
  }
}

/** Histories this module read (validateHistory, parseHistory): checkHistory takes them without reading them again. */
const READ = new WeakSet<History>();

/** Whether `history` came out of validateHistory or parseHistory. */
export function wasRead(history: unknown): boolean {
  return typeof history === 'object' && history !== null && READ.has(history as History);
}

export const MAX_TOKEN = 2n ** 63n - 1n;
const OPERATIONS: readonly Operation[] = ['acquire', 'extend', 'release', 'write', 'read'];

type Kind = 'text' | 'name' | 'ms' | 'positive' | 'token' | 'nullable';
/** identity: required on the invoke, inherited by the completion (equal if it repeats it); invoke: required on the invoke; ok: required on an ok. */
type Need = 'identity' | 'invoke' | 'ok' | 'optional';
interface FieldSpec {
  readonly name: string;
  readonly kind: Kind;
  readonly need: Need;
}

const f = (name: string, kind: Kind, need: Need = 'optional'): FieldSpec => ({ name, kind, need });
const RESOURCE = f('resource', 'name', 'identity');
const REASON = f('reason', 'text');
const FIELDS: Record<Operation, readonly FieldSpec[]> = {
  acquire: [RESOURCE, f('ttlMs', 'positive'), f('owner', 'name'), f('token', 'token'), f('validUntil', 'ms'), REASON],
  extend: [RESOURCE, f('owner', 'name', 'invoke'), f('token', 'token'), f('ttlMs', 'positive'), f('validUntil', 'ms'), REASON],
  release: [RESOURCE, f('owner', 'name', 'invoke'), f('token', 'token'), REASON],
  write: [RESOURCE, f('key', 'name', 'identity'), f('value', 'text', 'invoke'), f('prev', 'nullable'), f('token', 'token'), REASON],
  read: [RESOURCE, f('key', 'name', 'identity'), f('value', 'nullable', 'ok'), REASON],
};
const SIGNAL_FIELDS: readonly FieldSpec[] = [f('resource', 'name', 'invoke'), f('owner', 'name', 'invoke'), f('token', 'token'), f('reason', 'text', 'invoke')];
const FAULT_FIELDS: readonly FieldSpec[] = [f('fault', 'name', 'invoke'), f('target', 'text'), f('detail', 'text')];

/** Thrown inside the parser only; parseHistory turns it into its answer. */
class Bad {
  constructor(
    readonly field: string | undefined,
    readonly problem: string,
  ) {}
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return quotedInput(v, 40);
  if (typeof v === 'object') return 'an object';
  if (typeof v === 'number' || typeof v === 'boolean' || v === undefined) return String(v);
  return typeof v;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function checkValue(spec: FieldSpec, v: unknown): unknown {
  const bad = (what: string): never => {
    throw new Bad(spec.name, `must be ${what}, got ${describe(v)}`);
  };
  // A JSON \u escape can give text no UTF-8 file holds: a lone surrogate (U+FFFD once written, merging names in a report).
  const wellFormed = (t: string): string => (LONE_SURROGATE.test(t) ? bad('well-formed Unicode (a \\u escape left a lone surrogate)') : t);
  switch (spec.kind) {
    case 'text':
      return typeof v === 'string' ? wellFormed(v) : bad('a string');
    case 'name':
      return typeof v === 'string' && v !== '' ? wellFormed(v) : bad('a non-empty string');
    case 'nullable':
      return v === null ? v : typeof v === 'string' ? wellFormed(v) : bad('a string or null');
    // Past 2^53 a double cannot tell t from t+1: orders the checks read off the numbers (and t - 1) would be wrong.
    case 'ms':
      return typeof v === 'number' && Math.abs(v) <= Number.MAX_SAFE_INTEGER ? v : bad('a finite number (ms on the history clock) of magnitude at most 2^53-1');
    case 'positive':
      return typeof v === 'number' && v > 0 && v <= Number.MAX_SAFE_INTEGER ? v : bad('a positive number of ms, at most 2^53-1');
    case 'token': {
      if (typeof v !== 'string' || !/^[0-9]+$/.test(v)) return bad('a string of decimal digits (tokens are never JSON numbers)');
      // Compared as integers: leading zeros are dropped before the value's bound (2^63-1, 19 digits) is checked.
      const digits = v.replace(/^0+(?=[0-9])/, '');
      if (digits.length > 19) return bad('at most 2^63-1');
      const token = BigInt(digits);
      if (token > MAX_TOKEN) return bad('at most 2^63-1');
      // Canonical (no leading zeros): checks compare tokens as strings too (is this release of that lease?), so '07' must be '7'.
      return token.toString();
    }
  }
}

/** The fields of `spec` present in `o`, checked; required ones must be present. */
function fields(o: Record<string, unknown>, specs: readonly FieldSpec[], required: (n: Need) => boolean): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const spec of specs) {
    if (Object.hasOwn(o, spec.name) && o[spec.name] !== undefined) out[spec.name] = checkValue(spec, o[spec.name]);
    else if (required(spec.need)) throw new Bad(spec.name, 'is missing');
  }
  return out;
}

interface Open {
  readonly op: Operation;
  readonly line: number;
  readonly event: Record<string, unknown>;
}

/** What the parser remembers between lines. */
interface State {
  readonly open: Map<number, Open>;
  /** Faults begun and not yet ended, by `fault` and `target`. */
  readonly faults: Map<string, number>;
  readonly lastTime: Map<ProcessId, number>;
}

function processOf(v: unknown): ProcessId {
  if (v === 'nemesis') return v;
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return v;
  throw new Bad('process', `must be a non-negative integer or 'nemesis', got ${describe(v)}`);
}

function timeOf(o: Record<string, unknown>, process: ProcessId, state: State): number {
  const time = checkValue(f('time', 'ms'), o.time) as number;
  const last = state.lastTime.get(process);
  if (last !== undefined && time < last) throw new Bad('time', `goes backwards for process ${String(process)}: ${time} after ${last}`);
  state.lastTime.set(process, time);
  return time;
}

function faultEvent(o: Record<string, unknown>, type: string, time: number, state: State): HistoryEvent {
  if (o.op !== 'fault') throw new Bad('op', `the nemesis records only op 'fault', got ${describe(o.op)}`);
  if (type !== 'invoke' && type !== 'ok' && type !== 'info') throw new Bad('type', `a fault is 'invoke' (begins) or 'ok'/'info' (ends), got ${describe(type)}`);
  const rest = fields(o, FAULT_FIELDS, (n) => n === 'invoke') as { fault: string; target?: string };
  const key = compositeKey(rest.fault, rest.target ?? '');
  if (type === 'invoke') state.faults.set(key, (state.faults.get(key) ?? 0) + 1);
  else {
    const n = state.faults.get(key) ?? 0;
    if (n === 0) throw new Bad('fault', `ends fault ${describe(rest.fault)}${rest.target === undefined ? '' : ` on ${describe(rest.target)}`}, which was not begun`);
    state.faults.set(key, n - 1);
  }
  return { type, process: 'nemesis', time, op: 'fault', ...rest } as HistoryEvent;
}

function operationEvent(o: Record<string, unknown>, type: string, process: number, time: number, line: number, state: State): HistoryEvent {
  if (type !== 'invoke' && type !== 'ok' && type !== 'fail' && type !== 'info') throw new Bad('type', `must be invoke, ok, fail, info, signal or meta, got ${describe(type)}`);
  const open = state.open.get(process);
  if (type !== 'invoke' && open === undefined) throw new Bad('type', `${type} of ${o.op === undefined ? 'an operation' : OPERATIONS.includes(o.op as Operation) ? (o.op as Operation) : describe(o.op)} for process ${process}, which has no operation in flight`);
  // A completion may leave out op, resource and key: it completes its process's one open invoke, whose they are.
  const op = type !== 'invoke' && o.op === undefined ? open!.op : o.op;
  if (!OPERATIONS.includes(op as Operation)) throw new Bad('op', `must be one of ${OPERATIONS.join(', ')}, got ${describe(op)}`);
  const specs = FIELDS[op as Operation];
  if (type === 'invoke') {
    if (open !== undefined) throw new Bad('type', `process ${process} invokes ${String(op)} while its ${open.op} of line ${open.line} is still in flight (one operation at a time per process)`);
    const rest = fields(o, specs, (n) => n === 'identity' || n === 'invoke');
    const event = { type, process, time, op, ...rest };
    state.open.set(process, { op: op as Operation, line, event: rest });
    return event as HistoryEvent;
  }
  if (open === undefined) throw new Bad('type', `${type} of ${String(op)} for process ${process}, which has no operation in flight`);
  if (open.op !== op) throw new Bad('op', `completes process ${process}'s ${open.op} of line ${open.line} but says ${describe(op)}`);
  // Identity fields are inherited from the invoke when left out; given, they must agree with it (below).
  const rest = fields(o, specs, (n) => n === 'ok' && type === 'ok');
  // A completion adds what the invoke could not know (a token, a deadline, a value read); a field both carry names
  // the same operation and must agree, or the checks would judge the completion's value and the search the invoke's.
  for (const spec of specs) {
    const name = spec.name;
    if (name === 'reason' || !Object.hasOwn(rest, name) || !Object.hasOwn(open.event, name)) continue;
    if (rest[name] !== open.event[name]) throw new Bad(name, `is ${describe(rest[name])} but the invoke of line ${open.line} says ${describe(open.event[name])}`);
  }
  state.open.delete(process);
  return { type, process, time, op, ...open.event, ...rest } as HistoryEvent;
}

function eventOf(raw: unknown, index: number, line: number, state: State): HistoryEvent {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new Bad(undefined, `each line must be a JSON object, got ${describe(raw)}`);
  const o = raw as Record<string, unknown>;
  const type = o.type;
  if (type === 'meta') {
    if (index !== 0) throw new Bad('type', 'a meta line may only be the first line');
    const rest = fields(o, [f('backend', 'text'), f('description', 'text')], () => false);
    if (o.store !== undefined && !STORE_POLICIES.includes(o.store as StorePolicy)) throw new Bad('store', `must be one of ${STORE_POLICIES.join(', ')}, got ${describe(o.store)}`);
    return { type: 'meta', ...(o.store === undefined ? {} : { store: o.store as StorePolicy }), ...rest };
  }
  if (typeof type !== 'string') throw new Bad('type', `is missing or not a string (${describe(type)})`);
  const process = processOf(o.process);
  const time = timeOf(o, process, state);
  if (process === 'nemesis') return faultEvent(o, type, time, state);
  if (type === 'signal') return { type, process, time, ...fields(o, SIGNAL_FIELDS, (n) => n === 'invoke') } as HistoryEvent;
  return operationEvent(o, type, process, time, line, state);
}

/** Checks events already in memory (a recorder's own); `line` in errors is index + 1. */
export function validateHistory(values: readonly unknown[]): History | HistoryFormatError {
  if (!Array.isArray(values)) return new HistoryFormatError(0, undefined, `must be an array of events, got ${describe(values)}`);
  const state = newState();
  const events: HistoryEvent[] = [];
  for (let i = 0; i < values.length; i++) {
    const event = eventAt(values[i], i, state);
    if (event instanceof HistoryFormatError) return event;
    events.push(event);
  }
  READ.add(events);
  return events;
}

const newState = (): State => ({ open: new Map(), faults: new Map(), lastTime: new Map() });

/** Event `index` (line index + 1) checked, after those before it (`state`), or why it is not one. */
function eventAt(raw: unknown, index: number, state: State): HistoryEvent | HistoryFormatError {
  try {
    return eventOf(raw, index, index + 1, state);
  } catch (e) {
    if (e instanceof Bad) return new HistoryFormatError(index + 1, e.field, e.problem);
    return new HistoryFormatError(index + 1, undefined, `unreadable event (${e instanceof Error ? e.message : String(e)})`);
  }
}

/**
 * The bytes of a history file as text: UTF-8, a leading byte-order mark
 * dropped (editors and Windows tools write one). UTF-16 (what PowerShell's
 * `>` writes) is named as such instead of failing as 'not JSON' on line 1;
 * bytes that are not UTF-8 are refused with their line, never replaced by
 * U+FFFD (two names differing only there would be judged one name).
 */
export function decodeHistory(bytes: Uint8Array, maxChars = constants.MAX_STRING_LENGTH): string | HistoryFormatError {
  // UTF-8 never decodes to more UTF-16 units than it has bytes: under the bound, the text fits in one string.
  if (bytes.byteLength > maxChars) {
    return new HistoryFormatError(1, undefined, `the file has ${bytes.byteLength} bytes; a history is read whole, as one string of at most ${maxChars} characters: split it (by resource: each is judged on its own)`);
  }
  return match(decodeUtf8Text(bytes))
    .with({ kind: 'text' }, ({ text }): string | HistoryFormatError => text)
    .with({ kind: 'utf-16' }, () => new HistoryFormatError(1, undefined, 'the file is UTF-16 (it starts with a UTF-16 byte-order mark); a history is UTF-8 text (PowerShell: Out-File -Encoding utf8)'))
    .with({ kind: 'not-utf-8' }, ({ line }) => new HistoryFormatError(line, undefined, 'not UTF-8 (bytes that no UTF-8 text has: another encoding, such as Latin-1, or a binary file); a history is UTF-8 text'))
    .exhaustive();
}

/**
 * A JSONL history: one event per line, `\n` or `\r\n`, blank lines only at
 * the end (so that event i is line i+1); a leading byte-order mark is dropped. Open operations at the end are fine:
 * their effect is unknown, like an `info`.
 */
export function parseHistory(text: string): History | HistoryFormatError {
  if (typeof text !== 'string') return new HistoryFormatError(0, undefined, `must be text (JSON lines), got ${describe(text)}${(text as unknown) instanceof Uint8Array ? ': decodeHistory turns bytes into text' : ''}`);
  // A leading byte-order mark is dropped, as decodeHistory (and so the CLI) drops it: one history, one verdict.
  // Blank lines at the end are dropped (trimEnd: spaces after the last event's JSON are nothing to it either).
  const body = (text.startsWith('\uFEFF') ? text.slice(1) : text).trimEnd();
  // Each line checked as it is read, and only then the next: a hostile file of 256 MiB refused at its second line held
  // every line and every value in memory first (114 MiB of '{}' lines: 3.9 GB and 2.5 minutes to say 'line 2').
  const state = newState();
  const events: HistoryEvent[] = [];
  for (let at = 0, i = 0; at < body.length; i++) {
    const newline = body.indexOf('\n', at);
    const next = newline === -1 ? body.length : newline;
    const line = body.endsWith('\r', next) ? body.slice(at, next - 1) : body.slice(at, next);
    at = next + 1;
    if (line.trim() === '') return new HistoryFormatError(i + 1, undefined, 'blank line inside the history (each line must be one JSON event)');
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (e) {
      return new HistoryFormatError(i + 1, undefined, `not JSON (${jsonParseProblem(e)})`);
    }
    const twice = duplicateKey(line);
    if (twice !== undefined) return new HistoryFormatError(i + 1, twice, 'given twice in the event (JSON keeps only the last: which one did the recorder mean?)');
    const event = eventAt(value, i, state);
    if (event instanceof HistoryFormatError) return event;
    events.push(event);
  }
  READ.add(events);
  return events;
}
