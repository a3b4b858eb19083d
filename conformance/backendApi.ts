import type { BackendInstance, BackendUnderTest, Environment } from './adapter.ts';
import type { FaultKind } from './faults.ts';
import { faultKindsOf } from './faults.ts';
import { CLOSE_LIMIT_MS, START_LIMIT_MS, callAdapter, closeLateInstance, readAdapter } from './adapterCall.ts';
import { InvalidInputError } from '../model/errors.ts';
import { isObject, knownOptions } from '../impl/options.ts';
import { CONTRACT_OPTIONS } from './options.ts';
import { asText, messageText } from '../impl/errorText.ts';
import { counted } from './counted.ts';
import { describeThrown } from './thrown.ts';
import { checkDeclaration } from './declaration.ts';

/**
 * A loaded backend checked against the adapter API, and the faults it takes
 * read from what its environment provides.
 */

/** A backend or environment that does not follow the adapter API; the message says what changed and how to port. */
export class AdapterApiError extends Error {
  override readonly name = 'AdapterApiError';
  constructor(message?: string, options?: ErrorOptions) {
    super(messageText(message), options);
  }
}

/** The members of the old 13-member Environment that are fault injectors now. */
const OLD_ENVIRONMENT_METHODS: Readonly<Record<string, string>> = {
  clockStep: 'faults.clockStep: (node, deltaMs) => …',
  clockDrift: 'faults.clockDrift: (target, driftPpm) => …',
  crash: 'faults.crash: { crash(node), restart(node) }',
  restart: 'faults.crash: { crash(node), restart(node) }',
  partition: 'faults.partition: { cut(client, node), heal(client, node) }',
  heal: 'faults.partition: { cut(client, node), heal(client, node) }',
  setDelay: 'faults.delay: (client, ms) => …',
  pause: 'faults.pause: { pause(client), resume(client) }',
  resume: 'faults.pause: { pause(client), resume(client) }',
  killConnection: 'faults.killConnection: (client) => …',
};

const PORTING =
  'What changed: a backend no longer lists its fault kinds, and its environment no longer stubs the faults it cannot inject. ' +
  "The environment is time control (nowMs, advanceTo, runUntil, realTimeAheadMs?, inspect?) plus `faults`, a registry of injectors; what the backend takes is read from the injectors it provides. " +
  'To port: delete the backend\'s `faults: [...]`; in start(), move each fault method of env into env.faults (pause/resume -> faults.pause: { pause, resume }; partition/heal -> faults.partition: { cut, heal }; ' +
  'crash/restart -> faults.crash: { crash, restart }; setDelay -> faults.delay; clockStep, clockDrift, killConnection keep their names) and delete every stub of a fault you cannot inject. ' +
  'See docs/adapter.md, "Porting from the old API".';

/** What a backend declares: a key of neither (a typo such as sessionbound) would be read as absent, and the run judged by the wrong rules. */
const checkCapabilityKeys = knownOptions('capabilities', ['store', 'ttl', 'sessionBound', 'reentrant', 'tokens', 'expiryToleranceMs', 'ttlGrainMs', 'tokensComparedBy']);
const checkContractKeys = knownOptions('contract', CONTRACT_OPTIONS);

/**
 * Throws AdapterApiError unless `value` has the shape of a BackendUnderTest of
 * this API, every value of its declaration one the API takes and none
 * contradicting another (declaration.ts), naming the field.
 */
export function checkBackendApi(value: unknown, where = 'the backend'): asserts value is BackendUnderTest {
  try {
    checkBackendShape(value, where);
  } catch (e) {
    if (e instanceof AdapterApiError) throw e;
    // A getter of the declaration (name, design, capabilities, ...) that throws: the adapter's object, said as a shape error naming where.
    throw new AdapterApiError(`${asText(where)}: reading its declaration threw ${describeThrown(e).split('\n')[0]}`, { cause: e });
  }
}

function checkBackendShape(value: unknown, where: string): void {
  const b = value as Partial<Record<keyof BackendUnderTest | 'faults', unknown>> | null | undefined;
  if (b === null || typeof b !== 'object' || typeof b.name !== 'string' || b.name === '' || typeof b.start !== 'function' || b.design === undefined || b.capabilities === undefined) {
    throw new AdapterApiError(`${asText(where)} must be a BackendUnderTest (name: a non-empty string, design, capabilities, start; contract optional)`);
  }
  if (Array.isArray(b.faults)) {
    throw new AdapterApiError(`${b.name}: written for the old adapter API (BackendUnderTest.faults, a list of fault kinds). ${PORTING}`);
  }
  try {
    if (isObject(b.capabilities)) checkCapabilityKeys(b.capabilities);
    if (isObject(b.contract)) checkContractKeys(b.contract);
    checkDeclaration(b as BackendUnderTest);
  } catch (e) {
    // The adapter's declaration, not a caller's option: said as the API's other shape errors are (the CLI prints it without a stack).
    if (e instanceof InvalidInputError) throw new AdapterApiError(`${b.name}: ${e.message.replace(/^invalid-config: /, '')}`);
    throw e;
  }
}

/** Throws AdapterApiError unless `env` is an Environment of this API (time control plus a `faults` registry). */
export function checkEnvironmentApi(env: unknown, backend: string): asserts env is Environment {
  const raw = env as Record<string, unknown> | null | undefined;
  if (raw === null || typeof raw !== 'object') throw new AdapterApiError(`${backend}: start() returned no environment (instance.env)`);
  // Each member read once, through readAdapter: a getter that throws is the adapter's failure (AdapterError), named.
  const e: Record<string, unknown> = {};
  for (const m of ['nowMs', 'advanceTo', 'runUntil', 'faults', ...Object.keys(OLD_ENVIRONMENT_METHODS)]) e[m] = readAdapter(backend, `reading its environment's ${m}`, () => raw[m]);
  const old = Object.keys(OLD_ENVIRONMENT_METHODS).filter((m) => typeof e[m] === 'function');
  if (old.length > 0) {
    const moves = [...new Set(old.map((m) => OLD_ENVIRONMENT_METHODS[m]!))].join('; ');
    throw new AdapterApiError(`${backend}: its environment has ${old.join(', ')} as methods, as in the old adapter API (now: ${moves}). ${PORTING}`);
  }
  for (const m of ['nowMs', 'advanceTo', 'runUntil'] as const) if (typeof e[m] !== 'function') throw new AdapterApiError(`${backend}: its environment has no ${m}() (time control: nowMs, advanceTo, runUntil)`);
  if (e.faults === null || typeof e.faults !== 'object') throw new AdapterApiError(`${backend}: its environment has no \`faults\` registry (an object of injectors; {} for none). ${PORTING}`);
}

/** Throws AdapterApiError unless start() returned a BackendInstance: `clients` handles (acquire, release, store, clock), an env and a close(). */
export function checkInstanceApi(instance: unknown, backend: string, clients: number): asserts instance is BackendInstance {
  const i = instance as Record<string, unknown> | null | undefined;
  if (i === null || typeof i !== 'object') throw new AdapterApiError(`${backend}: start() returned ${i === null ? 'null' : typeof i}, not a BackendInstance ({ clients, env, close })`);
  if (typeof i.close !== 'function') throw new AdapterApiError(`${backend}: start() returned an instance without close()`);
  if (!Array.isArray(i.clients) || i.clients.length < clients) {
    throw new AdapterApiError(`${backend}: start({ clients: ${clients} }) returned ${Array.isArray(i.clients) ? counted(i.clients.length, 'client') : `clients that are not an array (${typeof i.clients})`}; it must return one LockClient per client`);
  }
  i.clients.forEach((c: unknown, n: number) => {
    const client = c as Record<string, unknown> | null | undefined;
    const missing = client === null || typeof client !== 'object'
      ? ['the client itself']
      : [
          ...(['acquire', 'release'] as const).filter((m) => typeof client[m] !== 'function').map((m) => `${m}()`),
          ...(client.extend !== undefined && typeof client.extend !== 'function' ? ['extend() (a function, or absent)'] : []),
          ...(typeof (client.store as Record<string, unknown> | undefined)?.write !== 'function' || typeof (client.store as Record<string, unknown> | undefined)?.read !== 'function' ? ['store (write, read)'] : []),
          ...(typeof (client.clock as Record<string, unknown> | undefined)?.now !== 'function' ? ['clock (now)'] : []),
        ];
    if (missing.length > 0) throw new AdapterApiError(`${backend}: start() returned client ${n} without ${missing.join(', ')} (a LockClient: acquire, extend?, release, store, clock)`);
  });
}

/** What a backend takes, read from one instance it starts: the fault kinds its environment provides, and whether its clients extend. */
interface Offer {
  readonly faults: readonly FaultKind[];
  readonly extend: boolean;
}

const offers = new WeakMap<BackendUnderTest, Promise<Offer>>();

/** Starts (and closes) one instance, once per backend object. Raises AdapterApiError for an adapter of the old API. */
function offerOf(backend: BackendUnderTest): Promise<Offer> {
  checkBackendApi(backend);
  let offer = offers.get(backend);
  if (offer === undefined) {
    offer = (async () => {
      const instance = await callAdapter(backend.name, 'start()', () => backend.start({ clients: 2, tokenBase: 0n }), START_LIMIT_MS, closeLateInstance(backend.name));
      try {
        checkInstanceApi(instance, backend.name, 2);
        checkEnvironmentApi(instance.env, backend.name);
        const faults = readAdapter(backend.name, "reading its environment's faults", () => faultKindsOf(instance.env.faults));
        return { faults, extend: instance.clients.every((c) => c.extend !== undefined) };
      } finally {
        if (typeof (instance as Partial<BackendInstance> | null)?.close === 'function') await callAdapter(backend.name, 'close() of an instance', () => instance.close(), CLOSE_LIMIT_MS);
      }
    })();
    offers.set(backend, offer);
    // A probe that failed (a start() that threw or was given up on at its bound) is not what the backend takes: the next call probes again.
    const failed = offer;
    failed.catch(() => {
      if (offers.get(backend) === failed) offers.delete(backend);
    });
  }
  return offer;
}

/** The fault kinds a backend takes: those its environment provides. */
export async function offeredFaults(backend: BackendUnderTest): Promise<readonly FaultKind[]> {
  return (await offerOf(backend)).faults;
}

/** Whether the backend's clients have an extend: a library without one (LockClient.extend absent) is sent none. */
export async function offersExtend(backend: BackendUnderTest): Promise<boolean> {
  return (await offerOf(backend)).extend;
}
