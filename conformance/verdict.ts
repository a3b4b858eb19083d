import { match } from 'ts-pattern';
import type { Command } from '../model/command.ts';
import type { Outcome } from '../model/outcome.ts';
import type { PropertyId, Violation } from '../model/properties.ts';
import { checkObject, refuse } from '../impl/options.ts';
import type { Consequence } from './consequence.ts';

/**
 * What a lockstep run concluded. The two failure kinds never blur:
 * a conformance failure is an implementation bug (the backend did what its
 * model forbids); a property violation is a finding about the design (the
 * model itself breaks a property under this schedule, and the backend agreed
 * step by step).
 */

/** One executed step, as the timeline and the reports show it. */
export interface ExecutedStep {
  /** 0-based position in the run's steps. */
  readonly index: number;
  /** The schedule's command, as run on both sides. */
  readonly command: Command;
  /** True time before and after the step. */
  readonly startMs: number;
  /** True time after the step, in ms. */
  readonly endMs: number;
  /** What the backend did. */
  readonly actual: Outcome;
  /** What the model allowed. */
  readonly allowed: readonly Outcome[];
  /** Properties the model's state breaks after the step (findings about the design). */
  readonly violations: readonly Violation[];
  /** The token and deadline of each client's lease after the step, for the timeline. */
  readonly leases: ReadonlyArray<{ readonly client: number; readonly resource: string; readonly token: bigint; readonly validUntilTrueMs: number | null }>;
  /** Each node's view after the step (up, clock offset). */
  readonly nodes: ReadonlyArray<{ readonly up: boolean; readonly clockOffsetMs: number }>;
}

/** The backend did what its model forbids at `step`: an implementation bug (or, for a library, a deviation from its contract). */
export interface ConformanceFailure {
  readonly kind: 'conformance-failure';
  /** The property the backend's deviation endangers. */
  readonly property: PropertyId;
  /** What the deviation costs a user who trusts the backend: unsafe, liveness, or the safe direction. */
  readonly consequence: Consequence;
  /** What the backend did and what the model allowed instead. */
  readonly message: string;
  /** The step it deviated at. */
  readonly step: ExecutedStep;
}

/** The backend agreed with its model step by step, and the model breaks a property at `step`: a finding about the design. */
export interface PropertyViolation {
  readonly kind: 'property-violation';
  /** The properties broken after `step`. */
  readonly violations: readonly Violation[];
  /** The step after which the properties broke. */
  readonly step: ExecutedStep;
}

/**
 * Why a run stopped without a verdict:
 * - `ambiguous`: more candidate model states than the runner follows (512);
 * - `out-of-pace`: real time outran the run's tolerance on servers with their own clocks (spec 7.8); the
 *   same schedule may keep pace when tried again;
 * - `environment`: the servers failed the run (a restart that did not come back in its bound, say);
 * - `no-client-timeout`: an operation had not completed when the model had it done, and the library declares no client-side timeout
 *   (its contract allows the wait, so the run can go no further).
 */
export type InconclusiveCause = 'ambiguous' | 'out-of-pace' | 'environment' | 'no-client-timeout';

/** Each cause in a few words, for reports and matrix cells. */
export const INCONCLUSIVE_CAUSES: Readonly<Record<InconclusiveCause, string>> = Object.freeze({
  ambiguous: 'too ambiguous to follow',
  'out-of-pace': 'real time outran the pace',
  environment: 'the servers failed the run',
  'no-client-timeout': 'a call had not returned when the model had it done (the library declares no client-side timeout)',
});

/**
 * Why runs stopped early, in words: the cause alone when all stopped for one
 * ("too ambiguous to follow"), else each with its count, most first.
 */
export function describeStoppedEarly(by: Readonly<Partial<Record<InconclusiveCause, number>>>): string {
  checkObject(by, 'describeStoppedEarly by', 'counts of runs by cause, as CheckResult.stoppedEarlyBy');
  for (const [cause, count] of Object.entries(by)) {
    if (!Object.hasOwn(INCONCLUSIVE_CAUSES, cause)) refuse('describeStoppedEarly by', `keyed by causes (${Object.keys(INCONCLUSIVE_CAUSES).join(', ')})`, cause);
    if (count !== undefined && !(Number.isSafeInteger(count) && count >= 0)) refuse(`describeStoppedEarly by['${cause}']`, 'a count of runs (an integer >= 0)', count);
  }
  const causes = (Object.keys(INCONCLUSIVE_CAUSES) as InconclusiveCause[]).filter((c) => (by[c] ?? 0) > 0).sort((a, b) => by[b]! - by[a]!);
  if (causes.length === 0) return 'no cause recorded';
  if (causes.length === 1) return INCONCLUSIVE_CAUSES[causes[0]!];
  return causes.map((c) => `${by[c]} ${INCONCLUSIVE_CAUSES[c]}`).join(', ');
}

/**
 * The runner stopped before the end of the schedule without a verdict against
 * the backend (InconclusiveCause). Nothing was found, and nothing was shown
 * to hold either.
 */
export interface Inconclusive {
  readonly kind: 'inconclusive';
  readonly cause: InconclusiveCause;
  /** Why the run stopped, in full, for the report. */
  readonly reason: string;
}

/** A lockstep run's verdict: `pass` (the backend agreed with its model and the model broke no property), or one of the three above. */
export type Verdict = { readonly kind: 'pass' } | ConformanceFailure | PropertyViolation | Inconclusive;

/** One lockstep run: its verdict and the steps that led there, what timelines and reports are drawn from. */
export interface RunReport {
  /** The backend's name. */
  readonly backend: string;
  /** How the run ended. */
  readonly verdict: Verdict;
  /** The steps that ran (commands the model did not enable are skipped and not listed). */
  readonly steps: readonly ExecutedStep[];
  /** Property violations passed on the way, when the run was told to keep going. */
  readonly findings: readonly PropertyViolation[];
  /**
   * A library audit's deviations in the safe direction or of liveness that
   * the run went past (the model resynchronised to what the backend did):
   * each a conformance failure at its step, in order. The run's verdict is
   * what came after them.
   */
  readonly deviations?: readonly ConformanceFailure[];
  /** Simulated clients in the run. */
  readonly clients: number;
  /** Lock nodes of the backend's design. */
  readonly nodes: number;
  /** What the backend's instance said beside the verdict (BackendInstance.warnings): the run may not have followed the model's time. */
  readonly warnings?: readonly string[];
}

/** The property IDs a failing verdict names. */
export function verdictProperties(verdict: Verdict): PropertyId[] {
  return match(verdict)
    .with({ kind: 'pass' }, { kind: 'inconclusive' }, () => [])
    .with({ kind: 'conformance-failure' }, (v) => [v.property])
    .with({ kind: 'property-violation' }, (v) => [...new Set(v.violations.map((x) => x.property))])
    .exhaustive();
}
