import { readdirSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { MAX_ATTEMPTS, type RunReport } from '../conformance/index.ts';
import { InvalidInputError } from '../impl/errors.ts';
import type { Lease } from '../impl/lease.ts';
import type { AcquireResult } from '../impl/leaseLock.ts';

/** The process exists and is not a zombie. */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** The pids of this process's live descendants whose command is `comm`. */
export function descendantsNamed(comm: string): number[] {
  const parentOf = new Map<number, number>();
  const names = new Map<number, string>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] === 'Z') continue;
      parentOf.set(Number(entry), Number(fields[1]));
      names.set(Number(entry), readFileSync(`/proc/${entry}/comm`, 'utf8').trim());
    } catch {
      // gone meanwhile
    }
  }
  const ours = (pid: number): boolean => {
    for (let p = parentOf.get(pid); p !== undefined; p = parentOf.get(p)) if (p === process.pid) return true;
    return false;
  };
  return [...names].filter(([pid, name]) => name === comm && ours(pid)).map(([pid]) => pid);
}

/** Polls `condition` every 20 ms; false if it does not hold within `timeoutMs`. */
export async function until(condition: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return true;
}

/**
 * Waits until `condition` holds, for `timeoutMs` (default 10 s), and throws
 * naming `what` if it never does. Each miss yields to the event loop (a
 * timer, not a microtask): a condition that an I/O event makes true (a
 * watch notification, a reply on another socket) must get the chance to.
 */
export async function eventually(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  if (!(await until(condition, timeoutMs))) throw new Error(`never within ${timeoutMs} ms: ${what}`);
}

/**
 * Acquires until granted or `boundMs` passed, each attempt on a resource of
 * its own (`prefix-0`, `prefix-1`, ...): an attempt that timed out on the
 * client may have been granted on the servers, and its key would answer
 * every later attempt on the same resource 'held' for its whole ttl. Throws,
 * naming every attempt's outcome, if none was granted in the bound.
 */
export async function grantedWithin(boundMs: number, prefix: string, acquire: (resource: string) => Promise<AcquireResult>): Promise<{ readonly lease: Lease; readonly resource: string }> {
  const bound = Date.now() + boundMs;
  const tried: string[] = [];
  for (;;) {
    const resource = `${prefix}-${tried.length}`;
    const r = await acquire(resource);
    if (r.kind === 'granted') return { lease: r.lease, resource };
    tried.push(`${resource}: ${r.kind === 'denied' ? `denied ${r.reason}` : r.kind}`);
    if (Date.now() >= bound) throw new Error(`no grant within ${boundMs} ms: ${tried.join(', ')}`);
  }
}

/** A test's runtime skip (vitest's `ctx.skip`): ends the test as skipped, with the reason. */
export type Skip = (note?: string) => never;

/**
 * A fixed schedule on servers on their own clocks, run again from a fresh
 * start while the machine could not keep pace (spec 7.8), up to
 * MAX_ATTEMPTS in all, as checkConformance does for generated ones. A run
 * still out of pace then is judged neither way: the test is skipped, saying
 * so (a machine too busy to follow real time within the tolerance, not a
 * finding).
 */
export async function inPace(skip: Skip, run: () => Promise<RunReport>): Promise<RunReport> {
  let report = await run();
  for (let attempt = 1; attempt < MAX_ATTEMPTS && report.verdict.kind === 'inconclusive' && report.verdict.cause === 'out-of-pace'; attempt++) report = await run();
  if (report.verdict.kind === 'inconclusive' && report.verdict.cause === 'out-of-pace') skip(`out of pace in ${MAX_ATTEMPTS} attempts, judged neither way: ${report.verdict.reason}`);
  return report;
}

/** Generated schedules on servers on their own clocks: skipped, saying so, when not one run could be judged (every attempt out of pace). */
export function skipUnjudged(skip: Skip, result: { readonly runs: number; readonly stoppedEarly: number }): void {
  if (result.stoppedEarly >= result.runs) skip(`none of ${result.runs} schedule(s) kept pace with real time in ${MAX_ATTEMPTS} attempts: judged neither way`);
}

/** What a promise settled with: its rejection, or null when it resolved (the value is handed to `onValue`, to be stopped). */
export function settledOf<T>(promise: Promise<T>, onValue: (value: T) => Promise<void>): Promise<unknown> {
  return promise.then(
    async (value) => {
      await onValue(value);
      return null;
    },
    (error: unknown) => error,
  );
}

/** Polls `find` once per turn of the event loop (setImmediate, not a sleep) until it gives something, for at most `ms`. */
export async function pollFor<T>(find: () => T | null, ms: number, what: string): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const found = find();
    if (found !== null) return found;
    if (Date.now() >= until) throw new Error(`never within ${ms} ms: ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** Whether something accepts a TCP connection on the loopback port (bounded by a 2 s timer). */
export function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    const timer = setTimeout(() => finish(true), 2000);
    const finish = (answer: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    socket.once('connect', () => finish(true));
    socket.once('error', () => finish(false));
  });
}

/** What `f` throws, checked to be an InvalidInputError: a synchronous refusal, for its code and exact message. */
export function refusal(f: () => unknown): InvalidInputError {
  try {
    f();
  } catch (e) {
    if (e instanceof InvalidInputError) return e;
    throw new Error(`refused with something other than an InvalidInputError: ${String(e)}`, { cause: e });
  }
  throw new Error('not refused');
}
