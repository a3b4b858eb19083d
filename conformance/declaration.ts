import type { BackendUnderTest } from './adapter.ts';
import { contractDesign } from './consequence.ts';
import type { Design } from '../model/design.ts';
import { hasTtl, isReentrant, isSessionBound, STORE_POLICIES, storeFits, validateDesign } from '../model/design.ts';
import { checkOneOf } from '../model/checks.ts';
import { checkObject, knownOptions, refuse } from '../impl/options.ts';
import { InvalidInputError } from '../model/errors.ts';

/**
 * The values of a backend's declaration (its design, capabilities, contract,
 * options and members), checked before anything starts: each has the type
 * and range the adapter API gives it, and none contradicts another. A value
 * read as something else (the string 'false' is truthy, an unknown token kind
 * reads as the default) would have the runs judged by rules the adapter never
 * declared; others failed later, as a TypeError or the model's error after a
 * server had started. Throws InvalidInputError naming the field; checkBackendApi
 * says it as an AdapterApiError of the backend.
 */

/** The members of a BackendUnderTest (`faults`, the old API's list, is refused on its own before this). */
const checkBackendKeys = knownOptions('the backend', ['name', 'design', 'capabilities', 'contract', 'options', 'start', 'concurrent', 'close', 'misconfigurations']);
const checkFailedExtendKeys = knownOptions('contract.failedExtend', ['lease', 'keys']);
const checkDriftMarginKeys = knownOptions('contract.driftMargin', ['factor', 'fixedMs', 'rounding']);

function optionalBoolean(o: Readonly<Record<string, unknown>>, key: string, name: string): void {
  if (o[key] !== undefined && typeof o[key] !== 'boolean') refuse(`${name}.${key}`, 'a boolean or absent', o[key]);
}

function optionalOneOf(o: Readonly<Record<string, unknown>>, key: string, name: string, allowed: readonly string[]): void {
  if (o[key] !== undefined) checkOneOf(o[key], `${name}.${key}`, allowed);
}

/** An integer in [min, max], or absent. */
function optionalInteger(o: Readonly<Record<string, unknown>>, key: string, name: string, min: number, max: number): void {
  const v = o[key];
  if (v !== undefined && (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max)) refuse(`${name}.${key}`, `an integer in [${min}, ${max}] or absent`, v);
}

function checkCapabilities(value: unknown): void {
  const c = checkObject(value, 'capabilities') as Readonly<Record<string, unknown>>;
  checkOneOf(c.store, 'capabilities.store', STORE_POLICIES);
  for (const key of ['ttl', 'sessionBound', 'reentrant'] as const) if (typeof c[key] !== 'boolean') refuse(`capabilities.${key}`, 'a boolean', c[key]);
  optionalBoolean(c, 'tokens', 'capabilities');
  // The ttl floor the schedules draw from (5 + 2 × tolerance) must stay a ttl the model takes.
  optionalInteger(c, 'expiryToleranceMs', 'capabilities', 0, 2 ** 30 - 3);
  optionalInteger(c, 'ttlGrainMs', 'capabilities', 1, 2 ** 31 - 1);
  optionalOneOf(c, 'tokensComparedBy', 'capabilities', ['value', 'order']);
}

function checkContract(value: unknown): void {
  const c = checkObject(value, 'contract') as Readonly<Record<string, unknown>>;
  optionalOneOf(c, 'deadline', 'contract', ['known', 'none']);
  for (const key of ['clientTimeout', 'denialReasons', 'validatesInput']) optionalBoolean(c, key, 'contract');
  optionalOneOf(c, 'refreshTtl', 'contract', ['given', 'acquired']);
  optionalOneOf(c, 'decidesAt', 'contract', ['quorum', 'every-reply']);
  optionalOneOf(c, 'tokens', 'contract', ['bigint', 'number', 'none']);
  if (c.failedExtend !== undefined) {
    const f = checkObject(c.failedExtend, 'contract.failedExtend', "an object { lease: 'kept' | 'unchanged' | 'dropped' | 'dropped-if-denied', keys: 'kept' | 'deleted' } or absent") as Readonly<Record<string, unknown>>;
    checkFailedExtendKeys(f);
    checkOneOf(f.lease, 'contract.failedExtend.lease', ['kept', 'unchanged', 'dropped', 'dropped-if-denied']);
    checkOneOf(f.keys, 'contract.failedExtend.keys', ['kept', 'deleted']);
  }
  if (c.driftMargin !== undefined) {
    const m = checkObject(c.driftMargin, 'contract.driftMargin', "an object { factor, fixedMs, rounding: 'ceil' | 'round' } or absent") as Readonly<Record<string, unknown>>;
    checkDriftMarginKeys(m);
    // The ranges the model's designs take (a drift factor of 1 or more leaves no validity at all).
    if (typeof m.factor !== 'number' || !(m.factor >= 0 && m.factor < 1)) refuse('contract.driftMargin.factor', 'a number in [0, 1)', m.factor);
    if (typeof m.fixedMs !== 'number' || !Number.isInteger(m.fixedMs) || m.fixedMs < 0 || m.fixedMs > 1000) refuse('contract.driftMargin.fixedMs', 'an integer in [0, 1000]', m.fixedMs);
    checkOneOf(m.rounding, 'contract.driftMargin.rounding', ['ceil', 'round']);
  }
}

/** The library's settings: data recorded in counterexample files as JSON and compared on replay, so JSON's exact values only. */
function checkSettings(value: unknown): void {
  const o = checkObject(value, 'options', 'an object of settings') as Readonly<Record<string, unknown>>;
  for (const [key, v] of Object.entries(o)) {
    if (!(typeof v === 'string' || typeof v === 'boolean' || v === null || (typeof v === 'number' && Number.isFinite(v)))) refuse(`options.${key}`, 'a string, a finite number, a boolean or null', v);
  }
}

function checkMembers(b: Readonly<Record<string, unknown>>): void {
  if (b.close !== undefined && typeof b.close !== 'function') refuse('close', 'a function or absent', b.close);
  if (b.misconfigurations !== undefined && !Array.isArray(b.misconfigurations)) refuse('misconfigurations', 'an array of { what, names, attempt } or absent', b.misconfigurations);
  if (b.concurrent !== undefined) {
    const c = b.concurrent as Readonly<Record<string, unknown>> | null;
    if (typeof c !== 'object' || c === null || typeof c.connect !== 'function' || typeof c.servers !== 'object' || c.servers === null) refuse('concurrent', 'a ConcurrentClient ({ servers, connect(), lockKey?, tokens? }) or absent', b.concurrent);
  }
}

/** Values that are each valid but say opposite things: which one the runs would follow is a guess. */
function checkAgreement(b: BackendUnderTest): void {
  const { capabilities: caps, contract } = b;
  const design: Design = contractDesign(b.design, contract, caps.reentrant);
  validateDesign(design);
  const kind = b.design.kind;
  if (!storeFits(design, caps.store)) refuse('capabilities.store', `a store that fits design ${kind} (transactional with pg-xact only, and pg-xact with it only)`, caps.store);
  const noTokens = caps.tokens === false ? 'capabilities.tokens false' : contract?.tokens === 'none' ? "contract.tokens 'none'" : null;
  if (noTokens !== null && caps.store !== 'unfenced') throw new InvalidInputError('invalid-config', `without fencing tokens (${noTokens}) its store must be 'unfenced', not '${caps.store}': a fenced store needs tokens to judge writes by`);
  if (contract?.tokens !== undefined && (contract.tokens === 'none') === (caps.tokens !== false) && caps.tokens !== undefined) {
    throw new InvalidInputError('invalid-config', `contract.tokens '${contract.tokens}' contradicts capabilities.tokens ${String(caps.tokens)}`);
  }
  const follows: readonly [key: 'ttl' | 'sessionBound' | 'reentrant', value: boolean][] = [['ttl', hasTtl(design)], ['sessionBound', isSessionBound(design)], ['reentrant', isReentrant(design)]];
  for (const [key, value] of follows) {
    if (caps[key] !== value) throw new InvalidInputError('invalid-config', `capabilities.${key} ${String(caps[key])} contradicts its design ${kind}, whose locks ${key === 'ttl' ? (value ? 'carry' : 'carry no') + ' ttl' : key === 'sessionBound' ? (value ? 'live' : 'do not live') + ' with the session' : value ? 'stack' : 'do not stack'}`);
  }
}

/** Throws InvalidInputError naming the first field of `b` (shaped as a BackendUnderTest) whose value the adapter API does not take. */
export function checkDeclaration(b: BackendUnderTest): void {
  const members = b as unknown as Readonly<Record<string, unknown>>;
  checkBackendKeys(members);
  validateDesign(b.design);
  checkCapabilities(b.capabilities);
  if (b.contract !== undefined) checkContract(b.contract);
  if (b.options !== undefined) checkSettings(b.options);
  checkMembers(members);
  checkAgreement(b);
}
