import { match } from 'ts-pattern';
import type { Command } from '../model/command.ts';
import type { Outcome } from '../model/outcome.ts';
import type { PropertyId, Violation } from '../model/properties.ts';
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
  readonly index: number;
  readonly command: Command;
  /** True time before and after the step. */
  readonly startMs: number;
  readonly endMs: number;
  /** What the backend did. */
  readonly actual: Outcome;
  /** What the model allowed. */
  readonly allowed: readonly Outcome[];
  readonly violations: readonly Violation[];
  /** The token and deadline of each client's lease after the step, for the timeline. */
  readonly leases: ReadonlyArray<{ readonly client: number; readonly resource: string; readonly token: bigint; readonly validUntilTrueMs: number | null }>;
  /** Each node's view after the step (up, clock offset). */
  readonly nodes: ReadonlyArray<{ readonly up: boolean; readonly clockOffsetMs: number }>;
}

export interface ConformanceFailure {
  readonly kind: 'conformance-failure';
  /** The property the backend's deviation endangers. */
  readonly property: PropertyId;
  /** What the deviation costs a user who trusts the backend: unsafe, liveness, or the safe direction. */
  readonly consequence: Consequence;
  readonly message: string;
  readonly step: ExecutedStep;
}

export interface PropertyViolation {
  readonly kind: 'property-violation';
  readonly violations: readonly Violation[];
  readonly step: ExecutedStep;
}

/**
 * The runner stopped before the end of the schedule without a verdict against
 * the backend: too many unresolved ambiguities to follow, or real time outran
 * the run's pace. Nothing was found, and nothing was shown to hold either.
 */
export interface Inconclusive {
  readonly kind: 'inconclusive';
  readonly reason: string;
  /** Out of pace with servers on their own clocks (spec 7.8): the same schedule may keep pace when tried again. */
  readonly outOfPace?: true;
}

export type Verdict = { readonly kind: 'pass' } | ConformanceFailure | PropertyViolation | Inconclusive;

export interface RunReport {
  readonly backend: string;
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
  readonly clients: number;
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
