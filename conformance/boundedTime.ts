import type { TimeControl } from './adapter.ts';
import { AdapterError } from './adapterCall.ts';
import { EnvironmentError } from './env/faketime.ts';
import { RunEnvironmentError } from './env/runEnvironment.ts';
import { valueWithin } from './realTimeLimit.ts';
import { TimingError } from './sim/time.ts';
import { describeThrown } from './thrown.ts';
import { InvalidInputError, MAX_TTL_MS } from '../model/errors.ts';

/**
 * A run's time control as the runner calls it: the environment's own
 * nowMs, advanceTo, runUntil and realTimeAheadMs, each the adapter's code.
 * One that throws or answers what the API does not define is an
 * AdapterError naming the call (the check stops, as for a start() that
 * throws); one still pending after its bound leaves the run unjudged with
 * that AdapterError as its reason (RunEnvironmentError), as a fault
 * injection does. Without this a runUntil that never settled held the check
 * for ever, and a throw came up bare, naming nothing.
 */

/** At most this much of a value the adapter answered is shown. */
const MAX_SHOWN = 100;

/** A value an adapter's call answered, for a message: NaN as NaN, bigints with their n. */
export function shownAnswer(v: unknown): string {
  let text: string;
  try {
    // JSON says NaN and Infinity as null, and has no form for undefined, a function or a symbol: their kind is shown.
    text = typeof v === 'number' ? String(v) : (JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x)) ?? `a ${typeof v}`);
  } catch {
    text = `a ${typeof v}`;
  }
  return text.length > MAX_SHOWN ? `${text.slice(0, MAX_SHOWN)}…` : text;
}

/** Errors that already say what failed and whose they are, passed on as they are. */
function typed(e: unknown): boolean {
  return e instanceof AdapterError || e instanceof EnvironmentError || e instanceof TimingError || e instanceof InvalidInputError;
}

/**
 * `env`'s time control, each call checked and bounded: a move of true time
 * may take the real time it covers (servers paced to real time wait for it)
 * plus `limitMs`. nowMs() must be a finite number that never goes back.
 */
export function boundedTime(backend: string, env: TimeControl, limitMs: number): TimeControl {
  const call = (name: string): string => `the environment's ${name}`;
  const failed = (name: string, e: unknown): never => {
    if (typed(e)) throw e;
    throw new AdapterError(backend, call(name), `threw ${describeThrown(e).split('\n')[0]}`, { cause: e });
  };
  const sync = <T>(name: string, f: () => T): T => {
    try {
      return f();
    } catch (e) {
      return failed(name, e);
    }
  };
  const ms = (name: string, v: unknown): number => {
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new AdapterError(backend, call(name), `returned ${shownAnswer(v)}, not a finite number of ms`);
    return v;
  };
  // The runner catches true time up by an advance of this much: past the longest advance the model takes, it is no lag a run can follow.
  const ahead = (v: number): number => {
    if (v > MAX_TTL_MS) throw new AdapterError(backend, call('realTimeAheadMs()'), `returned ${v}, more than the longest advance (${MAX_TTL_MS} ms) true time could catch up by`);
    return v;
  };
  let last = Number.NEGATIVE_INFINITY;
  const nowMs = (): number => {
    const now = ms('nowMs()', sync('nowMs()', () => env.nowMs()));
    if (now < last) throw new AdapterError(backend, call('nowMs()'), `went back from ${last} ms to ${now} ms (true time never goes back)`);
    last = now;
    return now;
  };
  /** The call, bounded by the real time the virtual span to `targetMs` may take plus `limitMs`. */
  const bounded = async <T>(name: string, targetMs: number, f: () => T | Promise<T>): Promise<T> => {
    const boundMs = Math.min(2 ** 31 - 1, limitMs + Math.max(0, Math.ceil(targetMs - nowMs())));
    let started: Promise<T>;
    try {
      started = Promise.resolve(f());
    } catch (e) {
      started = Promise.reject(e);
    }
    let result;
    try {
      result = await valueWithin(started, boundMs);
    } catch (e) {
      return failed(name, e);
    }
    if (!result.done) throw new RunEnvironmentError(new AdapterError(backend, call(name), `had not settled after ${boundMs} ms of real time (a promise of the environment that never settles?)`).message);
    return result.value;
  };
  return {
    nowMs,
    advanceTo: (trueMs) => bounded('advanceTo()', trueMs, () => env.advanceTo(trueMs)),
    runUntil: async (work, limit) => {
      const settled: unknown = await bounded('runUntil()', limit, () => env.runUntil(work, limit));
      if (typeof settled !== 'boolean') throw new AdapterError(backend, call('runUntil()'), `returned ${shownAnswer(settled)}, not a boolean`);
      return settled;
    },
    ...(env.realTimeAheadMs === undefined ? {} : { realTimeAheadMs: () => ahead(ms('realTimeAheadMs()', sync('realTimeAheadMs()', () => env.realTimeAheadMs!()))) }),
  };
}

/** What inspect() answered, checked: one owner value (a string, or null) per node. */
export function checkInspected(backend: string, held: unknown, nodes: number): ReadonlyArray<string | null> {
  if (!Array.isArray(held) || held.length !== nodes || !held.every((o) => o === null || typeof o === 'string')) {
    throw new AdapterError(backend, 'inspect()', `returned ${shownAnswer(held)}, not one owner value (a string, or null) per node (${nodes})`);
  }
  return held as ReadonlyArray<string | null>;
}
