import { match } from 'ts-pattern';
import type { Command, Operation } from '../model/command.ts';
import { verdictProperties, type RunReport, type Verdict } from './verdict.ts';
import { RESOURCE_NAMES } from './generate.ts';

/**
 * The pass after fast-check's shrink. fast-check shrinks the generator's
 * chunks: a script (pause, gap, contender, resume, writes) goes or stays
 * whole, so a step inside it that plays no part stays, and so does an earlier
 * chunk it leans on; and it gives up on a value once one of its shrinks
 * passes. This pass works on the failing run's steps themselves: it removes
 * blocks of steps, then single steps, then simplifies arguments (no retries,
 * no latency, smaller ttls and advances, plain names, token base 0), each
 * candidate replayed on the real backend and kept only if it fails the same
 * way (sameFailure). Deterministic for a backend that is: the same start
 * gives the same result. Bounded in replays and real time.
 */

/** One run's input, everything a replay needs: the commands and the run's drawn settings. */
export interface Schedule {
  readonly commands: readonly Command[];
  readonly tokenBase: bigint;
  readonly requestTimeoutMs?: number;
}

/** How much the pass may spend. */
export interface MinimiseBudget {
  /** Candidate replays at most. */
  readonly maxReplays: number;
  /** Real time at most, in ms (on `clock`). */
  readonly limitMs: number;
}

/** What the pass may choose among: the backend's floor and grain for ttls. */
export interface MinimiseLimits {
  readonly ttlFloorMs: number;
  readonly ttlGrainMs: number;
}

export interface Minimised {
  readonly schedule: Schedule;
  /** The failing report of `schedule`, cut at its failure. */
  readonly report: RunReport;
  readonly replays: number;
  readonly elapsedMs: number;
  /** The budget ran out: a smaller schedule may still fail the same way. */
  readonly cut: boolean;
}

/**
 * Default budget. On lockcheck's own Redis a replay costs 10-60 ms and the
 * pass needs 1-30 replays; on PostgreSQL with keepalive or kill-connection
 * faults a replay costs 1-2 s (18 replays, 35 s for a 6-step partition
 * counterexample), so the time bound is what holds there.
 */
export const MINIMISE_BUDGET: MinimiseBudget = { maxReplays: 60, limitMs: 30_000 };

/** What names a failure for sameFailure: its kind, the properties it names, and for a deviation what it costs. */
export function failureSignature(verdict: Verdict): string {
  const kind = verdict.kind === 'conformance-failure' ? `${verdict.kind}/${verdict.consequence.kind}` : verdict.kind;
  return `${kind}:${verdictProperties(verdict).sort().join(',')}`;
}

/**
 * Whether `candidate` fails as `original` does: the same kind of failure, the
 * same properties, the same consequence. A token counter lost at a restart
 * (DUR-1) is a repeated token (FENCE-1) with a restart before it: a candidate
 * that repeats it with the restart gone shows the restart played no part, and
 * is taken, naming the failure FENCE-1 (a token that sometimes repeats was
 * named DUR-1 by every schedule that happened to hold a restart).
 */
export function sameFailure(original: Verdict, candidate: Verdict): boolean {
  const signature = failureSignature(original);
  return signature === failureSignature(candidate) || (signature.endsWith(':DUR-1') && signature.replace(/:DUR-1$/, ':FENCE-1') === failureSignature(candidate));
}

/**
 * Minimises `start` (a schedule whose run failed with `report`): `replay`
 * runs a candidate and answers its failing report, cut at the failure, if it
 * fails at all (as the check judges it), else null; the pass keeps a
 * candidate only when that report fails the same way (sameFailure) and has
 * no more steps. `progress` is told after every replay.
 */
export async function minimise(
  start: Schedule,
  report: RunReport,
  replay: (schedule: Schedule) => Promise<RunReport | null>,
  o: { readonly budget: MinimiseBudget; readonly limits: MinimiseLimits; readonly clock: () => number; readonly progress?: (replays: number, steps: number) => void },
): Promise<Minimised> {
  const started = o.clock();
  const original = report.verdict;
  const initial: Schedule = { ...start, commands: report.steps.map((s) => s.command) };
  let best: { schedule: Schedule; report: RunReport } = { schedule: initial, report };
  let replays = 0;
  let cut = false;
  const spent = (): boolean => {
    if (replays >= o.budget.maxReplays || o.clock() - started >= o.budget.limitMs) cut = true;
    return cut;
  };
  /** Runs a candidate; keeps it if it fails the same way in no more steps. */
  const tryCandidate = async (schedule: Schedule): Promise<boolean> => {
    if (spent()) return false;
    replays++;
    const r = await replay(schedule);
    o.progress?.(replays, best.report.steps.length);
    if (r === null || !sameFailure(original, r.verdict) || r.steps.length > best.report.steps.length) return false;
    // The run's own steps: a command the model did not enable was skipped and is not listed, so it goes too.
    best = { schedule: { ...schedule, commands: r.steps.map((s) => s.command) }, report: r };
    return true;
  };
  const without = (from: number, count: number): Schedule => ({ ...best.schedule, commands: [...best.schedule.commands.slice(0, from), ...best.schedule.commands.slice(from + count)] });

  /** Removes blocks of steps, halving their size, then single steps until none can go. */
  const removeSteps = async (): Promise<void> => {
    for (let size = Math.floor(best.schedule.commands.length / 2); size >= 2 && !spent(); size = Math.floor(size / 2)) {
      // From the end: the failing step is last, and what comes just before it matters most often.
      for (let from = best.schedule.commands.length - 1 - size; from >= 0 && !spent(); from -= size) await tryCandidate(without(from, size));
    }
    for (let changed = true; changed && !spent(); ) {
      changed = false;
      // The failing step itself is kept: without it the run cannot fail there.
      for (let i = best.schedule.commands.length - 2; i >= 0 && !spent(); i--) {
        if (i < best.schedule.commands.length - 1 && (await tryCandidate(without(i, 1)))) changed = true;
      }
    }
  };

  await removeSteps();
  let simplified = false;
  // Time passing in two steps in a row: one step, if nothing happened between them that mattered.
  for (let i = best.schedule.commands.length - 2; i >= 0 && !spent(); i--) {
    const [a, b] = [best.schedule.commands[i]!, best.schedule.commands[i + 1]];
    if (a.kind !== 'advance' || b?.kind !== 'advance') continue;
    const merged: Command = { kind: 'advance', ms: a.ms + b.ms };
    simplified = (await tryCandidate({ ...best.schedule, commands: [...best.schedule.commands.slice(0, i), merged, ...best.schedule.commands.slice(i + 2)] })) || simplified;
  }
  // The run's settings first: the token base and the request timeout the run drew.
  if (best.schedule.tokenBase !== 0n) simplified = (await tryCandidate({ ...best.schedule, tokenBase: 0n })) || simplified;
  if (best.schedule.requestTimeoutMs !== undefined) {
    const { requestTimeoutMs: _t, ...rest } = best.schedule;
    simplified = (await tryCandidate(rest)) || simplified;
  }
  const plain = plainNames(best.schedule.commands);
  if (plain !== null) simplified = (await tryCandidate({ ...best.schedule, commands: plain })) || simplified;
  // Then each command's arguments, one simplification at a time: first what can go altogether (retries, latency) in
  // every step, then smaller numbers, so that a smaller number does not come to lean on retries that could have gone.
  for (const stage of ['drop', 'smaller'] as const) {
    for (let i = 0; i < best.schedule.commands.length && !spent(); i++) {
      for (let variants = simpler(best.schedule.commands[i]!, o.limits, stage); variants.length > 0 && !spent(); ) {
        const at = i;
        const found = await firstThatFails(variants, (c) => ({ ...best.schedule, commands: best.schedule.commands.map((x, j) => (j === at ? c : x)) }), tryCandidate);
        if (!found) break;
        simplified = true;
        // Simplify the same step further (a skipped step gone may have moved another one here: it is simplified then).
        variants = i < best.schedule.commands.length ? simpler(best.schedule.commands[i]!, o.limits, stage) : [];
      }
    }
  }
  // A simpler argument may make another step superfluous (a shorter ttl, a wait no longer needed).
  if (simplified) await removeSteps();
  // Each kept candidate failed once. On servers with their own clocks a run can fail by the machine's timing: the
  // result is run once more (past the budget: one replay), and if it does not fail the same way, fast-check's case stands.
  if (best.report !== report) {
    replays++;
    const again = await replay(best.schedule);
    o.progress?.(replays, best.report.steps.length);
    if (again === null || !sameFailure(original, again.verdict)) best = { schedule: initial, report };
  }
  return { schedule: best.schedule, report: best.report, replays, elapsedMs: o.clock() - started, cut };
}

async function firstThatFails(variants: readonly Command[], build: (c: Command) => Schedule, tryCandidate: (s: Schedule) => Promise<boolean>): Promise<boolean> {
  for (const v of variants) if (await tryCandidate(build(v))) return true;
  return false;
}

/** The schedule with its resource names mapped to r0, r1, ... in order of first use; null if they are those already. */
function plainNames(commands: readonly Command[]): Command[] | null {
  const names = new Map<string, string>();
  const name = (r: string): string => {
    if (!names.has(r)) names.set(r, RESOURCE_NAMES[names.size] ?? r);
    return names.get(r)!;
  };
  const renamed = commands.map((c) => renamedCommand(c, name));
  return [...names].every(([from, to]) => from === to) ? null : renamed;
}

function renamedCommand(c: Command, name: (r: string) => string): Command {
  if ('resource' in c) return { ...c, resource: name(c.resource) };
  if (c.kind === 'pause') {
    return {
      ...c,
      ...(c.pendingWrite !== undefined ? { pendingWrite: { ...c.pendingWrite, resource: name(c.pendingWrite.resource) } } : {}),
      ...(c.inFlight !== undefined ? { inFlight: renamedCommand(c.inFlight, name) as Operation } : {}),
    };
  }
  return c;
}

/** A smaller value between `floor` and `value` to try: the floor itself, then halfway; none when it is the floor already. */
function smallerNumbers(value: number, floor: number, grain = 1): number[] {
  const round = (ms: number): number => Math.ceil(ms / grain) * grain;
  const out = [...new Set([round(floor), round(floor + (value - floor) / 2)])].filter((v) => v < value && v >= floor);
  return out;
}

/**
 * Simpler forms of one command, simplest first: at stage 'drop', without its
 * retries or its latency; at stage 'smaller', fewer retries, less latency,
 * smaller ttls (not below the backend's floor, on its grain), shorter waits
 * and clock jumps.
 */
export function simpler(c: Command, limits: MinimiseLimits, stage: 'drop' | 'smaller'): Command[] {
  const drop = stage === 'drop';
  const ttls = (ttlMs: number): number[] => (drop ? [] : smallerNumbers(ttlMs, limits.ttlFloorMs, limits.ttlGrainMs));
  const smaller = (value: number, floor: number): number[] => (drop ? [] : smallerNumbers(value, floor));
  const latency = <C extends { readonly latencyMs?: number }>(x: C): C[] => {
    if (x.latencyMs === undefined) return [];
    const { latencyMs: _l, ...rest } = x;
    return drop ? [rest as C] : smaller(x.latencyMs, 1).map((latencyMs) => ({ ...x, latencyMs }));
  };
  return match<Command, Command[]>(c)
    .with({ kind: 'acquire' }, (a) => {
      const { retries: _r, retryDelayMs: _d, ...once } = a;
      return [
        ...(a.retries !== undefined ? (drop ? [once] : smaller(a.retries, 1).map((retries) => ({ ...a, retries }))) : []),
        ...latency(a),
        ...(a.ttlMs !== undefined ? ttls(a.ttlMs).map((ttlMs) => ({ ...a, ttlMs })) : []),
        ...(a.retryDelayMs !== undefined ? smaller(a.retryDelayMs, 1).map((retryDelayMs) => ({ ...a, retryDelayMs })) : []),
      ];
    })
    .with({ kind: 'extend' }, (e) => [...latency(e), ...ttls(e.ttlMs).map((ttlMs) => ({ ...e, ttlMs }))])
    .with({ kind: 'release' }, (r) => latency(r))
    .with({ kind: 'write' }, (w) => latency(w))
    .with({ kind: 'advance' }, (a) => smaller(a.ms, 1).map((ms) => ({ ...a, ms })))
    .with({ kind: 'clock-step' }, (s) => smaller(Math.abs(s.deltaMs), 1).map((m) => ({ ...s, deltaMs: Math.sign(s.deltaMs) * m })))
    .with({ kind: 'node-delay' }, (d) => (typeof d.ms === 'number' && d.ms > 0 ? smaller(d.ms, 1).map((ms) => ({ ...d, ms })) : []))
    .with({ kind: 'pause' }, (p) => (p.inFlight !== undefined ? simpler(p.inFlight, limits, stage).map((inFlight) => ({ ...p, inFlight: inFlight as Operation })) : []))
    .with({ kind: 'read' }, { kind: 'clock-drift' }, { kind: 'resume' }, { kind: 'deliver' }, { kind: 'crash' }, { kind: 'restart' }, { kind: 'replicate' }, { kind: 'partition' }, { kind: 'heal' }, { kind: 'kill-connection' }, () => [])
    .exhaustive();
}
