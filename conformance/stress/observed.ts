import type { NemesisFault } from './nemesis.ts';
import { counted } from '../counted.ts';
import type { CheckReport } from '../history/check.ts';
import { checkHistory, hasClientOperations } from '../history/check.ts';
import type { History, StorePolicy } from '../history/event.ts';

/** What a run's verdict rests on: the holds its history judged, and the faults of its nemesis that struck. */
export interface Observation {
  /** null: not counted (the history check's budget ran out first), which is no 0. */
  readonly operations: number | null;
  readonly holds: number | null;
  readonly nemesis: readonly NemesisFault[];
  readonly faultsStruck: readonly NemesisFault[];
}

/**
 * Why a stress run observed nothing a verdict can rest on, or null: no
 * client was granted a lease (no hold to overlap, no write to lose: an empty
 * history, clients that never got through, a lock that denies everything),
 * or the nemesis asked for never struck (a targeted fault found no holder at
 * its gate, a terminate found no session). Such a run is no SAFE: it said
 * nothing about the lock under those faults.
 */
export function unobserved(o: Observation): string | null {
  if (o.operations === 0) return 'no client operation was recorded';
  if (o.holds === 0) return 'no client was granted a lease, so no hold was judged';
  if (o.nemesis.length > 0 && o.faultsStruck.length === 0) return `the nemesis (${o.nemesis.join(', ')}) never struck: ${counted(0, 'fault')} injected`;
  return null;
}

/** The faults asked for that never struck in a run that others did strike in (named beside its verdict). */
export function faultsNotStruck(o: Observation): readonly NemesisFault[] {
  return o.nemesis.filter((f) => !o.faultsStruck.includes(f));
}

/**
 * The recorded run judged: checkHistory's report, or for a run that recorded
 * no client operation (every client failed to connect), which checkHistory
 * refuses as no history, a report of nothing judged (unknown, every count 0
 * but the faults): the run's summary, its client errors and exit code, still
 * come out, where the refusal was thrown as if lockcheck had a bug.
 */
export function judgeRecording(history: History, storePolicy: StorePolicy): CheckReport {
  if (hasClientOperations(history)) return checkHistory(history, { storePolicy });
  const faults = history.filter((e) => e.type === 'invoke' && e.process === 'nemesis').length;
  const zero = { operations: 0, grants: 0, holds: 0, overlappingHolds: 0, writesAccepted: 0, writesRejected: 0, writesUnknown: 0, lostUpdates: 0, staleWritesAccepted: 0, tokenOrderViolations: 0, unknownOutcomes: 0 };
  return { verdict: 'unknown', storePolicy, checks: [], findings: [], counts: { events: history.length, ...zero, faults } };
}
