import { InvalidInputError, MAX_TIME_MS, shown } from './errors.ts';
import type { ModelErrorCode } from './errors.ts';

export { shown };

/**
 * Checks of the arguments the model's public functions take, so a wrong type
 * is an InvalidInputError naming the argument, never a TypeError from deep
 * inside. The model's own hot paths do not pass through here: they call the
 * unchecked functions with values these checks (or initialWorld and step)
 * accepted before.
 */

export function refuse(name: string, wanted: string, value: unknown, code: ModelErrorCode = 'invalid-config'): never {
  throw new InvalidInputError(code, `${name} must be ${wanted}, got ${shown(value)}`);
}

export const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** An object argument (or a nested one): not null, a primitive or an array. */
export function checkObject(value: unknown, name: string, wanted = 'an object'): Record<string, unknown> {
  if (!isObject(value)) refuse(name, wanted, value);
  return value;
}

/** An optional options object: absent (undefined) or an object. */
export function checkOptions<T>(value: T, name: string): T {
  if (value !== undefined) checkObject(value, name, 'an options object or absent');
  return value;
}

export function checkArray<T>(value: T, name: string, wanted = 'an array'): T {
  if (!Array.isArray(value)) refuse(name, wanted, value);
  return value;
}

export function checkFunction<T>(value: T, name: string, wanted = 'a function'): T {
  if (typeof value !== 'function') refuse(name, wanted, value);
  return value;
}

/** One of a closed set of strings. */
export function checkOneOf<T extends string>(value: unknown, name: string, allowed: readonly T[]): T {
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) refuse(name, `one of ${allowed.map((a) => `'${a}'`).join(', ')}`, value);
  return value as T;
}

/** A finite number (the model's times and clock readings). */
export function checkNumber(value: unknown, name: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) refuse(name, 'a finite number', value);
  return value;
}

/** A time or clock reading: a number of ms within [-MAX_TIME_MS, MAX_TIME_MS], where +1 still moves it (a clock's search depends on that). */
export function checkTime(value: unknown, name: string): number {
  if (typeof value !== 'number' || !(value >= -MAX_TIME_MS && value <= MAX_TIME_MS)) refuse(name, `a finite number of ms in [-${MAX_TIME_MS}, ${MAX_TIME_MS}]`, value);
  return value;
}

export function checkInteger(value: unknown, name: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) refuse(name, `an integer in [${min}, ${max}]`, value);
  return value;
}

/** A command's outer shape: an object with a string kind (step checks the rest, and names an unknown kind). */
export function checkCommandShape(command: unknown, name: string): void {
  if (!isObject(command) || typeof command.kind !== 'string') refuse(name, 'a command (an object with a kind)', command);
}

/** An alphabet or a schedule: an array of commands. */
export function checkCommands(commands: unknown, name: string): void {
  checkArray(commands, name, 'an array of commands');
  // Every index, holes included (forEach skips them).
  for (let i = 0; i < (commands as readonly unknown[]).length; i++) checkCommandShape((commands as readonly unknown[])[i], `${name}[${i}]`);
}

/**
 * Refuses any own key of `o` not in `known`: a misspelt option or field
 * (`maxstates`, `latency`) would otherwise be read as absent, and the call
 * would run with the default, silently. The message names each unknown key,
 * the known one it is nearest to (a likely typo), and the known keys.
 */
export function checkKnownKeys(o: object, name: string, known: readonly string[], code: ModelErrorCode = 'invalid-config'): void {
  let unknown: string[] | undefined;
  for (const key of Object.keys(o)) if (!known.includes(key)) (unknown ??= []).push(key);
  if (unknown === undefined) return;
  const each = unknown.map((key) => {
    const near = nearestKey(key, known);
    return `${shown(key.length > 60 ? `${key.slice(0, 57)}...` : key)}${near === undefined ? '' : ` (did you mean ${near}?)`}`;
  });
  throw new InvalidInputError(code, `${name}: unknown ${unknown.length > 1 ? 'keys' : 'key'} ${each.join(', ')}; known: ${known.join(', ')}`);
}

/** The known key nearest `key` (case ignored) when near enough to be a typo: within 40 % of the longer by edit distance, or one the start of the other. */
function nearestKey(key: string, known: readonly string[]): string | undefined {
  if (key.length > 100) return undefined;
  const k = key.toLowerCase();
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of known) {
    const c = candidate.toLowerCase();
    const d = editDistance(k, c);
    const near = d <= Math.max(1, Math.round(0.4 * Math.max(k.length, c.length))) || (k.length >= 3 && (c.startsWith(k) || k.startsWith(c)));
    if (near && d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/** Levenshtein distance (both strings short: keys). */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_v, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) current.push(Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1)));
    previous = current;
  }
  return previous[b.length]!;
}
