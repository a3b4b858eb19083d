import { EnvironmentError } from './env/faketime.ts';
import { TimingError } from './sim/time.ts';
import { valueWithin } from './realTimeLimit.ts';
import type { Environment } from './adapter.ts';
import type { FaultInjectors } from './faults.ts';
import { asText } from '../impl/errorText.ts';

/**
 * The adapter's own code failed in one of the calls the runner makes into it
 * outside a schedule's operations (its factory, start(), close(), warnings()):
 * it threw, or never settled within its bound. The message names the adapter
 * and the call; the adapter's error is the `cause`. (An operation that throws
 * or hangs is judged instead, as the model judges an acquire that fails.)
 */
export class AdapterError extends Error {
  override readonly name = 'AdapterError';
  constructor(
    readonly backend: string,
    readonly call: string,
    what: string,
    options?: ErrorOptions,
  ) {
    super(`adapter ${asText(backend)}: ${asText(call)} ${asText(what)}`, options);
  }
}

/** How long start() may take: starting servers under load takes seconds; a start that never settles must still end. */
export const START_LIMIT_MS = 180_000;

/** How long the runner waits for a close(): a teardown that never ends must not hold the check. */
export const CLOSE_LIMIT_MS = 60_000;

/**
 * How long one call into the run's environment may take (a fault's
 * injection, inspect(), prepareRestart()): a server restarted under load
 * takes seconds; a call that never settles must still end the check.
 */
export const ENVIRONMENT_LIMIT_MS = 120_000;

/** Errors that already say what failed and whose they are: passed on as they are. */
function saysWhatFailed(e: unknown): boolean {
  return e instanceof AdapterError || e instanceof EnvironmentError || e instanceof TimingError;
}

function describe(e: unknown): string {
  if (e instanceof Error) return `${e.name}: ${e.message.split('\n')[0]}`;
  try {
    return JSON.stringify(e) ?? String(e);
  } catch {
    return String(e);
  }
}

/**
 * Runs `work` (a call into the adapter) at most `limitMs` of real time: a
 * throw, synchronous or not, becomes an AdapterError naming `backend` and
 * `call`; a call still pending at the limit rejects with one (the timer is
 * a real one, and keeps the process alive until then: a promise that never
 * settles must not let the process end as if all went well). `late` gets
 * what a call settles with after its limit (an instance to close: what it
 * started must not be left running).
 */
export async function callAdapter<T>(backend: string, call: string, work: () => T | Promise<T>, limitMs: number, late?: (value: T) => unknown): Promise<T> {
  // Called at once, not a tick later: a start() that queues for its servers takes its place in the queue before the caller's next step.
  let started: Promise<T>;
  try {
    started = Promise.resolve(work());
  } catch (e) {
    started = Promise.reject(e);
  }
  let result;
  const waiting = slowCallNotices(backend, call, limitMs);
  try {
    result = await valueWithin(started, limitMs);
  } catch (e) {
    if (saysWhatFailed(e)) throw e;
    throw new AdapterError(backend, call, `threw ${describe(e)}`, { cause: e });
  } finally {
    waiting?.stop();
  }
  if (!result.done) {
    if (late !== undefined) started.then(late).catch(() => undefined);
    throw new AdapterError(backend, call, `had not settled after ${limitMs} ms of real time (a promise of the adapter that never settles?)`);
  }
  return result.value;
}

/** Told of an adapter call still pending: the adapter, the call, the real time waited so far and the limit, in ms. */
export type SlowCallListener = (backend: string, call: string, waitedMs: number, limitMs: number) => void;

let slowCallListener: SlowCallListener | null = null;

/** The first notice of a call still pending comes after this much real time, then one every SLOW_CALL_EVERY_MS. */
export const SLOW_CALL_FIRST_MS = 10_000;
const SLOW_CALL_EVERY_MS = 30_000;

/**
 * Sets (or with null, clears) who is told of an adapter call (start(), a
 * factory, close()) still pending after SLOW_CALL_FIRST_MS, and every 30 s
 * after: the CLI says so on stderr, so that a start() that never settles is
 * not a silent wait of START_LIMIT_MS. A library caller is told nothing
 * unless it sets one.
 */
export function onSlowAdapterCall(listener: SlowCallListener | null): void {
  slowCallListener = listener;
}

function slowCallNotices(backend: string, call: string, limitMs: number): { stop(): void } | null {
  const listener = slowCallListener;
  if (listener === null || limitMs <= SLOW_CALL_FIRST_MS) return null;
  const since = performance.now();
  let timer: NodeJS.Timeout;
  const next = (delayMs: number): void => {
    timer = setTimeout(() => {
      listener(backend, call, performance.now() - since, limitMs);
      next(SLOW_CALL_EVERY_MS);
    }, delayMs);
    // The call's own bound keeps the process alive; a notice never does.
    timer.unref();
  };
  next(SLOW_CALL_FIRST_MS);
  return { stop: () => clearTimeout(timer) };
}

/** Closes an instance start() handed over after its bound, if it is one: nobody else will (its failure is nobody's to report). */
export function closeLateInstance(backend: string): (instance: unknown) => Promise<void> {
  return async (instance) => {
    const i = instance as { close?: unknown } | null;
    if (typeof i === 'object' && i !== null && typeof i.close === 'function') await callAdapter(backend, 'close() of an instance start() handed over late', () => (i.close as () => unknown)(), CLOSE_LIMIT_MS);
  };
}

/** Closes a backend a factory (an adapter module's default export) handed over after its bound, if it has a close hook: nobody else will. */
export function closeLateBackend(backend: string): (value: unknown) => Promise<void> {
  return async (value) => {
    const b = value as { close?: unknown } | null;
    if (typeof b === 'object' && b !== null && typeof b.close === 'function') await callAdapter(backend, 'close hook of a backend its factory handed over late', () => (b.close as () => unknown).call(b), CLOSE_LIMIT_MS);
  };
}

/**
 * `read()` (a read of the adapter's objects: a getter, a method such as a
 * client's clock.now()), with a throw that does not already say whose it is
 * made an AdapterError naming `backend` and `what`, the throw its cause.
 */
export function readAdapter<T>(backend: string, what: string, read: () => T): T {
  try {
    return read();
  } catch (e) {
    if (saysWhatFailed(e)) throw e;
    throw new AdapterError(backend, what, `threw ${describe(e)}`, { cause: e });
  }
}

/** Calls the backend's close hook, if it has one, bounded as a close() is. */
export async function closeBackend(backend: { readonly name: string; close?(): Promise<void> }): Promise<void> {
  if (backend.close !== undefined) await callAdapter(backend.name, "close() (the backend's close hook)", () => backend.close!(), CLOSE_LIMIT_MS);
}

/** The calls into a run's environment that the runner makes outside time control, each bounded (boundedCalls). */
export interface BoundedCalls {
  readonly faults: FaultInjectors;
  readonly inspect?: Environment['inspect'];
}

/**
 * `env`'s fault injectors and inspect(), each bounded to `limitMs` of real
 * time: a call still pending then rejects with an AdapterError naming it;
 * what a call throws is passed on as it is (the runner judges an
 * environment's failures). The adapter's objects are not changed; methods
 * keep their `this`.
 */
export function boundedCalls(backend: string, env: Environment, limitMs: number): BoundedCalls {
  const bounded = <A extends unknown[], R>(call: string, f: (...args: A) => R | Promise<R>, self: unknown) =>
    async (...args: A): Promise<R> => {
      // Called at once, not a tick later: an injection must take effect before the runner's next step.
      const result = await valueWithin(Promise.resolve(f.apply(self, args)), limitMs);
      if (!result.done) throw new AdapterError(backend, call, `had not settled after ${limitMs} ms of real time (a promise of the environment that never settles?)`);
      return result.value;
    };
  const faults: Record<string, unknown> = {};
  // The registry and its injectors are the adapter's objects: a getter among them that throws is its failure, named.
  const registry = readAdapter(backend, "reading the environment's faults", () => env.faults);
  for (const [kind, injector] of readAdapter(backend, "reading the environment's faults", () => Object.entries(registry))) {
    if (typeof injector === 'function') faults[kind] = bounded(`the ${kind} fault`, injector as (...a: unknown[]) => unknown, registry);
    else if (injector !== null && typeof injector === 'object') {
      const methods: Record<string, unknown> = {};
      for (const [name, method] of readAdapter(backend, `reading the ${kind} fault's injector`, () => Object.entries(injector as Record<string, unknown>))) {
        methods[name] = typeof method === 'function' ? bounded(`the ${kind} fault's ${name}()`, method as (...a: unknown[]) => unknown, injector) : method;
      }
      faults[kind] = methods;
    } else faults[kind] = injector;
  }
  // Read once, called with the environment as `this` (bounded applies it), so a class's method works.
  // oxlint-disable-next-line unbound-method -- bounded() calls it on env
  const inspect = readAdapter(backend, "reading the environment's inspect", () => env.inspect);
  return { faults: faults as FaultInjectors, ...(inspect === undefined ? {} : { inspect: bounded('inspect()', inspect, env) }) };
}
