import type { StorePolicy } from '../model/design.ts';
import { checkResource, InvalidInputError, isKeepableText, MAX_RESOURCE_LENGTH, MAX_TOKEN, MAX_TTL_MS, shown as shownValue } from '../model/errors.ts';
import type { MonotonicClock } from './clock.ts';
import { aTypeOf } from './errorText.ts';
import type { Lease } from './lease.ts';
import { quotedValue } from '../model/shownText.ts';

/**
 * Checks of the options the public constructors and factories take: each
 * throws InvalidInputError('invalid-config') naming the option and what was
 * given, at construction, rather than a TypeError deep inside a later call.
 */

/** Options whose value is a secret, whatever its type: a message gives only its kind. */
const SECRET_OPTION = /pass|pwd|secret|credential|api.?key|private.?key|connection.?string/i;
/**
 * Text that may carry a secret: a URL with user info (postgres://user:password@...,
 * a '/' in the password included), user:password@host without a scheme, or a
 * secret-named key with a value.
 */
const SECRET_TEXT = /:\/\/\S*@|[^\s/@:]+:[^\s@]*@|(?:pass|secret|credential|api.?key|private.?key)\w*\s*[=:]/i;
/** Secret-named words, for text too long to search with SECRET_TEXT. */
const SECRET_WORD = /pass|secret|credential|api.?key|private.?key/i;
/** The longest text SECRET_TEXT searches: its user-info branch rescans to the end from every position, so time grew with the square of the length (21 s for 200,000 characters). */
const SEARCHED_MAX = 256;

/** Whether `text` may carry a secret (SECRET_TEXT); a longer text, by its `@` or a secret-named word, in linear time. */
function mayHoldSecret(text: string): boolean {
  return text.length <= SEARCHED_MAX ? SECRET_TEXT.test(text) : text.includes('@') || SECRET_WORD.test(text);
}

/** A value's kind alone: a string, a number, ... */
function kindOf(value: unknown): string {
  if (typeof value === 'string') return `a string of ${value.length} characters`;
  if (value === null) return 'null';
  if (Array.isArray(value)) return `an array of ${value.length}`;
  return value === undefined ? 'undefined' : aTypeOf(value);
}

/**
 * What was given, for a message: its kind and a short form, never the whole
 * of an object (it may hold a password); for an option named like a secret
 * (`name`), or text that may carry one (a URL with a password in it), only
 * its kind.
 */
export function shown(value: unknown, name?: string): string {
  if ((name !== undefined && SECRET_OPTION.test(name)) || (typeof value === 'string' && mayHoldSecret(value))) return `${kindOf(value)} (not shown: it may hold a secret)`;
  return shownValue(value);
}

/**
 * A host list or connect string that was refused (etcd `hosts`, ZooKeeper's
 * `connectString`), for a message: one with user info (an `@`) only by its
 * kind, else with each port that is not a number hidden (`app:s3cret`, a
 * user name and password typed as host:port), and its control characters
 * escaped. A user may type there what belonged in `auth`.
 */
export function shownHosts(value: unknown): string {
  if (typeof value !== 'string') return shown(value);
  if (value.length > 60 || value.includes('@') || SECRET_TEXT.test(value)) return `${kindOf(value)} (not shown: it may hold a secret)`;
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(value)?.[0] ?? '';
  const rest = value.slice(scheme.length).replace(/\[[^\]]*\]|:([^,/:[\]]*)/g, (part: string, port: string | undefined) => {
    if (port === undefined) return /^\[[0-9A-Fa-f:.]*\]$/.test(part) ? part : '[<redacted>]';
    return /^\d{0,5}$/.test(port) ? part : ':<redacted>';
  });
  return quotedValue(scheme + rest);
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
  if (!isObject(lease) || typeof lease.resource !== 'string' || typeof lease.owner !== 'string' || lease.owner === '') {
    throw new InvalidInputError('precondition', `${call} needs a lease that acquire returned, got ${shown(lease)}`);
  }
  // No acquire grants a resource acquire refuses (InvalidInputError('invalid-resource'), as acquire says), or an empty owner:
  // such a lease was made by hand, and sending it only came back as a release that did not happen (false), an unknown outcome.
  checkResource(lease.resource);
}

/**
 * What a lease the lock did not grant names, checked before it is sent: its
 * resource as acquire takes one, and its fencing token, a bigint in
 * [0, 2^63-1] as every lock's grants carry. Returns the token.
 */
export function grantNamed(lease: Lease, call: string): bigint {
  checkResource(lease.resource);
  if (typeof lease.token !== 'bigint' || lease.token < 0n || lease.token > MAX_TOKEN) throw new InvalidInputError('precondition', `${call} needs a lease that acquire returned (its token a bigint in [0, 2^63-1]), got ${shown(lease)}`);
  return lease.token;
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

/**
 * A credential (a user name, a password, ZooKeeper's `auth`): a string with
 * a UTF-8 form, as it goes on the wire. A lone surrogate has none: it went
 * out as U+FFFD, so two passwords that differ only there were one identity
 * (a ZooKeeper digest identity wrote a znode only the other's ACL allowed).
 * Never shown when its name is a secret's.
 */
export function checkCredential(value: unknown, name: string, nonEmpty: boolean): string {
  const text = checkString(value, name, nonEmpty);
  if (/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(text)) refuse(name, 'well-formed Unicode (a lone surrogate has no UTF-8 form: it would go out as U+FFFD)', value);
  return text;
}

/** The longest key prefix (Redis, etcd) or ZooKeeper root, in UTF-16 code units: as long as a resource name. */
export const MAX_PREFIX_LENGTH = MAX_RESOURCE_LENGTH;

/**
 * A key prefix (Redis, etcd) or a ZooKeeper root: a string of at most
 * MAX_PREFIX_LENGTH, well-formed Unicode without NUL, as a resource name is.
 * A lone surrogate has no UTF-8 form, so two prefixes that differ only there
 * were the same bytes on the wire (one lock's key was the other's: 'held');
 * a prefix too long for a request read as an outage on every call.
 */
export function checkPrefix(value: unknown, name: string): string {
  if (typeof value !== 'string' || value.length > MAX_PREFIX_LENGTH || !isKeepableText(value)) {
    refuse(name, `a string of at most ${MAX_PREFIX_LENGTH} characters, well-formed Unicode without NUL`, value);
  }
  return value;
}

/** The longest owner value a LeaseNode takes, in UTF-16 code units (the lock's own are 32 or 36). */
export const MAX_OWNER_LENGTH = MAX_RESOURCE_LENGTH;

/**
 * A LeaseNode call's `owner`: a non-empty string of at most
 * MAX_OWNER_LENGTH, well-formed Unicode without NUL (as a resource name).
 * Anything else was a TypeError from inside the driver, or a value two
 * owners could share on the wire (a lone surrogate).
 */
export function checkOwner(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_OWNER_LENGTH || !isKeepableText(value)) {
    refuse('owner', `a non-empty string of at most ${MAX_OWNER_LENGTH} characters, well-formed Unicode without NUL`, value);
  }
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

/**
 * A checker of an options object's keys: a key not in `known` (a typo such
 * as `retry` for `retries`, or an option of another backend) would
 * otherwise be ignored and the default run in its place, unnoticed. Throws
 * InvalidInputError('invalid-config') naming the object (`name`), each
 * unknown key (with the closest known one, when one is near) and the known
 * ones. Only own keys count, whatever their value; a known key whose value is
 * undefined passes (it means the default). Built once per object kind: the
 * check is a loop over the keys given, cheap enough for every acquire.
 * `as` names the object in place of `name` (an element of a list: `auth[1]`).
 */
export function knownOptions(name: string, known: readonly string[], listed: readonly string[] = known): (options: object, as?: string) => void {
  const set = new Set(known);
  return (options, as = name) => {
    let unknown: string[] | undefined;
    for (const key in options) if (!set.has(key) && Object.hasOwn(options, key)) (unknown ??= []).push(key);
    if (unknown !== undefined) refuseUnknown(as, unknown, listed);
  };
}

function refuseUnknown(name: string, unknown: readonly string[], known: readonly string[]): never {
  const each = unknown.map((key) => {
    const near = closest(key, known);
    return `${shownKey(key)}${near === undefined ? '' : ` (did you mean ${near}?)`}`;
  });
  const knownText = known.length === 0 ? 'it takes none' : `known: ${known.join(', ')}`;
  throw new InvalidInputError('invalid-config', `${name}: unknown option${unknown.length > 1 ? 's' : ''} ${each.join(', ')}; ${knownText}`);
}

/** A key as given, quoted; a very long one cut short (it is the caller's text, not a secret: values are never shown). */
function shownKey(key: string): string {
  return JSON.stringify(key.length > 60 ? `${key.slice(0, 57)}...` : key);
}

/**
 * The known key nearest `key` by edit distance (case ignored), when near
 * enough to be a typo: within 40 % of the longer name (rounded), or one
 * name the start of the other (`ttl` for `ttlMs`). Ties go to the first in
 * `known`.
 */
export function closest(key: string, known: readonly string[]): string | undefined {
  const k = key.toLowerCase();
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of known) {
    const c = candidate.toLowerCase();
    const distance = editDistance(k, c);
    const near = distance <= Math.max(1, Math.round(0.4 * Math.max(k.length, c.length))) || (k.length >= 3 && (c.startsWith(k) || k.startsWith(c)));
    if (near && distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

/** Levenshtein distance with adjacent transpositions (optimal string alignment). */
function editDistance(a: string, b: string): number {
  if (a.length > 200 || b.length > 200) return Number.POSITIVE_INFINITY;
  let before = new Array<number>(b.length + 1).fill(0);
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, before[j - 2]! + 1);
      current.push(d);
    }
    before = previous;
    previous = current;
  }
  return previous[b.length]!;
}
