import type { NemesisFault } from './nemesis.ts';
import { counted } from '../counted.ts';

/** What a run's verdict rests on: the holds its history judged, and the faults of its nemesis that struck. */
export interface Observation {
  readonly holds: number;
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
  if (o.holds === 0) return 'no client was granted a lease, so no hold was judged';
  if (o.nemesis.length > 0 && o.faultsStruck.length === 0) return `the nemesis (${o.nemesis.join(', ')}) never struck: ${counted(0, 'fault')} injected`;
  return null;
}

/** The faults asked for that never struck in a run that others did strike in (named beside its verdict). */
export function faultsNotStruck(o: Observation): readonly NemesisFault[] {
  return o.nemesis.filter((f) => !o.faultsStruck.includes(f));
}
