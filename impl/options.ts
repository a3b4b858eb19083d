import type { StorePolicy } from '../model/design.ts';
import { InvalidInputError, MAX_TOKEN, MAX_TTL_MS } from '../model/errors.ts';
import type { MonotonicClock } from './clock.ts';

/**
 * Checks of the options the public constructors and factories take: each
 * throws InvalidInputError('invalid-config') naming the option and what was
 * given, at construction, rather than a TypeError deep inside a later call.
 */

/** Options whose value is a secret, whatever its type: a message gives only its kind. */
const SECRET_OPTION = /pass|secret|credential|api.?key|private.?key/i;
/** Text that may carry a secret: a URL with user info (postgres://user:password@...), or a secret-named key with a value. */
const SECRET_TEXT = /:\/\/[^/\s]*@|(?:pass|secret|credential|api.?key|private.?key)\w*\s*[=:]/i;

/** A value's kind alone: a string, a number, ... */
function kindOf(value: unknown): string {
  if (typeof value === 'string') return `a string of ${value.length} characters`;
  if (value === null) return 'null';
  if (Array.isArray(value)) return `an array of ${value.length}`;
  return `a ${typeof value}`;
}

/**
 * What was given, for a message: its kind and a short form, never the whole
 * of an object (it may hold a password); for an option named like a secret
 * (`name`), or text that may carry one (a URL with a password in it), only
 * its kind.
 */
export function shown(value: unknown, name?: string): string {
  if ((name !== undefined && SECRET_OPTION.test(name)) || (typeof value === 'string' && SECRET_TEXT.test(value))) return `${kindOf(value)} (not shown: it may hold a secret)`;
  if (typeof value === 'string') return value.length > 60 ? `a string of ${value.length} characters` : JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'function') return 'a function';
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (typeof value === 'object' && value !== null) return 'an object';
  return String(value);
}

export function refuse(name: string, wanted: string, value: unknown): never {
  throw new InvalidInputError('invalid-config', `${name} must be ${wanted}, got ${shown(value, name)}`);
}

export const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The options argument itself (or a nested option): an object, not null or an array. */
export function checkObject<T>(value: T, name: string, kind = 'an object'): T {
  if (!isObject(value)) refuse(name, kind, value);
  return value;
}

/**
 * The lease given to release, extend or a transaction call: an object with its
 * resource and owner, as acquire returned it. Anything else (null, a token, a
 * resource name) is a caller's mistake, refused by name, never a TypeError.
 */
export function checkLease(lease: unknown, call: string): void {
  if (!isObject(lease) || typeof lease.resource !== 'string' || typeof lease.owner !== 'string') {
    throw new InvalidInputError('precondition', `${call} needs a lease that acquire returned, got ${shown(lease)}`);
  }
}

/** An object (or a function: a class instance or a callable) with each of `methods` as a function. */
export function checkMethods<T>(value: T, name: string, kind: string, methods: readonly string[]): T {
  const wanted = `${kind} (with ${methods.map((m) => `${m}()`).join(', ')})`;
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null || Array.isArray(value)) refuse(name, wanted, value);
  const missing = methods.filter((m) => typeof (value as Record<string, unknown>)[m] !== 'function');
  if (missing.length > 0) throw new InvalidInputError('invalid-config', `${name} must be ${wanted}, got an object without ${missing.map((m) => `${m}()`).join(', ')}`);
  return value;
}

export function checkClock(value: unknown, name = 'clock'): MonotonicClock {
  return checkMethods(value as MonotonicClock, name, 'a MonotonicClock', ['now', 'schedule']);
}

/** A timeout or bound, in whole ms: positive, and within what a timer can wait (Node fires a longer one at once). */
export function checkTimeoutMs(value: unknown, name: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_TTL_MS) refuse(name, `an integer number of ms in [1, ${MAX_TTL_MS}]`, value);
  return value;
}

/** A token counter's start: a bigint in [0, 2^63-1]; 'invalid-token', as the model refuses it (spec 4.3). */
export function checkTokenBase(value: unknown, name = 'tokenBase'): bigint {
  if (typeof value !== 'bigint' || value < 0n || value > MAX_TOKEN) throw new InvalidInputError('invalid-token', `${name} must be a bigint in [0, 2^63-1], got ${shown(value)}`);
  return value;
}

export function checkString(value: unknown, name: string, nonEmpty: boolean): string {
  if (typeof value !== 'string' || (nonEmpty && value === '')) refuse(name, nonEmpty ? 'a non-empty string' : 'a string', value);
  return value;
}

/** A callback option: absent, or a function. */
export function checkOptionalFunction(value: unknown, name: string): void {
  if (value !== undefined && typeof value !== 'function') refuse(name, 'a function', value);
}

/** A store's policy, one of `allowed`. */
export function checkPolicy<P extends StorePolicy>(value: unknown, allowed: readonly P[]): P {
  if (!allowed.includes(value as P)) refuse('policy', `one of ${allowed.join(', ')}`, value);
  return value as P;
}

/** The policies of a store outside the lock's transaction. */
export const FENCES = ['unfenced', 'strict', 'monotonic'] as const;
