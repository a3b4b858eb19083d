import { quotedValue } from './shownText.ts';
/**
 * Typed errors of the model. A command the model rejects changes nothing:
 * every step function validates before it builds a new state.
 */
export type ModelErrorCode =
  | 'invalid-ttl'
  | 'invalid-resource'
  | 'invalid-token'
  | 'invalid-duration'
  | 'invalid-config'
  | 'unknown-client'
  | 'unknown-node'
  | 'unsupported-operation'
  | 'precondition';

/**
 * Input refused before anything changed (docs/errors.md): `code` says
 * which rule (an invalid ttl, resource, token, duration or option; an
 * unknown client or node; an unsupported operation; a precondition), and
 * the message names the input and what was given.
 */
export class InvalidInputError extends Error {
  override readonly name = 'InvalidInputError';
  constructor(
    readonly code: ModelErrorCode,
    message: string,
  ) {
    // String(): a Symbol (or any value) given by mistake still makes an error, not a TypeError.
    super(`${String(code)}: ${String(message)}`);
  }
}

/**
 * What was given, for a message: its kind and a short form, never the whole
 * of an object, and never a throw (a Symbol, an object without a prototype).
 * A string is quoted with the characters JSON leaves raw escaped too (C1,
 * bidirectional controls, U+2028/U+2029): a message may reach a terminal or a
 * report that does not pass through lockcheck's filter.
 */
export function shown(value: unknown): string {
  if (typeof value === 'string') return value.length > 60 ? `a string of ${value.length} characters` : quotedValue(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'function') return 'a function';
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (typeof value === 'object' && value !== null) return 'an object';
  return String(value);
}

/** The longest ttl or duration, in ms (2^31-1, about 24.8 days). */
export const MAX_TTL_MS = 2 ** 31 - 1;
/** The latest (and, negated, earliest) time in ms the model takes or reaches: 2^53-1, past which a +1 no longer moves a number (a clock's search would not end). */
export const MAX_TIME_MS = Number.MAX_SAFE_INTEGER;
/** The longest resource name, in UTF-16 code units. */
export const MAX_RESOURCE_LENGTH = 256;
/** Tokens are exact up to 2^63-1 (a signed 64-bit integer, as Redis and PostgreSQL keep them). */
export const MAX_TOKEN = 2n ** 63n - 1n;

/** `ttlMs` if it is an integer number of ms in [1, MAX_TTL_MS]; else throws InvalidInputError('invalid-ttl'). */
export function checkTtl(ttlMs: unknown): number {
  if (typeof ttlMs !== 'number' || !Number.isInteger(ttlMs) || ttlMs < 1 || ttlMs > MAX_TTL_MS) {
    throw new InvalidInputError('invalid-ttl', `ttl must be an integer number of ms in [1, ${MAX_TTL_MS}], got ${shown(ttlMs)}`);
  }
  return ttlMs;
}

/** `ms` if it is an integer number of ms in [0, MAX_TTL_MS]; else throws InvalidInputError('invalid-duration') naming `what`. */
export function checkDuration(ms: unknown, what: string): number {
  if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 0 || ms > MAX_TTL_MS) {
    throw new InvalidInputError('invalid-duration', `${typeof what === 'string' ? what : shown(what)} must be an integer number of ms in [0, ${MAX_TTL_MS}], got ${shown(ms)}`);
  }
  return ms;
}

/** How many attempts an acquire makes after the first; absent means none. */
export function checkRetries(retries: unknown): number {
  const n = retries ?? 0;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > 100) throw new InvalidInputError('precondition', `retries must be an integer in [0, 100], got ${shown(n)}`);
  return n;
}

/** A UTF-16 surrogate with no partner: it has no UTF-8 form, so two such names would become the same bytes on the wire. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Text every backend keeps as given: well-formed Unicode (no lone surrogate) without NUL. */
export function isKeepableText(text: unknown): boolean {
  return typeof text === 'string' && !text.includes('\0') && !LONE_SURROGATE.test(text);
}

/** `resource` if it is a non-empty string of at most MAX_RESOURCE_LENGTH, well-formed Unicode, without NUL; else throws InvalidInputError('invalid-resource'). */
export function checkResource(resource: unknown): string {
  if (typeof resource !== 'string' || resource.length === 0 || resource.length > MAX_RESOURCE_LENGTH) {
    throw new InvalidInputError('invalid-resource', `resource must be a non-empty string of at most ${MAX_RESOURCE_LENGTH} characters`);
  }
  // NUL: PostgreSQL text cannot hold it.
  if (!isKeepableText(resource)) {
    throw new InvalidInputError('invalid-resource', 'resource must be well-formed Unicode without NUL characters');
  }
  return resource;
}

/**
 * `value` if it is a string of well-formed Unicode without NUL; else throws
 * InvalidInputError('precondition'). A store value is kept as UTF-8 text on
 * every backend: a lone surrogate has no UTF-8 form (Redis and PostgreSQL
 * read it back as U+FFFD, a different value), and PostgreSQL text cannot
 * hold NUL; refused before anything is sent, on every backend alike.
 */
export function checkValue(value: unknown): string {
  if (typeof value !== 'string') throw new InvalidInputError('precondition', 'value must be a string');
  if (!isKeepableText(value)) throw new InvalidInputError('precondition', 'value must be well-formed Unicode without NUL characters');
  return value;
}

/** `token` if it is a bigint in [0, MAX_TOKEN]; else throws InvalidInputError('invalid-token'). */
export function checkToken(token: unknown): bigint {
  if (typeof token !== 'bigint' || token < 0n || token > MAX_TOKEN) {
    throw new InvalidInputError('invalid-token', `token must be a bigint in [0, 2^63-1], got ${typeof token === 'bigint' ? token.toString() : typeof token}`);
  }
  return token;
}
