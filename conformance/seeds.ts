import type { Command } from '../model/command.ts';
import type { Design, StorePolicy } from '../model/design.ts';
import { describeDesign } from '../model/design.ts';
import type { FaultClass } from '../model/faultClass.ts';
import type { PropertyId } from '../model/properties.ts';
import type { FaultKind } from './faults.ts';
import { rescaled, RESOURCE_NAMES } from './generate.ts';
import type { FoundSchedule } from './derivedSeeds.ts';
import { SEED_CELLS } from './seedSchedules.ts';

/**
 * The model's shortest counterexamples as the first schedules a real-server
 * run tries (issue 12, item 6): `npm run seeds` explores every cell of the
 * built-in backends' designs and writes each property's shortest breaking
 * schedule to conformance/seedSchedules.ts; `lockcheck matrix` and
 * `lockcheck run` replay those of their cell as runs 1, 2, ... before the
 * random ones, so a predicted finding shows up in the first runs.
 */
export interface SeedCell {
  /** The design's label (describeDesign), the key a backend is looked up by. */
  readonly design: string;
  readonly store: StorePolicy;
  readonly fault: FaultClass;
  /** The deepest level explored completely; a shorter counterexample than the ones below does not exist. */
  readonly depth: number;
  /**
   * Each property broken, with its shortest schedule in the model's alphabet (resource "r", ttl 10 ms);
   * `derived`: a property the cell predicts by derivation, on a schedule built for it and checked on the
   * model (conformance/derivedSeeds.ts), which may be longer than `depth`.
   */
  readonly found: ReadonlyArray<FoundSchedule>;
}

/** The fault kinds an environment needs to run `command` (none for a plain operation); null if no environment can (replication is the model's). */
export function faultsNeededBy(command: Command): readonly FaultKind[] | null {
  switch (command.kind) {
    case 'acquire':
      return (command.latencyMs ?? 0) > 0 ? ['delay'] : [];
    case 'extend':
    case 'release':
      return (command.latencyMs ?? 0) > 0 ? ['latency'] : [];
    case 'write':
      // The runner holds a delayed write itself (the store cannot tell); it belongs with the late replies.
      return (command.latencyMs ?? 0) > 0 || command.delayed === true ? ['latency'] : [];
    case 'deliver':
      return ['latency'];
    case 'read':
      return [];
    case 'advance':
      return ['advance'];
    case 'clock-step':
      return ['clock-step'];
    case 'clock-drift':
      return ['clock-drift'];
    case 'pause': {
      // An acquire or extend in flight needs an environment whose paused clients run no timers (latency), and its own latency's fault.
      const op = command.inFlight;
      const split: FaultKind[] = op?.kind === 'acquire' || op?.kind === 'extend' ? ['latency'] : [];
      const late = op === undefined ? [] : (faultsNeededBy(op) ?? []);
      return [...new Set<FaultKind>(['pause', ...split, ...late])];
    }
    case 'resume':
      return ['pause'];
    case 'crash':
    case 'restart':
      return ['crash-restart'];
    case 'partition':
    case 'heal':
      return ['partition'];
    case 'kill-connection':
      return ['kill-connection'];
    case 'node-delay':
      return ['slow-node'];
    case 'replicate':
      return null;
  }
}

/**
 * What a predicted property needs that `faults` lack: the fault kinds the
 * shortest recorded schedule breaking it in these cells needs beyond
 * `faults`, when none of the recorded schedules runs on `faults`. Null when
 * one does, when none is recorded (a derived prediction without a schedule),
 * or when one needs what no environment injects (the model's replication):
 * the runs may show it then. A cell whose prediction needs a partition the
 * backend does not take (pg-xact) cannot show it, and says so.
 */
export function faultsLackingFor(design: Design, store: StorePolicy, faultClasses: readonly FaultClass[], property: PropertyId, faults: readonly FaultKind[]): FaultKind[] | null {
  const label = describeDesign(design);
  const schedules = SEED_CELLS.filter((c) => c.design === label && c.store === store && faultClasses.includes(c.fault))
    .flatMap((c) => c.found.filter((f) => f.property === property).map((f) => f.commands))
    .sort((a, b) => a.length - b.length);
  let lacking: FaultKind[] | null = null;
  for (const commands of schedules) {
    const needs = commands.map(faultsNeededBy);
    if (needs.some((n) => n === null)) return null;
    const missing = [...new Set(needs.flatMap((n) => n!))].filter((k) => !faults.includes(k));
    if (missing.length === 0) return null;
    lacking ??= missing;
  }
  return lacking;
}

/** The model alphabet's ttl (faultClass.ts DEFAULT_ALPHABET), which a seed's durations are scaled from. */
const MODEL_TTL_MS = 10;

/**
 * The seed schedules for a backend of `design` and `store` that takes
 * `faults`, in the runner's terms: resource "r" becomes the first generated
 * resource name, and every duration is scaled up when the backend needs
 * longer ttls than the model's 10 ms (`ttlFloorMs`, servers on their own
 * clocks). Schedules needing a fault the backend does not take are left
 * out; so is everything for a design the exploration did not cover (a
 * label not in the file). Shortest first, each schedule once, each followed
 * by its variant with clock steps 1 ms past the expiry edge (pastTheEdge).
 */
export function seedSchedules(design: Design, store: StorePolicy, faults: readonly FaultKind[], ttlFloorMs = 5): Command[][] {
  const label = describeDesign(design);
  const scale = Math.max(1, Math.ceil(ttlFloorMs / MODEL_TTL_MS));
  const fits = (commands: readonly Command[]): boolean =>
    commands.every((c) => {
      const needs = faultsNeededBy(c);
      return needs !== null && needs.every((k) => faults.includes(k));
    });
  const seen = new Set<string>();
  const out: Command[][] = [];
  const candidates = SEED_CELLS.filter((c) => c.design === label && c.store === store)
    .flatMap((c) => c.found.map((f) => f.commands))
    .filter(fits)
    .sort((a, b) => a.length - b.length);
  for (const commands of candidates) {
    for (const variant of [commands, pastTheEdge(commands)]) {
      const key = JSON.stringify(variant);
      if (seen.has(key)) continue;
      seen.add(key);
      out.push(variant.map((c) => rescaled(c, scale, () => RESOURCE_NAMES[0])));
    }
  }
  return out;
}

/**
 * The schedule with every clock step 1 ms longer. The model's alphabet steps
 * a clock by exactly the ttl, onto a key's expiry instant, where the model
 * allows the key to be alive or gone; a real server decides one way (Redis
 * keeps a key alive at its expiry instant), so a counterexample that needs it
 * gone shows only one step past the edge. Tried right after the original.
 */
function pastTheEdge(commands: readonly Command[]): readonly Command[] {
  return commands.map((c) => (c.kind === 'clock-step' ? { ...c, deltaMs: c.deltaMs + Math.sign(c.deltaMs) } : c));
}
