import { PROPERTY_IDS } from '../model/properties.ts';
import { checkCommands } from '../model/checks.ts';
import { checkObject, checkOptionalFunction, checkString, checkTimeoutMs, checkTokenBase, knownOptions, refuse, shown } from '../impl/options.ts';
import type { Command } from '../model/command.ts';
import { InvalidInputError } from '../model/errors.ts';
import { CONSEQUENCE_KINDS } from './consequence.ts';
import { FAULT_KINDS, isFaultKind } from './faults.ts';
import { RESOURCE_NAMES } from './generate.ts';

/**
 * The options of a conformance check (checkConformance, conformanceSuite),
 * checked before any instance starts: InvalidInputError('invalid-config')
 * naming the option, where a bad one would otherwise fail deep inside
 * fast-check, or run no schedule at all and pass.
 */

/** `options[name]`, when given (or always, if `required`), an integer in [min, max]. */
export function integerIn(options: object, name: string, min: number, max: number, required = false): void {
  const value = (options as Readonly<Record<string, unknown>>)[name];
  if ((value !== undefined || required) && (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max)) refuse(name, `an integer in [${min}, ${max}]`, value);
}

function listOf(value: unknown, name: string, known: readonly string[], isKnown: (v: unknown) => boolean = (v) => known.includes(v as string)): void {
  if (!Array.isArray(value)) refuse(name, `an array of ${known.join(', ')}`, value);
  value.forEach((v, i) => {
    if (!isKnown(v)) refuse(`${name}[${i}]`, `one of ${known.join(', ')}`, v);
  });
}

/** What checkConformance and conformanceSuite both take. */
const RUN_OPTIONS = ['runs', 'seed', 'path', 'faults', 'maxCommands', 'clients', 'resources'];
const checkCheckKeys = knownOptions('checkConformance options', [...RUN_OPTIONS, 'failOn', 'timelineFile', 'onRun', 'clock', 'modelSeeds', 'shrinkLimitMs', 'minimise', 'onMinimise', 'schedule']);
const checkMinimiseKeys = knownOptions('minimise', ['maxReplays', 'limitMs']);
const checkScheduleKeys = knownOptions('schedule', ['commands', 'tokenBase', 'requestTimeoutMs']);
const checkSuiteKeys = knownOptions('conformanceSuite options', [...RUN_OPTIONS, 'timelineDir', 'timeoutMs']);
const checkFailOnKeys = knownOptions('failOn', ['properties', 'consequences']);
const ADAPTER_OPTIONS = { redis: ['name', 'design', 'contract', 'options', 'capabilities', 'lockKey', 'client'], pg: ['name', 'contract', 'options', 'capabilities', 'client'] } as const;
const checkAdapterKeys = { redis: knownOptions('adapter', ADAPTER_OPTIONS.redis), pg: knownOptions('adapter', ADAPTER_OPTIONS.pg) } as const;
/** The CLI hands one choice ({ redis?, pg? }) to every adapter module: each kind takes the other's URL too (and ignores it). */
const checkChoiceKeys = { redis: knownOptions('the server choice', ['redis', 'pg', 'cluster']), pg: knownOptions('the server choice', ['pg', 'redis', 'target']) } as const;
/** The keys of a LibraryContract. */
export const CONTRACT_OPTIONS = ['deadline', 'clientTimeout', 'decidesAt', 'refreshTtl', 'failedExtend', 'denialReasons', 'tokens', 'validatesInput', 'driftMargin'];
const checkContractKeys = knownOptions('adapter.contract', CONTRACT_OPTIONS);
const checkCapabilityKeys = { redis: knownOptions('adapter.capabilities', ['reentrant', 'ttl', 'tokens']), pg: knownOptions('adapter.capabilities', ['reentrant', 'tokens']) } as const;

/** What checkConformance and conformanceSuite both take; `what` names the options object. */
export function checkRunOptions(options: object, what: string): void {
  const o = checkObject(options, what) as Readonly<Record<string, unknown>>;
  integerIn(o, 'runs', 1, Number.MAX_SAFE_INTEGER);
  integerIn(o, 'seed', Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
  if (o.path !== undefined) {
    // What a failure prints (and the CLI's --path takes): fast-check's own refusal of anything else was a bare Error.
    if (typeof o.path !== 'string' || !/^\d{1,9}(:\d{1,9})*$/.test(o.path)) refuse('path', 'a replay path like 12:0:3, as a failure prints it', o.path);
    // Without the seed it was found with, the path names a case of a random seed: another schedule, or none.
    if (o.seed === undefined) refuse('path', 'given with the seed it was found with (path needs seed)', o.path);
  }
  if (o.faults !== undefined) listOf(o.faults, 'faults', FAULT_KINDS, isFaultKind);
  integerIn(o, 'maxCommands', 1, Number.MAX_SAFE_INTEGER);
  integerIn(o, 'clients', 1, 16);
  integerIn(o, 'resources', 1, RESOURCE_NAMES.length);
}

/** checkConformance's own options, beyond checkRunOptions. */
export function checkCheckOptions(options: object): void {
  checkRunOptions(options, 'checkConformance options');
  checkCheckKeys(options);
  const o = options as Readonly<Record<string, unknown>>;
  const failOn = o.failOn;
  if (failOn !== undefined && failOn !== 'conformance-failure' && failOn !== 'any') {
    const f = failOn as { properties?: unknown; consequences?: unknown } | null;
    if (typeof f !== 'object' || f === null) refuse('failOn', "'conformance-failure', 'any', { properties } or { consequences }", failOn);
    checkFailOnKeys(f);
    if ((f.properties === undefined) === (f.consequences === undefined)) refuse('failOn', "'conformance-failure', 'any', { properties } or { consequences }", failOn);
    if (f.properties !== undefined) listOf(f.properties, 'failOn.properties', PROPERTY_IDS);
    else listOf(f.consequences, 'failOn.consequences', CONSEQUENCE_KINDS);
  }
  if (o.timelineFile !== undefined) checkString(o.timelineFile, 'timelineFile', true);
  checkOptionalFunction(o.onRun, 'onRun');
  checkOptionalFunction(o.clock, 'clock');
  if (o.modelSeeds !== undefined && typeof o.modelSeeds !== 'boolean') refuse('modelSeeds', 'a boolean', o.modelSeeds);
  if (o.shrinkLimitMs !== undefined && !(typeof o.shrinkLimitMs === 'number' && o.shrinkLimitMs >= 0 && o.shrinkLimitMs < Number.POSITIVE_INFINITY)) refuse('shrinkLimitMs', 'a non-negative number of ms', o.shrinkLimitMs);
  if (o.minimise !== undefined && o.minimise !== false) {
    const m = checkObject(o.minimise, 'minimise', 'false or { maxReplays?, limitMs? }') as Readonly<Record<string, unknown>>;
    checkMinimiseKeys(m);
    integerIn(m, 'maxReplays', 0, Number.MAX_SAFE_INTEGER);
    if (m.limitMs !== undefined && !(typeof m.limitMs === 'number' && m.limitMs >= 0 && m.limitMs < Number.POSITIVE_INFINITY)) refuse('minimise.limitMs', 'a non-negative number of ms', m.limitMs);
  }
  checkOptionalFunction(o.onMinimise, 'onMinimise');
  if (o.schedule !== undefined) {
    const s = checkObject(o.schedule, 'schedule', 'a { commands, tokenBase, requestTimeoutMs? } (CheckFailure.schedule)') as Readonly<Record<string, unknown>>;
    checkScheduleKeys(s);
    checkCommands(s.commands, 'schedule.commands');
    if (typeof s.tokenBase !== 'bigint' || s.tokenBase < 0n || s.tokenBase >= 2n ** 63n) refuse('schedule.tokenBase', 'a bigint in [0, 2^63)', s.tokenBase);
    if (s.requestTimeoutMs !== undefined) integerIn(s, 'requestTimeoutMs', 1, 2 ** 31 - 1);
    if (o.path !== undefined) refuse('path', 'absent with schedule (a schedule is replayed as it is, a path names a generated case)', o.path);
  }
}

/** conformanceSuite's own options, beyond checkRunOptions. */
export function checkSuiteOptions(options: object): void {
  checkRunOptions(options, 'conformanceSuite options');
  checkSuiteKeys(options);
  const o = options as Readonly<Record<string, unknown>>;
  if (o.timelineDir !== undefined) checkString(o.timelineDir, 'timelineDir', true);
  integerIn(o, 'timeoutMs', 1, 2 ** 31 - 1);
}

/**
 * The adapter and server choice of redisLibraryBackend and
 * postgresLibraryBackend: an adapter with a name and a client(), and where
 * the servers are (URLs as strings); `urls` names the choice's URL option.
 */
export function checkLibraryAdapter(adapter: object, choice: object, urls: 'redis' | 'pg'): void {
  const a = checkObject(adapter, 'adapter') as Readonly<Record<string, unknown>>;
  checkAdapterKeys[urls](a);
  if (a.contract !== undefined) checkContractKeys(checkObject(a.contract, 'adapter.contract') as object);
  if (a.capabilities !== undefined) checkCapabilityKeys[urls](checkObject(a.capabilities, 'adapter.capabilities') as object);
  checkString(a.name, 'adapter.name', true);
  if (typeof a.client !== 'function') refuse('adapter.client', 'a function', a.client);
  checkOptionalFunction(a.lockKey, 'adapter.lockKey');
  const c = checkObject(choice, 'the server choice') as Readonly<Record<string, unknown>>;
  checkChoiceKeys[urls](c);
  const given = c[urls];
  if (given === undefined) return;
  if (urls === 'pg') checkString(given, 'pg', true);
  else if (!Array.isArray(given) || given.length === 0) refuse('redis', 'a non-empty array of redis:// URLs', given);
  // Array.from: every index, holes included (forEach skips them).
  else Array.from(given as unknown[]).forEach((url, i) => checkString(url, `redis[${i}]`, true));
}

/** runLockstep's options: the instance's size, where its tokens start, and the real-time bounds on the adapter's calls. */
export function checkLockstepOptions(options: object): void {
  const o = options as Readonly<Record<string, unknown>>;
  integerIn(o, 'clients', 1, 16, true);
  checkTokenBase(o.tokenBase, 'tokenBase');
  if (o.continueAfterViolation !== undefined && typeof o.continueAfterViolation !== 'boolean') refuse('continueAfterViolation', 'a boolean', o.continueAfterViolation);
  // A bound that is no number (NaN) made a real-time timer of 1 ms: the adapter's call was cut at once.
  for (const bound of ['requestTimeoutMs', 'closeLimitMs', 'startLimitMs', 'environmentLimitMs']) if (o[bound] !== undefined) checkTimeoutMs(o[bound], bound);
}

/** Every command kind of the model's language (model/command.ts), exhaustive by its type. */
const COMMAND_KINDS: Readonly<Record<Command['kind'], true>> = {
  acquire: true, extend: true, release: true, write: true, read: true,
  advance: true, 'clock-step': true, 'clock-drift': true, crash: true, restart: true, partition: true, heal: true,
  'node-delay': true, pause: true, resume: true, deliver: true, 'kill-connection': true, replicate: true,
};

/**
 * runLockstep's commands: a command the model never enables (an unknown
 * kind, a client or node the run does not have) is skipped as a generated
 * one the state does not allow, so a schedule of them passed having run
 * nothing. The rest of each command the model checks as it steps.
 */
export function checkRunCommands(commands: unknown, clients: number, nodes: number): void {
  checkCommands(commands, 'commands');
  const index = (value: unknown, name: string, count: number, what: string): void => {
    if (value !== undefined && (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value >= count)) refuse(name, `a ${what} index in [0, ${count - 1}]`, value);
  };
  const check = (c: Readonly<Record<string, unknown>>, name: string): void => {
    if (!Object.hasOwn(COMMAND_KINDS, c.kind as string)) throw new InvalidInputError('invalid-config', `${name}: unknown command kind ${shown(c.kind)} (known: ${Object.keys(COMMAND_KINDS).join(', ')})`);
    index(c.client, `${name}.client`, clients, 'client');
    index(c.node, `${name}.node`, nodes, 'node');
    const target = c.target as Readonly<Record<string, unknown>> | undefined;
    if (typeof target === 'object' && target !== null) {
      index(target.client, `${name}.target.client`, clients, 'client');
      index(target.node, `${name}.target.node`, nodes, 'node');
    }
    if (typeof c.inFlight === 'object' && c.inFlight !== null) check(c.inFlight as Readonly<Record<string, unknown>>, `${name}.inFlight`);
  };
  (commands as readonly Readonly<Record<string, unknown>>[]).forEach((c, i) => check(c, `commands[${i}]`));
}
